#!/usr/bin/env python3
"""Where a process spends its CPU, by part: reads `perf script` output of a call-graph profile
and gives each sample to the first part (in the order listed) whose pattern matches a frame of
its stack; the rest is "other". Prints one line per part, `SHARE% PART`, largest first, weighted
by the samples' periods.

    perf record --call-graph dwarf,16384 -p PID -o perf.data -- sleep 10
    perf script -i perf.data | scripts/perf-parts.py            # the parts of `up`, below
    perf script -i perf.data | scripts/perf-parts.py 'redb=redb::' 'hyper=^hyper::'

A part is `NAME=REGEX` (Python syntax, searched in each frame's symbol). The default parts are
those BENCHMARKS.md reports for `up`; their order settles a sample whose stack matches several
(a commit's fsync, reached from a controller's write, counts as the commit).
"""
import re
import sys
from collections import defaultdict

UP_PARTS = [
    ("futex waits", r"futex"),
    ("redb's commit and fsync", r"^redb::|fsync|fdatasync"),
    ("watches", r"pv_store::watch|pv_apiserver::watch"),
    ("the HTTP creates' decode and validation", r"pv_apiserver::handlers::create"),
    ("the in-process controller and the store's in-memory write path",
     r"^pv_core::|^pv_local::|^pv_model::|^pv_plugins::|^pv_store::"),
    ("hyper", r"^hyper::|^hyper_util::"),
]


def parts_from_args(args):
    out = []
    for a in args:
        name, sep, pattern = a.partition("=")
        if not sep or not name or not pattern:
            sys.exit(f"perf-parts: a part is NAME=REGEX, got {a!r}")
        out.append((name, pattern))
    return out


def samples(lines):
    """Yields (period, [symbol, ...]) for each sample of `perf script` output."""
    period, frames, in_sample = 1, [], False
    header = re.compile(r"^\S.*?\s(\d+)\s+\S+:\s*$|^\S")
    for line in lines:
        if not line.strip():
            if in_sample:
                yield period, frames
            period, frames, in_sample = 1, [], False
        elif not line[0].isspace():
            m = header.match(line)
            period = int(m.group(1)) if m and m.group(1) else 1
            in_sample = True
        else:
            # "\t    55d0c0a1b2c3 pv_core::queue::Queue::pop+0x12 (/path/pv-controller)"
            f = line.strip().split(None, 1)
            if len(f) == 2:
                frames.append(re.sub(r"\+0x[0-9a-f]+ \(.*\)$| \(.*\)$", "", f[1]))
    if in_sample:
        yield period, frames


def main():
    parts = parts_from_args(sys.argv[1:]) if len(sys.argv) > 1 else UP_PARTS
    compiled = [(n, re.compile(p)) for n, p in parts]
    weight, total = defaultdict(int), 0
    for period, frames in samples(sys.stdin):
        total += period
        part = next((n for n, r in compiled if any(r.search(f) for f in frames)), "other")
        weight[part] += period
    if total == 0:
        sys.exit("perf-parts: no samples in the input (is it `perf script` output?)")
    for name, w in sorted(weight.items(), key=lambda kv: -kv[1]):
        print(f"{100 * w / total:5.1f}% {name}")
    print(f"{total} in all")


if __name__ == "__main__":
    main()
