#!/usr/bin/env bash
# End-to-end check of `pv-controller run` on a real Kubernetes control plane, deployed as an
# operator would: kube-apiserver + etcd, kube-controller-manager with every controller but the PV
# binder, kube-scheduler and a Node (scripts/real-cluster.sh, built from conformance/; needs Go).
# The controller runs as the ServiceAccount of deploy/rbac.yaml with a token from
# `kubectl create token`, so the real RBAC authorizer checks that the ClusterRole is enough.
#
# Checks: `kubectl apply --dry-run=server -k deploy/`; two replicas elect one leader (the standby
# writes nothing); static binding, volumeName reservation, host-path provisioning (directory under
# --hostpath-root), events, reclaim (Delete removes PV + directory, Retain gives Released); a
# volume created after its claim binds it without waiting for the resync; the pv/pvc-protection
# finalizers added by admission and removed by KCM's protection controllers (a claim in use by a
# pod stays Terminating until the pod goes); WaitForFirstConsumer through kube-scheduler (the
# scheduler pre-binds a static volume and sets volume.kubernetes.io/selected-node for a
# provisioned one, the controller finishes both, the pod is bound to the node); a claim being
# expanded keeps its expansion fields; /metrics counts; no request refused (403) or failed; the
# standby takes over after kill -9 of the leader; LeaderElection events on the Lease; Recycle by a
# recycler pod (the test plays the kubelet: an event about the pod, then Succeeded); /metrics over
# HTTPS (--metrics-secure) authorized by TokenReview and SubjectAccessReview: 403 for anonymous
# and for a user without the grant, 401 for a bad token, 200 for the metrics reader, /healthz
# open; `explain pod` predicts what kube-scheduler does with a pod, case by case
# (scripts/explain-vs-scheduler.sh, tests/explain/scheduler/). Stops at the first failure and
# says why.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
GO="$(command -v go || echo /usr/local/go/bin/go)"
if [[ ! -x "$GO" ]]; then echo "e2e-real: skipped: Go not installed"; exit 0; fi
WORK="$(mktemp -d)"
CLUSTER="$WORK/cluster"
VOLUMES="$WORK/volumes"
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/pv-controller"
declare -A RPID RPORT
cleanup() {
  local p
  for p in "${RPID[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  "$ROOT/scripts/real-cluster.sh" down "$CLUSTER" >/dev/null 2>&1 || true
  [[ -n "${KEEP_WORK:-}" ]] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
  echo "FAIL: $*" >&2
  if [[ -f "$CLUSTER/kubeconfig" ]]; then
    { echo "--- state at failure:"; kubectl get pv,pvc,pods -A -o wide; kubectl get events -A
      for r in "${!RPID[@]}"; do echo "--- replica $r log:"; tail -30 "$WORK/replica-$r.log"; done
      echo "--- kube-controller-manager log:"; grep -E '^E' "$CLUSTER/logs/kube-controller-manager.log" | tail -20
    } >&2 2>&1 || true
  fi
  exit 1
}
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

command -v kubectl >/dev/null || fail "kubectl not on PATH"
(cd "$ROOT" && cargo build --quiet --release --workspace) || fail "cargo build --release"
[[ -x "$BIN" ]] || fail "$BIN missing after the build"
SECONDS=0

PASSED=0
pvc_gone() { [[ -z "$(q get pvc -n "$2" "$1" --ignore-not-found -o name)" ]]; }
finalizers() { q get "$@" -o jsonpath='{.metadata.finalizers}'; }

# --- the cluster --------------------------------------------------------------------------------
T_UP=$(now_ms)
"$ROOT/scripts/real-cluster.sh" up "$CLUSTER" --kcm '*,-persistentvolume-binder-controller' --scheduler \
  >"$WORK/up.out" 2>&1 || { cat "$WORK/up.out" >&2; fail "real-cluster.sh up"; }
[[ "$(tail -2 "$WORK/up.out" | head -1)" == "kubeconfig: $CLUSTER/kubeconfig" ]] || { cat "$WORK/up.out"; fail "up: kubeconfig line"; }
[[ "$(tail -1 "$WORK/up.out")" =~ ^server:\ https://127\.0\.0\.1:[0-9]+$ ]] || { cat "$WORK/up.out"; fail "up: server line"; }
SERVER="$(sed -n 's/^server: //p' "$WORK/up.out")"
echo "   real cluster up in $(( $(now_ms) - T_UP )) ms (build included): $SERVER"
export KUBECONFIG="$CLUSTER/kubeconfig" KUBECACHEDIR="$WORK/kube-cache"
k "server version" get --raw /version
expect '"gitVersion": "v1\.37\.[0-9]+"'
binder_disabled() { grep -q 'controller is disabled.*persistentvolume-binder-controller' "$CLUSTER/logs/kube-controller-manager.log"; }
wait_until "kube-controller-manager to report its PV binder disabled" 60 binder_disabled
pass "KCM runs without its PV binder"

# --- deploy/ ------------------------------------------------------------------------------------
k "apply --dry-run=server -k deploy/" apply --dry-run=server -k "$ROOT/deploy/"
for o in serviceaccount/pv-controller clusterrole.rbac.authorization.k8s.io/pv-controller \
  clusterrole.rbac.authorization.k8s.io/pv-controller-metrics-reader \
  clusterrolebinding.rbac.authorization.k8s.io/pv-controller role.rbac.authorization.k8s.io/pv-controller-leader-election \
  rolebinding.rbac.authorization.k8s.io/pv-controller-leader-election deployment.apps/pv-controller \
  poddisruptionbudget.policy/pv-controller; do
  expect "^${o//./\\.} created \(server dry run\)$"
done
k "dry run created nothing" get deployment,serviceaccount -n kube-system -l app.kubernetes.io/name=pv-controller -o name
[[ ! -s "$WORK/out" ]] || fail "the server dry run created objects: $(cat "$WORK/out")"
k "apply deploy/rbac.yaml" apply -f "$ROOT/deploy/rbac.yaml"
SA_KC="$WORK/pv-controller.kubeconfig"
# As the README's walkthrough: a kubeconfig of the current context's cluster and a new token.
"$BIN" kubeconfig --service-account kube-system/pv-controller --duration 2h >"$SA_KC" 2>"$WORK/err" \
  || { cat "$WORK/err"; fail "pv-controller kubeconfig --service-account kube-system/pv-controller"; }
pass "pv-controller kubeconfig wrote the ServiceAccount's kubeconfig"
TOKEN="$(kubectl --kubeconfig "$SA_KC" config view --raw -o jsonpath='{.users[0].user.token}')"
[[ -n "$TOKEN" ]] || fail "no token in $SA_KC"
k "whoami with the token" --kubeconfig "$SA_KC" auth whoami
expect 'system:serviceaccount:kube-system:pv-controller'
for verb_res in "update persistentvolumes" "update persistentvolumeclaims/status" "create events" "list nodes" \
  "create pods" "delete pods" "watch events" "create tokenreviews" "create subjectaccessreviews"; do
  k "can $verb_res" --kubeconfig "$SA_KC" auth can-i --all-namespaces $verb_res
  expect '^yes$'
done
for verb_res in "delete persistentvolumeclaims" "list secrets" "patch persistentvolumes" "update pods"; do
  if kubectl --kubeconfig "$SA_KC" auth can-i --all-namespaces $verb_res >"$WORK/out" 2>/dev/null; then fail "the ServiceAccount may $verb_res"; fi
  expect '^no$'
  pass "cannot $verb_res"
done

# Who may read /metrics: a ServiceAccount bound to deploy/'s pv-controller-metrics-reader.
k "metrics reader ServiceAccount" create serviceaccount metrics-reader -n kube-system
k "bind it to pv-controller-metrics-reader" create clusterrolebinding metrics-reader \
  --clusterrole=pv-controller-metrics-reader --serviceaccount=kube-system:metrics-reader
k "token for the metrics reader" create token metrics-reader -n kube-system --duration=2h
METRICS_TOKEN="$(cat "$WORK/out")"

# --- two replicas -------------------------------------------------------------------------------
start_replica() {
  local r="$1"
  RPORT[$r]="$(free_port)"
  "$BIN" run --kubeconfig "$SA_KC" --leader-elect --leader-elect-namespace=kube-system \
    --leader-elect-lease-duration 3s --leader-elect-renew-deadline 2s --leader-elect-retry-period 500ms \
    --metrics-addr "127.0.0.1:${RPORT[$r]}" --metrics-secure --resync-period 60s --hostpath-root "$VOLUMES" \
    >/dev/null 2>"$WORK/replica-$r.log" &
  RPID[$r]=$!
}
metrics() { curl -sfk -H "Authorization: Bearer $METRICS_TOKEN" "https://127.0.0.1:${RPORT[$1]}/metrics" || true; }
# code R PATH [CURL ARGS...]: the HTTP status of an HTTPS GET of PATH on replica R (body in $WORK/body).
code() { local r="$1" path="$2"; shift 2; curl -sk -o "$WORK/body" -w '%{http_code}' "$@" "https://127.0.0.1:${RPORT[$r]}$path" || true; }
# metric R SERIES: the value of SERIES (exact name{labels}) in replica R's /metrics, or "".
metric() { metrics "$1" | awk -v s="$2" '$1 == s {print $2}'; }
LEADER_SERIES='leader_election_master_status{name="pv-controller"}'
mkdir -p "$VOLUMES"
start_replica a
start_replica b
one_leader() {
  local a b
  a="$(metric a "$LEADER_SERIES")" b="$(metric b "$LEADER_SERIES")"
  [[ -n "$a" && -n "$b" ]] && (( ${a%.*} + ${b%.*} == 1 )) || return 1
  [[ "$(code a /readyz)" == 200 && "$(code b /readyz)" == 200 ]]
}
wait_until "one leader among two ready replicas" 60 one_leader
if [[ "$(metric a "$LEADER_SERIES")" == 1 ]]; then LEADER=a STANDBY=b; else LEADER=b STANDBY=a; fi
k "lease holder" get lease -n kube-system pv-controller -o jsonpath='{.spec.holderIdentity}'
HOLDER="$(cat "$WORK/out")"
[[ -n "$HOLDER" ]] || fail "Lease kube-system/pv-controller has no holder"
pass "replica $LEADER leads ($HOLDER), $STANDBY stands by"
k "LeaderElection event on the Lease" get events -n kube-system --field-selector reason=LeaderElection \
  -o jsonpath='{range .items[*]}{.type} {.involvedObject.kind} {.involvedObject.name} {.source.component}: {.message}{"\n"}{end}'
expect "^Normal Lease pv-controller pv-controller: $HOLDER became leader\$"
pass "LeaderElection event: $HOLDER became leader"

# --- examples/up/ -------------------------------------------------------------------------------
apply_examples_up 30 "pv-controller run"
k "logs bound to the provisioned volume" get pvc -n demo logs -o jsonpath='{.spec.volumeName} {.metadata.annotations.pv\.kubernetes\.io/bind-completed} {.metadata.annotations.volume\.kubernetes\.io/storage-provisioner}'
expect "^$LOGS_PV yes kubernetes.io/host-path\$"
k "provisioned volume" get pv "$LOGS_PV" -o jsonpath='{.spec.storageClassName} {.spec.persistentVolumeReclaimPolicy} {.spec.capacity.storage} {.spec.claimRef.name} {.status.phase} {.metadata.annotations.pv\.kubernetes\.io/provisioned-by} {.spec.hostPath.path}'
expect "^local Delete 1Gi logs Bound kubernetes.io/host-path $VOLUMES/$LOGS_PV\$"
[[ -d "$VOLUMES/$LOGS_PV" ]] || fail "$VOLUMES/$LOGS_PV is not a directory"
pass "volume directory $LOGS_PV exists under --hostpath-root"

# --- finalizers from admission ------------------------------------------------------------------
[[ "$(finalizers pvc -n demo small)" == '["kubernetes.io/pvc-protection"]' ]] || fail "demo/small finalizers: $(finalizers pvc -n demo small)"
pass "StorageObjectInUseProtection added kubernetes.io/pvc-protection to a claim"
[[ "$(finalizers pv pv-5g)" == '["kubernetes.io/pv-protection"]' ]] || fail "pv-5g finalizers: $(finalizers pv pv-5g)"
pass "StorageObjectInUseProtection added kubernetes.io/pv-protection to a volume"
F="$(finalizers pv "$LOGS_PV")"
[[ "$F" == *'"kubernetes.io/pv-protection"'* && "$F" == *'"kubernetes.io/pv-controller"'* ]] || fail "$LOGS_PV finalizers: $F"
pass "provisioned volume carries kubernetes.io/pv-protection and kubernetes.io/pv-controller"

# --- events -------------------------------------------------------------------------------------
k "describe pvc logs" describe pvc -n demo logs
expect "Normal +ProvisioningSucceeded .*Successfully provisioned volume $LOGS_PV using kubernetes.io/host-path"
k "event source" get events -n demo --field-selector reason=ProvisioningSucceeded -o jsonpath='{.items[0].source.component} {.items[0].involvedObject.kind}/{.items[0].involvedObject.name}'
expect '^persistentvolume-controller PersistentVolumeClaim/logs$'

# --- /metrics -----------------------------------------------------------------------------------
for pair in \
  'pv_collector_bound_pv_count{storage_class=""} 2' \
  'pv_collector_bound_pv_count{storage_class="local"} 1' \
  'pv_collector_bound_pvc_count{namespace="demo",storage_class="",volume_attributes_class=""} 2' \
  'pv_collector_bound_pvc_count{namespace="demo",storage_class="local",volume_attributes_class=""} 1' \
  'pv_collector_total_pv_count{plugin_name="kubernetes.io/host-path",volume_mode="Filesystem"} 1' \
  'pv_collector_total_pv_count{plugin_name="kubernetes.io/nfs",volume_mode="Filesystem"} 2'; do
  series="${pair% *}" want="${pair##* }"
  got="$(metric "$LEADER" "$series")"
  [[ "$got" == "$want" ]] || { metrics "$LEADER" | grep '^pv_collector' >&2; fail "leader /metrics: $series is '$got', expected $want"; }
done
pass "leader /metrics counts the volumes and claims"
writes() { metrics "$1" | grep '^rest_client_requests_total{' | grep -vc 'method="GET"' || true; }
(( $(writes "$STANDBY") == 0 )) || { metrics "$STANDBY" | grep '^rest_client_requests_total' >&2; fail "the standby wrote"; }
(( $(writes "$LEADER") > 0 )) || fail "the leader's /metrics counts no writes"
pass "only the leader writes"

# --- /metrics over HTTPS, authorized by the API server -----------------------------------------
[[ "$(code "$LEADER" /metrics)" == 403 ]] || fail "anonymous /metrics: not 403: $(cat "$WORK/body")"
grep -qF 'forbidden: User \"system:anonymous\" cannot get path \"/metrics\"' "$WORK/body" || fail "anonymous /metrics: $(cat "$WORK/body")"
pass "anonymous /metrics: 403 (SubjectAccessReview denied system:anonymous)"
[[ "$(code "$LEADER" /metrics -H "Authorization: Bearer $TOKEN")" == 403 ]] || fail "/metrics with a token lacking the grant: not 403"
grep -qF 'system:serviceaccount:kube-system:pv-controller' "$WORK/body" || fail "403 body: $(cat "$WORK/body")"
pass "/metrics with a valid token lacking the grant: 403 naming the user"
[[ "$(code "$LEADER" /metrics -H "Authorization: Bearer not-a-token")" == 401 ]] || fail "/metrics with a bad token: not 401"
pass "/metrics with a token the API server rejects: 401"
[[ "$(code "$LEADER" /metrics -H "Authorization: Bearer $METRICS_TOKEN")" == 200 ]] || fail "/metrics as the metrics reader: not 200"
grep -q '^leader_election_master_status' "$WORK/body" || fail "/metrics as the metrics reader: no metrics"
pass "/metrics as the metrics reader: 200"
[[ "$(code "$LEADER" /healthz)" == 200 && "$(code "$STANDBY" /livez)" == 200 ]] || fail "/healthz, /livez without a token: not 200"
pass "/healthz and /livez need no token"
if curl -s -o /dev/null --max-time 5 "http://127.0.0.1:${RPORT[$LEADER]}/metrics"; then fail "plain HTTP served on the secure port"; fi
pass "no plain HTTP on the secure port"

# --- reclaim: Delete and Retain, finalizers removed by KCM --------------------------------------
k "delete demo/logs" delete pvc -n demo logs --wait=false
wait_until "demo/logs gone (pvc-protection finalizer removed by KCM)" 30 pvc_gone logs demo
wait_until "provisioned PV $LOGS_PV deleted" 30 pv_gone "$LOGS_PV"
pass "Delete policy: claim and provisioned PV gone (pv-protection and pv-controller finalizers lifted)"
[[ ! -e "$VOLUMES/$LOGS_PV" ]] || fail "$VOLUMES/$LOGS_PV still exists after its PV was deleted"
pass "Delete policy: directory removed"
k "delete demo/small" delete pvc -n demo small --wait=false
wait_until "pv-5g Released" 30 pv_phase_is pv-5g Released
pass "Retain policy: pv-5g Released"
k "pv-5g kept" get pv pv-5g -o jsonpath='{.spec.claimRef.name} {.spec.persistentVolumeReclaimPolicy} {.metadata.finalizers}'
expect '^small Retain \["kubernetes.io/pv-protection"\]$'
k "delete released pv-5g" delete pv pv-5g --wait=false
wait_until "pv-5g gone (pv-protection lifted: not bound)" 30 pv_gone pv-5g
pass "KCM's pv-protection lifts the finalizer of a Released volume"

# --- a volume created after its claim -----------------------------------------------------------
late_claim_waits 20
sleep 1
late_volume_binds_it 30s
echo "   claim→Bound after PV creation: ${LATE_MS} ms (resync period 60 s)"
(( LATE_MS < 30000 )) || fail "demo/late bound only after ${LATE_MS} ms"
pass "late claim bound without waiting for the resync"

# --- WaitForFirstConsumer through kube-scheduler ------------------------------------------------
k "create WaitForFirstConsumer classes, a static volume and two claims" create -f - <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: wffc}
provisioner: kubernetes.io/host-path
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
allowVolumeExpansion: true
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: wffc-static}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-node-1}
spec:
  capacity: {storage: 2Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: wffc-static
  hostPath: {path: $VOLUMES/static-node-1, type: DirectoryOrCreate}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [node-1]}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: wait-provisioned, namespace: demo}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: wffc
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: wait-static, namespace: demo}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: wffc-static
  resources: {requests: {storage: 1Gi}}
EOF
wffc_event() {
  q get events -n demo --field-selector involvedObject.name=wait-provisioned -o jsonpath='{range .items[*]}{.reason}{"\n"}{end}' | grep '^WaitForFirstConsumer$' >/dev/null
}
wait_until "WaitForFirstConsumer event for demo/wait-provisioned" 20 wffc_event
k "both claims wait" get pvc -n demo wait-provisioned wait-static -o jsonpath='{range .items[*]}{.status.phase} {.spec.volumeName}|{end}'
expect '^Pending \|Pending \|$'
sa_exists() { [[ -n "$(q get serviceaccount -n demo default --ignore-not-found -o name)" ]]; }
wait_until "ServiceAccount demo/default (KCM's serviceaccount controller)" 30 sa_exists
k "create a pod using both claims" create -f - <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: consumer, namespace: demo}
spec:
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    volumeMounts: [{name: a, mountPath: /a}, {name: b, mountPath: /b}]
  volumes:
  - {name: a, persistentVolumeClaim: {claimName: wait-provisioned}}
  - {name: b, persistentVolumeClaim: {claimName: wait-static}}
EOF
pod_scheduled() { [[ "$(q get pod -n demo consumer -o jsonpath='{.spec.nodeName}')" == node-1 ]]; }
wait_until "pod demo/consumer bound to node-1 by kube-scheduler" 60 pod_scheduled
pass "kube-scheduler bound the pod once both claims were bound (${WAITED_MS} ms)"
k "selected node of the provisioned claim" get pvc -n demo wait-provisioned -o jsonpath='{.metadata.annotations.volume\.kubernetes\.io/selected-node} {.status.phase} {.spec.volumeName}'
expect '^node-1 Bound pvc-'
WAIT_PV="$(cut -d' ' -f3 "$WORK/out")"
k "provisioned WaitForFirstConsumer volume" get pv "$WAIT_PV" -o jsonpath='{.spec.claimRef.name} {.status.phase} {.spec.hostPath.path}'
expect "^wait-provisioned Bound $VOLUMES/$WAIT_PV\$"
k "static claim bound to the volume the scheduler chose" get pvc -n demo wait-static -o jsonpath='{.status.phase} {.spec.volumeName} {.metadata.annotations.pv\.kubernetes\.io/bind-completed}'
expect '^Bound pv-node-1 yes$'
k "pv-node-1 pre-bound by the scheduler, finished by the controller" get pv pv-node-1 -o jsonpath='{.spec.claimRef.namespace}/{.spec.claimRef.name} {.status.phase} {.metadata.annotations.pv\.kubernetes\.io/bound-by-controller}'
expect '^demo/wait-static Bound yes$'

# --- expansion fields left alone ----------------------------------------------------------------
k "expand demo/wait-provisioned" patch pvc -n demo wait-provisioned --type=merge -p '{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}'
k "a resizer's status" patch pvc -n demo wait-provisioned --subresource=status --type=merge \
  -p '{"status":{"allocatedResources":{"storage":"2Gi"},"allocatedResourceStatuses":{"storage":"ControllerResizeInProgress"}}}'
k "label the claim (an update for the controller to sync)" label pvc -n demo wait-provisioned resized=yes
sleep 3
k "expansion fields kept" get pvc -n demo wait-provisioned -o jsonpath='{.spec.resources.requests.storage} {.status.allocatedResources.storage} {.status.allocatedResourceStatuses.storage} {.status.capacity.storage} {.status.phase} {.spec.volumeName}'
expect "^2Gi 2Gi ControllerResizeInProgress 1Gi Bound $WAIT_PV\$"

# --- a claim in use stays until its pod goes ----------------------------------------------------
k "delete demo/wait-static while the pod uses it" delete pvc -n demo wait-static --wait=false
sleep 3
k "claim in use is Terminating" get pvc -n demo wait-static -o jsonpath='{.metadata.deletionTimestamp} {.metadata.finalizers}'
expect '^[0-9TZ:-]+ \["kubernetes.io/pvc-protection"\]$'
# No kubelet confirms the pod's end: delete it at once (kubectl warns that it does so).
kubectl delete pod -n demo consumer --grace-period=0 --force >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err"; fail "force-delete the pod"; }
grep -v '^Warning: Immediate deletion does not wait' "$WORK/err" && fail "force-delete the pod printed to stderr"
pass "force-delete the pod (no kubelet)"
wait_until "demo/wait-static gone once its pod is" 30 pvc_gone wait-static demo
pass "KCM's pvc-protection lifted the finalizer when the pod went"
wait_until "pv-node-1 Released" 30 pv_phase_is pv-node-1 Released
pass "pv-node-1 Released (Retain)"

# --- Recycle: a recycler pod, finished by the test (no kubelet) -------------------------------
# kube-apiserver answers with its deprecation warning for Recycle, and nothing else on stderr.
kubectl create -f - >"$WORK/out" 2>"$WORK/err" <<'EOF' || { cat "$WORK/err"; fail "create a released NFS volume with policy Recycle"; }
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-recycle}
spec:
  capacity: {storage: 20Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Recycle
  storageClassName: ""
  claimRef: {namespace: demo, name: gone, uid: 00000000-0000-0000-0000-000000000000}
  nfs: {server: nfs.example.com, path: /exports/recycle}
EOF
[[ "$(cat "$WORK/err")" == "Warning: spec.persistentVolumeReclaimPolicy: The Recycle reclaim policy is deprecated. Instead, the recommended approach is to use dynamic provisioning." ]] \
  || { cat "$WORK/err"; fail "create a released NFS volume with policy Recycle: stderr"; }
pass "create a released NFS volume with policy Recycle (with kube-apiserver's deprecation warning)"
recycler_pod() { [[ -n "$(q get pod -n default recycler-for-pv-recycle --ignore-not-found -o name)" ]]; }
wait_until "recycler pod default/recycler-for-pv-recycle" 30 recycler_pod
k "recycler pod" get pod -n default recycler-for-pv-recycle \
  -o jsonpath='{.spec.activeDeadlineSeconds} {.spec.volumes[0].nfs.server}:{.spec.volumes[0].nfs.path} {.spec.containers[0].image}'
expect '^600 nfs\.example\.com:/exports/recycle registry\.k8s\.io/build-image/debian-base:bookworm-v1\.0\.6$'
pass "recycler pod: upstream's template, the volume's NFS export, 30 s per GiB"
k "the kubelet's part: an event about the pod" create -f - <<'EOF'
apiVersion: v1
kind: Event
metadata: {name: recycler-for-pv-recycle.started, namespace: default}
involvedObject: {kind: Pod, namespace: default, name: recycler-for-pv-recycle}
reason: Started
message: Started container pv-recycler
type: Normal
EOF
relayed() {
  q get events -n default --field-selector involvedObject.name=pv-recycle,reason=RecyclerPod -o jsonpath='{.items[*].message}' |
    grep -q 'Recycler pod: Started container pv-recycler'
}
wait_until "RecyclerPod event on pv-recycle" 30 relayed
pass "the pod's event relayed to the volume (RecyclerPod)"
k "the kubelet's part: the pod succeeded" patch pod -n default recycler-for-pv-recycle --subresource=status --type=merge \
  -p '{"status":{"phase":"Succeeded"}}'
wait_until "pv-recycle Available" 30 pv_phase_is pv-recycle Available
k "VolumeRecycled event" get events -n default --field-selector involvedObject.name=pv-recycle,reason=VolumeRecycled -o jsonpath='{.items[0].message}'
expect '^Volume recycled$'
# Deleted, but a pod on a node stays Terminating until its kubelet confirms; none runs here.
pod_deleted() { [[ -n "$(q get pod -n default recycler-for-pv-recycle --ignore-not-found -o jsonpath='{.metadata.deletionTimestamp}')" ]] || ! recycler_pod; }
wait_until "recycler pod deleted" 30 pod_deleted
pass "Recycle: pv-recycle Available, VolumeRecycled, recycler pod deleted"

# --- failover after kill -9 ---------------------------------------------------------------------
kill -9 "${RPID[$LEADER]}"; wait "${RPID[$LEADER]}" 2>/dev/null || true
unset "RPID[$LEADER]"
create_static_pair failover demo
T_KILL=$(now_ms)
wait_until "demo/failover Bound by the standby" 60 claim_phase_is failover Bound
echo "   standby bound the claim $(( $(now_ms) - T_KILL )) ms after the leader's kill -9 (lease 3 s)"
[[ "$(metric "$STANDBY" "$LEADER_SERIES")" == 1 ]] || fail "the standby does not report leadership"
k "new lease holder" get lease -n kube-system pv-controller -o jsonpath='{.spec.holderIdentity}'
[[ "$(cat "$WORK/out")" != "$HOLDER" ]] || fail "the Lease is still held by $HOLDER"
pass "standby took over after kill -9"

# --- nothing refused, nothing failed ------------------------------------------------------------
for r in a b; do
  f="$WORK/replica-$r.log"
  sed -i 's/\x1b\[[0-9;]*m//g' "$f"
  if grep -Eiq 'forbidden|\b403\b' "$f"; then grep -Ei 'forbidden|\b403\b' "$f" >&2; fail "replica $r was refused a request (RBAC of deploy/rbac.yaml)"; fi
  if grep -Eq 'panic|^error|[[:space:]]ERROR[[:space:]]' "$f"; then cat "$f" >&2; fail "replica $r logged errors"; fi
  if grep -q ' WARN ' "$f"; then
    echo "   note: replica $r logged $(grep -c ' WARN ' "$f") warning(s):"; grep ' WARN ' "$f" | sed 's/^/     /' | head -10
  fi
done
if metrics "$STANDBY" | grep -q '^rest_client_requests_total{.*code="403"'; then fail "the controller got 403 answers"; fi
# The audit log says what the ServiceAccount did: nothing refused, and which rules of the
# ClusterRole/Role the run exercised (a rule never used is listed; the scenario may not reach it).
kubectl get clusterrole pv-controller -o json >"$WORK/clusterrole.json"
kubectl get role -n kube-system pv-controller-leader-election -o json >"$WORK/role.json"
python3 - "$CLUSTER/logs/audit.log" "$WORK/clusterrole.json" "$WORK/role.json" >"$WORK/audit.txt" <<'PY' || { cat "$WORK/audit.txt" >&2; fail "the audit log shows refused requests of the ServiceAccount"; }
import json, sys
user = "system:serviceaccount:kube-system:pv-controller"
used, refused = set(), []
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("user", {}).get("username") != user or "objectRef" not in e:
        continue
    o = e["objectRef"]
    res = o.get("resource", "") + ("/" + o["subresource"] if o.get("subresource") else "")
    key = (o.get("apiGroup", ""), res, e["verb"])
    code = e.get("responseStatus", {}).get("code", 0)
    if code == 403:
        refused.append(f"{e['verb']} {res} {o.get('namespace', '')}/{o.get('name', '')}")
    used.add(key)
unused = []
for f in sys.argv[2:]:
    for rule in json.load(open(f)).get("rules", []):
        for g in rule.get("apiGroups", []):
            for r in rule.get("resources", []):
                for v in rule.get("verbs", []):
                    if (g, r, v) not in used:
                        unused.append(f"{v} {g + '/' if g else ''}{r}")
print(f"   the ServiceAccount made {len(used)} kinds of request (verb, resource)")
if unused:
    print("   role permissions this run did not use: " + ", ".join(sorted(unused)))
for r in refused:
    print("   refused (403): " + r)
sys.exit(1 if refused else 0)
PY
cat "$WORK/audit.txt"
pass "no request refused by RBAC, no errors logged"

# --- a refused token, renewed without a restart (the README's walkthrough) ----------------------
# The standby stops, so that the run below is the only binder; it runs as a ServiceAccount of its
# own, so that revoking its tokens (re-creating it) touches nothing else.
kill "${RPID[$STANDBY]}"; wait "${RPID[$STANDBY]}" 2>/dev/null || true
unset "RPID[$STANDBY]"
k "renewal ServiceAccount" create serviceaccount pv-renew -n kube-system
k "bind it to the pv-controller ClusterRole" create clusterrolebinding pv-renew \
  --clusterrole=pv-controller --serviceaccount=kube-system:pv-renew
RENEW_KC="$WORK/renew.kubeconfig"
"$BIN" kubeconfig --service-account kube-system/pv-renew >"$RENEW_KC" 2>"$WORK/err" || { cat "$WORK/err"; fail "kubeconfig for pv-renew"; }
"$BIN" run --kubeconfig "$RENEW_KC" --metrics-addr 127.0.0.1:0 --resync-period 60s >/dev/null 2>"$WORK/replica-renew.log" &
RPID[renew]=$!
renew_synced() { grep -q 'caches synced' "$WORK/replica-renew.log"; }
wait_until "run with pv-renew's token to sync" 60 renew_synced
# Re-creating the ServiceAccount revokes every token of the old one: run is answered 401.
k "revoke: delete the ServiceAccount" delete serviceaccount pv-renew -n kube-system
k "re-create it" create serviceaccount pv-renew -n kube-system
# kube-apiserver caches a token's successful authentication for 10 s.
token_refused() { ! kubectl --kubeconfig "$RENEW_KC" auth whoami >/dev/null 2>&1; }
wait_until "kube-apiserver to refuse the revoked token" 60 token_refused
refused_warned() { grep -q 'WARN.*refused the token (401' "$WORK/replica-renew.log"; }
k "a pair created while the token is refused" apply -f - <<'YAML'
apiVersion: v1
kind: PersistentVolume
metadata: {name: renew}
spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], storageClassName: "", nfs: {server: nfs.example.com, path: /renew}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: renew, namespace: default}
spec: {accessModes: [ReadWriteOnce], storageClassName: "", resources: {requests: {storage: 1Gi}}}
YAML
wait_until "run's WARN line about the refused token" 60 refused_warned
[[ "$(kubectl get pvc -n default renew -o jsonpath='{.status.phase}')" == Pending ]] || fail "the claim bound while run's token was refused"
pass "a revoked token: run logs one WARN line and binds nothing"
"$BIN" kubeconfig --service-account kube-system/pv-renew >"$WORK/new" && mv "$WORK/new" "$RENEW_KC"
renewed() { grep -q 'took the new token from the kubeconfig' "$WORK/replica-renew.log"; }
wait_until "run to take the new token" 90 renewed
renew_bound() { [[ "$(kubectl get pvc -n default renew -o jsonpath='{.status.phase}')" == Bound ]]; }
wait_until "the claim to bind with the renewed token" 90 renew_bound
kill -0 "${RPID[renew]}" || fail "run exited"
kill "${RPID[renew]}"; wait "${RPID[renew]}" || true
unset "RPID[renew]"
[[ "$(grep -c 'refused the token (401; expired' "$WORK/replica-renew.log")" == 1 ]] || fail "the WARN line about the refused token is not logged exactly once"
pass "a new kubeconfig written over the old: run took its token and bound the claim, no restart"

# --- explain pod against kube-scheduler, on this cluster ---------------------------------------
"$ROOT/scripts/explain-vs-scheduler.sh" "$CLUSTER/kubeconfig" | tee "$WORK/explain-vs-scheduler.out" \
  || fail "explain pod and kube-scheduler disagree (scripts/explain-vs-scheduler.sh)"
pass "$(tail -1 "$WORK/explain-vs-scheduler.out")"

echo "e2e-real: ${SECONDS}s (cargo build excluded)"
echo "$PASSED passed, 0 failed"
