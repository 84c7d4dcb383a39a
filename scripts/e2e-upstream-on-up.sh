#!/usr/bin/env bash
# Upstream's PV controller on our API server: the real kube-controller-manager (built from
# conformance/; needs Go), running only its persistentvolume-binder-controller with the host-path
# provisioner and the pv- and pvc-protection controllers (which release the finalizers the API
# server's admission adds), against `pv-controller up --no-controller`. It must bind and provision the same
# scenario as scripts/e2e-up.sh: static binding, volumeName reservation, host-path provisioning,
# events, reclaim (Delete removes PV + directory, Retain gives Released), a volume created after
# its claim, and KCM's own leader-election Lease. This proves the API server serves client-go:
# discovery, lists and watches for informers, updates of objects and status, events, leases.
#
# Every request KCM's log reports as failed (klog error lines) is a defect of the API server: the
# script prints them all at the end and fails when there are any, unless
# UPSTREAM_ON_UP_ALLOW_ERRORS=1 (then they are only listed).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
GO="$(command -v go || echo /usr/local/go/bin/go)"
if [[ ! -x "$GO" ]]; then echo "e2e-upstream-on-up: skipped: Go not installed"; exit 0; fi
WORK="$(mktemp -d)"
DATA="$WORK/data"
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/pv-controller"
SERVER_PID="" KCM_PID=""
cleanup() {
  local p
  for p in $KCM_PID $SERVER_PID; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  [[ -n "${KEEP_WORK:-}" ]] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# klog error lines, less two that are not about the server: KCM always says it has no component
# config file, and upstream's binder races its own deletion of a provisioned volume (a sync of
# the cached volume after the delete operation lifted the kubernetes.io/pv-controller finalizer
# puts it back and gets 404, as against kube-apiserver).
# With the protection controllers the same stale write also meets a 409 (racing pv-protection)
# or the 422 that kube-apiserver gives too (a finalizer added to a volume being deleted). And
# upstream's delete operation lifts its finalizer from a volume that its own binder writes in the
# same moment: a 409 for the operation, retried after 500 ms as against kube-apiserver (the
# volume is gone by the end, which the checks below require). The other side of that race is
# pv-protection lifting its finalizer from the same volume in the same moment: its 409, requeued
# with backoff as against kube-apiserver.
kcm_errors() {
  grep -E '^E[0-9]{4} ' "$WORK/kcm.log" 2>/dev/null | grep -v 'The manifest file is empty, ignoring' \
    | grep -Ev "can't anneal migration annotations or finalizer: persistentvolumes \\\\\"pvc-[0-9a-f-]+\\\\\" not found" \
    | grep -Ev "can't anneal migration annotations or finalizer: Operation cannot be fulfilled on persistentvolumes .*the object has been modified" \
    | grep -Ev "can't anneal migration annotations or finalizer: PersistentVolume .* is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted" \
    | grep -Ev 'Operation for "delete-pvc-[0-9a-f-]+\[[0-9a-f-]+\]" failed\. .*Error: Operation cannot be fulfilled on persistentvolumes "pvc-[0-9a-f-]+": the object has been modified' \
    | grep -Ev 'pv_protection_controller.go:[0-9]+\] "Unhandled Error" err="PV pvc-[0-9a-f-]+ failed with : Operation cannot be fulfilled on persistentvolumes \\"pvc-[0-9a-f-]+\\": the object has been modified' || true
}
fail() {
  echo "FAIL: $*" >&2
  { echo "--- state at failure:"; kubectl get pv,pvc -A -o wide; kubectl get events -A
    echo "--- kube-controller-manager errors:"; kcm_errors | tail -30
    echo "--- up stderr:"; sed 's/\x1b\[[0-9;]*m//g' "$WORK/up.err" | tail -20; } >&2 2>&1 || true
  exit 1
}
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

command -v kubectl >/dev/null || fail "kubectl not on PATH"
(cd "$ROOT" && cargo build --quiet --release --workspace) || fail "cargo build --release"
KBIN="$("$ROOT/conformance/build.sh" | tail -1)" || fail "conformance/build.sh"
SECONDS=0

PASSED=0

# --- our API server, upstream's controller ------------------------------------------------------
"$BIN" up --no-controller --data-dir "$DATA" --listen 127.0.0.1:0 >"$WORK/up.out" 2>"$WORK/up.err" &
SERVER_PID=$!
t0=$(now_ms)
until grep -q '^server: ' "$WORK/up.out"; do
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/up.err" >&2; fail "up exited"; }
  (( $(now_ms) - t0 < 30000 )) || fail "up did not print server: within 30s"
  sleep 0.05
done
export KUBECONFIG="$DATA/kubeconfig" KUBECACHEDIR="$WORK/kube-cache"
echo "   up --no-controller: $(sed -n 's/^server: //p' "$WORK/up.out")"

# KCM's default content type: protobuf for reads, writes and watches, as in a real cluster.
"$KBIN/kube-controller-manager" \
  --kubeconfig="$DATA/kubeconfig" \
  --controllers=persistentvolume-binder-controller,persistentvolume-protection-controller,persistentvolumeclaim-protection-controller \
  --enable-hostpath-provisioner \
  --use-service-account-credentials=false --secure-port=0 \
  --leader-elect=true --leader-elect-lease-duration=5s --leader-elect-renew-deadline=3s --leader-elect-retry-period=1s \
  --pvclaimbinder-sync-period=15s --profiling=false ${KCM_FLAGS:-} \
  >"$WORK/kcm.log" 2>&1 &
KCM_PID=$!
kcm_leads() { [[ -n "$(q get lease -n kube-system kube-controller-manager --ignore-not-found -o jsonpath='{.spec.holderIdentity}')" ]]; }
wait_until "kube-controller-manager holds its Lease kube-system/kube-controller-manager" 60 \
  eval 'kill -0 "$KCM_PID" 2>/dev/null || fail "kube-controller-manager exited: $(tail -5 "$WORK/kcm.log")"; kcm_leads'
pass "kube-controller-manager $("$KBIN/kube-controller-manager" --version | cut -d' ' -f2) elected itself on our server"

# --- examples/up/ -------------------------------------------------------------------------------
apply_examples_up 60 "upstream's controller"
k "logs bound to the provisioned volume" get pvc -n demo logs -o jsonpath='{.spec.volumeName} {.metadata.annotations.volume\.kubernetes\.io/storage-provisioner}'
expect "^$LOGS_PV kubernetes.io/host-path\$"
k "provisioned volume" get pv "$LOGS_PV" -o jsonpath='{.spec.storageClassName} {.spec.persistentVolumeReclaimPolicy} {.spec.capacity.storage} {.spec.claimRef.name} {.status.phase} {.metadata.annotations.pv\.kubernetes\.io/provisioned-by} {.metadata.finalizers}'
# The provisioner's finalizer, and the pv-protection one that admission adds.
expect '^local Delete 1Gi logs Bound kubernetes.io/host-path \["kubernetes.io/pv-controller","kubernetes.io/pv-protection"\]$'
LOGS_DIR="$(q get pv "$LOGS_PV" -o jsonpath='{.spec.hostPath.path}')"
[[ "$LOGS_DIR" == /tmp/hostpath_pv/* && -d "$LOGS_DIR" ]] || fail "provisioned directory '$LOGS_DIR' missing (upstream provisions under /tmp/hostpath_pv/)"
pass "host-path directory $LOGS_DIR exists"
k "describe pvc logs" describe pvc -n demo logs
expect "Normal +ProvisioningSucceeded .*Successfully provisioned volume $LOGS_PV using kubernetes.io/host-path"
k "event source" get events -n demo --field-selector reason=ProvisioningSucceeded -o jsonpath='{.items[0].source.component}'
expect '^persistentvolume-controller$'

# --- reclaim ------------------------------------------------------------------------------------
k "delete demo/logs" delete pvc -n demo logs
wait_until "provisioned PV $LOGS_PV deleted" 60 pv_gone "$LOGS_PV"
pass "Delete policy: provisioned PV deleted"
[[ ! -e "$LOGS_DIR" ]] || fail "$LOGS_DIR still exists after its PV was deleted"
pass "Delete policy: directory removed"
k "delete demo/small" delete pvc -n demo small
wait_until "pv-5g Released" 60 pv_phase_is pv-5g Released
pass "Retain policy: pv-5g Released"

# --- a volume created after its claim -----------------------------------------------------------
late_claim_waits 30
# Upstream binds a waiting claim at its next resync (--pvclaimbinder-sync-period=15s).
late_volume_binds_it 60s

# --- KCM still leads, and what it could not do --------------------------------------------------
kill -0 "$KCM_PID" 2>/dev/null || fail "kube-controller-manager exited"
kcm_leads || fail "kube-controller-manager lost its Lease"
pass "kube-controller-manager still running and leading"
kill -TERM "$KCM_PID"; wait "$KCM_PID" 2>/dev/null || true; KCM_PID=""
ERRORS="$(kcm_errors)"
if [[ -n "$ERRORS" ]]; then
  echo "--- kube-controller-manager reported $(wc -l <<<"$ERRORS") error line(s) against our server:"
  sed 's/^/   /' <<<"$ERRORS" | cut -c1-400
  [[ "${UPSTREAM_ON_UP_ALLOW_ERRORS:-}" == 1 ]] || fail "kube-controller-manager failed requests against our server (UPSTREAM_ON_UP_ALLOW_ERRORS=1 to list them only)"
else
  pass "kube-controller-manager logged no errors"
fi

echo "e2e-upstream-on-up: ${SECONDS}s (builds excluded)"
echo "$PASSED passed, 0 failed"
