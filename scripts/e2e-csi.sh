#!/usr/bin/env bash
# Upstream's CSI sidecars, unmodified and with their default flags, and csi-test's mock driver
# over a unix socket (all built by conformance/build.sh into conformance/bin/), first against the
# real cluster with `pv-controller run` (kube-apiserver, KCM without its PV binder, kube-scheduler;
# scripts/real-cluster.sh), then against `pv-controller up` (its controller in-process).
#
# Both halves run the commands of README.md's "Testing a CSI driver against `up`" as written (read
# from the README, so they cannot drift): on the real cluster all but `up`'s own lines, with
# KUBECONFIG and CSI_ENDPOINT pointing at the real cluster; on `up` every one of them. Then, on
# each server, the same checks:
# - provisioning, Immediate class: the claim handed off to csi-provisioner by the controller,
#   a volume with the driver's topology as its node affinity, Bound;
# - WaitForFirstConsumer: the claim waits (event WaitForFirstConsumer) until it names the node
#   a scheduler would pick (the Node and CSINode a kubelet registers are in examples/csi/), then a
#   volume for that node's topology;
# - attach and detach: a VolumeAttachment as the attach-detach controller creates it, attached
#   by csi-attacher (status.attached, the attacher's finalizers), deleted, detached;
# - a pod (README.md's "Pods on `up`"): csi-node reported Ready as its kubelet would, a pod with a
#   WaitForFirstConsumer claim placed by kube-scheduler (real cluster; its other node cordoned) or
#   `up --scheduler`, the claim provisioned for that node, the pod bound to it; its volume
#   attached through KCM's attach-detach controller or `up`'s stand-in (the VolumeAttachment's
#   name and spec, the Node's status.volumesAttached, the pod's Scheduled and
#   SuccessfulAttachVolume events), detached and gone once the pod is deleted; compared;
# - expansion: the claim's request raised in a class with allowVolumeExpansion, csi-resizer
#   resizes the volume, and the claim's status ends as on kube-apiserver (compared);
# - deletion: the claims deleted, their volumes deleted by csi-provisioner (Delete policy);
# - snapshots: external-snapshotter's CRDs (the module cache's, linked by conformance/build.sh),
#   snapshot-controller and csi-snapshotter started beside the sidecars, the README's claim again,
#   a VolumeSnapshotClass, a VolumeSnapshot of the claim (examples/csi/snapshot/, the commands of
#   README.md's "Snapshots on `up`") ready to use with a bound VolumeSnapshotContent, a claim restored
#   from it (provisioned by csi-provisioner from the snapshot, bound by the controller); the
#   restored claim and the snapshot deleted, their volume and content deleted (Delete policies);
#   `kubectl get` of the snapshot objects, the restored claim's data source fields and the objects
#   left at the end compared between the servers;
# - a provisioner secret named by a class (csi.storage.k8s.io/provisioner-secret-name and
#   -namespace): with the Secret missing the claim gets ProvisioningFailed naming the secret
#   (csi-provisioner reads it; the message compared between the servers); once the Secret exists,
#   the claim is Bound, and its volume carries the secret as its deletion secret;
# - `pv-controller explain` past the binder, against the real csi-provisioner: a claim whose
#   provisioner is not installed (notInstalled), one the provisioner fails (failing, with the
#   driver's error), the same once the provisioner is stopped and its leader Lease has expired
#   (down), and a provisioned claim ("provisioned for it").
# On `up`, no request may get a 409 or a 5xx answer (its request log), and no sidecar (nor
# snapshot-controller) may log an error line that the real cluster's run did not also cause (lines
# compared with names, uids and numbers masked). Stops at the first failure and says why.
#
# Skipped (exit 0, saying so) when the CSI binaries are missing and Go is not installed to build
# them; with Go, conformance/build.sh builds what is missing (a no-op when up to date).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CONF_BIN="$ROOT/conformance/bin"
GO="$(command -v go || echo /usr/local/go/bin/go)"
CSI_BINARIES=(csi-provisioner csi-attacher csi-resizer csi-snapshotter snapshot-controller mock-driver)
# external-snapshotter's VolumeSnapshot CRDs: conformance/build.sh links them here from its
# module in the module cache.
SNAPSHOT_CRDS="$CONF_BIN/crd/snapshot"
SNAPSHOT_CRD_NAMES=(volumesnapshotclasses.snapshot.storage.k8s.io volumesnapshotcontents.snapshot.storage.k8s.io volumesnapshots.snapshot.storage.k8s.io)
missing=()
for b in "${CSI_BINARIES[@]}"; do [[ -x "$CONF_BIN/$b" ]] || missing+=("$b"); done
if [[ ! -x "$GO" ]]; then
  if (( ${#missing[@]} )); then
    echo "e2e-csi: skipped: Go not installed, and conformance/bin/ lacks ${missing[*]} (conformance/build.sh builds them from the Go module proxy)"
  else
    echo "e2e-csi: skipped: Go not installed (the real cluster of scripts/real-cluster.sh is built with Go)"
  fi
  exit 0
fi

WORK="$(mktemp -d)"
BIN_DIR="${CARGO_TARGET_DIR:-$ROOT/target}/release"
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  "$ROOT/scripts/real-cluster.sh" down "$WORK/real" >/dev/null 2>&1 || true
  [[ -n "${KEEP_WORK:-}" ]] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

SERVER=""  # which half runs: "real" or "up"
fail() {
  echo "FAIL${SERVER:+ ($SERVER)}: $*" >&2
  if [[ -n "${KUBECONFIG:-}" && -f "${KUBECONFIG:-}" ]]; then
    { echo "--- state at failure:"; kubectl get pv,pvc,volumeattachments -A -o wide; kubectl get events -A
      kubectl get volumesnapshots,volumesnapshotcontents -A 2>/dev/null
    } >&2 2>&1 || true
  fi
  local f
  for f in "$WORK/$SERVER"-logs/*.log; do
    [[ -f "$f" ]] || continue
    { echo "--- $(basename "$f") (last lines):"; sed 's/\x1b\[[0-9;]*m//g' "$f" | tail -15; } >&2
  done
  exit 1
}
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

command -v kubectl >/dev/null || fail "kubectl not on PATH"
(cd "$ROOT" && cargo build --quiet --release --workspace) || fail "cargo build --release"
[[ -x "$BIN_DIR/pv-controller" ]] || fail "$BIN_DIR/pv-controller missing after the build"
"$ROOT/conformance/build.sh" >"$WORK/build.out" 2>&1 || { cat "$WORK/build.out" >&2; fail "conformance/build.sh"; }
for b in "${CSI_BINARIES[@]}"; do [[ -x "$CONF_BIN/$b" ]] || fail "conformance/build.sh did not build $b"; done
for c in "${SNAPSHOT_CRD_NAMES[@]}"; do
  f="$SNAPSHOT_CRDS/${c#*.}_${c%%.*}.yaml"
  [[ -f "$f" ]] || fail "conformance/build.sh did not link $f"
done
SECONDS=0
PASSED=0

# --- the README's commands ----------------------------------------------------------------------
readme_commands 'Testing a CSI driver against `up`'
readme_commands 'Snapshots on `up`' "$WORK/snapshots.sh"
readme_commands 'Pods on `up`' "$WORK/pods.sh"

# The scratch directory plays the repository's: the README's paths are relative to it.
mkdir -p "$WORK/repo/target"
ln -s "$BIN_DIR" "$WORK/repo/target/release"
for d in examples conformance; do ln -s "$ROOT/$d" "$WORK/repo/$d"; done
cd "$WORK/repo"
export KUBECACHEDIR="$WORK/kube-cache"
unset KUBECONFIG CSI_ENDPOINT


declare -A PID_OF=()  # the README's background commands: program -> pid (readme_run fills it)
DRIVER=io.kubernetes.storage.mock
NODE=csi-node                           # examples/csi/: the Node and CSINode a kubelet registers
TOPOLOGY="$DRIVER/node=some-mock-node"  # the mock driver's one topology segment
claim_events() { q get events -n csi -o jsonpath='{range .items[*]}{.involvedObject.name} {.reason}{"\n"}{end}'; }
has_event() { local ev; ev="$(claim_events)"; grep -qx "$1 $2" <<<"$ev"; }
claim_bound() { claim_phase_is "$1" Bound csi; }
claim_gone() { [[ -z "$(q get pvc -n csi "$1" --ignore-not-found -o name)" ]]; }
pv_capacity_is() { [[ "$(q get pv "$1" -o jsonpath='{.spec.capacity.storage}')" == "$2" ]]; }
claim_capacity_is() { [[ "$(q get pvc -n csi "$1" -o jsonpath='{.status.capacity.storage}')" == "$2" ]]; }
va_attached() { [[ "$(q get volumeattachment "$1" -o jsonpath='{.status.attached}')" == true ]]; }
va_gone() { [[ -z "$(q get volumeattachment "$1" --ignore-not-found -o name)" ]]; }
AFFINITY='{.spec.nodeAffinity.required.nodeSelectorTerms[*].matchExpressions[*].key}={.spec.nodeAffinity.required.nodeSelectorTerms[*].matchExpressions[*].values[*]}'

# csi_checks: the checks that follow the README's commands, on the server KUBECONFIG names.
csi_checks() {
  # --- provisioning, Immediate (the README's claim) ---------------------------------------------
  k "csi/data Bound, handed off to the driver" get pvc -n csi data \
    -o jsonpath='{.status.phase} {.spec.volumeName} {.metadata.annotations.volume\.kubernetes\.io/storage-provisioner} {.status.capacity.storage}'
  expect "^Bound pvc-[0-9a-f-]{36} $DRIVER 1Gi\$"
  DATA_PV="$(cut -d' ' -f2 "$WORK/out")"
  k "data's volume: the driver's, with its topology" get pv "$DATA_PV" \
    -o jsonpath="{.spec.csi.driver} {.metadata.annotations.pv\.kubernetes\.io/provisioned-by} $AFFINITY {.spec.persistentVolumeReclaimPolicy} {.spec.claimRef.name} {.status.phase}"
  expect "^$DRIVER $DRIVER $TOPOLOGY Delete data Bound\$"
  k "data's volume carries the provisioner's finalizer" get pv "$DATA_PV" -o jsonpath='{.metadata.finalizers}'
  expect 'external-provisioner\.volume\.kubernetes\.io/finalizer'
  DATA_HANDLE="$(q get pv "$DATA_PV" -o jsonpath='{.spec.csi.volumeHandle}')"
  [[ -n "$DATA_HANDLE" ]] || fail "$DATA_PV has no volumeHandle"
  provisioning_events() { has_event data ExternalProvisioning && has_event data ProvisioningSucceeded; }
  wait_until "events ExternalProvisioning and ProvisioningSucceeded on csi/data" 30 provisioning_events
  pass "events: ExternalProvisioning by the controller, ProvisioningSucceeded by csi-provisioner"

  # --- WaitForFirstConsumer, topology -----------------------------------------------------------
  k "a WaitForFirstConsumer class and a claim" create -f - <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: csi-mock-wait}
provisioner: $DRIVER
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: later, namespace: csi}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: csi-mock-wait
  resources: {requests: {storage: 1Gi}}
EOF
  wait_until "WaitForFirstConsumer event on csi/later" 30 has_event later WaitForFirstConsumer
  sleep 1
  k "csi/later waits, not handed off" get pvc -n csi later \
    -o jsonpath='{.status.phase} {.spec.volumeName}|{.metadata.annotations.volume\.kubernetes\.io/storage-provisioner}'
  expect '^Pending \|$'
  k "the scheduler's part: csi/later's selected node" annotate pvc -n csi later "volume.kubernetes.io/selected-node=$NODE"
  wait_until "csi/later Bound" 60 claim_bound later
  pass "csi/later Bound once its node was selected (${WAITED_MS} ms)"
  LATER_PV="$(q get pvc -n csi later -o jsonpath='{.spec.volumeName}')"
  k "later's volume: the selected node's topology" get pv "$LATER_PV" \
    -o jsonpath="{.spec.csi.driver} $AFFINITY {.spec.claimRef.name}"
  expect "^$DRIVER $TOPOLOGY later\$"

  # --- attach and detach ------------------------------------------------------------------------
  # Named as the attach-detach controller names it: csi-<sha256(volume handle, driver, node)>.
  VA="csi-$(printf '%s%s%s' "$DATA_HANDLE" "$DRIVER" "$NODE" | sha256sum | cut -d' ' -f1)"
  k "a VolumeAttachment for data's volume on $NODE" create -f - <<EOF
apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata: {name: $VA}
spec:
  attacher: $DRIVER
  nodeName: $NODE
  source: {persistentVolumeName: $DATA_PV}
EOF
  wait_until "VolumeAttachment attached" 30 va_attached "$VA"
  pass "csi-attacher attached the volume (${WAITED_MS} ms)"
  k "the attacher's finalizer on the VolumeAttachment" get volumeattachment "$VA" -o jsonpath='{.metadata.finalizers}'
  expect "external-attacher/io-kubernetes-storage-mock"
  k "the attacher's finalizer on the volume" get pv "$DATA_PV" -o jsonpath='{.metadata.finalizers}'
  expect "external-attacher/io-kubernetes-storage-mock"
  k "delete the VolumeAttachment" delete volumeattachment "$VA" --wait=false
  wait_until "VolumeAttachment detached and gone" 30 va_gone "$VA"
  pass "csi-attacher detached the volume (${WAITED_MS} ms)"
  # The attacher lifts its finalizer from the volume when the volume is deleted (below).

  # --- expansion --------------------------------------------------------------------------------
  k "raise csi/data's request to 2Gi" patch pvc -n csi data --type=merge -p '{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}'
  wait_until "data's volume resized to 2Gi" 60 pv_capacity_is "$DATA_PV" 2Gi
  pass "csi-resizer resized the volume (${WAITED_MS} ms)"
  wait_until "csi/data's status.capacity 2Gi" 30 claim_capacity_is data 2Gi
  pass "the claim's capacity followed"
  k "csi/data's status after the resize" get pvc -n csi data \
    -o jsonpath='capacity={.status.capacity.storage} allocated={.status.allocatedResources.storage} statuses={.status.allocatedResourceStatuses} conditions={.status.conditions[?(@.type!="Unused")]} phase={.status.phase}'
  # The resizer's conditions, compared without their times. pvc-protection's Unused is left out:
  # on the real cluster it depends on whether KCM has started that controller yet, and
  # scripts/e2e-protection.sh compares it.
  sed -E 's/"(lastTransitionTime|lastProbeTime)":"[^"]*"/"\1":"<time>"/g; s/"lastProbeTime":null,?//g' "$WORK/out" >"$WORK/$SERVER-resized-status"
  echo "   $(cat "$WORK/out")"

  # --- deletion ---------------------------------------------------------------------------------
  k "delete both claims" delete pvc -n csi data later --wait=false
  volumes_gone() { pv_gone "$DATA_PV" && pv_gone "$LATER_PV"; }
  wait_until "$DATA_PV and $LATER_PV deleted by csi-provisioner" 60 volumes_gone
  pass "Delete policy: both volumes deleted by csi-provisioner (${WAITED_MS} ms)"
  claims_gone() { claim_gone data && claim_gone later; }
  wait_until "both claims gone" 30 claims_gone
}

pod_node_is() { [[ "$(q get pod -n csi "$1" -o jsonpath='{.spec.nodeName}')" == "$2" ]]; }
node_lists_attached() { [[ -n "$(q get node "$NODE" -o jsonpath='{.status.volumesAttached}')" ]]; }
node_lists_none() { [[ -z "$(q get node "$NODE" -o jsonpath='{.status.volumesAttached}')" ]]; }

# pod_checks: the README's "Pods on `up`" commands, checked step by step, on the server KUBECONFIG
# names: kube-scheduler and KCM's attach-detach controller on the real cluster, `up --scheduler
# --controllers '*,attachdetach'` on up. What both did is kept in $WORK/$SERVER-pod and compared.
pod_checks() {
  local app_pv handle va
  pods() { readme_run '' "$1" "$WORK/pods.sh"; }
  # What csi-node's kubelet would report (the README's first command): Ready, with room for pods.
  pods '^kubectl patch node '
  # The real cluster's other node (scripts/real-cluster.sh --scheduler) has no driver: kept out
  # of the choice, so that both servers have the one node a kubelet of the driver registered.
  if [[ "$SERVER" == real ]]; then k "node-1 cordoned" cordon node-1; fi
  pods '^kubectl apply -f examples/csi/pod/'
  wait_until "pod csi/app bound to $NODE" 60 pod_node_is app "$NODE"
  pass "the pod was placed on $NODE once its claim was provisioned there (${WAITED_MS} ms)"
  pods '^kubectl wait pod '
  pods '^kubectl get pvc -n csi app-data'
  expect "^$NODE\$"
  app_pv="$(q get pvc -n csi app-data -o jsonpath='{.spec.volumeName}')"
  handle="$(q get pv "$app_pv" -o jsonpath='{.spec.csi.volumeHandle}')"
  va="csi-$(printf '%s%s%s' "$handle" "$DRIVER" "$NODE" | sha256sum | cut -d' ' -f1)"
  wait_until "VolumeAttachment $va attached" 30 va_attached "$va"
  pass "the pod's volume attached by csi-attacher through a VolumeAttachment named as KCM names it (${WAITED_MS} ms)"
  wait_until "the Node lists the volume as attached" 30 node_lists_attached
  pods '^kubectl wait node '
  pods '^kubectl get volumeattachments'
  expect "^$va +$DRIVER +$app_pv +$NODE +true "
  pass "the Node lists the attached volume"
  {
    echo "claim: $(q get pvc -n csi app-data -o jsonpath='{.status.phase} {.metadata.annotations.volume\.kubernetes\.io/selected-node} {.metadata.annotations.volume\.kubernetes\.io/storage-provisioner}')"
    echo "pod: $(q get pod -n csi app -o jsonpath='{.spec.nodeName} {.status.phase} {.status.conditions[?(@.type=="PodScheduled")].status}')"
    echo "volumeattachment: $(q get volumeattachment "$va" -o jsonpath='{.spec} {.status.attached} {.metadata.finalizers}' | sed "s/$app_pv/PV/g")"
    echo "node volumesAttached: $(q get node "$NODE" -o jsonpath='{.status.volumesAttached}' | sed "s/$handle/HANDLE/g")"
    echo "pod events:"
    q get events -n csi --field-selector involvedObject.kind=Pod,involvedObject.name=app \
      -o jsonpath='{range .items[*]}{.type} {.reason} {.reportingComponent} {.message}{"\n"}{end}' | sed "s/$app_pv/PV/g" | sort
  } >"$WORK/$SERVER-pod"
  sed 's/^/     | /' "$WORK/$SERVER-pod"
  pods '^kubectl delete pod '
  wait_until "VolumeAttachment $va deleted and detached" 30 va_gone "$va"
  pass "the pod deleted: its volume detached and the VolumeAttachment gone (${WAITED_MS} ms)"
  wait_until "the Node lists no attached volume" 30 node_lists_none
  pods '^kubectl wait volumeattachment '
  pods '^kubectl delete pvc '
  wait_until "$app_pv deleted by csi-provisioner" 60 pv_gone "$app_pv"
  pass "the claim deleted, its volume too"
  if [[ "$SERVER" == real ]]; then k "node-1 uncordoned" uncordon node-1; fi
}

# mask_table: kubectl's table with uids masked, ages and times as AGE, columns single-spaced.
mask_table() {
  sed -E 's/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/UID/g' \
    | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^([0-9]+[smhd])+$/) $i = "AGE"; $1 = $1; print}'
}
crds_established() {
  [[ "$(kubectl get crd "${SNAPSHOT_CRD_NAMES[@]}" -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Established")].status} {end}' 2>/dev/null)" == "True True True " ]]
}
snapshot_ready() { [[ "$(q get volumesnapshot -n csi "$1" -o jsonpath='{.status.readyToUse}')" == true ]]; }
snapshot_gone() { [[ -z "$(q get volumesnapshot -n csi "$1" --ignore-not-found -o name)" ]]; }
content_gone() { [[ -z "$(q get volumesnapshotcontent "$1" --ignore-not-found -o name)" ]]; }
finalizers_are() { [[ "$(q get "$1" "$2" ${3:+-n "$3"} -o jsonpath='{.metadata.finalizers}')" == "$4" ]]; }

# snapshot_checks: the README's "Snapshots on `up`" commands, checked step by step, on the server KUBECONFIG names
# (the README's driver and sidecars running). Starts snapshot-controller and csi-snapshotter.
snapshot_checks() {
  local t0 snap_uid content handle restored_pv; t0=$(now_ms)
  # --- the CRDs, snapshot-controller, csi-snapshotter -------------------------------------------
  # The README's snapshot commands, a few at a time, the checks between them.
  snap() { readme_run '' "$1" "$WORK/snapshots.sh"; }
  snap '^kubectl apply -f conformance/bin/crd/snapshot/'
  pass "the VolumeSnapshot CRDs created"
  wait_until "the snapshot CRDs to be Established on $SERVER (condition Established True on all three)" 30 crds_established
  snap '^kubectl wait crd '
  pass "the snapshot CRDs are Established (${WAITED_MS} ms)"
  # Started once the CRDs serve: snapshot-controller checks them at start (and logs an error
  # for each try before they do).
  snap '^(snapshot-controller|csi-snapshotter) '

  # --- a snapshot of the README's claim ---------------------------------------------------------
  k "the README's objects again (csi/data was deleted above)" apply -f examples/csi/
  wait_until "csi/data Bound" 30 claim_bound data
  DATA_PV="$(q get pvc -n csi data -o jsonpath='{.spec.volumeName}')"
  DATA_HANDLE="$(q get pv "$DATA_PV" -o jsonpath='{.spec.csi.volumeHandle}')"
  snap '^kubectl apply -f examples/csi/snapshot/snapshot(class)?\.yaml'
  wait_until "csi/data-snapshot readyToUse" 60 snapshot_ready data-snapshot
  pass "the snapshot is ready to use (${WAITED_MS} ms)"
  snap '^kubectl (wait|get) volumesnapshot '
  expect "^data-snapshot +true +data "
  snap_uid="$(q get volumesnapshot -n csi data-snapshot -o jsonpath='{.metadata.uid}')"
  k "the snapshot: bound to its content, of csi/data" get volumesnapshot -n csi data-snapshot \
    -o jsonpath='{.status.readyToUse} {.status.boundVolumeSnapshotContentName} {.spec.source.persistentVolumeClaimName} {.status.restoreSize} {.status.creationTime}'
  # No restoreSize: the mock driver's snapshots have no size.
  expect "^true snapcontent-$snap_uid data  [0-9]{4}-[0-9]{2}-[0-9]{2}T"
  content="snapcontent-$snap_uid"
  k "the content: the driver's snapshot of data's volume, bound to the snapshot" get volumesnapshotcontent "$content" \
    -o jsonpath='{.spec.driver} {.spec.deletionPolicy} {.spec.volumeSnapshotClassName} {.spec.source.volumeHandle} {.spec.volumeSnapshotRef.namespace}/{.spec.volumeSnapshotRef.name} {.spec.volumeSnapshotRef.uid} {.status.readyToUse} {.status.snapshotHandle}'
  expect "^$DRIVER Delete csi-mock-snapshot $DATA_HANDLE csi/data-snapshot $snap_uid true [^ ]+\$"
  handle="$(awk '{print $NF}' "$WORK/out")"
  # What kubectl shows of them (the CRDs' printer columns), compared between the servers below.
  {
    for r in volumesnapshotclasses volumesnapshots volumesnapshotcontents; do
      echo "kubectl get $r:"
      q get "$r" -n csi | mask_table
    done
    echo "snapshot finalizers: $(q get volumesnapshot -n csi data-snapshot -o jsonpath='{.metadata.finalizers}')"
    echo "content finalizers: $(q get volumesnapshotcontent "$content" -o jsonpath='{.metadata.finalizers}')"
  } >"$WORK/$SERVER-snapshot-tables"
  sed 's/^/     | /' "$WORK/$SERVER-snapshot-tables"
  grep -qxE 'NAME READYTOUSE SOURCEPVC SOURCESNAPSHOTCONTENT RESTORESIZE SNAPSHOTCLASS SNAPSHOTCONTENT CREATIONTIME AGE' "$WORK/$SERVER-snapshot-tables" \
    || fail "kubectl get volumesnapshots: not the CRD's columns"
  pass "kubectl get volumesnapshots shows the CRD's columns"
  # Once ready, the snapshot no longer protects its source claim.
  wait_until "snapshot-controller's finalizer off csi/data" 30 finalizers_are pvc data csi '["kubernetes.io/pvc-protection"]'

  # --- a claim restored from it -----------------------------------------------------------------
  snap '^kubectl apply -f examples/csi/snapshot/restore\.yaml'
  wait_until "csi/restored Bound" 60 claim_bound restored
  snap '^kubectl wait pvc -n csi restored '
  pass "csi/restored provisioned from the snapshot and Bound (${WAITED_MS} ms)"
  k "the restored claim: its data source, handed off to the driver" get pvc -n csi restored \
    -o jsonpath='{.spec.dataSource} {.spec.dataSourceRef} {.metadata.annotations.volume\.kubernetes\.io/storage-provisioner} {.status.capacity.storage}'
  expect "^\{\"apiGroup\":\"snapshot\.storage\.k8s\.io\",\"kind\":\"VolumeSnapshot\",\"name\":\"data-snapshot\"\} \{\"apiGroup\":\"snapshot\.storage\.k8s\.io\",\"kind\":\"VolumeSnapshot\",\"name\":\"data-snapshot\"\} $DRIVER 1Gi\$"
  cp "$WORK/out" "$WORK/$SERVER-restored-claim"
  restored_pv="$(q get pvc -n csi restored -o jsonpath='{.spec.volumeName}')"
  k "the restored volume: the driver's, for csi/restored" get pv "$restored_pv" \
    -o jsonpath="{.spec.csi.driver} {.metadata.annotations.pv\.kubernetes\.io/provisioned-by} $AFFINITY {.spec.claimRef.name} {.status.phase}"
  expect "^$DRIVER $DRIVER $TOPOLOGY restored Bound\$"
  [[ "$(q get pv "$restored_pv" -o jsonpath='{.spec.csi.volumeHandle}')" != "$DATA_HANDLE" ]] || fail "the restored volume has data's volume handle"
  restored_events() { has_event restored ExternalProvisioning && has_event restored ProvisioningSucceeded; }
  wait_until "events ExternalProvisioning and ProvisioningSucceeded on csi/restored" 30 restored_events
  # csi-provisioner guards the snapshot while it provisions from it, and lets go once done.
  wait_until "csi-provisioner's finalizer off the snapshot" 30 finalizers_are volumesnapshot data-snapshot csi \
    '["snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection","snapshot.storage.kubernetes.io/volumesnapshot-bound-protection"]'
  pass "csi-provisioner released the snapshot it restored from"

  # --- deletion ---------------------------------------------------------------------------------
  snap '^kubectl delete pvc -n csi restored'
  wait_until "$restored_pv deleted by csi-provisioner" 60 pv_gone "$restored_pv"
  pass "Delete policy: the restored volume deleted by csi-provisioner (${WAITED_MS} ms)"
  wait_until "csi/restored gone" 30 claim_gone restored
  snap '^kubectl delete volumesnapshot -n csi data-snapshot'
  wait_until "$content deleted (csi-snapshotter deletes the driver's snapshot $handle)" 60 content_gone "$content"
  wait_until "csi/data-snapshot gone" 30 snapshot_gone data-snapshot
  pass "Delete policy: the content and the driver's snapshot deleted by csi-snapshotter (${WAITED_MS} ms)"
  # What is left: the README's claim and its volume, the class; compared between the servers.
  {
    echo "volumesnapshots: $(q get volumesnapshots -A -o name | tr '\n' ' ')"
    echo "volumesnapshotcontents: $(q get volumesnapshotcontents -o name | tr '\n' ' ')"
    echo "volumesnapshotclasses: $(q get volumesnapshotclasses -o name | tr '\n' ' ')"
    echo "claims: $(q get pvc -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}:{.status.phase}:{.metadata.finalizers} {end}')"
    echo "volumes: $(q get pv -o jsonpath='{range .items[*]}{.spec.claimRef.namespace}/{.spec.claimRef.name}:{.status.phase}:{.metadata.finalizers} {end}')"
  } >"$WORK/$SERVER-snapshot-left"
  sed 's/^/     | /' "$WORK/$SERVER-snapshot-left"
  grep -qx 'volumesnapshots: ' "$WORK/$SERVER-snapshot-left" && grep -qx 'volumesnapshotcontents: ' "$WORK/$SERVER-snapshot-left" \
    || fail "snapshots or contents left after the deletion"
  k "delete the VolumeSnapshotClass" delete volumesnapshotclass csi-mock-snapshot
  k "delete csi/data" delete pvc -n csi data --wait=false
  wait_until "$DATA_PV deleted by csi-provisioner" 60 pv_gone "$DATA_PV"
  wait_until "csi/data gone" 30 claim_gone data
  echo "   snapshot checks: $(( $(now_ms) - t0 )) ms"
}

# secret_checks: a provisioner secret named by the claim's class, on the server KUBECONFIG names.
secret_checks() {
  local t0 pv; t0=$(now_ms)
  k "a class naming a provisioner secret" create -f - <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: csi-mock-secret}
provisioner: $DRIVER
reclaimPolicy: Delete
parameters:
  csi.storage.k8s.io/provisioner-secret-name: mock-provisioner
  csi.storage.k8s.io/provisioner-secret-namespace: csi
EOF
  csi_claim secured csi-mock-secret 1Gi
  wait_until "ProvisioningFailed event on csi/secured" 60 has_event secured ProvisioningFailed
  q get events -n csi -o jsonpath='{range .items[*]}{.involvedObject.name} {.reason} {.type} {.message}{"\n"}{end}' \
    | sed -n 's/^secured ProvisioningFailed //p' | sort -u >"$WORK/$SERVER-secret-event"
  echo "   $(cat "$WORK/$SERVER-secret-event")"
  grep -q 'secret mock-provisioner in namespace csi' "$WORK/$SERVER-secret-event" \
    || fail "csi/secured's ProvisioningFailed event does not name the secret csi/mock-provisioner"
  k "csi/secured Pending, no volume" get pvc -n csi secured -o jsonpath='{.status.phase} {.spec.volumeName}|'
  expect '^Pending \|$'
  pass "the missing secret stops provisioning, named in the event"
  k "create the secret" create secret generic mock-provisioner -n csi --from-literal=token=mock
  wait_until "csi/secured Bound" 60 claim_bound secured
  pass "csi/secured Bound once the secret exists (${WAITED_MS} ms)"
  pv="$(q get pvc -n csi secured -o jsonpath='{.spec.volumeName}')"
  k "the volume names the secret for its deletion" get pv "$pv" \
    -o jsonpath='{.metadata.annotations.volume\.kubernetes\.io/provisioner-deletion-secret-namespace}/{.metadata.annotations.volume\.kubernetes\.io/provisioner-deletion-secret-name}'
  expect '^csi/mock-provisioner$'
  k "delete csi/secured" delete pvc -n csi secured --wait=false
  wait_until "$pv deleted by csi-provisioner (with the secret)" 60 pv_gone "$pv"
  wait_until "csi/secured gone" 30 claim_gone secured
  k "delete the secret" delete secret -n csi mock-provisioner
  k "delete the class" delete storageclass csi-mock-secret
  echo "   secret checks: $(( $(now_ms) - t0 )) ms"
}

# explain_json CLAIM: `pv-controller explain` of csi/CLAIM on the server KUBECONFIG names: JSON in
# $WORK/explain.json, text in $WORK/explain.txt; both must exit 0 with nothing on stderr.
explain_json() {
  "$BIN_DIR/pv-controller" explain pvc "csi/$1" -o json >"$WORK/explain.json" 2>"$WORK/explain.err" \
    || { cat "$WORK/explain.err" >&2; fail "explain pvc csi/$1 -o json"; }
  "$BIN_DIR/pv-controller" explain pvc "csi/$1" >"$WORK/explain.txt" 2>>"$WORK/explain.err" \
    || { cat "$WORK/explain.err" >&2; fail "explain pvc csi/$1"; }
  [[ ! -s "$WORK/explain.err" ]] || { cat "$WORK/explain.err" >&2; fail "explain pvc csi/$1 printed to stderr"; }
}
# field EXPR: a field of $WORK/explain.json (a Python expression over `d`); None prints as null.
field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); v=$1; print('null' if v is None else v)" "$WORK/explain.json"; }
provisioner_verdict_is() { explain_json "$1"; [[ "$(field "d.get('provisioner', {}).get('verdict')")" == "$2" ]]; }
lease_held() { [[ -n "$(q get lease -A --field-selector metadata.name=io-kubernetes-storage-mock -o jsonpath='{.items[*].spec.holderIdentity}')" ]]; }
show_explain() { sed 's/^/     | /' "$WORK/explain.txt"; }
explain_failed() { cat "$WORK/explain.json" >&2; fail "$1"; }
# csi_claim NAME CLASS SIZE: creates claim csi/NAME (ReadWriteOnce).
csi_claim() {
  k "claim csi/$1 of $3 in class $2" create -f - <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $1, namespace: csi}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: $2
  resources: {requests: {storage: $3}}
YAML
}

# explain_checks: `explain` past the binder against the real csi-provisioner, on the server
# KUBECONFIG names, with the README's provisioner (no leader election) running.
explain_checks() {
  # --- a provisioned claim ----------------------------------------------------------------------
  csi_claim explained csi-mock 1Gi
  wait_until "csi/explained Bound" 30 claim_bound explained
  explain_json explained
  [[ "$(field "d['message']")" == *"provisioned for it by $DRIVER"* ]] || explain_failed "explain of a provisioned claim"
  pass "explain: the bound claim's volume was provisioned for it by $DRIVER"

  # --- not installed ----------------------------------------------------------------------------
  k "a class whose provisioner is not installed" create -f - <<'YAML'
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: explain-absent}
provisioner: example.com/absent
YAML
  csi_claim orphan explain-absent 1Gi
  wait_until "ExternalProvisioning event on csi/orphan" 30 has_event orphan ExternalProvisioning
  explain_json orphan
  show_explain
  [[ "$(field "d['next']") $(field "d['provisioner']['verdict']") $(field "d['provisioner']['csiDriver']") $(field "d['provisioner']['leaseHolder']")" \
     == "wait-external-provisioner notInstalled False null" ]] || explain_failed "explain of a claim whose provisioner is not installed"
  grep -q 'is the driver installed?' "$WORK/explain.txt" || fail "explain's text does not ask whether the driver is installed"
  pass "explain: no CSIDriver, no Lease, no answer: is the driver installed?"

  # --- failing ----------------------------------------------------------------------------------
  # The README's provisioner runs without leader election; one with it takes its place. Outside a
  # pod its Lease is in namespace `default`; short lease times let the stop below show soon.
  kill "${PID_OF[csi-provisioner]}"
  wait "${PID_OF[csi-provisioner]}" 2>/dev/null || true
  "$CONF_BIN/csi-provisioner" --kubeconfig "$KUBECONFIG" --csi-address "$CSI_ENDPOINT" --leader-election \
    --leader-election-lease-duration 4s --leader-election-renew-deadline 3s --leader-election-retry-period 1s \
    </dev/null >"$LOGS/csi-provisioner-leader.log" 2>&1 &
  local leader=$!
  PIDS+=("$leader")
  wait_until "csi-provisioner holds its Lease io-kubernetes-storage-mock" 60 lease_held
  # The mock driver refuses volumes of 1Ti and more (OutOfRange).
  csi_claim huge csi-mock 2Ti
  wait_until "ProvisioningFailed event on csi/huge" 60 has_event huge ProvisioningFailed
  explain_json huge
  show_explain
  [[ "$(field "d['provisioner']['verdict']") $(field "d['provisioner']['csiDriver']") $(field "d['provisioner']['lastEvent']['reason']") $(field "d['provisioner']['lease']")" \
     == "failing True ProvisioningFailed default/io-kubernetes-storage-mock" ]] || explain_failed "explain of a claim the provisioner fails"
  [[ "$(field "d['provisioner']['leaseHolder']")" != null ]] || explain_failed "explain names no Lease holder"
  [[ "$(field "d['message']")" == *"exceeds maximum allowed"* ]] || explain_failed "explain does not give the driver's error"
  pass "explain: provisioner failing, with the driver's error"

  # --- stopped ----------------------------------------------------------------------------------
  kill -9 "$leader"
  wait "$leader" 2>/dev/null || true
  wait_until "explain says csi/huge's provisioner is down" 60 provisioner_verdict_is huge down
  show_explain
  grep -q 'the provisioner is down' "$WORK/explain.txt" || fail "explain's text does not say the provisioner is down"
  pass "explain: provisioner stopped, its Lease expired: down (${WAITED_MS} ms after the kill)"

  k "delete the claims of the explain checks" delete pvc -n csi orphan huge explained --wait=false
  k "delete class explain-absent" delete storageclass explain-absent
}

# error_lines LOGDIR: the sidecars' klog error lines (E...), with times, pids, line numbers,
# uids, names and numbers masked, one per line, prefixed by the sidecar.
error_lines() {
  local f
  for f in "$1"/csi-provisioner.log "$1"/csi-attacher.log "$1"/csi-resizer.log "$1"/csi-snapshotter.log "$1"/snapshot-controller.log; do
    [[ -f "$f" ]] || continue
    { grep -E '^E[0-9]{4} ' "$f" || true; } | sed -E \
      -e 's/^E[0-9]{4} [0-9:.]+ +[0-9]+ ([^:]+):[0-9]+\] /\1] /' \
      -e 's/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/UID/g' \
      -e 's/csi-[0-9a-f]{64}/csi-VA/g' -e 's/[0-9]+/N/g' \
      -e "s|^|$(basename "$f" .log): |"
  done | sort -u
}
# Error lines that depend only on timing: a sidecar acting on its cache while the object changes
# or goes. `up` answers faster, so they show there more often; kube-apiserver gives the same
# answers in the same interleaving. Masked line (regex) -> why.
declare -A RACES=(
  ['^csi-attacher: csi_handler\.go\] "Failed to remove finalizer from PersistentVolume" err="the JSON patch could not be applied']="the attacher removes its finalizer by index behind a JSON-patch test of that index; when another finalizer went first its cached index is stale, the test fails with 422 (kube-apiserver's code too; the message differs, conformance/DIFFERENCES.md) and it retries"
  ["^csi-provisioner: clone_controller\\.go\\] \"Unhandled Error\" err=\"item '[^']+' in work queue no longer exists\""]="the claim was deleted before the clone-protection worker took it from its queue"
  ['^csi-provisioner: controller\.go\] "Unhandled Error" err="claim \\"UID\\" in work queue no longer exists"']="the claim was deleted before the provisioner's claim worker took it from its queue"
  ['^csi-provisioner: controller\.go\] "Unhandled Error" err="error syncing volume \\"pvc-UID\\": persistentvolumes \\"pvc-UID\\" not found"']="the volume was deleted while still queued in the provisioner"
  ['^snapshot-controller: snapshot_controller_base\.go\] could not sync snapshot "csi/data-snapshot": failed to delete VolumeSnapshotContent snapcontent-UID from API server: "volumesnapshotcontents\.snapshot\.storage\.kNs\.io \\"snapcontent-UID\\" not found"']="snapshot-controller deletes a deleted snapshot's content on every sync while its cache still holds the content; csi-snapshotter lifts the content's finalizer at once, and a sync that runs before the content's deletion reached the controller's watch deletes it again and gets a 404"
  ['^csi-attacher: csi_handler\.go\] "Failed to remove finalizer from PersistentVolume" err="persistentvolumes \\"pvc-UID\\" not found"']="the tail of the stale-index race above: the retry removed the attacher's finalizer, the volume (already deleted) went, and a second update of it still queued in the attacher found it gone"
)
warn_count() { cat "$1"/csi-*.log "$1"/snapshot-controller.log 2>/dev/null | grep -cE '^W[0-9]{4} ' || true; }

# === the real cluster, `pv-controller run` =======================================================
SERVER=real
LOGS="$WORK/real-logs"; mkdir -p "$LOGS"
echo "== real cluster (kube-apiserver, KCM without its PV binder, kube-scheduler), pv-controller run"
T0=$(now_ms)
"$ROOT/scripts/real-cluster.sh" up "$WORK/real" --kcm '*,-persistentvolume-binder-controller' --scheduler \
  >"$WORK/real-up.out" 2>&1 || { cat "$WORK/real-up.out" >&2; fail "real-cluster.sh up"; }
echo "   real cluster up in $(( $(now_ms) - T0 )) ms"
export KUBECONFIG="$WORK/real/kubeconfig" CSI_ENDPOINT="$WORK/real-csi.sock"
"$BIN_DIR/pv-controller" run --kubeconfig "$KUBECONFIG" --metrics-addr 127.0.0.1:0 </dev/null >"$LOGS/pv-controller.log" 2>&1 &
PIDS+=("$!")
# The README's commands but `up`'s own: the build (done above), `up`, its kubeconfig and socket
# (this cluster's are exported above), and the final kill (stop_all below).
readme_run '^(conformance/build\.sh|pv-controller up|until kubectl --kubeconfig csi-demo|export KUBECONFIG=|kill )'
expect "^pvc-[0-9a-f-]{36} .* Bound +csi/data +csi-mock "
pass "the README's commands on the real cluster"
csi_checks
pod_checks
snapshot_checks
secret_checks
explain_checks
error_lines "$LOGS" >"$WORK/real-errors"
echo "   sidecars: $(wc -l <"$WORK/real-errors") distinct error line(s), $(warn_count "$LOGS") warning line(s)"
sed 's/^/     /' "$WORK/real-errors"
python3 - "$WORK/real/logs/audit.log" <<'PY'
import json, sys, collections
codes = collections.Counter(json.loads(l).get("responseStatus", {}).get("code", 0) for l in open(sys.argv[1]))
print("   kube-apiserver's answers: " + ", ".join(f"{n}×{c}" for c, n in sorted(codes.items())))
PY
stop_all
"$ROOT/scripts/real-cluster.sh" down "$WORK/real" >/dev/null 2>&1 || fail "real-cluster.sh down"
unset KUBECONFIG CSI_ENDPOINT
echo "   real cluster done after ${SECONDS}s"

# === `pv-controller up` ==========================================================================
SERVER=up
LOGS="$WORK/up-logs"; mkdir -p "$LOGS"
echo "== pv-controller up (the API server and the controller in one process)"
# One debug line per request with its status code, for the check of 409s and 5xxs below.
export RUST_LOG="warn,kube_client=off,pv_kube=info,pv_core=info,pv_controller=info,pv_apiserver::dispatch=debug"
readme_run '^kill '
expect "^pvc-[0-9a-f-]{36} .* Bound +csi/data +csi-mock "
pass "the README's commands on up"
csi_checks
pod_checks
snapshot_checks
secret_checks
explain_checks
for what in resized-status:"the claim's status after the resize" snapshot-tables:"kubectl get of the snapshot objects" \
  restored-claim:"the restored claim's data source fields" snapshot-left:"the objects left after the snapshot checks" \
  secret-event:"the event of the missing provisioner secret" pod:"the pod's placement, attachment and events"; do
  if ! diff -u "$WORK/real-${what%%:*}" "$WORK/up-${what%%:*}" >"$WORK/diff"; then
    cat "$WORK/diff" >&2; fail "${what#*:}: not as on kube-apiserver (- real, + up)"
  fi
  pass "${what#*:}: as on kube-apiserver"
done

# Every answer `up` gave: none may be a 409 (a client's write lost to a race kube-apiserver would
# have retried) or a 5xx.
LOG="$LOGS/pv-controller.log"
sed -i 's/\x1b\[[0-9;]*m//g' "$LOG"
grep -oE 'pv_apiserver::dispatch: request method=[A-Z]+ path=[^ ]+ status=[0-9]+' "$LOG" >"$WORK/requests" || true
echo "   up's answers: $(sed -E 's/.* status=//' "$WORK/requests" | sort | uniq -c | awk '{printf "%s%s×%s", sep, $1, $2; sep=", "}')"
grep -q 'status=201$' "$WORK/requests" || fail "up's request log (RUST_LOG ...dispatch=debug) shows no create: is the log format still method= path= status=?"
if grep -E 'status=(409|5[0-9][0-9])$' "$WORK/requests" >"$WORK/bad"; then
  cat "$WORK/bad" >&2; fail "up answered $(wc -l <"$WORK/bad") request(s) with a 409 or a 5xx"
fi
pass "up answered no request with a 409 or a 5xx"
error_lines "$LOGS" >"$WORK/up-errors"
echo "   sidecars: $(wc -l <"$WORK/up-errors") distinct error line(s), $(warn_count "$LOGS") warning line(s)"
comm -23 "$WORK/up-errors" "$WORK/real-errors" >"$WORK/new-errors"
unexplained=0
while IFS= read -r line; do
  reason=""
  for re in "${!RACES[@]}"; do [[ "$line" =~ $re ]] && reason="${RACES[$re]}"; done
  if [[ -n "$reason" ]]; then
    echo "   note: not in the real cluster's run, a race kube-apiserver runs into too: $line"
    echo "         ($reason)"
  else
    echo "   error not in the real cluster's run: $line" >&2
    unexplained=$((unexplained + 1))
  fi
done <"$WORK/new-errors"
(( unexplained == 0 )) || fail "the sidecars logged $unexplained error(s) on up that the real cluster's run did not cause"
pass "no sidecar error beyond those the real cluster's run (or its races) causes"

# The README's last command stops the driver, the sidecars and up (SIGTERM: up stops gracefully).
readme_run '' '^kill '
UP_PID="${PIDS[0]}"
t0=$(now_ms)
for p in "${PIDS[@]}"; do
  while kill -0 "$p" 2>/dev/null; do
    (( $(now_ms) - t0 < 15000 )) || fail "pid $p still runs 15 s after the README's kill"
    sleep 0.1
  done
done
wait "$UP_PID" || fail "up exited with status $? on SIGTERM"
PIDS=()
pass "the README's kill stopped everything; up exited 0"

# --- the README's block pasted whole ----------------------------------------------------------
# As a newcomer pastes it (or saves it as a script): one shell, no waits but the block's own, in
# a directory of its own; `bash -e` stops at the first failing line.
mkdir -p "$WORK/pasted/target"
ln -s "$BIN_DIR" "$WORK/pasted/target/release"
for d in examples conformance; do ln -s "$ROOT/$d" "$WORK/pasted/$d"; done
if ! (cd "$WORK/pasted" && unset KUBECONFIG CSI_ENDPOINT RUST_LOG && timeout 180 bash -e "$WORK/readme.sh") \
  >"$WORK/pasted.log" 2>&1; then
  tail -30 "$WORK/pasted.log" >&2; fail "the README's CSI block, run as one script"
fi
grep -Eq "^pvc-[0-9a-f-]{36} .* Bound +csi/data +csi-mock " "$WORK/pasted.log" \
  || { cat "$WORK/pasted.log" >&2; fail "the README's CSI block, run as one script: no provisioned volume listed"; }
pass "the README's CSI block, run as one script, provisioned csi/data and stopped"

echo "e2e-csi: $PASSED checks passed (${SECONDS}s)"
