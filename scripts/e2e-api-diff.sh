#!/usr/bin/env bash
# The API server differential: every case of conformance/api/ (request sequences) is sent to the real kube-apiserver
# (scripts/real-cluster.sh; needs Go) and to `pv-controller up --no-controller`, and the answers
# are compared: status codes, Status bodies, stored objects after normalisation, media types and
# Warning headers (scripts/api_differential.py says how).
#
#   scripts/e2e-api-diff.sh [CASE_FILE...]      (default: the whole corpus)
#
# Every difference must be listed, with its reason, in conformance/DIFFERENCES.md under a heading
# `## API server...`: a line "- `CASE`" (any difference of that case) or "- `CASE:LINE`" (glob
# patterns; LINE matches one reported difference, e.g. `*:*metadata.generation: *`). With the
# whole corpus, a listing that matches nothing fails the run too, so the list shrinks as the
# server is fixed. Last line:
#   api-differential: N cases, S same, L differ only as listed, U with unlisted differences (marked !)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
GO="$(command -v go || echo /usr/local/go/bin/go)"
if [[ ! -x "$GO" ]]; then echo "e2e-api-diff: skipped: Go not installed"; exit 0; fi
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
# The whole corpus also checks that every listing in DIFFERENCES.md still matches a difference.
if [[ $# -gt 0 ]]; then CASES=("$@"); else CASES=("$ROOT"/conformance/api/*.yaml); export API_DIFF_WHOLE_CORPUS=1; fi
(cd "$ROOT" && cargo build --quiet --release --workspace) || fail "cargo build --release"
SECONDS=0
real_and_ours_up
status=0
python3 "$ROOT/scripts/api_differential.py" "$WORK/real/kubeconfig" "$WORK/ours/kubeconfig" \
  "$ROOT/conformance/DIFFERENCES.md" "${CASES[@]}" || status=$?
echo "e2e-api-diff: ${SECONDS}s"
(( status == 0 )) || fail "a difference from kube-apiserver is not listed in conformance/DIFFERENCES.md (or a listed one is gone)"
