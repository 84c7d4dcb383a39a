#!/usr/bin/env bash
# Shadow mode end to end: `pv-controller run --shadow` beside upstream's binder
# (kube-controller-manager's persistentvolume-binder-controller) on a real kube-apiserver 1.37,
# through scripts/differential.sh with DIFF_SHADOW=1: each scenario of the subset below is loaded
# and settled by upstream's binder while the shadow (as deploy/shadow/'s read-only
# ServiceAccount, its kubeconfig from `pv-controller kubeconfig`) decides beside it and writes
# nothing. Checks:
# - each scenario's decisions agree (or are equivalent) with what upstream wrote, or differ only
#   as conformance/DIFFERENCES.md lists for that scenario, and `pv-controller shadow report` names
#   the deliberate-difference entry of each such difference;
# - kube-apiserver's audit log shows requests from the shadow's user, and not one write;
# - the shadow's own cases, tests/shadow/*.yaml, each with what the shadow's report must say
#   (a case may start upstream's binder with flags of its own, `kcmFlags`, and make objects
#   after the shadow decided and before upstream's binder starts, `late`), among them:
#   - a difference made on purpose: upstream's binder with --enable-dynamic-provisioning=false
#     leaves a claim of an external provisioner's class alone, which the shadow would hand to the
#     provisioner; the report names that decision with both values, as not a listed difference;
#   - a decision that depends on the order of events: the incumbent, started after a smaller
#     volume was made, takes it where the shadow took the larger one it saw alone; the report
#     calls it equivalent, naming the rule, and no difference;
#   and the shadow wrote nothing there either.
# Prints per scenario `agree NAME (N decisions)` or `differ NAME ...`, and last
# `N passed, M failed` (a check per scenario, and the checks above). Skipped (exit 0) without Go.
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
GO="$(command -v go || echo /usr/local/go/bin/go)"
if [[ ! -x "$GO" ]]; then echo "e2e-shadow: skipped: Go not installed"; exit 0; fi
S="$ROOT/tests/scenarios"
SUBSET=(
  bind-smallest-volume-that-fits
  bind-access-modes-fewest-first
  bind-selector-match-labels
  bind-volume-mode-block
  bind-ten-claims-ten-volumes
  bind-readwriteoncepod
  bind-two-claims-compete-for-one-volume
  prebound-claim-to-free-volume
  prebound-claim-and-volume-by-name
  bound-claim-volume-missing-lost
  volume-claim-missing-released-retain
  volume-pending-without-claimref-becomes-available
  provision-external-provisioner
  provision-no-provisioner-fails
  reclaim-retain-keeps-data
  reclaim-delete-external-provisioner-left-alone
  delay-selected-node-provisions
  delay-wait-for-first-consumer-no-binding
  class-default-newest-wins
  reclaim-retain-rebind-same-name
  reclaim-recycle-no-plugin-failed
  bound-claim-volume-bound-to-other-claim-misbound
  bound-lost-claim-recovers-when-volume-returns
  class-default-assigned-then-binds-volume-of-class
  class-delayed-default-waits-for-consumer
  provision-migrated-aws-ebs-handed-to-csi
  reclaim-delete-csi-volume-left-to-driver
  prebound-claim-volume-mode-mismatch
  bind-selector-match-expressions
  delay-selected-node-external-provisioner
  bind-crash-after-pv-claimref-saved
  bind-volume-attributes-class-must-match
  reclaim-delete-released-volume
)
FILES=()
for n in "${SUBSET[@]}"; do FILES+=("$S/$n.yaml"); done
SECONDS=0
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
PASSED=0 FAILED=0
check() { if "${@:2}"; then PASSED=$((PASSED + 1)); echo "ok: $1"; else FAILED=$((FAILED + 1)); echo "FAIL: $1" >&2; fi; }
# Quiescence after 2 s without change: upstream resyncs every second here.
export DIFF_SETTLE="${DIFF_SETTLE:-2}"

DIFF_SHADOW=1 "$ROOT/scripts/differential.sh" "${FILES[@]}" >"$WORK/corpus.out" 2>&1
cat "$WORK/corpus.out"
scenarios_ok="$(grep -cE '^agree |^  \(listed in conformance/DIFFERENCES.md\)$' "$WORK/corpus.out")"
scenarios_bad="$(grep -cE '^  \(not listed in conformance/DIFFERENCES.md\)$|^  error: ' "$WORK/corpus.out")"
PASSED=$((PASSED + scenarios_ok)) FAILED=$((FAILED + scenarios_bad))
(( scenarios_ok + scenarios_bad == ${#FILES[@]} )) || { FAILED=$((FAILED + 1)); echo "FAIL: a verdict for each of the ${#FILES[@]} scenarios" >&2; }
no_unlisted() { ! grep -q 'not a listed difference' "$WORK/corpus.out"; }
check "pv-controller shadow report names a listed entry for every difference of a listed scenario" no_unlisted
rebind_named() { grep -q '  deliberate: README, deliberate differences: "Retained volumes go back' "$WORK/corpus.out"; }
check "the rebind scenario's differences are named as that deliberate difference" rebind_named
hostpath_delete_named() { grep -q '  deliberate: deploy/REPLACING.md, shadow mode: no host-path plugin' "$WORK/corpus.out"; }
check "the host-path delete the shadow cannot make is named as that deliberate difference" hostpath_delete_named
audit_clean() { grep -qE '^audit: [1-9][0-9]* requests from system:serviceaccount:kube-system:pv-controller-shadow .*, 0 writes$' "$1"; }
check "the audit log: the shadow's user read, and wrote nothing" audit_clean "$WORK/corpus.out"

echo "== the shadow's own cases (tests/shadow/): a difference made on purpose, a choice made from a later state"
CASES=("$ROOT"/tests/shadow/*.yaml)
[[ -e "${CASES[0]}" ]] || { echo "e2e-shadow: no shadow cases in tests/shadow/" >&2; exit 1; }
DIFF_SHADOW=1 "$ROOT/scripts/differential.sh" "${CASES[@]}" >"$WORK/cases.out" 2>&1
cat "$WORK/cases.out"
for c in "${CASES[@]}"; do
  n="$(basename "$c")"
  case_ok() { grep -qx "expected $n ([0-9]* decisions)" "$WORK/cases.out"; }
  check "shadow case $n: the report is as the case expects" case_ok
done
check "the audit log of the cases' run: the shadow wrote nothing" audit_clean "$WORK/cases.out"

echo "e2e-shadow: ${#FILES[@]} scenarios; $(grep -E '^decisions: ' "$WORK/corpus.out"); ${SECONDS}s"
echo "$PASSED passed, $FAILED failed"
(( FAILED == 0 ))
