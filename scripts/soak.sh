#!/usr/bin/env bash
# Soak run: random churn with process kills and broken connections, invariants checked as it goes.
#
#   scripts/soak.sh DURATION [--real-cluster]        DURATION: 90s, 2m, 30m, 1h (a bare number: seconds)
#
# Against `pv-controller up` (default): claims of static and provisioned classes (host-path
# Delete and Retain) created and deleted, static host-path volumes (Delete, Retain, Recycle)
# created and deleted, pods using claims, reclaim policies changed, at a steady rate; meanwhile
# `up` is killed with SIGKILL and restarted, or paused with SIGSTOP, at random moments.
# --real-cluster: the same churn against etcd + kube-apiserver + kube-controller-manager (without
# its PV binder; scripts/real-cluster.sh, needs Go or REAL_CLUSTER_BIN) with two
# `pv-controller run` replicas under leader election, whose every connection to kube-apiserver
# goes through a chaos proxy (latency, resets, graceful drops, stalled watches, refused
# connections); the leader is killed with SIGKILL or paused past its lease, kube-apiserver is
# killed with SIGKILL and restarted.
#
# Every 5 s: the invariants of crates/sim/src/invariants.rs on the live objects, acknowledged
# creates present, Lost claims only for volumes the user deleted, a marker file in every bound
# host-path volume still there, and each controller's caches (GET /debug/caches) equal to a fresh
# list from the API server; after the churn stops, every claim that can bind Bound within 120 s
# and the checks holding at once. RSS and open descriptors of every process are sampled and
# their slopes reported. The last line is `soak: N operations, K kills, V violations`; the exit
# code is 0 only when V is 0. SOAK_SEED fixes the random seed; KEEP_WORK=1 keeps the work
# directory (logs of every process) also when the run passes.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
usage() { echo "usage: $0 DURATION [--real-cluster]" >&2; exit 1; }
[[ $# -ge 1 && $# -le 2 ]] || usage
case "$1" in
  *h) SECS=$(( ${1%h} * 3600 )) ;;
  *m) SECS=$(( ${1%m} * 60 )) ;;
  *s) SECS=${1%s} ;;
  *) SECS=$1 ;;
esac
[[ "$SECS" =~ ^[0-9]+$ && "$SECS" -gt 0 ]] || usage
MODE=up
if [[ $# -eq 2 ]]; then
  [[ "$2" == --real-cluster ]] || usage
  MODE=real
  if [[ -z "${REAL_CLUSTER_BIN:-}" ]] && ! command -v go >/dev/null 2>&1 && [[ ! -x /usr/local/go/bin/go ]]; then
    echo "soak: --real-cluster needs Go (to build conformance/) or REAL_CLUSTER_BIN" >&2
    exit 1
  fi
  [[ -x /usr/local/go/bin/go ]] && export PATH="$PATH:/usr/local/go/bin"
fi

(cd "$ROOT" && cargo build --quiet --release --workspace) || { echo "soak: cargo build failed" >&2; exit 1; }
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}/release"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/soak.XXXXXX")"
SOAK_PID=""
cleanup() {
  local rc=$?
  if [[ -n "$SOAK_PID" ]]; then kill -TERM "$SOAK_PID" 2>/dev/null || true; wait "$SOAK_PID" 2>/dev/null || true; fi
  # Kept when the run failed, for its logs.
  if [[ $rc -eq 0 && -z "${KEEP_WORK:-}" ]]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$TARGET/pv-soak" "$MODE" "$SECS" --bin "$TARGET/pv-controller" --work "$WORK" --repo "$ROOT" \
  ${SOAK_SEED:+--seed "$SOAK_SEED"} &
SOAK_PID=$!
rc=0
wait "$SOAK_PID" || rc=$?
SOAK_PID=""
exit "$rc"
