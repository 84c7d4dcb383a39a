#!/usr/bin/env bash
# Prints N static PV/PVC pairs as multi-document YAML (as `kubectl get -o yaml` spells objects):
# the input of `pv-controller simulate` at scale, the same workload as `bench --simulate --pairs N`
# (volumes of 1..10 Gi, each claim asking for its volume's size).
#   scripts/sim-pairs.sh 10000 > /tmp/pairs-10k.yaml
set -euo pipefail
n="${1:?usage: sim-pairs.sh N}"
awk -v n="$n" 'BEGIN {
  for (i = 0; i < n; i++) {
    size = (1 + i % 10) "Gi"
    printf "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: bench-pv-%07d\nspec:\n  accessModes:\n  - ReadWriteOnce\n  capacity:\n    storage: %s\n  nfs:\n    path: /e/%d\n    server: bench\n  storageClassName: \"\"\nstatus:\n  phase: Available\n---\n", i, size, i
    printf "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: bench-pvc-%07d\n  namespace: default\nspec:\n  accessModes:\n  - ReadWriteOnce\n  resources:\n    requests:\n      storage: %s\n  storageClassName: \"\"\nstatus:\n  phase: Pending\n", i, size
    if (i < n - 1) printf "---\n"
  }
}'
