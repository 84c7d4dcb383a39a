package main

import (
	"encoding/json"
	"os"
	"strconv"
)

// The history of one run: every request with when it started and ended and what it got, every
// watch stream with what it delivered, and the times the server was killed. Times are wall-clock
// nanoseconds (the script that kills the server records its kills on the same clock).

// Obj is what the checks need of an object: its name, resourceVersion, the value the clients
// write (annotation robustness.example.com/v, unique per write), whether it has finalizers and
// whether it is terminating (deletionTimestamp set).
type Obj struct {
	Name string `json:"name"`
	RV   string `json:"rv"`
	Val  string `json:"val"`
	Fin  bool   `json:"fin,omitempty"`
	Term bool   `json:"term,omitempty"`
}

// Op is one request on one key (a GET, or a write) as a client saw it.
type Op struct {
	Client int    `json:"client"`
	Kind   string `json:"kind"` // resource: configmaps, persistentvolumes, ...
	Name   string `json:"name"`
	// Type: get, create, update (PUT without resourceVersion), cupdate (PUT with the read's
	// resourceVersion as precondition), mpatch, jpatch, spatch (merge, JSON, strategic-merge patch
	// of the value), unfin (merge patch removing every finalizer), addfin (merge patch setting
	// this test's finalizer), delete.
	Type    string `json:"type"`
	Val     string `json:"val,omitempty"`     // the value a write sets
	Fin     bool   `json:"fin,omitempty"`     // create: with this test's finalizer; update: the body's finalizers are non-empty
	Precond string `json:"precond,omitempty"` // cupdate: the resourceVersion required
	Call    int64  `json:"call"`
	Return  int64  `json:"return"`
	// Status: the HTTP code; 0 when no answer came (connection cut, timeout: unknown outcome);
	// -1 when the request was never sent (connection refused).
	Status int  `json:"status"`
	Obj    *Obj `json:"obj,omitempty"` // the object answered (reads, successful writes)
}

// List is a list of a kind, in pages (limit/continue) or whole: a snapshot at RV.
type List struct {
	Client int    `json:"client"`
	Kind   string `json:"kind"`
	Call   int64  `json:"call"`   // the first page's request
	Return int64  `json:"return"` // the first page's answer
	RV     string `json:"rv"`
	Pages  int    `json:"pages"`
	Items  []Obj  `json:"items"`
}

// Event is one event of a watch stream. Bookmarks carry only RV (and InitialEnd for the
// bookmark that ends a sendInitialEvents watch's initial events).
type Event struct {
	Type       string `json:"type"` // ADDED, MODIFIED, DELETED, BOOKMARK
	Obj        Obj    `json:"obj"`
	InitialEnd bool   `json:"initialEnd,omitempty"`
	At         int64  `json:"at"`
}

// Segment is one watch request and its stream. A chain is a logical watch: it starts from a
// list's resourceVersion (or with sendInitialEvents) and each later segment resumes from the
// last resourceVersion the chain received.
type Segment struct {
	Kind          string  `json:"kind"`
	Chain         int     `json:"chain"`
	From          string  `json:"from"` // resourceVersion asked for; "" with sendInitialEvents
	Resumed       bool    `json:"resumed,omitempty"`
	InitialEvents bool    `json:"initialEvents,omitempty"`
	Start         int64   `json:"start"`
	Stop          int64   `json:"stop"`
	End           string  `json:"end"` // eof, error, gone (410), refused, stopped
	Events        []Event `json:"events"`
}

// History is one run on one server.
type History struct {
	Server   string    `json:"server"`
	Fault    string    `json:"fault"`
	Keys     []string  `json:"keys"` // kind/name
	Start    int64     `json:"start"`
	End      int64     `json:"end"`
	Ops      []Op      `json:"ops"`
	Lists    []List    `json:"lists"`
	Segments []Segment `json:"segments"`
	Kills    []int64   `json:"kills"` // when the server was found dead (after each kill)
}

func (h *History) save(path string) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func loadHistory(path string) (*History, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var h History
	return &h, json.Unmarshal(b, &h)
}

// rvNum reads a resourceVersion as the integer both servers use (etcd's revision; `up`'s
// counter); 0 when there is none.
func rvNum(rv string) uint64 {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0
	}
	return n
}
