package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"
)

// slowReader: a watch whose client stops reading (its socket's receive buffer made small) while
// `writes` changes of `size` bytes each are made must be cut by the server (the stream ends
// before all of them were delivered), not buffered without end; what it delivered is a prefix
// of the changes, in order; a watch resumed from the last version it delivered gets exactly the
// remaining changes, or 410 when that version is no longer kept.
func slowReader(c *Client, writes, size int) error {
	const sel = "labelSelector=robustness-slow%3D1"
	path := "/api/v1/namespaces/" + namespace + "/configmaps"
	for i := 0; i < 100; i++ {
		a := c.do("POST", "/api/v1/namespaces", "application/json", []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+namespace+`"}}`), 10*time.Second)
		if a.Status == 201 || a.Status == 409 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var a Answer
	for i := 0; i < 600; i++ { // the server may be starting
		if a = c.do("GET", path+"?"+sel, "", nil, 10*time.Second); a.Status == 200 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if a.Status != 200 {
		return fmt.Errorf("list: %d", a.Status)
	}
	var l struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(a.Body, &l)

	// The watch, on a connection whose receive buffer is 4 KiB.
	u, _ := url.Parse(c.server)
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		_ = rc.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return err
	}}
	raw, err := d.Dial("tcp", u.Host)
	if err != nil {
		return err
	}
	cfg := c.tlsCfg.Clone()
	cfg.ServerName = u.Hostname()
	conn := tls.Client(raw, cfg)
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s?%s&watch=1&resourceVersion=%s&timeoutSeconds=600 HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nAccept: application/json\r\n\r\n",
		path, sel, l.Metadata.ResourceVersion, u.Host, c.token)
	br := bufio.NewReaderSize(conn, 4096)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return fmt.Errorf("watch: %v", err)
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("watch: %d", resp.StatusCode)
	}

	// The changes, from 4 writers on 4 ConfigMaps, not read meanwhile.
	value := strings.Repeat("x", size)
	var mu sync.Mutex
	written := map[uint64]bool{}
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			name := fmt.Sprintf("slow-%d", w)
			for i := w; i < writes; i += 4 {
				body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":%q,"labels":{"robustness-slow":"1"}},"data":{"v":"%d-%s"}}`, name, namespace, i, value)
				var a Answer
				if i < 4 {
					a = c.do("POST", path, "application/json", []byte(body), 30*time.Second)
				} else {
					a = c.do("PUT", path+"/"+name, "application/json", []byte(body), 30*time.Second)
				}
				if a.Status >= 200 && a.Status < 300 {
					if o := objOf(a.Body); o != nil {
						mu.Lock()
						written[rvNum(o.RV)] = true
						mu.Unlock()
					}
				}
			}
		}(w)
	}
	wg.Wait()
	writeTime := time.Since(t0)
	time.Sleep(2 * time.Second)

	// Now read what the stream still holds, until it ends or 30 s of silence.
	type ev struct {
		Type   string          `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	var got []uint64
	ended := ""
	dec := json.NewDecoder(resp.Body)
	for {
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		var e ev
		if err := dec.Decode(&e); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				ended = "still open after 30 s of silence"
			} else {
				ended = "ended (" + err.Error() + ")"
			}
			break
		}
		if e.Type == "ERROR" {
			ended = "ended with an ERROR event: " + string(e.Object)
			break
		}
		if e.Type == "BOOKMARK" {
			continue
		}
		if o := objOf(e.Object); o != nil {
			got = append(got, rvNum(o.RV))
		}
	}
	all := make([]uint64, 0, len(written))
	for n := range written {
		all = append(all, n)
	}
	sortU(all)
	// What it delivered is the first changes, in order.
	for i, n := range got {
		if i >= len(all) || all[i] != n {
			return fmt.Errorf("event %d of the unread watch is at %d, the %d-th change was at %v", i, n, i, at(all, i))
		}
	}
	if strings.HasPrefix(ended, "still open") || len(got) >= len(all) {
		return fmt.Errorf("the watch was not cut: %d of %d changes (%d MB) delivered, stream %s", len(got), len(all), len(all)*size>>20, ended)
	}
	// Resumed from the last version delivered (or the list's when none was).
	from := l.Metadata.ResourceVersion
	if len(got) > 0 {
		from = fmt.Sprint(got[len(got)-1])
	}
	seg := (&Recorder{c: c, stop: make(chan struct{}), seenRV: map[string]uint64{}}).watchSlow(path, sel, from)
	if seg.End == "gone" {
		fmt.Printf("PASS slow-reader: %d changes of %d KB made in %s while a watch was not read: the stream %s after %d of them; the watch resumed from %s got 410 (no longer kept)\n",
			len(all), size/1000, writeTime.Round(time.Millisecond), ended, len(got), from)
		return nil
	}
	rest := all[len(got):]
	var resumed []uint64
	for _, e := range seg.Events {
		if e.Type != "BOOKMARK" {
			resumed = append(resumed, rvNum(e.Obj.RV))
		}
	}
	if fmt.Sprint(resumed) != fmt.Sprint(rest) {
		return fmt.Errorf("the watch resumed from %s (%s) delivered %d changes, %d expected (first %v, expected first %v)", from, seg.End, len(resumed), len(rest), at(resumed, 0), at(rest, 0))
	}
	fmt.Printf("PASS slow-reader: %d changes of %d KB made in %s while a watch was not read: the stream %s after %d of them; the watch resumed from %s delivered the other %d exactly\n",
		len(all), size/1000, writeTime.Round(time.Millisecond), ended, len(got), from, len(resumed))
	return nil
}

func at(xs []uint64, i int) any {
	if i < len(xs) {
		return xs[i]
	}
	return "none"
}

func sortU(xs []uint64) {
	for i := 1; i < len(xs); i++ {
		for j := i; j > 0 && xs[j] < xs[j-1]; j-- {
			xs[j], xs[j-1] = xs[j-1], xs[j]
		}
	}
}

// watchSlow: a watch of path from a version, read until 5 s pass without an event.
func (r *Recorder) watchSlow(path, sel, from string) Segment {
	seg := Segment{From: from}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", r.c.server+path+"?"+sel+"&watch=1&resourceVersion="+from+"&timeoutSeconds=60", nil)
	req.Header.Set("Authorization", "Bearer "+r.c.token)
	req.Header.Set("Accept", "application/json")
	resp, err := r.c.http.Do(req)
	if err != nil {
		seg.End = "error"
		return seg
	}
	defer resp.Body.Close()
	if resp.StatusCode == 410 {
		seg.End = "gone"
		return seg
	}
	timer := time.AfterFunc(5*time.Second, cancel)
	dec := json.NewDecoder(resp.Body)
	for {
		var e struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&e); err != nil {
			seg.End = "quiet"
			return seg
		}
		timer.Reset(5 * time.Second)
		if e.Type == "ERROR" {
			if strings.Contains(string(e.Object), `"code":410`) {
				seg.End = "gone"
			} else {
				seg.End = "error event"
			}
			return seg
		}
		if o := objOf(e.Object); o != nil {
			seg.Events = append(seg.Events, Event{Type: e.Type, Obj: *o})
		}
	}
}
