#!/usr/bin/env bash
# Two-minute soaks (scripts/soak.sh): against `pv-controller up`, and against the real cluster
# (etcd + kube-apiserver + kube-controller-manager, two `run` replicas behind a chaos proxy) where
# Go is present. The long runs are `scripts/soak.sh 30m` and `scripts/soak.sh 30m --real-cluster`.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DURATION="${SOAK_DURATION:-2m}"
"$ROOT/scripts/soak.sh" "$DURATION"
GO="$(command -v go || echo /usr/local/go/bin/go)"
if [[ -x "$GO" || -n "${REAL_CLUSTER_BIN:-}" ]]; then
  "$ROOT/scripts/soak.sh" "$DURATION" --real-cluster
else
  echo "e2e-soak: skipped: --real-cluster needs Go (conformance/)"
fi
echo "e2e-soak: ok"
