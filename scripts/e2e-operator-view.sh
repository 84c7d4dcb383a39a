#!/usr/bin/env bash
# What an operator sees, upstream's binder against ours: the same workload runs on a fresh real
# cluster (conformance/bin; needs Go) once under kube-controller-manager's
# persistentvolume-binder-controller and once under `pv-controller run`, both resyncing every
# 2 s. Then the Events of the PV controller and the `/metrics` of both are compared:
#
# - Events: the same set of (object, type, reason, message), one Event each, and every event of
#   a claim that stays stuck counted more than once (count > 1, lastTimestamp after
#   firstTimestamp) on both sides. Our FailedBinding's "(N volumes: ...)" suffix is a deliberate
#   difference (README) and is removed before comparing.
# - Metrics: for the pv_collector_*, volume_operation_*, storage_operation_duration_seconds,
#   retroactive_storageclass_* families and the workqueue_* series of the `volumes` and `claims`
#   queues: the same HELP and TYPE, the same series (label names and values, histogram
#   buckets), and the same values where they do not depend on timing (object counts, operation
#   counts, errors).
#
# The workload: a static pair; a claim with no class and no volume (FailedBinding); a class with
# the `kubernetes.io/no-provisioner` provisioner and one naming no StorageClass
# (ProvisioningFailed); a claim handed to an external provisioner that the script then plays
# (ExternalProvisioning, then bound: `provision` timed), and deletes again (`delete` timed to the
# PV gone); volumes of several sources and modes for the collector's labels.
#
# Prints every difference, then `operator view: N compared, M differ`; exits 1 when M > 0.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
GO="$(command -v go || echo /usr/local/go/bin/go)"
if [[ ! -x "$GO" && -z "${REAL_CLUSTER_BIN:-}" ]]; then echo "e2e-operator-view: skipped: Go not installed"; exit 0; fi
command -v kubectl >/dev/null || { echo "e2e-operator-view: kubectl not on PATH" >&2; exit 1; }
WORK="$(mktemp -d)"
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/pv-controller"
RUN_PID=""
cleanup() {
  [[ -n "$RUN_PID" ]] && { kill "$RUN_PID" 2>/dev/null || true; wait "$RUN_PID" 2>/dev/null || true; }
  for c in upstream ours; do
    [[ -d "$WORK/$c" ]] && "$ROOT/scripts/real-cluster.sh" down "$WORK/$c" >/dev/null 2>&1 || true
  done
  [[ -n "${KEEP_WORK:-}" ]] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"
SECONDS=0
(cd "$ROOT" && cargo build --quiet --release --workspace) || fail "cargo build --release"
export REAL_CLUSTER_BIN="${REAL_CLUSTER_BIN:-$("$ROOT/conformance/build.sh" | tail -1)}"

SYNC=2s
NS=ov

workload() {
  cat <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: $NS}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: none}
provisioner: kubernetes.io/no-provisioner
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: ext}
provisioner: ext.example.com
reclaimPolicy: Delete
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: ov-static, labels: {ov-order: first}}
spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], storageClassName: "", persistentVolumeReclaimPolicy: Retain, hostPath: {path: /tmp/ov-static}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: static, namespace: $NS}
spec: {accessModes: [ReadWriteOnce], storageClassName: "", resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: stuck, namespace: $NS}
spec: {accessModes: [ReadWriteOnce], storageClassName: "", resources: {requests: {storage: 50Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: none, namespace: $NS}
spec: {accessModes: [ReadWriteOnce], storageClassName: none, resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: nothing, namespace: $NS, annotations: {volume.beta.kubernetes.io/storage-class: nothing}}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: ext, namespace: $NS}
spec: {accessModes: [ReadWriteOnce], storageClassName: ext, resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: ov-csi}
spec: {capacity: {storage: 1Mi}, accessModes: [ReadWriteOnce], storageClassName: collect, csi: {driver: csi.example.com, volumeHandle: h1}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: ov-csi-block}
spec: {capacity: {storage: 1Mi}, accessModes: [ReadWriteOnce], storageClassName: collect, volumeMode: Block, csi: {driver: csi.example.com, volumeHandle: h2}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: ov-local}
spec:
  capacity: {storage: 1Mi}
  accessModes: [ReadWriteOnce]
  storageClassName: collect
  local: {path: /mnt/ov}
  nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [node-1]}]}]}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: ov-nfs}
spec: {capacity: {storage: 1Mi}, accessModes: [ReadWriteMany], storageClassName: collect, nfs: {server: 10.0.0.1, path: /export}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: ov-iscsi}
spec: {capacity: {storage: 1Mi}, accessModes: [ReadWriteOnce], storageClassName: collect, iscsi: {targetPortal: "10.0.0.1:3260", iqn: "iqn.2001-04.com.example:storage", lun: 0}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: ov-fc}
spec: {capacity: {storage: 1Mi}, accessModes: [ReadWriteOnce], storageClassName: collect, fc: {targetWWNs: [500a0982991b8dc5], lun: 0}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: ov-beta, annotations: {volume.beta.kubernetes.io/storage-class: beta-annotation}}
spec: {capacity: {storage: 1Mi}, accessModes: [ReadWriteOnce], storageClassName: collect, hostPath: {path: /tmp/ov-beta}}
EOF
}

# wait_for SECONDS DESCRIPTION COMMAND...
wait_for() {
  local t="$1" what="$2"; shift 2
  local end=$((SECONDS + t))
  until "$@" >/dev/null 2>&1; do
    (( SECONDS < end )) || fail "$SIDE: timed out waiting for $what"
    sleep 0.5
  done
}
phase_is() { [[ "$(kubectl get "$1" "${@:3}" -o jsonpath='{.status.phase}')" == "$2" ]]; }

# run_side NAME: the workload on a fresh cluster; leaves events.json and metrics.txt in WORK/NAME.
run_side() {
  SIDE="$1"
  local dir="$WORK/$SIDE" out
  if [[ "$SIDE" == upstream ]]; then
    out="$(KCM_FLAGS="--pvclaimbinder-sync-period=$SYNC" "$ROOT/scripts/real-cluster.sh" up "$dir" \
      --kcm persistentvolume-binder-controller 2>&1)" || { echo "$out" >&2; fail "real-cluster up (upstream)"; }
  else
    out="$("$ROOT/scripts/real-cluster.sh" up "$dir" 2>&1)" || { echo "$out" >&2; fail "real-cluster up (ours)"; }
  fi
  export KUBECONFIG="$dir/kubeconfig"
  local metrics_url token
  token="$(kubectl config view --raw -o jsonpath='{.users[0].user.token}')"
  if [[ "$SIDE" == upstream ]]; then
    local pid port
    pid="$(cat "$dir/pids/kube-controller-manager.pid")"
    port="$(tr '\0' '\n' <"/proc/$pid/cmdline" | sed -n 's/^--secure-port=//p' | tail -1)"
    metrics_url="https://127.0.0.1:$port/metrics"
  else
    local mport
    mport="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    "$BIN" run --kubeconfig "$dir/kubeconfig" --resync-period "$SYNC" --metrics-addr "127.0.0.1:$mport" \
      >"$dir/run.log" 2>&1 &
    RUN_PID=$!
    metrics_url="http://127.0.0.1:$mport/metrics"
    wait_for 30 "pv-controller readyz" curl -sf "http://127.0.0.1:$mport/readyz"
  fi

  # The static volume first, so that neither binder can see its claim before it (upstream then
  # emits a FailedBinding for it, ours does not: a race, not a difference).
  workload | kubectl apply -l ov-order=first -f - >/dev/null
  wait_for 30 "ov-static Available" phase_is pv Available ov-static
  workload | kubectl apply -f - >/dev/null
  wait_for 30 "ov/static Bound" phase_is pvc Bound static -n "$NS"
  wait_for 30 "ov/ext handed off" bash -c "kubectl get pvc ext -n $NS -o jsonpath='{.metadata.annotations}' | grep -q ext.example.com"
  # Several resyncs while claims stay stuck, then play the external provisioner.
  sleep 8
  local uid
  uid="$(kubectl get pvc ext -n "$NS" -o jsonpath='{.metadata.uid}')"
  kubectl create -f - >/dev/null <<EOF
apiVersion: v1
kind: PersistentVolume
metadata: {name: pvc-$uid, annotations: {pv.kubernetes.io/provisioned-by: ext.example.com}}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: ext
  persistentVolumeReclaimPolicy: Delete
  csi: {driver: ext.example.com, volumeHandle: v-$uid}
  claimRef: {namespace: $NS, name: ext, uid: $uid}
EOF
  wait_for 30 "ov/ext Bound" phase_is pvc Bound ext -n "$NS"
  # The claim goes (no pvc-protection controller runs: lift its finalizer), the volume is
  # released to its external deleter, which the script plays too.
  kubectl delete pvc ext -n "$NS" --wait=false >/dev/null
  kubectl patch pvc ext -n "$NS" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
  wait_for 30 "pvc-$uid Released" phase_is pv Released "pvc-$uid"
  sleep 3
  kubectl delete pv "pvc-$uid" --wait=false >/dev/null
  kubectl patch pv "pvc-$uid" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
  wait_for 30 "pvc-$uid gone" bash -c "! kubectl get pv pvc-$uid"
  sleep 4
  kubectl get events -A -o json >"$dir/events.json"
  curl -sfk -H "Authorization: Bearer $token" "$metrics_url" >"$dir/metrics.txt" || fail "$SIDE: GET $metrics_url"
  kubectl get pvc -n "$NS" -o json >"$dir/claims.json"
  if [[ -n "$RUN_PID" ]]; then kill "$RUN_PID"; wait "$RUN_PID" 2>/dev/null || true; RUN_PID=""; fi
  "$ROOT/scripts/real-cluster.sh" down "$dir" >/dev/null
  echo "e2e-operator-view: $SIDE done at ${SECONDS}s"
}

run_side upstream
run_side ours

rc=0
python3 - "$WORK/upstream" "$WORK/ours" <<'EOF' || rc=$?
import json, re, sys
up_dir, our_dir = sys.argv[1], sys.argv[2]
compared = differ = 0

def report(ok, what, detail=""):
    global compared, differ
    compared += 1
    if ok:
        print(f"same   {what}")
    else:
        differ += 1
        print(f"DIFFER {what}{': ' + detail if detail else ''}")

# --- events -------------------------------------------------------------------------------------
def events(d):
    items = json.load(open(f"{d}/events.json"))["items"]
    uids = {c["metadata"]["uid"]: "UID" for c in json.load(open(f"{d}/claims.json"))["items"]}
    out = {}
    for e in items:
        if (e.get("source") or {}).get("component") != "persistentvolume-controller":
            continue
        o = e["involvedObject"]
        msg = e.get("message", "")
        # Deliberate difference: FailedBinding says why the volumes did not match.
        msg = re.sub(r" \(\d+ volumes?: [^)]*\)$", "", msg)
        msg = re.sub(r"pvc-[0-9a-f-]{36}", "pvc-UID", msg)
        name = re.sub(r"pvc-[0-9a-f-]{36}", "pvc-UID", o.get("name", ""))
        key = (o.get("kind"), o.get("namespace", ""), name, e.get("type"), e.get("reason"), msg)
        out.setdefault(key, []).append(e)
    return out

up_ev, our_ev = events(up_dir), events(our_dir)
for key in sorted(set(up_ev) | set(our_ev), key=str):
    label = "event " + " ".join(str(k) for k in key)
    u, o = up_ev.get(key, []), our_ev.get(key, [])
    if not u or not o:
        report(False, label, "only upstream" if u else "only ours")
        continue
    report(len(u) == len(o) == 1, label + " (one Event)", f"upstream {len(u)}, ours {len(o)}")
    uc, oc = u[0].get("count", 1), o[0].get("count", 1)
    if uc > 1 or oc > 1:
        moved = lambda e: e.get("lastTimestamp", "") > e.get("firstTimestamp", "")
        report(uc > 1 and oc > 1 and moved(u[0]) and moved(o[0]), label + " (counted, lastTimestamp moves)",
               f"upstream count {uc}, ours {oc}")

# --- metrics ------------------------------------------------------------------------------------
def parse(path):
    fams = {}
    for line in open(path):
        line = line.rstrip("\n")
        m = re.match(r"# (HELP|TYPE) (\S+) ?(.*)", line)
        if m:
            fams.setdefault(m.group(2), {"samples": {}})[m.group(1)] = m.group(3)
            continue
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)", line)
        name, labels, value = m.group(1), m.group(3) or "", float(m.group(4))
        lab = tuple(sorted(re.findall(r'([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"', labels)))
        fam = re.sub(r"_(bucket|sum|count)$", "", name) if re.sub(r"_(bucket|sum|count)$", "", name) in fams else name
        fams.setdefault(fam, {"samples": {}})["samples"][(name, lab)] = value
    return fams

up_m, our_m = parse(f"{up_dir}/metrics.txt"), parse(f"{our_dir}/metrics.txt")
WANT = re.compile(r"^(pv_collector_|volume_operation_|storage_operation_duration_seconds|retroactive_storageclass_|workqueue_)")
QUEUES = {"volumes", "claims"}
TIMING = re.compile(r"^(workqueue_|volume_operation_total_seconds|storage_operation_duration_seconds)")

def series(fam, m):
    s = m.get(fam, {"samples": {}})["samples"]
    if fam.startswith("workqueue_"):
        s = {k: v for k, v in s.items() if dict(k[1]).get("name") in QUEUES}
    return s

for fam in sorted(f for f in set(up_m) | set(our_m) if WANT.match(f)):
    u, o = series(fam, up_m), series(fam, our_m)
    if not u and not o:
        continue
    if not u or not o:
        report(False, f"metric {fam}", "only upstream" if u else "only ours")
        continue
    for k in ("HELP", "TYPE"):
        report(up_m[fam].get(k) == our_m[fam].get(k), f"metric {fam} {k}",
               f"upstream {up_m[fam].get(k)!r}, ours {our_m[fam].get(k)!r}")
    report(set(u) == set(o), f"metric {fam} series",
           f"only upstream {sorted(set(u) - set(o))}, only ours {sorted(set(o) - set(u))}")
    if TIMING.match(fam):
        # Durations differ by nature; observation counts do not (but the workqueues' do: our
        # controller syncs on its own schedule).
        if not fam.startswith("workqueue_"):
            cu = {k: v for k, v in u.items() if k[0].endswith("_count")}
            co = {k: v for k, v in o.items() if k[0].endswith("_count")}
            report(cu == co, f"metric {fam} observation counts", f"upstream {cu}, ours {co}")
        continue
    report(u == o, f"metric {fam} values", f"upstream {sorted(u.items())}, ours {sorted(o.items())}")

print(f"operator view: {compared} compared, {differ} differ")
sys.exit(1 if differ else 0)
EOF
echo "e2e-operator-view: ${SECONDS}s"
exit $rc
