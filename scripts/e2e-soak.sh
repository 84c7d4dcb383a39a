#!/usr/bin/env bash
# Two-minute soaks (scripts/soak.sh): random churn, kills and pauses, the invariants, caches and
# volume markers checked every 5 s. First against `pv-controller up`; then, where Go can build
# the real control plane (conformance/), against etcd + kube-apiserver + kube-controller-manager
# with two `run` replicas under leader election behind the chaos proxy (the runner stands in for
# the kubelet of `run`'s recycler pods). The long runs are `scripts/soak.sh 30m` and
# `scripts/soak.sh 30m --real-cluster`. SOAK_DURATION sets the length of both.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
"$ROOT/scripts/soak.sh" "${SOAK_DURATION:-2m}"
if command -v go >/dev/null 2>&1 || [[ -x /usr/local/go/bin/go ]] || [[ -n "${REAL_CLUSTER_BIN:-}" ]]; then
  "$ROOT/scripts/soak.sh" "${SOAK_DURATION:-2m}" --real-cluster
else
  echo "skipped: the real-cluster soak (Go not installed to build conformance/)"
fi
echo "e2e-soak: ok"
