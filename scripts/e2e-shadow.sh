#!/usr/bin/env bash
# Shadow mode end to end: `pv-controller run --shadow` beside upstream's binder
# (kube-controller-manager's persistentvolume-binder-controller) on a real kube-apiserver 1.37,
# through scripts/differential.sh with DIFF_SHADOW=1: each scenario of the subset below is loaded
# and settled by upstream's binder while the shadow (as deploy/shadow/'s read-only
# ServiceAccount, its kubeconfig from `pv-controller kubeconfig`) decides beside it and writes
# nothing. Each scenario's decisions must agree (or be equivalent) with what upstream wrote, a
# difference must be one conformance/DIFFERENCES.md lists and `pv-controller shadow report`
# must name its deliberate-difference entry, and kube-apiserver's audit log must show the shadow's
# user reading and never writing.
#
# Then a difference made on purpose: upstream's binder with --enable-dynamic-provisioning=false
# leaves a claim of an external provisioner's class alone, which the shadow would hand to the
# provisioner: the shadow must report that decision with both values (`pv-controller shadow
# report`'s text) and the run must fail as an unlisted difference.
#
# Prints per scenario `agree NAME (N decisions)` or `differ NAME ...`, and last
# `e2e-shadow: ...`. Skipped (exit 0) without Go.
set -euo pipefail

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
  bind-two-claims-compete-for-one-volume
  reclaim-retain-rebind-same-name
  reclaim-recycle-no-plugin-failed
)
FILES=()
for n in "${SUBSET[@]}"; do FILES+=("$S/$n.yaml"); done
SECONDS=0
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
DIFF_SHADOW=1 "$ROOT/scripts/differential.sh" "${FILES[@]}" | tee "$WORK/corpus.out"
grep -qE '^audit: [1-9][0-9]* requests from system:serviceaccount:kube-system:pv-controller-shadow .*, 0 writes$' "$WORK/corpus.out" \
  || { echo "e2e-shadow: the audit log does not show the shadow reading without writing" >&2; exit 1; }
corpus="$(grep -E '^[0-9]+ agree, [0-9]+ differ, 0 unlisted$' "$WORK/corpus.out")" \
  || { echo "e2e-shadow: an unlisted difference in the corpus" >&2; exit 1; }
decisions="$(grep -E '^decisions: ' "$WORK/corpus.out")"
# The shadow's own report (`pv-controller shadow report`) names the deliberate difference each
# listed scenario's differences are.
if grep -q 'not a listed difference' "$WORK/corpus.out"; then
  echo "e2e-shadow: pv-controller shadow report calls a difference of a listed scenario not a listed one" >&2; exit 1
fi
grep -q '  deliberate: README, deliberate differences: "Retained volumes go back' "$WORK/corpus.out" \
  || { echo "e2e-shadow: the rebind scenario's differences are not named as the deliberate one" >&2; exit 1; }

echo "== a difference made on purpose: upstream's binder with --enable-dynamic-provisioning=false"
rc=0
DIFF_SHADOW=1 DIFF_KCM_FLAGS=--enable-dynamic-provisioning=false \
  "$ROOT/scripts/differential.sh" "$S/provision-external-provisioner.yaml" >"$WORK/purpose.out" 2>&1 || rc=$?
cat "$WORK/purpose.out"
(( rc != 0 )) || { echo "e2e-shadow: the difference made on purpose was not reported as one" >&2; exit 1; }
grep -qE 'differ PersistentVolumeClaim [^ ]+ annotations.storage-provisioner: ours "[^"]+", theirs ""' "$WORK/purpose.out" \
  || { echo "e2e-shadow: the shadow's report does not name the provisioner annotation with both values" >&2; exit 1; }
grep -qE '^audit: .* 0 writes$' "$WORK/purpose.out" || { echo "e2e-shadow: the shadow wrote" >&2; exit 1; }

echo "e2e-shadow: ${#FILES[@]} scenarios: $corpus; $decisions; the difference made on purpose reported (${SECONDS}s)"
