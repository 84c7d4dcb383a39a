#!/usr/bin/env bash
# Validation compared with kube-apiserver: every manifest in conformance/cases/ is created with
# `kubectl create --dry-run=server` against the real kube-apiserver (scripts/real-cluster.sh; needs
# Go) and against `pv-controller up --no-controller`. Both must give the same verdict: accepted,
# or rejected naming the same fields.
#
# conformance/cases/KNOWN-DIFFERENCES lists cases (file names) where the embedded server is known
# to disagree; they are reported, not failed, and a listed case that now agrees fails the run so
# that the list shrinks as the server is fixed.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
GO="$(command -v go || echo /usr/local/go/bin/go)"
if [[ ! -x "$GO" ]]; then echo "e2e-validation-diff: skipped: Go not installed"; exit 0; fi
WORK="$(mktemp -d)"
CASES="$ROOT/conformance/cases"
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/pv-controller"
UP_PID=""
cleanup() {
  if [[ -n "$UP_PID" ]]; then kill -9 "$UP_PID" 2>/dev/null || true; wait "$UP_PID" 2>/dev/null || true; fi
  "$ROOT/scripts/real-cluster.sh" down "$WORK/real" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }
now_ms() { date +%s%3N; }

command -v kubectl >/dev/null || fail "kubectl not on PATH"
(cd "$ROOT" && cargo build --quiet --release) || fail "cargo build --release"
SECONDS=0
"$ROOT/scripts/real-cluster.sh" up "$WORK/real" >"$WORK/real.out" 2>&1 || { cat "$WORK/real.out" >&2; fail "real-cluster.sh up"; }
"$BIN" up --no-controller --data-dir "$WORK/ours" --listen 127.0.0.1:0 >"$WORK/up.out" 2>"$WORK/up.err" &
UP_PID=$!
t0=$(now_ms)
until grep -q '^server: ' "$WORK/up.out"; do
  kill -0 "$UP_PID" 2>/dev/null || { cat "$WORK/up.err" >&2; fail "up exited"; }
  (( $(now_ms) - t0 < 30000 )) || fail "up did not print server: within 30s"
  sleep 0.05
done

# verdict KUBECONFIG FILE: "accepted", or "rejected:" and the sorted field paths the error names.
verdict() {
  if KUBECACHEDIR="$WORK/cache-$(basename "$(dirname "$1")")" kubectl --kubeconfig "$1" create --dry-run=server -o name -f "$2" >"$WORK/v.out" 2>"$WORK/v.err"; then
    echo accepted
  else
    echo "rejected: $(grep -oE '(metadata|spec|provisioner|parameters|volumeBindingMode|reclaimPolicy|allowedTopologies|mountOptions)(\.[][A-Za-z0-9_-]+)*: ' "$WORK/v.err" | tr -d ' ' | sort -u | tr '\n' ' ')"
    cp "$WORK/v.err" "$WORK/last.err"
  fi
}
known() { grep -qxF "$1" <(grep -v '^#' "$CASES/KNOWN-DIFFERENCES" 2>/dev/null); }
SAME=0 KNOWN=0 BAD=0
for f in "$CASES"/*.yaml; do
  name="$(basename "$f")"
  real="$(verdict "$WORK/real/kubeconfig" "$f")"
  real_err="$(cat "$WORK/last.err" 2>/dev/null || true)"; rm -f "$WORK/last.err"
  ours="$(verdict "$WORK/ours/kubeconfig" "$f")"
  ours_err="$(cat "$WORK/last.err" 2>/dev/null || true)"; rm -f "$WORK/last.err"
  if [[ "$real" == "$ours" ]]; then
    if known "$name"; then echo "FIXED: $name agrees now ($real); remove it from conformance/cases/KNOWN-DIFFERENCES"; BAD=$((BAD + 1))
    else echo "ok: $name: $real"; SAME=$((SAME + 1)); fi
  else
    if known "$name"; then echo "known difference: $name: kube-apiserver $real / ours $ours"; KNOWN=$((KNOWN + 1)); continue; fi
    echo "DIFFERENT: $name"
    echo "   kube-apiserver: $real ${real_err:+($real_err)}"
    echo "   pv-controller:  $ours ${ours_err:+($ours_err)}"
    BAD=$((BAD + 1))
  fi
done
echo "e2e-validation-diff: ${SECONDS}s; $SAME same, $KNOWN known differences, $BAD failed"
(( BAD == 0 )) || fail "$BAD case(s) differ from kube-apiserver"
