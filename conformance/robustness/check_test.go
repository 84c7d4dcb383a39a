package main

import (
	"strings"
	"testing"
	"time"
)

// A small history that holds every property: a ConfigMap created (rv 10), patched (rv 11),
// read, listed, and watched by two chains, one resumed, one with initial events.
func clean() *History {
	cm := "configmaps"
	obj := func(rv, val string) *Obj { return &Obj{Name: "k0", RV: rv, Val: val} }
	return &History{
		Server: "test", Keys: []string{"configmaps/k0"}, Start: 0, End: 1000,
		Ops: []Op{
			{Client: 0, Kind: cm, Name: "k0", Type: "get", Call: 1, Return: 2, Status: 404},
			{Client: 0, Kind: cm, Name: "k0", Type: "create", Val: "a", Call: 10, Return: 20, Status: 201, Obj: obj("10", "a")},
			{Client: 1, Kind: cm, Name: "k0", Type: "get", Call: 21, Return: 22, Status: 200, Obj: obj("10", "a")},
			{Client: 0, Kind: cm, Name: "k0", Type: "mpatch", Val: "b", Call: 30, Return: 40, Status: 200, Obj: obj("11", "b")},
			{Client: 1, Kind: cm, Name: "k0", Type: "get", Call: 41, Return: 42, Status: 200, Obj: obj("11", "b")},
		},
		Lists: []List{
			{Client: -1, Kind: cm, Call: 3, Return: 4, RV: "5", Pages: 1},
			{Client: 2, Kind: cm, Call: 50, Return: 51, RV: "11", Pages: 2, Items: []Obj{*obj("11", "b")}},
		},
		Segments: []Segment{
			{Kind: cm, Chain: 1, From: "5", Start: 5, Stop: 100, End: "eof", Events: []Event{
				{Type: "ADDED", Obj: *obj("10", "a")},
			}},
			{Kind: cm, Chain: 1, From: "10", Resumed: true, Start: 100, Stop: 200, End: "eof", Events: []Event{
				{Type: "MODIFIED", Obj: *obj("11", "b")},
				{Type: "BOOKMARK", Obj: Obj{RV: "12"}},
			}},
			{Kind: cm, Chain: 2, From: "5", Start: 5, Stop: 200, End: "eof", Events: []Event{
				{Type: "ADDED", Obj: *obj("10", "a")},
				{Type: "MODIFIED", Obj: *obj("11", "b")},
			}},
			{Kind: cm, Chain: 3, InitialEvents: true, Start: 25, Stop: 200, End: "eof", Events: []Event{
				{Type: "ADDED", Obj: *obj("10", "a")},
				{Type: "BOOKMARK", Obj: Obj{RV: "10"}, InitialEnd: true},
				{Type: "MODIFIED", Obj: *obj("11", "b")},
			}},
		},
	}
}

// verdicts runs the checks and returns the failed properties with their problems.
func verdicts(t *testing.T, h *History) map[string]string {
	t.Helper()
	failed := map[string]string{}
	for _, r := range check(h, 10*time.Second) {
		if !r.OK {
			failed[r.Property] = strings.Join(r.Problems, "; ")
		}
	}
	return failed
}

func expectOnly(t *testing.T, h *History, want ...string) {
	t.Helper()
	failed := verdicts(t, h)
	for _, p := range want {
		if _, ok := failed[p]; !ok {
			t.Errorf("%s not caught (failed: %v)", p, failed)
		}
		delete(failed, p)
	}
	if len(failed) > 0 {
		t.Errorf("unexpected failures: %v", failed)
	}
}

func TestCleanHistoryPasses(t *testing.T) {
	expectOnly(t, clean())
}

func TestStaleReadIsCaught(t *testing.T) {
	h := clean()
	// After the patch to b was answered, a read still answers a.
	h.Ops = append(h.Ops, Op{Client: 2, Kind: "configmaps", Name: "k0", Type: "get", Call: 60, Return: 61, Status: 200,
		Obj: &Obj{Name: "k0", RV: "10", Val: "a"}})
	expectOnly(t, h, "linearizable")
}

func TestStaleListIsCaught(t *testing.T) {
	h := clean()
	h.Lists = append(h.Lists, List{Client: 3, Kind: "configmaps", Call: 60, Return: 61, RV: "10", Pages: 1,
		Items: []Obj{{Name: "k0", RV: "10", Val: "a"}}})
	expectOnly(t, h, "linearizable")
}

func TestLostWriteIsCaught(t *testing.T) {
	h := clean()
	// After a restart the acknowledged object is gone, though nobody deleted it.
	h.Kills = []int64{55}
	h.Ops = append(h.Ops, Op{Client: 2, Kind: "configmaps", Name: "k0", Type: "get", Call: 60, Return: 61, Status: 404})
	expectOnly(t, h, "linearizable")
}

func TestLostUpdateIsCaught(t *testing.T) {
	h := clean()
	// The acknowledged patch to b is gone after a restart: the object is back at a.
	h.Ops = h.Ops[:4]
	h.Kills = []int64{45}
	h.Ops = append(h.Ops, Op{Client: 2, Kind: "configmaps", Name: "k0", Type: "get", Call: 60, Return: 61, Status: 200,
		Obj: &Obj{Name: "k0", RV: "10", Val: "a"}})
	h.Lists = h.Lists[:1]
	expectOnly(t, h, "linearizable")
}

func TestDoubleCreateIsCaught(t *testing.T) {
	h := clean()
	// A second create of the same key succeeds although nothing deleted it.
	h.Ops = append(h.Ops, Op{Client: 2, Kind: "configmaps", Name: "k0", Type: "create", Val: "c", Call: 60, Return: 61, Status: 201,
		Obj: &Obj{Name: "k0", RV: "13", Val: "c"}})
	failed := verdicts(t, h)
	if _, ok := failed["linearizable"]; !ok {
		t.Errorf("double create not caught: %v", failed)
	}
}

func TestUnansweredWriteMayHaveHappened(t *testing.T) {
	h := clean()
	// A patch without an answer (the server was killed), seen applied by a later read: fine.
	h.Kills = []int64{65}
	h.Ops = append(h.Ops,
		Op{Client: 2, Kind: "configmaps", Name: "k0", Type: "jpatch", Val: "d", Call: 60, Return: 70, Status: 0},
		Op{Client: 2, Kind: "configmaps", Name: "k0", Type: "get", Call: 80, Return: 81, Status: 200, Obj: &Obj{Name: "k0", RV: "20", Val: "d"}})
	expectOnly(t, h)
	// ... or not applied: fine too.
	h = clean()
	h.Kills = []int64{65}
	h.Ops = append(h.Ops,
		Op{Client: 2, Kind: "configmaps", Name: "k0", Type: "jpatch", Val: "d", Call: 60, Return: 70, Status: 0},
		Op{Client: 2, Kind: "configmaps", Name: "k0", Type: "get", Call: 80, Return: 81, Status: 200, Obj: &Obj{Name: "k0", RV: "11", Val: "b"}})
	expectOnly(t, h)
}

func TestDuplicatedWatchEventIsCaught(t *testing.T) {
	h := clean()
	// The resumed segment delivers again the event the chain's first segment delivered.
	s := &h.Segments[1]
	s.Events = append([]Event{{Type: "ADDED", Obj: Obj{Name: "k0", RV: "10", Val: "a"}}}, s.Events...)
	expectOnly(t, h, "unique")
}

func TestSkippedWatchEventIsCaught(t *testing.T) {
	h := clean()
	// The second chain misses the change at 10 although it went on to 11.
	h.Segments[2].Events = h.Segments[2].Events[1:]
	expectOnly(t, h, "reliable")
}

func TestAcknowledgedWriteNoWatchDeliveredIsCaught(t *testing.T) {
	h := clean()
	// No watch delivered the acknowledged patch at 11 (every stream went past it).
	for i := range h.Segments {
		var kept []Event
		for _, e := range h.Segments[i].Events {
			if e.Obj.RV != "11" {
				kept = append(kept, e)
			}
		}
		h.Segments[i].Events = append(kept, Event{Type: "BOOKMARK", Obj: Obj{RV: "12"}})
	}
	failed := verdicts(t, h)
	if _, ok := failed["reliable"]; !ok {
		t.Errorf("missing acknowledged write not caught: %v", failed)
	}
}

func TestOutOfOrderEventIsCaught(t *testing.T) {
	h := clean()
	e := h.Segments[2].Events
	e[0], e[1] = e[1], e[0]
	expectOnly(t, h, "ordered")
}

func TestBookmarkGoingBackIsCaught(t *testing.T) {
	h := clean()
	h.Segments[1].Events[1].Obj.RV = "10"
	expectOnly(t, h, "bookmarkable")
}

func TestWrongInitialEventsAreCaught(t *testing.T) {
	h := clean()
	// The initial events claim the state at 10 held b (it held a).
	h.Segments[3].Events[0].Obj.Val = "b"
	failed := verdicts(t, h)
	if _, ok := failed["initial-events"]; !ok {
		t.Errorf("wrong initial events not caught: %v", failed)
	}
	// And a watch that ends without the initial-events-end bookmark.
	h = clean()
	h.Segments[3].Events = h.Segments[3].Events[:1]
	expectOnly(t, h, "initial-events")
}

func TestConflictingEventsAreCaught(t *testing.T) {
	h := clean()
	// Two watches disagree on what happened at 11.
	h.Segments[2].Events[1].Obj.Val = "z"
	failed := verdicts(t, h)
	if _, ok := failed["atomic"]; !ok {
		t.Errorf("conflicting events not caught: %v", failed)
	}
}

// A PV with a finalizer, deleted (terminating at rv 21), then two merge patches removing its
// finalizers: kube-apiserver answers both 200 (the second finds the object gone when it deletes
// it, and ignores that), each with the object it wrote at the version it read.
func emptiedTwice(secondCall, secondReturn int64) *History {
	pv := "persistentvolumes"
	obj := func(rv, val string, fin, term bool) *Obj {
		return &Obj{Name: "p0", RV: rv, Val: val, Fin: fin, Term: term}
	}
	return &History{
		Server: "test", Keys: []string{pv + "/p0"}, Start: 0, End: 1000,
		Ops: []Op{
			{Client: 0, Kind: pv, Name: "p0", Type: "create", Val: "a", Call: 10, Return: 20, Status: 201, Obj: obj("20", "a", true, false)},
			{Client: 0, Kind: pv, Name: "p0", Type: "delete", Call: 21, Return: 22, Status: 200, Obj: obj("21", "a", true, true)},
			{Client: 1, Kind: pv, Name: "p0", Type: "unfin", Val: "b", Call: 30, Return: 40, Status: 200, Obj: obj("21", "b", false, true)},
			{Client: 2, Kind: pv, Name: "p0", Type: "unfin", Val: "c", Call: secondCall, Return: secondReturn, Status: 200, Obj: obj("21", "c", false, true)},
			{Client: 3, Kind: pv, Name: "p0", Type: "get", Call: 60, Return: 61, Status: 404},
		},
	}
}

func TestConcurrentFinalizerEmptyingPasses(t *testing.T) {
	expectOnly(t, emptiedTwice(31, 39))
}

func TestFinalizerEmptyingDecidedOnAnOlderVersionPasses(t *testing.T) {
	// The first patch read the object at 21 (the watch cache's copy) while a patch of its value
	// made it 22; the delete that follows removes version 22 (kube-apiserver, 30-minute run).
	h := emptiedTwice(31, 39)
	h.Ops = append(h.Ops[:2], append([]Op{{Client: 4, Kind: "persistentvolumes", Name: "p0", Type: "mpatch", Val: "m",
		Call: 25, Return: 28, Status: 200, Obj: &Obj{Name: "p0", RV: "22", Val: "m", Fin: true, Term: true}}}, h.Ops[2:]...)...)
	expectOnly(t, h)
}

func TestEmptyingAnsweredWithANewerVersionIsCaught(t *testing.T) {
	h := emptiedTwice(31, 39)
	h.Ops[3].Obj.RV = "22"
	expectOnly(t, h, "linearizable")
}

func TestEmptyingOfAnObjectNotBeingDeletedIsCaught(t *testing.T) {
	// Lifting the finalizer of an object not being deleted keeps it: a later 404 is a lost object.
	h := emptiedTwice(31, 39)
	h.Ops = append(h.Ops[:1], h.Ops[2:]...)
	h.Ops[1].Obj.RV, h.Ops[2].Obj.RV = "22", "23"
	h.Ops[1].Obj.Term, h.Ops[2].Obj.Term = false, false
	expectOnly(t, h, "linearizable")
}

func TestUnansweredPatchSeenOnlyThroughTheDeleteThatFollowedPasses(t *testing.T) {
	// A patch to d without an answer (the server was killed); no watch saw its own version, only
	// the delete's after it (terminating, value d kept, rv 30), which answers that too: the
	// patch's version is unknown, not 30 (up, 30-minute run).
	h := clean()
	h.Kills = []int64{58}
	h.Ops[1].Fin = true
	h.Ops[1].Obj.Fin = true
	for _, i := range []int{2, 4} {
		h.Ops[i].Obj.Fin = true
	}
	h.Ops[3].Obj.Fin = true
	h.Lists[1].Items[0].Fin = true
	for i := range h.Segments {
		for j := range h.Segments[i].Events {
			if h.Segments[i].Events[j].Type != "BOOKMARK" {
				h.Segments[i].Events[j].Obj.Fin = true
			}
		}
	}
	h.Ops = append(h.Ops,
		Op{Client: 2, Kind: "configmaps", Name: "k0", Type: "jpatch", Val: "d", Call: 55, Return: 60, Status: 0},
		Op{Client: 2, Kind: "configmaps", Name: "k0", Type: "delete", Call: 70, Return: 71, Status: 200,
			Obj: &Obj{Name: "k0", RV: "30", Val: "d", Fin: true, Term: true}},
		Op{Client: 3, Kind: "configmaps", Name: "k0", Type: "get", Call: 80, Return: 81, Status: 200,
			Obj: &Obj{Name: "k0", RV: "30", Val: "d", Fin: true, Term: true}})
	h.Segments = append(h.Segments, Segment{Kind: "configmaps", Chain: 9, From: "11", Start: 72, Stop: 200, End: "eof",
		Events: []Event{{Type: "MODIFIED", Obj: Obj{Name: "k0", RV: "30", Val: "d", Fin: true, Term: true}}}})
	expectOnly(t, h)
}

func TestUpdateOfARecreatedObjectMayBeRefused(t *testing.T) {
	// A PUT without resourceVersion whose body came from the object before a delete and a new
	// create: 409 (its uid is a precondition), as on kube-apiserver.
	h := clean()
	h.Ops = append(h.Ops, Op{Client: 2, Kind: "configmaps", Name: "k0", Type: "update", Val: "u", Call: 60, Return: 61, Status: 409},
		Op{Client: 3, Kind: "configmaps", Name: "k0", Type: "get", Call: 62, Return: 63, Status: 200, Obj: &Obj{Name: "k0", RV: "11", Val: "b"}})
	expectOnly(t, h)
}
