#!/usr/bin/env bash
# The concurrent API differential: N clients race creates, patches of each type (server-side
# apply included), updates with a stale resourceVersion and without one, read-modify-write
# retries, and deletes against finalizer removals, on the real kube-apiserver
# (scripts/real-cluster.sh; needs Go) and on `pv-controller up --no-controller`; what the clients
# got (codes, reasons, messages, as multisets) and the objects left are compared
# (scripts/api_concurrency.py says how).
#
#   scripts/e2e-api-concurrency.sh [RACE...]      (default: every race)
#
# CONC_CLIENTS (default 8) and CONC_OPS (default 40) size the races. Differences that remain
# are listed, with their reasons, in conformance/DIFFERENCES.md under `## Concurrency...`. Last
# line: api-concurrency: N races (...), S same, D differ (U with unlisted differences, marked !)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
GO="$(command -v go || echo /usr/local/go/bin/go)"
if [[ ! -x "$GO" ]]; then echo "e2e-api-concurrency: skipped: Go not installed"; exit 0; fi
WORK="$(mktemp -d)"
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/pv-controller"
UP_PID=""
cleanup() {
  real_and_ours_down
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

python3 -c 'import yaml' 2>/dev/null || python3 -m pip install --quiet pyyaml || fail "python3 with PyYAML needed"
(cd "$ROOT" && cargo build --quiet --release --workspace) || fail "cargo build --release"
SECONDS=0
real_and_ours_up
status=0
python3 "$ROOT/scripts/api_concurrency.py" "$WORK/real/kubeconfig" "$WORK/ours/kubeconfig" \
  "$ROOT/conformance/DIFFERENCES.md" "$@" || status=$?
echo "e2e-api-concurrency: ${SECONDS}s"
(( status == 0 )) || fail "a difference from kube-apiserver under concurrency is not listed in conformance/DIFFERENCES.md"
