#!/usr/bin/env bash
# `pv-controller explain pod` against the real kube-scheduler, on a real control plane that runs
# it (scripts/e2e-real.sh calls this on its cluster at the end, so one cluster serves both).
#
# For each case of tests/explain/scheduler/*.yaml (a namespace, what the pod needs, and the pod
# `app`; the file's name up to `--` is the verdict explain must give), on a cluster of two Ready
# nodes (node-1 in zone a, node-2 in zone b; this script adds node-2 and the zone labels):
#   1. everything but the pod is created, and `pv-controller run` (started here, the cluster's
#      binder) binds what it binds; "settled" is when `explain pvc -n NS` lists no claim the
#      controller is about to bind or provision, and every other pod has its node;
#   2. the state is dumped (`kubectl get ... -A -o yaml`) with the pod added, and `explain pod -f`
#      predicts: a verdict, and the nodes that fit;
#   3. the pod is created; kube-scheduler either binds it to a node or records FailedScheduling;
#   4. they agree when the pod was placed exactly when explain said it can be, on a node explain
#      listed, and, where it was not, the scheduler's message names the reason explain gave;
#      then `explain pod` live must carry that FailedScheduling message as `scheduler`.
# Prints "explain pod vs kube-scheduler: N cases, A agree" and exits 1 on any disagreement.
#
# Usage: scripts/explain-vs-scheduler.sh KUBECONFIG   (uses target/release/pv-controller)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/pv-controller"
export KUBECONFIG="${1:?usage: $0 KUBECONFIG}"
WORK="$(mktemp -d)"
RUN_PID=""
cleanup() {
  [[ -z "$RUN_PID" ]] || { kill "$RUN_PID" 2>/dev/null || true; wait "$RUN_PID" 2>/dev/null || true; }
  [[ -n "${KEEP_WORK:-}" ]] || rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [[ -f "$WORK/run.log" ]] && { echo "--- run log:"; tail -20 "$WORK/run.log"; } >&2; exit 1; }
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

# What kube-scheduler's message says for each verdict that keeps a pod off every node (its own
# words; the node-affinity one changed wording across releases, both are accepted).
declare -A SAYS=(
  [volume-node-affinity-conflict]="volume node affinity conflict|didn't match PersistentVolume's node affinity"
  [disjoint-nodes]="volume node affinity conflict|didn't match PersistentVolume's node affinity"
  [unbound-immediate-claim]="pod has unbound immediate PersistentVolumeClaims"
  [claim-not-found]='persistentvolumeclaim "[^"]+" not found'
  [no-volume-to-bind]="didn't find available persistent volumes to bind"
  [selected-node-gone]="didn't find available persistent volumes to bind|selected-node"
  [no-node-for-pod]="didn't match Pod's node affinity/selector"
  [read-write-once-pod-conflict]="ReadWriteOncePod access mode"
  [attach-limit]="exceed max volume count"
  [insufficient-capacity]="did not have enough free storage"
)

# --- two Ready nodes in two zones --------------------------------------------------------------
kubectl label node node-1 topology.kubernetes.io/zone=a --overwrite >/dev/null
if ! kubectl get node node-2 >/dev/null 2>&1; then
  kubectl create -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Node
metadata:
  name: node-2
  labels: {kubernetes.io/hostname: node-2, kubernetes.io/os: linux, kubernetes.io/arch: amd64, topology.kubernetes.io/zone: b}
EOF
fi
NOW="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
kubectl patch node node-2 --subresource=status --type=merge -p "{\"status\":{
  \"capacity\":{\"cpu\":\"8\",\"memory\":\"16Gi\",\"pods\":\"110\"},\"allocatable\":{\"cpu\":\"8\",\"memory\":\"16Gi\",\"pods\":\"110\"},
  \"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\",\"message\":\"no kubelet: a test node\",
    \"lastHeartbeatTime\":\"$NOW\",\"lastTransitionTime\":\"$NOW\"}]}}" >/dev/null

# --- the binder -------------------------------------------------------------------------------
"$BIN" run --kubeconfig "$KUBECONFIG" --metrics-addr 127.0.0.1:0 >"$WORK/run.log" 2>&1 &
RUN_PID=$!

CASES=0 AGREE=0
for f in "$ROOT"/tests/explain/scheduler/*.yaml; do
  name="$(basename "$f" .yaml)"
  want="${name%%--*}"
  CASES=$((CASES + 1))
  # Split the case: the pod `app` apart from what it needs.
  python3 - "$f" "$WORK/setup.yaml" "$WORK/pod.yaml" <<'PY'
import sys, re
docs = [d for d in re.split(r'(?m)^---\s*$', open(sys.argv[1]).read()) if d.strip() and not all(l.startswith('#') or not l.strip() for l in d.splitlines())]
pod = [d for d in docs if re.search(r'(?m)^kind: Pod$', d) and re.search(r'name: app[,}]', d)]
assert len(pod) == 1, "one pod named app"
# The namespace is created apart (its ServiceAccount must exist before any pod).
open(sys.argv[2], 'w').write('\n---\n'.join(d for d in docs if d is not pod[0] and not re.search(r'(?m)^kind: Namespace$', d)))
open(sys.argv[3], 'w').write(pod[0])
PY
  ns="$(sed -n 's/^metadata: {name: app, namespace: \([a-z0-9-]*\)}$/\1/p' "$WORK/pod.yaml")"
  [[ -n "$ns" ]] || fail "$name: the pod app names no namespace"
  # Pods are admitted once KCM has made the namespace's default ServiceAccount.
  kubectl create namespace "$ns" >/dev/null || fail "$name: creating namespace $ns"
  has_sa() { kubectl get serviceaccount -n "$ns" default >/dev/null 2>&1; }
  wait_until "$name: the default ServiceAccount of $ns" 60 has_sa
  if [[ -s "$WORK/setup.yaml" ]]; then
    kubectl apply -f "$WORK/setup.yaml" >/dev/null || fail "$name: creating what the pod needs"
  fi
  settled() {
    "$BIN" explain pvc -n "$ns" -o json >"$WORK/claims.json" 2>/dev/null || return 1
    python3 -c "import json,sys; sys.exit(any(c['reason'] in ('bind','provision','default-class') for c in json.load(open(sys.argv[1]))))" "$WORK/claims.json" || return 1
    kubectl get pods -n "$ns" -o json \
      | python3 -c "import json,sys; sys.exit(any(not p['spec'].get('nodeName') for p in json.load(sys.stdin)['items']))"
  }
  wait_until "$name: claims settled, other pods placed" 60 settled
  kubectl get pv,pvc,sc,pods,nodes,csidrivers,csinodes,volumeattachments,csistoragecapacities,leases,events -A -o yaml >"$WORK/dump.yaml"
  { cat "$WORK/dump.yaml"; echo "---"; cat "$WORK/pod.yaml"; } >"$WORK/with-pod.yaml"
  "$BIN" explain pod "$ns/app" -f "$WORK/with-pod.yaml" -o json >"$WORK/predicted.json" 2>"$WORK/err" \
    || { cat "$WORK/err"; fail "$name: explain pod -f"; }
  predicted="$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['verdict'], ','.join(d['fittingNodes']) or '-')" "$WORK/predicted.json")"
  kubectl apply -f "$WORK/pod.yaml" >/dev/null || fail "$name: creating the pod"
  decided() {
    [[ -n "$(kubectl get pod -n "$ns" app -o jsonpath='{.spec.nodeName}')" ]] \
      || [[ -n "$(kubectl get events -n "$ns" --field-selector involvedObject.name=app,reason=FailedScheduling -o name)" ]]
  }
  wait_until "$name: kube-scheduler to place the pod or say why not" 60 decided
  placed="$(kubectl get pod -n "$ns" app -o jsonpath='{.spec.nodeName}')"
  said="$(kubectl get events -n "$ns" --field-selector involvedObject.name=app,reason=FailedScheduling -o json \
    | python3 -c "import json,sys; i=json.load(sys.stdin)['items']; print(i[-1]['message'] if i else '')")"
  read -r verdict fitting <<<"$predicted"
  ok=1
  if [[ -n "$placed" ]]; then
    [[ "$verdict" == ok && ",$fitting," == *",$placed,"* ]] || ok=0
    echo "   $name: kube-scheduler placed the pod on $placed; explain said $verdict, fitting $fitting"
  else
    [[ "$verdict" != ok && "$fitting" == - ]] || ok=0
    [[ -n "${SAYS[$verdict]:-}" ]] && ! grep -Eq -- "${SAYS[$verdict]}" <<<"$said" && ok=0
    echo "   $name: kube-scheduler: $said"
    echo "   $name: explain said $verdict, fitting $fitting"
    "$BIN" explain pod "$ns/app" -o json >"$WORK/live.json" 2>/dev/null || fail "$name: explain pod live"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(not (d['scheduler'] and d['verdict'] == sys.argv[2]))" \
      "$WORK/live.json" "$verdict" || { cat "$WORK/live.json"; fail "$name: explain pod live lacks the scheduler's message or changed its verdict"; }
  fi
  [[ "$verdict" == "$want" ]] || ok=0
  if (( ok )); then AGREE=$((AGREE + 1)); else echo "   $name: DISAGREE (the case expects $want)"; fi
done
echo "explain pod vs kube-scheduler: $CASES cases, $AGREE agree"
(( AGREE == CASES )) || fail "explain pod and kube-scheduler disagree on $((CASES - AGREE)) case(s)"
