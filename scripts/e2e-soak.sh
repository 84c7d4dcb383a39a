#!/usr/bin/env bash
# A two-minute soak (scripts/soak.sh) against `pv-controller up`: random churn, kills and pauses,
# the invariants, caches and volume markers checked every 5 s. The long runs are
# `scripts/soak.sh 30m` and `scripts/soak.sh 30m --real-cluster`. The real-cluster soak is not
# run here: `run` recycles host-path volumes through recycler pods there, and the runner does not
# yet stand in for the kubelet that would run them, so Recycle volumes stay Released.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
"$ROOT/scripts/soak.sh" "${SOAK_DURATION:-2m}"
echo "e2e-soak: ok"
