// Command robustness records what concurrent clients do to a Kubernetes API server (while a
// script injects faults into the server) and checks the history as etcd's robustness tests
// check etcd's: linearizability per key (porcupine) and the watch guarantees (ordered, unique,
// atomic, reliable, resumable, bookmarkable) plus sendInitialEvents' initial events.
//
//	robustness record -kubeconfig K -out H.json [-server NAME] [-fault NAME] [-duration 20s] [-seed 1] [-clients 6] [-keys 3] [-pause 0]
//	robustness check [-kills FILE] [-timeout 60s] H.json
//	robustness slowreader -kubeconfig K [-writes 300] [-size 100000]
//
// check prints one line per property, `PASS property: figures` or `FAIL property: problem`
// (with up to ten problems on the lines after), and exits 1 when any failed. The kills file holds
// one wall-clock time in nanoseconds a line: when the server was found dead after each kill.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: robustness record|check|slowreader ...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "record":
		fs := flag.NewFlagSet("record", flag.ExitOnError)
		kc := fs.String("kubeconfig", "", "kubeconfig of the server")
		out := fs.String("out", "history.json", "where the history goes")
		server := fs.String("server", "up", "the server's name, for the report")
		fault := fs.String("fault", "none", "the fault injected meanwhile, for the report")
		duration := fs.Duration("duration", 20*time.Second, "how long the clients run")
		settle := fs.Duration("settle", 15*time.Second, "how long the watches may take to catch up afterwards")
		seed := fs.Int64("seed", 1, "random seed of the clients")
		clients := fs.Int("clients", 6, "clients")
		keys := fs.Int("keys", 3, "keys per kind")
		pause := fs.Duration("pause", 0, "each client's pause between operations (long runs: a smaller history)")
		_ = fs.Parse(os.Args[2:])
		c, err := newClient(*kc)
		if err != nil {
			fmt.Fprintln(os.Stderr, "robustness:", err)
			os.Exit(2)
		}
		h := record(c, *server, *fault, *clients, *keys, *duration, *settle, *pause, *seed)
		if err := h.save(*out); err != nil {
			fmt.Fprintln(os.Stderr, "robustness:", err)
			os.Exit(2)
		}
		fmt.Printf("recorded %d operations, %d lists, %d watch streams in %s\n", len(h.Ops), len(h.Lists), len(h.Segments),
			time.Duration(h.End-h.Start).Round(time.Millisecond))
	case "check":
		fs := flag.NewFlagSet("check", flag.ExitOnError)
		kills := fs.String("kills", "", "file of kill times (ns, one a line)")
		timeout := fs.Duration("timeout", 60*time.Second, "porcupine's time limit per key")
		_ = fs.Parse(os.Args[2:])
		if fs.NArg() != 1 {
			fmt.Fprintln(os.Stderr, "usage: robustness check [-kills FILE] HISTORY")
			os.Exit(2)
		}
		h, err := loadHistory(fs.Arg(0))
		if err != nil {
			fmt.Fprintln(os.Stderr, "robustness:", err)
			os.Exit(2)
		}
		if *kills != "" {
			h.Kills = append(h.Kills, readKills(*kills)...)
		}
		failed := 0
		for _, r := range check(h, *timeout) {
			if r.OK {
				fmt.Printf("PASS %s: %s\n", r.Property, r.Figures)
				continue
			}
			failed++
			fmt.Printf("FAIL %s: %s\n", r.Property, r.Figures)
			for _, p := range r.Problems {
				fmt.Printf("  %s\n", p)
			}
		}
		if failed > 0 {
			os.Exit(1)
		}
	case "slowreader":
		fs := flag.NewFlagSet("slowreader", flag.ExitOnError)
		kc := fs.String("kubeconfig", "", "kubeconfig of the server")
		writes := fs.Int("writes", 300, "writes made while the watch is not read")
		size := fs.Int("size", 100000, "bytes of each write's value")
		_ = fs.Parse(os.Args[2:])
		c, err := newClient(*kc)
		if err != nil {
			fmt.Fprintln(os.Stderr, "robustness:", err)
			os.Exit(2)
		}
		if err := slowReader(c, *writes, *size); err != nil {
			fmt.Printf("FAIL slow-reader: %v\n", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: robustness record|check|slowreader ...")
		os.Exit(2)
	}
}

func readKills(path string) []int64 {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var ks []int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if n, err := strconv.ParseInt(strings.TrimSpace(sc.Text()), 10, 64); err == nil {
			ks = append(ks, n)
		}
	}
	return ks
}
