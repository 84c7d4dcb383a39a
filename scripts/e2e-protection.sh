#!/usr/bin/env bash
# The protection controllers of `up` against kube-controller-manager 1.37's.
#
# 1. README.md's "Choosing `up`'s controllers" as written: `up --controllers
#    '*,-persistentvolume-binder-controller'` with `pv-controller run` as its binder; a deleted
#    claim goes (its pvc-protection finalizer lifted by `up`), the binding is run's.
# 2. (needs Go) The same steps on the real cluster (scripts/real-cluster.sh with KCM) and on `up`:
#    claims bound and pending, scheduled and unscheduled pods, a generic ephemeral volume's claim,
#    claims deleted while in use, pods force-deleted. After each step the claims are compared,
#    condition by condition (type, status, reason, message, lastTransitionTime): a
#    lastTransitionTime is compared as the how-manieth distinct time of that claim (T0, T1, ...),
#    so a time that must stay and a time that must move are both checked; lastProbeTime null and
#    absent are the same. KCM runs without its ephemeral-volume-controller and this script
#    creates the ephemeral volume's claim (`<pod>-<volume>`, controlled by the pod) on both,
#    since `up` has no ephemeral-volume controller.
#
# Last line: e2e-protection: N checks passed
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN_DIR="${CARGO_TARGET_DIR:-$ROOT/target}/release"
BIN="$BIN_DIR/pv-controller"
WORK="$(mktemp -d)"
LOGS="$WORK/logs"
PIDS=()
UP_PID=""
cleanup() {
  stop_all
  real_and_ours_down
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

command -v kubectl >/dev/null 2>&1 || { echo "e2e-protection: skipped: kubectl not installed"; exit 0; }
(cd "$ROOT" && cargo build --quiet --release --bin pv-controller) || fail "cargo build --release"
mkdir -p "$LOGS"
export KUBECACHEDIR="$WORK/kube-cache"
PASSED=0

# --- 1. the README's commands ------------------------------------------------------------------
echo "== README: run as up's binder"
readme_commands "Choosing \`up\`'s controllers"
mkdir -p "$WORK/repo/target"
ln -s "$BIN_DIR" "$WORK/repo/target/release"
ln -s "$ROOT/examples" "$WORK/repo/examples"
cd "$WORK/repo"
unset KUBECONFIG
readme_run '^kill '
pass "the README's commands: up without its binder, run as the binder, a deleted claim gone"
k "small was bound by run" get pv pv-5g -o jsonpath='{.spec.claimRef.name} {.metadata.annotations.pv\.kubernetes\.io/bound-by-controller}'
expect '^small yes$'
grep -q 'no controller runs' "$LOGS/pv-controller.log" && fail "up said no controller runs"
stop_all
unset KUBECONFIG
cd "$ROOT"

# --- 2. against kube-controller-manager ------------------------------------------------------
GO="$(command -v go || echo /usr/local/go/bin/go)"
if [[ ! -x "$GO" ]]; then
  echo "skip: the comparison with kube-controller-manager needs Go (scripts/real-cluster.sh builds it)"
  echo "e2e-protection: $PASSED checks passed"
  exit 0
fi
echo "== the same steps on kube-controller-manager 1.37 and on up"
PATH="$(dirname "$GO"):$PATH"
real_and_ours_up --kcm '*,-ephemeral-volume-controller' --controllers '*'
SERVERS=(real ours)
NS=prot

# on SERVER KUBECTL_ARGS...: kubectl against one server (no stderr allowed).
on() { local s="$1"; shift; q --kubeconfig "$WORK/$s/kubeconfig" "$@"; }
# both KUBECTL_ARGS... [< stdin]: the same kubectl command on both servers.
both() {
  local s input; input="$(cat)"
  for s in "${SERVERS[@]}"; do on "$s" "$@" <<<"$input" >/dev/null; done
}
# both_force_delete KUBECTL_ARGS...: a deletion with grace period 0 on both servers (kubectl warns
# that it does not wait for the kubelet: there is none).
both_force_delete() {
  local s
  for s in "${SERVERS[@]}"; do
    kubectl --kubeconfig "$WORK/$s/kubeconfig" delete --grace-period=0 --force "$@" >/dev/null 2>"$WORK/err" \
      || { cat "$WORK/err" >&2; fail "kubectl delete $* on $s"; }
  done
}
# snap SERVER: the namespace's claims, one line each, times normalised (see the header).
snap() {
  on "$1" get pvc -n "$NS" -o json | python3 -c '
import json, sys
seen_file = sys.argv[1]
try:
    seen = json.load(open(seen_file))
except FileNotFoundError:
    seen = {}
for c in sorted(json.load(sys.stdin)["items"], key=lambda c: c["metadata"]["name"]):
    name = c["metadata"]["name"]
    times = seen.setdefault(name, [])
    conds = []
    for x in (c.get("status") or {}).get("conditions") or []:
        t = x.get("lastTransitionTime")
        if t is not None and t not in times:
            times.append(t)
        conds.append("%s=%s reason=%s message=%r time=%s probe=%s" % (x["type"], x["status"], x.get("reason"), x.get("message"),
                     "T%d" % times.index(t) if t else None, x.get("lastProbeTime")))
    print(name, (c.get("status") or {}).get("phase"), "deleting" if c["metadata"].get("deletionTimestamp") else "-",
          ",".join(c["metadata"].get("finalizers") or []) or "-", "; ".join(conds) or "no-conditions")
json.dump(seen, open(seen_file, "w"))
' "$WORK/$1.times"
}
# settled SERVER: two snapshots a second apart agree (the controllers have stopped writing).
settled() {
  local a b; a="$(snap "$1")"; sleep 1; b="$(snap "$1")"
  [[ "$a" == "$b" ]]
}
# same STEP WANT_REGEX: once the real cluster's claims match WANT_REGEX (a line of it, extended
# regex) and have settled, `up`'s must be the same.
same() {
  local step="$1" want="$2" t0
  wait_until "$step: real cluster shows /$want/" 30 real_shows "$want"
  wait_until "$step: real cluster settled" 30 settled real
  snap real >"$WORK/real.snap"
  t0=$(now_ms)
  until snap ours >"$WORK/ours.snap" && cmp -s "$WORK/real.snap" "$WORK/ours.snap"; do
    if (( $(now_ms) - t0 > 30000 )); then
      echo "--- kube-controller-manager:"; cat "$WORK/real.snap"; echo "--- up:"; cat "$WORK/ours.snap"
      fail "$step: up's claims differ from the real cluster's"
    fi
    sleep 0.5
  done
  sed 's/^/     /' "$WORK/ours.snap"
  pass "$step: the claims' conditions are kube-controller-manager's"
}
real_shows() { local s; s="$(snap real)"; grep -Eq -- "$1" <<<"$s"; }
# Transitions one second apart, so that a time that moves is a new second.
tick() { sleep 1.1; }

both create namespace "$NS" </dev/null
both create -f - <<EOF
$(for v in a b c d; do printf 'apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: prot-%s}\nspec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], storageClassName: "", nfs: {server: s, path: /%s}}\n---\n' "$v" "$v"; done)
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: used, namespace: $NS}
spec: {accessModes: [ReadWriteOnce], storageClassName: "", volumeName: prot-a, resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: never, namespace: $NS}
spec: {accessModes: [ReadWriteOnce], storageClassName: "", volumeName: prot-b, resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: doomed, namespace: $NS}
spec: {accessModes: [ReadWriteOnce], storageClassName: "", volumeName: prot-d, resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: later, namespace: $NS}
spec: {accessModes: [ReadWriteOnce], storageClassName: "", resources: {requests: {storage: 5Gi}}}
EOF
same "claims bound, none used; a Pending claim" '^used Bound - kubernetes.io/pvc-protection Unused=True reason=NoPodsUsingPVC'

tick
both create -f - <<EOF
apiVersion: v1
kind: Pod
metadata: {name: app, namespace: $NS}
spec:
  nodeName: node-1
  containers: [{name: c, image: busybox}]
  volumes: [{name: a, persistentVolumeClaim: {claimName: used}}, {name: d, persistentVolumeClaim: {claimName: doomed}}]
---
apiVersion: v1
kind: Pod
metadata: {name: waiting, namespace: $NS}
spec:
  containers: [{name: c, image: busybox}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: later}}]
---
apiVersion: v1
kind: Pod
metadata: {name: eph, namespace: $NS}
spec:
  nodeName: node-1
  containers: [{name: c, image: busybox}]
  volumes:
  - name: scratch
    ephemeral:
      volumeClaimTemplate:
        spec: {accessModes: [ReadWriteOnce], storageClassName: "", volumeName: prot-c, resources: {requests: {storage: 1Gi}}}
EOF
# The ephemeral volume's claim, as kube-controller-manager's ephemeral-volume-controller makes it.
for s in "${SERVERS[@]}"; do
  uid="$(on "$s" get pod -n "$NS" eph -o jsonpath='{.metadata.uid}')"
  on "$s" create -f - >/dev/null <<EOF
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: eph-scratch
  namespace: $NS
  ownerReferences: [{apiVersion: v1, kind: Pod, name: eph, uid: "$uid", controller: true, blockOwnerDeletion: true}]
spec: {accessModes: [ReadWriteOnce], storageClassName: "", volumeName: prot-c, resources: {requests: {storage: 1Gi}}}
EOF
done
same "a scheduled pod, a generic ephemeral volume" '^eph-scratch Bound - kubernetes.io/pvc-protection Unused=False reason=PodUsingPVC'

tick
both create -f - <<EOF
apiVersion: v1
kind: PersistentVolume
metadata: {name: prot-e}
spec: {capacity: {storage: 5Gi}, accessModes: [ReadWriteOnce], storageClassName: "", nfs: {server: s, path: /e}}
EOF
same "a claim bound while an unscheduled pod names it" '^later Bound - kubernetes.io/pvc-protection Unused=False'

tick
both delete pvc -n "$NS" doomed eph-scratch --wait=false </dev/null
same "claims deleted while scheduled pods use them are kept" '^eph-scratch Bound deleting kubernetes.io/pvc-protection Unused=False'

tick
both_force_delete pod -n "$NS" app
same "the pod goes: its claim is unused since then, the deleted one goes" '^used Bound - kubernetes.io/pvc-protection Unused=True reason=NoPodsUsingPVC message=.* time=T2'

tick
both_force_delete pod -n "$NS" eph
wait_until "eph-scratch gone on the real cluster" 30 bash -c "! kubectl --kubeconfig '$WORK/real/kubeconfig' get pvc -n $NS eph-scratch -o name 2>/dev/null | grep -q ."
same "the ephemeral volume's pod goes: its deleted claim goes" '^later Bound'

tick
both_force_delete pod -n "$NS" waiting
same "the unscheduled pod goes: its claim is unused" '^later Bound - kubernetes.io/pvc-protection Unused=True'
grep -q '^never Bound - kubernetes.io/pvc-protection Unused=True reason=NoPodsUsingPVC .* time=T0 ' "$WORK/ours.snap" \
  || fail "the claim no pod ever used changed its Unused time"
pass "a claim no pod ever used keeps its first Unused time"

echo "e2e-protection: $PASSED checks passed"
