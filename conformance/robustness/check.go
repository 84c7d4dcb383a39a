package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Result is one property's verdict on one history.
type Result struct {
	Property string
	OK       bool
	Figures  string   // what was checked, e.g. "1234 operations on 9 keys"
	Problems []string // the first few violations
}

func (r *Result) fail(format string, a ...any) {
	r.OK = false
	if len(r.Problems) < 10 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, a...))
	}
}

// Properties, in the order they are reported.
var properties = []string{"linearizable", "ordered", "unique", "atomic", "reliable", "resumable", "bookmarkable", "initial-events"}

// check runs every property on h.
func check(h *History, timeout time.Duration) []Result {
	patchUnknown(h)
	rs := []Result{checkLinearizable(h, timeout)}
	return append(rs, checkWatches(h)...)
}

// --- linearizability, per key, with porcupine -------------------------------------------------

// lstate is one key's state in the model: whether the object exists, its resourceVersion (0 when
// not known: after a write whose answer was lost), its value, finalizers and deletion.
//
// Emptied: the object is gone because a write emptied its finalizers while it was terminating;
// RV then keeps its last version. kube-apiserver lets every write that emptied the same
// finalizers succeed: each deletes the object, the ones that find it gone already ignore that
// (genericregistry's deleteWithoutFinalizers) and answer 200 with the object they wrote, at the
// version they read. That version may be older than the last: the write is decided on the watch
// cache's copy, and the delete that follows removes whatever is stored (the 30-minute control run
// showed both).
type lstate struct {
	Exists  bool
	RV      uint64
	Val     string
	Fin     bool
	Term    bool
	Emptied bool
}

// emptiesFinalizers: op, on a terminating object, removes every finalizer (and so the object).
func emptiesFinalizers(op *Op) bool {
	return op.Type == "unfin" || ((op.Type == "update" || op.Type == "cupdate") && !op.Fin)
}

func unknownOutcome(op *Op) bool { return op.Status == 0 || op.Status >= 500 }
func success(op *Op) bool        { return op.Status >= 200 && op.Status < 300 }

// outcome: an answer a write may get in a state (code "2xx", "404", "409", "422"), and the
// state after it.
type outcome struct {
	code string
	next lstate
}

// protected kinds get a protection finalizer on create (StorageObjectInUseProtection).
func protected(kind string) bool {
	return kind == "persistentvolumes" || kind == "persistentvolumeclaims"
}

func outcomes(s lstate, op *Op) []outcome {
	if op.Type == "create" {
		if s.Exists {
			return []outcome{{"409", s}}
		}
		return []outcome{{"2xx", lstate{Exists: true, Val: op.Val, Fin: op.Fin || protected(op.Kind)}}}
	}
	if !s.Exists {
		if s.Emptied && emptiesFinalizers(op) && (op.Type != "cupdate" || s.RV == 0 || rvNum(op.Precond) == s.RV) {
			return []outcome{{"404", s}, {"2xx", s}} // a concurrent emptying: see lstate
		}
		return []outcome{{"404", s}}
	}
	next := s
	switch op.Type {
	case "update", "cupdate":
		var os []outcome
		if op.Type == "cupdate" && s.RV != 0 && rvNum(op.Precond) != s.RV {
			return []outcome{{"409", s}}
		}
		if op.Type == "cupdate" && s.RV == 0 {
			os = append(os, outcome{"409", s})
		}
		if op.Type == "update" {
			// The body carries the uid of the object read: when the name was deleted and created
			// again since, both servers answer 409 (the uid as a precondition). The model keeps no
			// incarnations, so it lets any such PUT be refused (up's 30-minute run).
			os = append(os, outcome{"409", s})
		}
		next.Val, next.Fin = op.Val, op.Fin
		if s.Term {
			// The body may name finalizers the object no longer has: no new ones once deleting.
			os = append(os, outcome{"422", s})
			if !op.Fin {
				next = lstate{RV: s.RV, Emptied: true}
			}
		}
		return append(os, outcome{"2xx", next})
	case "mpatch", "jpatch", "spatch":
		next.Val = op.Val
		return []outcome{{"2xx", next}}
	case "unfin":
		next.Val, next.Fin = op.Val, false
		if s.Term {
			next = lstate{RV: s.RV, Emptied: true}
		}
		return []outcome{{"2xx", next}}
	case "addfin":
		next.Val, next.Fin = op.Val, true
		if s.Term {
			return []outcome{{"422", s}, {"2xx", next}}
		}
		return []outcome{{"2xx", next}}
	case "delete":
		switch {
		case !s.Fin:
			return []outcome{{"2xx", lstate{}}}
		case !s.Term:
			// kube-apiserver decides a delete's finalizers from the object as it first read it:
			// a finalizer added meanwhile does not stop the delete (the answer is then a Status,
			// not the terminating object).
			next.Term = true
			return []outcome{{"2xx", next}, {"2xx", lstate{}}}
		default:
			return []outcome{{"2xx", s}}
		}
	}
	return nil
}

func codeOf(status int) string {
	if status >= 200 && status < 300 {
		return "2xx"
	}
	return fmt.Sprint(status)
}

// step is the model: every state the key may be in after op, given what op got.
func step(s lstate, op *Op) []lstate {
	if op.Type == "get" {
		switch {
		case op.Status == 404:
			if !s.Exists {
				return []lstate{s}
			}
			return nil
		case op.Status == 200 && op.Obj != nil:
			o := op.Obj
			if !s.Exists || s.Val != o.Val || s.Fin != o.Fin || s.Term != o.Term || (s.RV != 0 && s.RV != rvNum(o.RV)) {
				return nil
			}
			s.RV = rvNum(o.RV)
			return []lstate{s}
		default:
			return []lstate{s}
		}
	}
	var answerRV uint64
	if op.Obj != nil {
		answerRV = rvNum(op.Obj.RV)
	}
	if unknownOutcome(op) {
		res := []lstate{s}
		for _, o := range outcomes(s, op) {
			if o.code == "2xx" {
				n := o.next
				if n.Exists && n != s {
					n.RV = answerRV // known when a watch saw the write (patchUnknown)
				}
				res = append(res, n)
			}
		}
		return res
	}
	code := codeOf(op.Status)
	if code != "2xx" && code != "404" && code != "409" && code != "422" {
		return []lstate{s} // refused before it was tried (400, 403, 429, ...): no change
	}
	var res []lstate
	for _, o := range outcomes(s, op) {
		if o.code != code {
			continue
		}
		n := o.next
		if op.Type == "delete" && code == "2xx" && n.Exists != (op.Obj != nil && op.Obj.Term) && n != s {
			continue // the answer says which: the terminating object, or a Status (gone)
		}
		if code == "2xx" && s.Exists && n.Emptied && op.Obj != nil && s.RV != 0 && rvNum(op.Obj.RV) > s.RV {
			continue // the write that removes it answers with the object it wrote, at a version it read
		}
		if code == "2xx" && !s.Exists && n == s {
			// Another write emptied the finalizers meanwhile (see lstate): answered with the
			// terminating object as it wrote it, at a version it read.
			if op.Obj == nil || !op.Obj.Term || op.Obj.Fin || op.Obj.Val != op.Val || (s.RV != 0 && rvNum(op.Obj.RV) > s.RV) {
				continue
			}
		}
		if code == "2xx" && n.Exists && n != s {
			if answerRV != 0 && s.RV != 0 && answerRV <= s.RV {
				continue // a write's new version is above the one it changed
			}
			n.RV = answerRV
			if op.Obj != nil && op.Type == "create" {
				n.Fin = op.Obj.Fin
			}
		}
		res = append(res, n)
	}
	return res
}

var linModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{lstate{}} },
	Step: func(state, input, _ any) []any {
		var out []any
		for _, n := range step(state.(lstate), input.(*Op)) {
			out = append(out, n)
		}
		return out
	},
	DescribeOperation: func(input, _ any) string {
		op := input.(*Op)
		s := fmt.Sprintf("%s %s val=%s -> %d", op.Type, op.Name, op.Val, op.Status)
		if op.Obj != nil {
			s += fmt.Sprintf(" rv=%s val=%s fin=%v term=%v", op.Obj.RV, op.Obj.Val, op.Obj.Fin, op.Obj.Term)
		}
		return s
	},
}

// patchUnknown: a write whose answer was lost but whose value a watch delivered was applied at
// that event's resourceVersion, which the model then knows.
func patchUnknown(h *History) {
	seen := map[string]Obj{} // kind/name/val -> first event
	for _, s := range h.Segments {
		for _, e := range s.Events {
			if e.Type == "BOOKMARK" || e.Type == "DELETED" || e.Obj.Val == "" {
				continue
			}
			k := s.Kind + "/" + e.Obj.Name + "/" + e.Obj.Val
			if o, ok := seen[k]; !ok || rvNum(e.Obj.RV) < rvNum(o.RV) {
				seen[k] = e.Obj
			}
		}
	}
	// Values some read or list answered.
	read := map[string]bool{}
	for _, op := range h.Ops {
		if op.Type == "get" && op.Obj != nil {
			read[op.Kind+"/"+op.Name+"/"+op.Obj.Val] = true
		}
	}
	for _, l := range h.Lists {
		for _, it := range l.Items {
			read[l.Kind+"/"+it.Name+"/"+it.Val] = true
		}
	}
	kept := h.Ops[:0]
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.Type != "get" && op.Type != "delete" && unknownOutcome(op) && op.Obj == nil {
			k := op.Kind + "/" + op.Name + "/" + op.Val
			if o, ok := seen[k]; ok {
				o := o
				if o.Term {
					// Maybe not the write's own version: a delete marks the object terminating
					// and keeps its value, so the first event with it may be the delete's.
					o.RV = ""
				}
				op.Obj = &o
			} else if op.Status >= 500 && !read[k] {
				// Answered with a server error, and its value never seen by a watch, a read or a
				// list: not applied (as etcd's checker drops failed writes that no watch saw). A
				// write that took effect after all keeps its possibilities.
				continue
			}
		}
		kept = append(kept, *op)
	}
	h.Ops = kept
}

// returnOf: when an operation's effect was over. A request without an answer may take effect
// until the server next died, or until the end of the history.
func returnOf(h *History, op *Op) int64 {
	if !unknownOutcome(op) {
		return op.Return
	}
	end := h.End
	for _, k := range h.Kills {
		if k > op.Call && k < end {
			end = k
		}
	}
	return end
}

func checkLinearizable(h *History, timeout time.Duration) Result {
	r := Result{Property: "linearizable", OK: true}
	var ops []porcupine.Operation
	writes, acked, unknown, patched, reads, listReads, errors := 0, 0, 0, 0, 0, 0, 0
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.Type == "get" {
			reads++
		} else {
			writes++
			if success(op) {
				acked++
			} else if unknownOutcome(op) {
				unknown++
				if op.Status >= 500 {
					errors++
				}
				if op.Obj != nil {
					patched++
				}
			}
		}
		ops = append(ops, porcupine.Operation{ClientId: op.Client + 1, Input: op, Call: op.Call, Output: op, Return: returnOf(h, op)})
	}
	// Every list (each of its pages at the first page's resourceVersion) reads every key of its
	// kind, as of its first page.
	for _, l := range h.Lists {
		if strings.HasPrefix(l.RV, "mismatch:") {
			r.fail("a list of %s in %d pages answered more than one resourceVersion (%s)", l.Kind, l.Pages, l.RV)
			continue
		}
		byName := map[string]Obj{}
		for _, it := range l.Items {
			byName[it.Name] = it
		}
		for _, key := range h.Keys {
			kind, name, _ := strings.Cut(key, "/")
			if kind != l.Kind {
				continue
			}
			op := &Op{Client: l.Client, Kind: kind, Name: name, Type: "get", Call: l.Call, Return: l.Return, Status: 404}
			if o, ok := byName[name]; ok {
				o := o
				op.Status, op.Obj = 200, &o
			}
			listReads++
			ops = append(ops, porcupine.Operation{ClientId: l.Client + 1, Input: op, Call: op.Call, Output: op, Return: op.Return})
		}
	}
	byKey := map[string][]porcupine.Operation{}
	for _, o := range ops {
		op := o.Input.(*Op)
		byKey[op.Kind+"/"+op.Name] = append(byKey[op.Kind+"/"+op.Name], o)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	model := linModel.ToModel()
	for _, k := range keys {
		res, info := porcupine.CheckOperationsVerbose(model, byKey[k], timeout)
		switch res {
		case porcupine.Illegal:
			r.fail("%s: not linearizable%s", k, illegalDetail(byKey[k], info))
		case porcupine.Unknown:
			r.fail("%s: not decided within %s", k, timeout)
		}
	}
	r.Figures = fmt.Sprintf("%d operations on %d keys: %d writes (%d acknowledged, %d without an answer or answered 5xx (%d answered 5xx) of which %d seen applied), %d reads, %d reads by %d lists",
		len(ops), len(keys), writes, acked, unknown, errors, patched, reads, listReads, len(h.Lists))
	return r
}

// illegalDetail names the operations of the longest linearizable prefix's end, to start from.
func illegalDetail(ops []porcupine.Operation, info porcupine.LinearizationInfo) string {
	partial := info.PartialLinearizations()
	best := []int{}
	for _, p := range partial {
		for _, l := range p {
			if len(l) > len(best) {
				best = l
			}
		}
	}
	in := map[int]bool{}
	for _, i := range best {
		in[i] = true
	}
	// The first operation (by return) left out of the longest linearization.
	first := -1
	for i, o := range ops {
		if !in[i] && (first < 0 || o.Return < ops[first].Return) {
			first = i
		}
	}
	if first < 0 {
		return ""
	}
	d := linModel.DescribeOperation(ops[first].Input, nil)
	if len(best) > 0 {
		d = fmt.Sprintf("%s, after %s", d, linModel.DescribeOperation(ops[best[len(best)-1]].Input, nil))
	}
	return ": cannot place " + d
}

// --- watch properties (etcd's tests/robustness/validate, for the Kubernetes watch API) ---------

type change struct {
	typ, name, val string
	fin, term      bool
}

func changeOf(e Event) change {
	return change{e.Type, e.Obj.Name, e.Obj.Val, e.Obj.Fin, e.Obj.Term}
}

// ranges: the part of a segment that is a stream of changes (after the initial events), as
// (from, to]: from the version asked for (or the initial-events-end bookmark) to the last
// version the segment received (event or bookmark).
func streamOf(s Segment) (events []Event, from uint64, to uint64, ok bool) {
	if s.End == "refused" || (len(s.Events) == 0 && s.End != "eof" && s.End != "stopped") {
		return nil, 0, 0, false // no stream: the server was down, or the watch failed at once
	}
	from = rvNum(s.From)
	start := 0
	if s.InitialEvents {
		ok = false
		for i, e := range s.Events {
			if e.InitialEnd {
				start, from, ok = i+1, rvNum(e.Obj.RV), true
				break
			}
		}
		if !ok {
			return nil, 0, 0, false
		}
	}
	to = from
	for _, e := range s.Events[start:] {
		events = append(events, e)
		if n := rvNum(e.Obj.RV); n > to {
			to = n
		}
	}
	return events, from, to, true
}

func checkWatches(h *History) []Result {
	ordered := Result{Property: "ordered", OK: true}
	unique := Result{Property: "unique", OK: true}
	atomic := Result{Property: "atomic", OK: true}
	reliable := Result{Property: "reliable", OK: true}
	resumable := Result{Property: "resumable", OK: true}
	bookmarkable := Result{Property: "bookmarkable", OK: true}
	initial := Result{Property: "initial-events", OK: true}

	// Every change each kind went through, by resourceVersion: what the watches delivered, and
	// what the acknowledged writes answered (a write no watch delivered is still expected).
	global := map[string]map[uint64]change{}
	seenBy := map[string]map[uint64]string{} // who reported it first, for messages
	events, segments, bookmarks := 0, 0, 0
	for si, s := range h.Segments {
		if global[s.Kind] == nil {
			global[s.Kind], seenBy[s.Kind] = map[uint64]change{}, map[uint64]string{}
		}
		evs, _, _, ok := streamOf(s)
		if !ok {
			continue
		}
		segments++
		for _, e := range evs {
			if e.Type == "BOOKMARK" {
				bookmarks++
				continue
			}
			events++
			n := rvNum(e.Obj.RV)
			if c, ok := global[s.Kind][n]; ok && c != changeOf(e) {
				atomic.fail("%s at resourceVersion %d: %s delivered %+v, segment %d delivered %+v", s.Kind, n, seenBy[s.Kind][n], c, si, changeOf(e))
			} else if !ok {
				global[s.Kind][n], seenBy[s.Kind][n] = changeOf(e), fmt.Sprintf("segment %d", si)
			}
		}
	}
	ackedWrites := 0
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.Type == "get" || op.Type == "delete" || !success(op) || op.Obj == nil || (op.Obj.Term && !op.Obj.Fin) {
			continue
		}
		n := rvNum(op.Obj.RV)
		if global[op.Kind] == nil {
			global[op.Kind], seenBy[op.Kind] = map[uint64]change{}, map[uint64]string{}
		}
		ackedWrites++
		if c, ok := global[op.Kind][n]; ok {
			if c.name != op.Name || c.val != op.Val {
				atomic.fail("%s at resourceVersion %d: a watch delivered %s=%s, the write answering it was %s=%s", op.Kind, n, c.name, c.val, op.Name, op.Val)
			}
		} else {
			global[op.Kind][n] = change{typ: "(acknowledged " + op.Type + ")", name: op.Name, val: op.Val, fin: op.Obj.Fin, term: op.Obj.Term}
			seenBy[op.Kind][n] = fmt.Sprintf("%s by client %d", op.Type, op.Client)
		}
	}
	atomic.Figures = fmt.Sprintf("%d events in %d streams and %d acknowledged writes agree, one object per resourceVersion", events, segments, ackedWrites)

	// Per chain: ordered and unique over all its segments.
	byChain := map[int][]int{}
	for si, s := range h.Segments {
		byChain[s.Chain] = append(byChain[s.Chain], si)
	}
	chains := make([]int, 0, len(byChain))
	for c := range byChain {
		chains = append(chains, c)
	}
	sort.Ints(chains)
	for _, c := range chains {
		seen := map[uint64]bool{}
		for _, si := range byChain[c] {
			s := h.Segments[si]
			evs, from, _, ok := streamOf(s)
			if !ok {
				continue
			}
			last := from
			for _, e := range evs {
				n := rvNum(e.Obj.RV)
				if e.Type == "BOOKMARK" {
					continue
				}
				if seen[n] {
					unique.fail("chain %d (%s): the event at resourceVersion %d (%s %s) delivered twice (segment %d)", c, s.Kind, n, e.Type, e.Obj.Name, si)
				} else if n <= last {
					ordered.fail("chain %d (%s) segment %d: resourceVersion %d after %d", c, s.Kind, si, n, last)
				}
				seen[n] = true
				if n > last {
					last = n
				}
			}
		}
	}
	ordered.Figures = fmt.Sprintf("%d events in %d streams of %d watches, each after the previous and after the version asked for", events, segments, len(chains))
	unique.Figures = fmt.Sprintf("%d events, none twice in a watch (resumptions included)", events)

	// Reliable: a stream that got as far as version E holds every change of its kind in (from, E].
	// Resumable: a resumed stream's first change is the first one after the version it resumed from.
	expectedTotal, resumedChecked, gone := 0, 0, 0
	for si, s := range h.Segments {
		evs, from, to, ok := streamOf(s)
		if !ok {
			continue
		}
		got := map[uint64]bool{}
		for _, e := range evs {
			if e.Type != "BOOKMARK" {
				got[rvNum(e.Obj.RV)] = true
			}
		}
		var missing []uint64
		for n := range global[s.Kind] {
			if n > from && n <= to {
				expectedTotal++
				if !got[n] {
					missing = append(missing, n)
				}
			}
		}
		sort.Slice(missing, func(i, j int) bool { return missing[i] < missing[j] })
		for _, n := range missing {
			c := global[s.Kind][n]
			reliable.fail("%s segment %d (chain %d, from %d, through %d): no event for resourceVersion %d (%s %s val=%s, from %s)",
				s.Kind, si, s.Chain, from, to, n, c.typ, c.name, c.val, seenBy[s.Kind][n])
		}
		if s.Resumed && s.End != "gone" {
			resumedChecked++
			if len(missing) > 0 && len(evs) > 0 {
				resumable.fail("%s segment %d resumed from %d: the changes at %v are missing", s.Kind, si, from, missing)
			}
		}
		// Bookmarks never go back, and nothing comes after a bookmark at or below its version.
		var last uint64 = from
		var lastBookmark uint64
		for _, e := range evs {
			n := rvNum(e.Obj.RV)
			if e.Type == "BOOKMARK" {
				if n < last {
					bookmarkable.fail("%s segment %d: bookmark at %d after an event or bookmark at %d", s.Kind, si, n, last)
				}
				lastBookmark = n
			} else if lastBookmark != 0 && n <= lastBookmark {
				bookmarkable.fail("%s segment %d: event at %d after a bookmark at %d", s.Kind, si, n, lastBookmark)
			}
			if n > last {
				last = n
			}
		}
	}
	for _, s := range h.Segments {
		if s.Resumed && s.End == "gone" {
			gone++
		}
	}
	reliable.Figures = fmt.Sprintf("%d changes expected in the ranges %d streams covered, %d acknowledged writes among the changes", expectedTotal, segments, ackedWrites)
	resumable.Figures = fmt.Sprintf("%d watches resumed from the last version received (and streamed); %d answered 410 (version no longer kept), none of the others skipped or repeated a change", resumedChecked, gone)
	bookmarkable.Figures = fmt.Sprintf("%d bookmarks, never below an earlier event or bookmark, nothing after one at or below it", bookmarks)

	checkInitialEvents(h, global, &initial)
	return []Result{ordered, unique, atomic, reliable, resumable, bookmarkable, initial}
}

type objState struct {
	val       string
	fin, term bool
}

// checkInitialEvents: a sendInitialEvents watch sends ADDED for each object of the state at
// some version R, then the bookmark annotated k8s.io/initial-events-end at R, then the changes
// after R. The state at R is rebuilt from a list at L <= R and the changes in (L, R] when the
// watches covered that range (else only the form is checked).
func checkInitialEvents(h *History, global map[string]map[uint64]change, r *Result) {
	// The ranges of versions each kind's streams covered.
	type span struct{ from, to uint64 }
	covered := map[string][]span{}
	for _, s := range h.Segments {
		if _, from, to, ok := streamOf(s); ok && to > from {
			covered[s.Kind] = append(covered[s.Kind], span{from, to})
		}
	}
	isCovered := func(kind string, from, to uint64) bool {
		// (from, to] inside the union of the spans.
		sp := append([]span(nil), covered[kind]...)
		sort.Slice(sp, func(i, j int) bool { return sp[i].from < sp[j].from })
		at := from
		for _, x := range sp {
			if x.from <= at && x.to > at {
				at = x.to
			}
			if at >= to {
				return true
			}
		}
		return at >= to
	}
	watches, complete, compared, objects, cut := 0, 0, 0, 0, 0
	for si, s := range h.Segments {
		if !s.InitialEvents || s.End == "refused" || (len(s.Events) == 0 && s.End != "eof") {
			continue // the server was down: no watch
		}
		watches++
		end := -1
		for i, e := range s.Events {
			if e.InitialEnd {
				end = i
				break
			}
		}
		if end < 0 {
			if s.End == "eof" {
				r.fail("%s segment %d: the watch ended (eof) without the initial-events-end bookmark (%d events)", s.Kind, si, len(s.Events))
			} else {
				cut++
			}
			continue
		}
		complete++
		R := rvNum(s.Events[end].Obj.RV)
		got := map[string]objState{}
		for _, e := range s.Events[:end] {
			if e.Type == "BOOKMARK" {
				continue
			}
			if e.Type != "ADDED" {
				r.fail("%s segment %d: initial event %s %s", s.Kind, si, e.Type, e.Obj.Name)
			}
			if rvNum(e.Obj.RV) > R {
				r.fail("%s segment %d: initial object %s at %s, after the bookmark's %d", s.Kind, si, e.Obj.Name, e.Obj.RV, R)
			}
			if _, dup := got[e.Obj.Name]; dup {
				r.fail("%s segment %d: initial object %s sent twice", s.Kind, si, e.Obj.Name)
			}
			got[e.Obj.Name] = objState{e.Obj.Val, e.Obj.Fin, e.Obj.Term}
		}
		// The latest list at or before R from which the watches covered (L, R].
		var anchor *List
		for i := range h.Lists {
			l := &h.Lists[i]
			L := rvNum(l.RV)
			if l.Kind == s.Kind && L != 0 && L <= R && (L == R || isCovered(s.Kind, L, R)) && (anchor == nil || L > rvNum(anchor.RV)) {
				anchor = l
			}
		}
		if anchor == nil {
			continue
		}
		want := map[string]objState{}
		for _, it := range anchor.Items {
			want[it.Name] = objState{it.Val, it.Fin, it.Term}
		}
		var versions []uint64
		for n := range global[s.Kind] {
			if n > rvNum(anchor.RV) && n <= R {
				versions = append(versions, n)
			}
		}
		sort.Slice(versions, func(i, j int) bool { return versions[i] < versions[j] })
		for _, n := range versions {
			c := global[s.Kind][n]
			if c.typ == "DELETED" {
				delete(want, c.name)
			} else {
				want[c.name] = objState{c.val, c.fin, c.term}
			}
		}
		compared++
		objects += len(got)
		for name, w := range want {
			if g, ok := got[name]; !ok {
				r.fail("%s segment %d: the state at %d holds %s (val=%s) but no initial event sent it", s.Kind, si, R, name, w.val)
			} else if g.val != w.val || g.fin != w.fin || g.term != w.term {
				r.fail("%s segment %d: %s sent as %+v, the state at %d holds %+v", s.Kind, si, name, g, R, w)
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				r.fail("%s segment %d: initial event for %s, absent from the state at %d", s.Kind, si, name, R)
			}
		}
	}
	r.Figures = fmt.Sprintf("%d sendInitialEvents watches: %d ended their initial events with the bookmark (%d cut before it by a fault), %d compared with the state rebuilt at the bookmark's version (%d objects)",
		watches, complete, cut, compared, objects)
}
