#!/usr/bin/env bash
# What a controller costs when there is nothing to do: N bound PV/PVC pairs held in
# `pv-controller up --no-controller` (made by `bench --pairs N --bind-itself --keep`, no
# controller involved), then, one after the other on that same store, each controller started,
# given WARMUP seconds after it reports its caches synced (enough for the first syncs and at
# least one periodic resync), and its CPU seconds (user + system, /proc/PID/stat) counted over
# the next WINDOW seconds. Both resync every 15 s: upstream is kube-controller-manager 1.37 from
# conformance/ with only its persistentvolume-binder-controller, `--pvclaimbinder-sync-period=15s`
# and its client limit lifted (`--kube-api-qps=Q --kube-api-burst=2Q`, Q 1000 by default) as
# large clusters run it; ours is `pv-controller run` with its defaults (`--resync-period 15s`).
#
#   scripts/bench-idle.sh N [--window S] [--warmup S] [--upstream-qps Q] [--ours-only]
#
# Prints one line per controller (CPU seconds over the window, CPU seconds per minute, peak RSS)
# and as its last line:
#   ours/upstream idle CPU: X.XXX
# (with --ours-only, which runs no upstream, the ours line is the last).
# Needs Go (conformance/build.sh); builds nothing else (PV_CONTROLLER=path to use another binary).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${PV_CONTROLLER:-$ROOT/target/release/pv-controller}"
usage() { echo "usage: $0 N [--window S] [--warmup S] [--upstream-qps Q] [--ours-only]" >&2; exit 2; }
[[ $# -ge 1 && "$1" =~ ^[0-9]+$ && "$1" -gt 0 ]] || usage
N="$1"; shift
WINDOW=60 WARMUP=45 QPS=1000 UPSTREAM=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --window) [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || usage; WINDOW="$2"; shift 2 ;;
    --warmup) [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || usage; WARMUP="$2"; shift 2 ;;
    --upstream-qps) [[ $# -ge 2 && "$2" =~ ^[0-9]+$ && "$2" -gt 0 ]] || usage; QPS="$2"; shift 2 ;;
    --ours-only) UPSTREAM=0; shift ;;
    *) usage ;;
  esac
done
[[ -x "$BIN" ]] || { echo "bench-idle: $BIN not built (cargo build --release)" >&2; exit 2; }
KBIN=""
(( UPSTREAM )) && KBIN="$("$ROOT/conformance/build.sh" | tail -1)"

WORK="$(mktemp -d)"
SERVER_PID="" CTRL_PID=""
stop() {
  [[ -n "$1" ]] || return 0
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
cleanup() { stop "$CTRL_PID"; stop "$SERVER_PID"; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
peak_mib() { awk '$1 == "VmHWM:" {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }
wait_for() { # FILE PATTERN SECONDS PID
  local t=0
  until grep -q "$2" "$1" 2>/dev/null; do
    kill -0 "$4" 2>/dev/null || { tail -5 "$1" >&2; echo "bench-idle: process exited before: $2" >&2; exit 1; }
    (( t++ < $3 * 10 )) || { echo "bench-idle: no '$2' in $1 within $3 s" >&2; exit 1; }
    sleep 0.1
  done
}

"$BIN" up --no-controller --data-dir "$WORK/data" --listen 127.0.0.1:0 >"$WORK/up.out" 2>"$WORK/up.err" &
SERVER_PID=$!
wait_for "$WORK/up.out" '^server: ' 60 "$SERVER_PID"
KUBECONFIG="$WORK/data/kubeconfig"
echo "bench-idle: $N bound pairs into up --no-controller ..." >&2
"$BIN" bench --kubeconfig "$KUBECONFIG" --pairs "$N" --bind-itself --keep --timeout 60m -o json >"$WORK/fill.json"

measure() { # LABEL LOG READY-PATTERN CMD...
  local label="$1" log="$2" ready="$3"; shift 3
  "$@" >"$log" 2>&1 &
  CTRL_PID=$!
  wait_for "$log" "$ready" 600 "$CTRL_PID"
  sleep "$WARMUP"
  local before after
  before="$(cpu_seconds "$CTRL_PID")"
  sleep "$WINDOW"
  after="$(cpu_seconds "$CTRL_PID")"
  awk -v l="$label" -v b="$before" -v a="$after" -v w="$WINDOW" -v r="$(peak_mib "$CTRL_PID")" -v n="$N" \
    'BEGIN {printf "%-22s pairs %7d  CPU s over %ds: %8.3f  CPU s/min: %8.3f  peak RSS MiB: %7s\n", l, n, w, a - b, (a - b) * 60 / w, r}'
  echo "$after $before" >"$WORK/$label.cpu"
  stop "$CTRL_PID"; CTRL_PID=""
}

measure ours "$WORK/ours.log" 'caches synced' \
  "$BIN" run --kubeconfig "$KUBECONFIG" --metrics-addr 127.0.0.1:0 --hostpath-root "$WORK/volumes"
(( UPSTREAM )) || exit 0
measure "upstream qps=$QPS" "$WORK/kcm.log" 'Starting persistent volume controller' \
  "$KBIN/kube-controller-manager" --kubeconfig="$KUBECONFIG" --controllers=persistentvolume-binder-controller \
  --use-service-account-credentials=false --secure-port=0 --leader-elect=false --profiling=false \
  --pvclaimbinder-sync-period=15s --kube-api-qps="$QPS" --kube-api-burst="$((2 * QPS))"

read -r oa ob <"$WORK/ours.cpu"
read -r ua ub <"$WORK/upstream qps=$QPS.cpu"
awk -v o="$(awk -v a="$oa" -v b="$ob" 'BEGIN {print a - b}')" -v u="$(awk -v a="$ua" -v b="$ub" 'BEGIN {print a - b}')" \
  'BEGIN {printf "ours/upstream idle CPU: %.3f\n", (u > 0 ? o / u : 0)}'
