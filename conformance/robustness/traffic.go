package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Recorder runs the clients and the watches and keeps the history.
type Recorder struct {
	c       *Client
	mu      sync.Mutex
	h       History
	names   []string
	chainID int
	// The highest resourceVersion an acknowledged write of each kind answered, and the highest
	// each chain has seen: the watches are waited for at the end.
	ackRV  map[string]uint64
	seenRV map[string]uint64
	stop   chan struct{}
	pause  time.Duration // between a client's operations (long runs)
}

func now() int64 { return time.Now().UnixNano() }

func (r *Recorder) addOp(op Op) {
	if op.Status == -1 {
		return // never sent: no effect, nothing to check
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Ops = append(r.h.Ops, op)
	if op.Status >= 200 && op.Status < 300 && op.Type != "get" && op.Obj != nil {
		if n := rvNum(op.Obj.RV); n > r.ackRV[op.Kind] {
			r.ackRV[op.Kind] = n
		}
	}
}

func itemPath(kind, name string) string { return kinds[kind] + "/" + name }

// request performs one recorded request on key kind/name.
func (r *Recorder) request(client int, op Op, method, path, ctype string, body []byte) Op {
	op.Client = client
	op.Call = now()
	a := r.c.do(method, path, ctype, body, 10*time.Second)
	op.Return = now()
	op.Status = a.Status
	if a.Status >= 200 && a.Status < 300 {
		op.Obj = objOf(a.Body)
		if op.Obj != nil && op.Obj.Name == "" { // a Status, not an object (a delete's answer)
			op.Obj = nil
		}
	}
	r.addOp(op)
	return op
}

func (r *Recorder) get(client int, kind, name string) Op {
	return r.request(client, Op{Kind: kind, Name: name, Type: "get"}, "GET", itemPath(kind, name), "", nil)
}

// client is one client's loop of random operations on random keys.
func (r *Recorder) client(id int, rng *rand.Rand, deadline time.Time, wg *sync.WaitGroup) {
	defer wg.Done()
	seq := 0
	for time.Now().Before(deadline) {
		kind := kindOrder[rng.Intn(len(kindOrder))]
		name := r.names[rng.Intn(len(r.names))]
		seq++
		val := fmt.Sprintf("c%d-%d", id, seq)
		p := rng.Intn(100)
		var op Op
		switch {
		case p < 18:
			op = r.get(id, kind, name)
		case p < 26:
			r.list(id, kind, 1+rng.Intn(2))
			continue
		case p < 38:
			fin := rng.Intn(2) == 0
			op = r.request(id, Op{Kind: kind, Name: name, Type: "create", Val: val, Fin: fin}, "POST", kinds[kind],
				"application/json", newObject(kind, name, val, fin))
		case p < 56:
			// Read, then write the object read with a new value: with its resourceVersion as a
			// precondition (cupdate) or without (update).
			g := r.get(id, kind, name)
			if g.Status != 200 || g.Obj == nil {
				break
			}
			typ := "cupdate"
			if rng.Intn(3) == 0 {
				typ = "update"
			}
			body, ok := r.rewrite(id, kind, name, val, typ == "cupdate")
			if !ok {
				break
			}
			op = r.request(id, Op{Kind: kind, Name: name, Type: typ, Val: val, Fin: body.fin, Precond: body.rv},
				"PUT", itemPath(kind, name), "application/json", body.json)
		case p < 64:
			op = r.request(id, Op{Kind: kind, Name: name, Type: "mpatch", Val: val}, "PATCH", itemPath(kind, name),
				"application/merge-patch+json", []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, valueKey, val)))
		case p < 70:
			op = r.request(id, Op{Kind: kind, Name: name, Type: "jpatch", Val: val}, "PATCH", itemPath(kind, name),
				"application/json-patch+json", []byte(fmt.Sprintf(`[{"op":"add","path":"/metadata/annotations/%s","value":%q}]`,
					strings.ReplaceAll(valueKey, "/", "~1"), val)))
		case p < 76:
			op = r.request(id, Op{Kind: kind, Name: name, Type: "spatch", Val: val}, "PATCH", itemPath(kind, name),
				"application/strategic-merge-patch+json", []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, valueKey, val)))
		case p < 88:
			op = r.request(id, Op{Kind: kind, Name: name, Type: "delete"}, "DELETE", itemPath(kind, name), "", nil)
		case p < 95:
			op = r.request(id, Op{Kind: kind, Name: name, Type: "unfin", Val: val}, "PATCH", itemPath(kind, name),
				"application/merge-patch+json", []byte(fmt.Sprintf(`{"metadata":{"finalizers":null,"annotations":{%q:%q}}}`, valueKey, val)))
		default:
			op = r.request(id, Op{Kind: kind, Name: name, Type: "addfin", Val: val}, "PATCH", itemPath(kind, name),
				"application/merge-patch+json", []byte(fmt.Sprintf(`{"metadata":{"finalizers":[%q],"annotations":{%q:%q}}}`, finalizer, valueKey, val)))
		}
		if r.pause > 0 {
			time.Sleep(r.pause)
		}
		if op.Status <= 0 || op.Status >= 500 {
			// The server is down or overloaded: wait a little before the next request.
			time.Sleep(time.Duration(50+rng.Intn(150)) * time.Millisecond)
		}
	}
}

type rewritten struct {
	json []byte
	rv   string
	fin  bool
}

// rewrite fetches the object again (unrecorded body, recorded read) and returns it with the new
// value, keeping its resourceVersion (a precondition) or dropping it.
func (r *Recorder) rewrite(client int, kind, name, val string, keepRV bool) (rewritten, bool) {
	a := r.c.do("GET", itemPath(kind, name), "", nil, 10*time.Second)
	if a.Status != 200 {
		return rewritten{}, false
	}
	var o map[string]any
	if json.Unmarshal(a.Body, &o) != nil {
		return rewritten{}, false
	}
	meta, _ := o["metadata"].(map[string]any)
	if meta == nil {
		return rewritten{}, false
	}
	ann, _ := meta["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	ann[valueKey] = val
	meta["annotations"] = ann
	rv, _ := meta["resourceVersion"].(string)
	if !keepRV {
		delete(meta, "resourceVersion")
		rv = ""
	}
	fins, _ := meta["finalizers"].([]any)
	b, _ := json.Marshal(o)
	return rewritten{json: b, rv: rv, fin: len(fins) > 0}, true
}

// list lists a kind in pages of limit (0: whole), recording it when every page came.
func (r *Recorder) list(client int, kind string, limit int) (List, bool) {
	l := List{Client: client, Kind: kind}
	cont := ""
	for {
		q := labelQuery
		if limit > 0 {
			q += fmt.Sprintf("&limit=%d", limit)
		}
		if cont != "" {
			q += "&continue=" + url.QueryEscape(cont)
		}
		call := now()
		a := r.c.do("GET", kinds[kind]+"?"+q, "", nil, 10*time.Second)
		ret := now()
		if a.Status != 200 {
			return l, false
		}
		var page struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
				Continue        string `json:"continue"`
			} `json:"metadata"`
			Items []json.RawMessage `json:"items"`
		}
		if json.Unmarshal(a.Body, &page) != nil {
			return l, false
		}
		if l.Pages == 0 {
			l.Call, l.Return, l.RV = call, ret, page.Metadata.ResourceVersion
		} else if page.Metadata.ResourceVersion != l.RV {
			// Every page of a list is of the first page's snapshot: a different version is recorded
			// as a list of its own, which the checker refuses.
			l.RV = "mismatch:" + l.RV + "/" + page.Metadata.ResourceVersion
		}
		l.Pages++
		for _, it := range page.Items {
			if o := objOf(it); o != nil {
				l.Items = append(l.Items, *o)
			}
		}
		if page.Metadata.Continue == "" {
			break
		}
		cont = page.Metadata.Continue
	}
	r.mu.Lock()
	r.h.Lists = append(r.h.Lists, l)
	r.mu.Unlock()
	return l, true
}

// watchOnce runs one watch request to its end, recording it as a segment of chain.
func (r *Recorder) watchOnce(kind string, chain int, from string, resumed, initial bool, timeoutS int) Segment {
	seg := Segment{Kind: kind, Chain: chain, From: from, Resumed: resumed, InitialEvents: initial, Start: now()}
	q := labelQuery + "&watch=1&allowWatchBookmarks=true" + fmt.Sprintf("&timeoutSeconds=%d", timeoutS)
	if initial {
		q += "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
	} else {
		q += "&resourceVersion=" + from
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(timeoutS+10)*time.Second)
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, _ := http.NewRequestWithContext(ctx, "GET", r.c.server+kinds[kind]+"?"+q, nil)
	req.Header.Set("Authorization", "Bearer "+r.c.token)
	req.Header.Set("Accept", "application/json")
	resp, err := r.c.http.Do(req)
	finish := func(end string) Segment {
		seg.Stop, seg.End = now(), end
		r.mu.Lock()
		r.h.Segments = append(r.h.Segments, seg)
		r.mu.Unlock()
		return seg
	}
	if err != nil {
		if refused(err) {
			return finish("refused")
		}
		return finish("error")
	}
	defer resp.Body.Close()
	if resp.StatusCode == 410 {
		return finish("gone")
	}
	if resp.StatusCode != 200 {
		return finish(fmt.Sprintf("status %d", resp.StatusCode))
	}
	dec := json.NewDecoder(bufio.NewReaderSize(resp.Body, 64<<10))
	for {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			select {
			case <-r.stop:
				return finish("stopped")
			default:
			}
			if strings.Contains(err.Error(), "EOF") && !strings.Contains(err.Error(), "unexpected") {
				return finish("eof")
			}
			return finish("error")
		}
		if ev.Type == "ERROR" {
			var st struct {
				Code int `json:"code"`
			}
			_ = json.Unmarshal(ev.Object, &st)
			if st.Code == 410 {
				return finish("gone")
			}
			return finish(fmt.Sprintf("error %d", st.Code))
		}
		o := objOf(ev.Object)
		if o == nil {
			return finish("error")
		}
		e := Event{Type: ev.Type, Obj: *o, At: now()}
		if ev.Type == "BOOKMARK" {
			var b struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			}
			_ = json.Unmarshal(ev.Object, &b)
			e.InitialEnd = b.Metadata.Annotations["k8s.io/initial-events-end"] == "true"
			e.Obj = Obj{RV: o.RV}
		}
		seg.Events = append(seg.Events, e)
		if n := rvNum(o.RV); n > 0 && !initial {
			r.mu.Lock()
			if n > r.seenRV[kind] {
				r.seenRV[kind] = n
			}
			r.mu.Unlock()
		}
	}
}

// lastRV is the resourceVersion a chain resumes from: the last event's or bookmark's of the
// segment (after the initial events), or from when there is none.
func lastRV(seg Segment, from string) string {
	rv := from
	for _, e := range seg.Events {
		if seg.InitialEvents && !e.InitialEnd && rvNum(rv) == 0 {
			continue
		}
		if rvNum(e.Obj.RV) > rvNum(rv) {
			rv = e.Obj.RV
		}
	}
	return rv
}

func (r *Recorder) newChain() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.chainID++
	return r.chainID
}

func (r *Recorder) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// watcher keeps a logical watch of kind going: a list, then watches each resumed from the last
// resourceVersion received; after a 410 it lists again (a new chain).
func (r *Recorder) watcher(kind string, rng *rand.Rand, wg *sync.WaitGroup) {
	defer wg.Done()
	for !r.stopped() {
		l, ok := r.list(-1, kind, 0)
		if !ok {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		chain := r.newChain()
		from, resumed := l.RV, false
		for !r.stopped() {
			seg := r.watchOnce(kind, chain, from, resumed, false, 3+rng.Intn(10))
			if seg.End == "gone" {
				break
			}
			from, resumed = lastRV(seg, from), true
			if seg.End != "eof" {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
}

// initialWatcher opens sendInitialEvents watches one after another, each resumed once from where
// it ended (a chain of two segments).
func (r *Recorder) initialWatcher(kind string, rng *rand.Rand, wg *sync.WaitGroup) {
	defer wg.Done()
	for !r.stopped() {
		chain := r.newChain()
		seg := r.watchOnce(kind, chain, "", false, true, 2+rng.Intn(5))
		if seg.End != "eof" {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if from := lastRV(seg, ""); from != "" && !r.stopped() {
			r.watchOnce(kind, chain, from, true, false, 2+rng.Intn(4))
		}
	}
}

// record runs the traffic for duration, then lets the watches catch up with the acknowledged
// writes (up to settle), then reads every key once more.
func record(c *Client, server, fault string, clients, keysPerKind int, duration, settle, pause time.Duration, seed int64) *History {
	r := &Recorder{c: c, ackRV: map[string]uint64{}, seenRV: map[string]uint64{}, stop: make(chan struct{}), pause: pause}
	r.h.Server, r.h.Fault = server, fault
	for i := 0; i < keysPerKind; i++ {
		r.names = append(r.names, fmt.Sprintf("k%d", i))
	}
	for _, k := range kindOrder {
		for _, n := range r.names {
			r.h.Keys = append(r.h.Keys, k+"/"+n)
		}
	}
	// The namespace, created until it exists (the server may be starting).
	for i := 0; i < 300; i++ {
		a := c.do("POST", "/api/v1/namespaces", "application/json", []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+namespace+`"}}`), 10*time.Second)
		if a.Status == 201 || a.Status == 409 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.h.Start = now()
	var wwg, cwg sync.WaitGroup
	for i, k := range kindOrder {
		for j := 0; j < 2; j++ {
			wwg.Add(1)
			go r.watcher(k, rand.New(rand.NewSource(seed*1000+int64(i*10+j))), &wwg)
		}
		wwg.Add(1)
		go r.initialWatcher(k, rand.New(rand.NewSource(seed*1000+int64(i*10+5))), &wwg)
	}
	deadline := time.Now().Add(duration)
	for i := 0; i < clients; i++ {
		cwg.Add(1)
		go r.client(i, rand.New(rand.NewSource(seed*100+int64(i))), deadline, &cwg)
	}
	cwg.Wait()
	// Let every long watch see the last acknowledged write of its kind.
	end := time.Now().Add(settle)
	for time.Now().Before(end) {
		if r.caughtUp() {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(r.stop)
	wwg.Wait()
	for _, k := range kindOrder {
		for _, n := range r.names {
			for i := 0; i < 100; i++ {
				if r.get(clients, k, n).Status > 0 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	r.h.End = now()
	return &r.h
}

// caughtUp: the long watches of each kind have seen its highest acknowledged write.
func (r *Recorder) caughtUp() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, rv := range r.ackRV {
		if r.seenRV[k] < rv {
			return false
		}
	}
	return true
}
