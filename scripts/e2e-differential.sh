#!/usr/bin/env bash
# The controller differential (scripts/differential.sh) on a representative subset of
# tests/scenarios/, one or more per area: static binding, pre-bound claims and volumes, bound
# claims, volume phases, reclaim (retain, delete, recycle), provisioning, delayed binding, default
# classes, rejected input. Needs Go (conformance/). Takes about three minutes; the full set is
# `scripts/differential.sh` (see the README, "Against a real cluster").
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
GO="$(command -v go || echo /usr/local/go/bin/go)"
if [[ ! -x "$GO" ]]; then echo "e2e-differential: skipped: Go not installed"; exit 0; fi
S="$ROOT/tests/scenarios"
SUBSET=(
  bind-smallest-volume-that-fits
  bind-access-modes-fewest-first
  bind-selector-match-labels
  prebound-claim-to-free-volume
  bound-claim-volume-missing-lost
  volume-claim-missing-released-retain
  reclaim-delete-provisioned-hostpath
  reclaim-recycle-hostpath-controller-bound
  provision-hostpath-internal
  provision-external-provisioner
  delay-selected-node-provisions
  class-default-newest-wins
  input-bad-quantity-unit
)
FILES=()
for n in "${SUBSET[@]}"; do FILES+=("$S/$n.yaml"); done
SECONDS=0
"$ROOT/scripts/differential.sh" "${FILES[@]}"
echo "e2e-differential: ${#FILES[@]} scenarios in ${SECONDS}s"
