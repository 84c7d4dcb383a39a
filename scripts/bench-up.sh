#!/usr/bin/env bash
# Runs `pv-controller bench` against a fresh `pv-controller up`, REPEAT times, printing each
# run's JSON report (the figures in BENCHMARKS.md).
#
#   scripts/bench-up.sh [REPEAT] [bench flags...]     e.g. scripts/bench-up.sh 3 --pairs 1000
#
# A fresh data directory per call, so the store starts empty; `up` is stopped by its own PID.
# PV_CONTROLLER names the binary; UP_FLAGS adds flags to `up` (e.g. UP_FLAGS='--commit-delay 0').
# Last, on stderr: the CPU time `up` (API server and controller) used during the runs.
set -euo pipefail
repeat=${1:-3}
shift || true
bin=${PV_CONTROLLER:-target/release/pv-controller}
dir=$(mktemp -d)
out=$dir/up.out
# shellcheck disable=SC2086 # UP_FLAGS is split into flags on purpose
"$bin" up --data-dir "$dir" --listen 127.0.0.1:0 ${UP_FLAGS:-} >"$out" 2>"$dir/up.err" &
up_pid=$!
trap 'kill "$up_pid" 2>/dev/null; wait "$up_pid" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
  grep -q '^server: ' "$out" 2>/dev/null && break
  sleep 0.1
done
kubeconfig=$(sed -n 's/^kubeconfig: //p' "$out")
[ -n "$kubeconfig" ] || { echo "error: up did not start: $(cat "$dir/up.err")" >&2; exit 1; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$up_pid/stat"; }
before=$(cpu_ticks)
for _ in $(seq "$repeat"); do
  "$bin" bench --kubeconfig "$kubeconfig" -o json "$@"
  echo
done
after=$(cpu_ticks)
awk -v t="$((after - before))" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "up used %.2f CPU s during the runs\n", t / hz}' >&2
