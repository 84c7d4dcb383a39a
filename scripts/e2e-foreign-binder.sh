#!/usr/bin/env bash
# A second binder noticed: `pv-controller run` beside kube-controller-manager with its PV binder
# left ON (the mistake the README warns against), on a real control plane (scripts/real-cluster.sh,
# built from conformance/; needs Go).
#
# To make the other binder's writes certain rather than a race, `run` is paused (SIGSTOP) once its
# caches are synced; volumes and claims are created and kube-controller-manager binds them; `run`
# resumes and its watches deliver those binds. Checks: `run` logs a WARN line naming
# kube-controller-manager, records a Warning event ForeignBinderWrite on the objects, counts them
# in pv_controller_foreign_binder_writes_total{manager="kube-controller-manager"}, keeps working
# (a pair created afterwards binds) and writes nothing back to the objects KCM bound.
# Last line: `e2e-foreign-binder: N checks passed`.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
GO="$(command -v go || echo /usr/local/go/bin/go)"
if [[ ! -x "$GO" ]]; then echo "e2e-foreign-binder: skipped: Go not installed (needs the real control plane)"; exit 0; fi
command -v kubectl >/dev/null 2>&1 || { echo "e2e-foreign-binder: skipped: kubectl not installed (.ci/run installs it)"; exit 0; }
WORK="$(mktemp -d)"
CLUSTER="$WORK/cluster"
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/pv-controller"
RUN_PID=""
cleanup() {
  if [[ -n "$RUN_PID" ]]; then kill -CONT "$RUN_PID" 2>/dev/null || true; kill -9 "$RUN_PID" 2>/dev/null || true; wait "$RUN_PID" 2>/dev/null || true; fi
  "$ROOT/scripts/real-cluster.sh" down "$CLUSTER" >/dev/null 2>&1 || true
  [[ -n "${KEEP_WORK:-}" ]] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
  echo "FAIL: $*" >&2
  { echo "--- run log:"; tail -30 "$WORK/run.log"; kubectl get pv,pvc -A; } >&2 2>&1 || true
  exit 1
}
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"
PASSED=0

(cd "$ROOT" && cargo build --quiet --release --workspace) || fail "cargo build --release"
"$ROOT/scripts/real-cluster.sh" up "$CLUSTER" --kcm '*' >"$WORK/up.out" 2>&1 || { cat "$WORK/up.out" >&2; fail "real-cluster.sh up"; }
export KUBECONFIG="$CLUSTER/kubeconfig" KUBECACHEDIR="$WORK/kube-cache"
binder_on() { grep -q 'Starting persistent volume controller' "$CLUSTER/logs/kube-controller-manager.log"; }
wait_until "kube-controller-manager to start its PV binder" 60 binder_on
pass "kube-controller-manager runs its PV binder"

PORT="$(free_port)"
"$BIN" run --kubeconfig "$KUBECONFIG" --metrics-addr "127.0.0.1:$PORT" --resync-period 300s >"$WORK/run.log" 2>&1 &
RUN_PID=$!
synced() { grep -q 'caches synced' "$WORK/run.log"; }
wait_until "run's caches to sync" 60 synced
kill -STOP "$RUN_PID"

pair() {
  kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolume
metadata: {name: $1}
spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], storageClassName: "", nfs: {server: nfs.example.com, path: /$1}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $1, namespace: default}
spec: {accessModes: [ReadWriteOnce], storageClassName: "", resources: {requests: {storage: 1Gi}}, volumeName: ""}
YAML
}
for i in 1 2 3; do pair "kcm-$i"; done
bound() { [[ "$(kubectl get pvc -n default "$1" -o jsonpath='{.status.phase}')" == Bound ]]; }
for i in 1 2 3; do wait_until "kube-controller-manager to bind kcm-$i (run paused)" 60 bound "kcm-$i"; done
kubectl get pvc -n default kcm-1 -o jsonpath='{.metadata.managedFields[*].manager}' >"$WORK/out"
expect 'kube-controller-manager'
pass "kube-controller-manager bound the claims while run was paused"
RV_BEFORE="$(kubectl get pv,pvc -A -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.resourceVersion} {end}')"

kill -CONT "$RUN_PID"
warned() { grep -q 'WARN.*another binder wrote binder-owned fields.*manager="\?kube-controller-manager' "$WORK/run.log"; }
wait_until "run's WARN line naming kube-controller-manager" 30 warned
pass "run logs a WARN line naming kube-controller-manager"
evented() { kubectl get events -n default --field-selector reason=ForeignBinderWrite -o jsonpath='{.items[*].message}' | grep -q '^kube-controller-manager wrote \|kube-controller-manager wrote'; }
wait_until "a ForeignBinderWrite event" 30 evented
kubectl get events -n default --field-selector reason=ForeignBinderWrite -o jsonpath='{range .items[*]}{.type} {.involvedObject.kind}/{.involvedObject.name}: {.message}{"\n"}{end}' >"$WORK/out"
expect '^Warning PersistentVolumeClaim/kcm-[123]: kube-controller-manager wrote pv\.kubernetes\.io/bind-completed'
pass "a Warning event ForeignBinderWrite on the claims"
IDENTITY="$(grep "this replica's identity" "$WORK/run.log" | grep -o 'identity=[^ ]*' | head -1 | cut -d= -f2 | tr -d '"')"
[[ -n "$IDENTITY" ]] || fail "run did not log its identity"
kubectl get events -n default --field-selector reason=ForeignBinderWrite -o jsonpath='{range .items[*]}{.source.component} instance={.reportingInstance}{"\n"}{end}' >"$WORK/out"
expect "^persistentvolume-controller instance=$IDENTITY\$"
pass "run's events carry its identity as reportingInstance ($IDENTITY); source stays persistentvolume-controller"
counted() {
  curl -fsS "http://127.0.0.1:$PORT/metrics" >"$WORK/metrics" 2>/dev/null \
    && grep -Eq '^pv_controller_foreign_binder_writes_total\{manager="kube-controller-manager"\} [1-9]' "$WORK/metrics"
}
wait_until "pv_controller_foreign_binder_writes_total{manager=\"kube-controller-manager\"}" 30 counted
pass "the counter names kube-controller-manager"

sleep 3
RV_AFTER="$(kubectl get pv,pvc -A -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.resourceVersion} {end}')"
[[ "$RV_BEFORE" == "$RV_AFTER" ]] || fail "run wrote to objects kube-controller-manager had bound: $RV_BEFORE -> $RV_AFTER"
pass "run did not fight: the objects kube-controller-manager bound are unchanged"
pair after
wait_until "a pair created afterwards to bind" 60 bound after
pass "binding goes on"
echo "e2e-foreign-binder: $PASSED checks passed"
