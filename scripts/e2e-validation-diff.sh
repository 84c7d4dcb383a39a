#!/usr/bin/env bash
# Validation compared with kube-apiserver: every manifest in conformance/cases/ is created with
# `kubectl create --dry-run=server` against the real kube-apiserver (scripts/real-cluster.sh; needs
# Go) and against `pv-controller up --no-controller`. Both must give the same verdict: accepted,
# or rejected naming the same fields. A case may set objects up first and then send an update
# (see `verdict` below), and may compare fields of the accepted object (`# compare: JSONPATH`).
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
  real_and_ours_down
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

command -v kubectl >/dev/null || fail "kubectl not on PATH"
(cd "$ROOT" && cargo build --quiet --release --workspace) || fail "cargo build --release"
SECONDS=0
real_and_ours_up

# verdict KUBECONFIG FILE: "accepted" (followed by what the case's `# compare: JSONPATH` line
# selects from the answer), or "rejected:", the reason when it is not Invalid, and the sorted
# field paths the error names. A case of several YAML documents sets up all but the last one for
# real (created, then their status written when they carry one) and sends the last one as an
# update (`kubectl replace`; `# subresource: status` for a status write) when it names an object
# set up, else as a create; the set-up objects are deleted afterwards.
verdict() {
  local kc="$1" f="$2" docs="$WORK/docs" verb=create out=(-o name) cmp sub
  local kctl=(env KUBECACHEDIR="$WORK/cache-$(basename "$(dirname "$1")")" kubectl --kubeconfig "$kc")
  cmp="$(sed -n 's/^# compare: //p' "$f" | head -1)"; [[ -n "$cmp" ]] && out=(-o "jsonpath=$cmp")
  sub="$(sed -n 's/^# subresource: //p' "$f" | head -1)"
  rm -rf "$docs"; mkdir -p "$docs"
  awk -v dir="$docs" 'BEGIN { n = 0 } /^---$/ { n++; next } { print > (dir "/" n ".yaml") }' "$f"
  local all=("$docs"/*.yaml) setup=() names="" last
  last="${all[${#all[@]}-1]}"
  for d in "${all[@]}"; do
    [[ "$d" == "$last" ]] && break
    "${kctl[@]}" create -f "$d" >/dev/null 2>"$WORK/v.err" || { echo "setup failed: $(head -1 "$WORK/v.err")"; return; }
    if grep -q '^status:' "$d"; then
      "${kctl[@]}" replace --subresource=status -f "$d" >/dev/null 2>"$WORK/v.err" \
        || { echo "setup status failed: $(head -1 "$WORK/v.err")"; return; }
    fi
    setup+=("$d"); names+=" $("${kctl[@]}" create --dry-run=client -o name -f "$d")"
  done
  if (( ${#setup[@]} > 0 )) && [[ " $names " == *" $("${kctl[@]}" create --dry-run=client -o name -f "$last") "* ]]; then
    verb=replace
  fi
  if "${kctl[@]}" "$verb" ${sub:+--subresource=$sub} --dry-run=server "${out[@]}" -f "$last" >"$WORK/v.out" 2>"$WORK/v.err"; then
    if [[ -n "$cmp" ]]; then echo "accepted $(cat "$WORK/v.out")"; else echo accepted; fi
  else
    echo "rejected: $(grep -oE 'Error from server \([A-Za-z]+\)' "$WORK/v.err" | head -1)$(grep -oE '(metadata|spec|status|provisioner|parameters|volumeBindingMode|reclaimPolicy|allowedTopologies|mountOptions|volumeMode|nodeAffinity)([][0-9]*)(\.[][A-Za-z0-9_/-]+)*: ' "$WORK/v.err" | tr -d ' ' | sort -u | tr '\n' ' ')"
    cp "$WORK/v.err" "$WORK/last.err"
  fi
  for (( i=${#setup[@]}-1; i>=0; i-- )); do "${kctl[@]}" delete --wait=false -f "${setup[$i]}" >/dev/null 2>&1 || true; done
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
