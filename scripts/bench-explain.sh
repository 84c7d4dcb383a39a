#!/usr/bin/env bash
# `explain pvc -A` on `pv-controller up` holding N claims in mixed states (BENCHMARKS.md):
# a tenth each bound to a static volume and provisioned by the host-path plugin, a fifth each
# with no class and nothing to match, waiting for their first consumer, handed to an external
# provisioner that does not run, and naming a volume that does not exist; spread over ten
# namespaces. Checks that the JSON lists every claim not Bound, each with a reason the README
# documents, then times RUNS runs of the text and the JSON forms (wall seconds, median and range).
#
#   scripts/bench-explain.sh [N] [RUNS]        default 1000 claims, 5 runs
#
# KEEP=1 leaves `up` running and prints its kubeconfig, for other timers.
set -euo pipefail
N=${1:-1000}
RUNS=${2:-5}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${PV_CONTROLLER:-${CARGO_TARGET_DIR:-$ROOT/target}/release/pv-controller}"
dir=$(mktemp -d)
"$BIN" up --data-dir "$dir/data" --listen 127.0.0.1:0 --metrics-addr 127.0.0.1:0 >"$dir/up.out" 2>"$dir/up.err" &
up_pid=$!
if [[ -z "${KEEP:-}" ]]; then
  trap 'kill "$up_pid" 2>/dev/null; wait "$up_pid" 2>/dev/null; rm -rf "$dir"' EXIT
fi
for _ in $(seq 100); do grep -q '^server: ' "$dir/up.out" 2>/dev/null && break; sleep 0.1; done
export KUBECONFIG="$dir/data/kubeconfig"
[[ -f "$KUBECONFIG" ]] || { echo "error: up did not start: $(cat "$dir/up.err")" >&2; exit 1; }

python3 - "$N" >"$dir/objects.json" <<'PY'
import json, sys
n = int(sys.argv[1])
items = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"bench-{i}"}} for i in range(10)]
for name, prov, mode in [("hostpath", "kubernetes.io/host-path", "Immediate"),
                         ("wait", "kubernetes.io/no-provisioner", "WaitForFirstConsumer"),
                         ("absent", "example.com/absent", "Immediate")]:
    items.append({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                  "provisioner": prov, "volumeBindingMode": mode})
def claim(i, cls=None, volume=None, size="1Gi"):
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}, "storageClassName": cls or ""}
    if volume:
        spec["volumeName"] = volume
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": f"c-{i}", "namespace": f"bench-{i % 10}"}, "spec": spec}
for i in range(n):
    kind = (i * 10) // n  # 0: static, 1: host-path, 2-3: no class, 4-5: wait, 6-7: absent, 8-9: missing volume
    if kind == 0:
        items.append({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"pv-{i}"},
                      "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                               "nfs": {"server": "nfs.example.com", "path": f"/{i}"}}})
        items.append(claim(i))
    elif kind == 1:
        items.append(claim(i, "hostpath"))
    elif kind in (2, 3):
        items.append(claim(i, size="100Gi"))
    elif kind in (4, 5):
        items.append(claim(i, "wait"))
    elif kind in (6, 7):
        items.append(claim(i, "absent"))
    else:
        items.append(claim(i, volume=f"missing-{i}"))
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
t0=$(date +%s%3N)
kubectl create -f "$dir/objects.json" >/dev/null
bound_enough() {
  [[ "$(kubectl get pvc -A --no-headers 2>/dev/null | grep -c ' Bound ')" -ge $((N / 5)) ]]
}
for _ in $(seq 600); do bound_enough && break; sleep 0.1; done
bound_enough || { echo "error: the claims meant to bind did not" >&2; exit 1; }
echo "loaded $N claims in $(( $(date +%s%3N) - t0 )) ms"

# The JSON: every claim not Bound, each reason a documented one.
"$BIN" explain pvc -A -o json >"$dir/list.json"
python3 - "$dir/list.json" "$ROOT/README.md" "$N" <<'PY'
import json, re, sys
claims = json.load(open(sys.argv[1]))
readme = open(sys.argv[2]).read()
import itertools
table = readme[readme.index("| claim reason | meaning | next step |"):].splitlines()[2:]
codes = [re.match(r"\| `([a-z-]+)` \|", l).group(1) for l in itertools.takewhile(lambda l: l.startswith("| `"), table)]
reasons = {}
for c in claims:
    assert c["reason"] in codes, (c["claim"], c["reason"])
    assert c["phase"] != "Bound" or c["reason"] == "lost", c["claim"]
    reasons[c["reason"]] = reasons.get(c["reason"], 0) + 1
n = int(sys.argv[3])
assert len(claims) == n - n // 5, (len(claims), n)
print(f"explain pvc -A -o json: {len(claims)} claims, reasons {dict(sorted(reasons.items()))}, all documented")
PY

python3 - "$BIN" "$RUNS" <<'PY'
import statistics, subprocess, sys, time
bin, runs = sys.argv[1], int(sys.argv[2])
for form in (["explain", "pvc", "-A"], ["explain", "pvc", "-A", "-o", "json"]):
    subprocess.run([bin] + form, check=True, stdout=subprocess.DEVNULL)  # warm-up
    times = []
    for _ in range(runs):
        t = time.monotonic()
        subprocess.run([bin] + form, check=True, stdout=subprocess.DEVNULL)
        times.append(time.monotonic() - t)
    print(f"{' '.join(form)}: median {statistics.median(times):.3f} s (min {min(times):.3f}, max {max(times):.3f}, {runs} runs)")
PY
[[ -z "${KEEP:-}" ]] || echo "kubeconfig: $KUBECONFIG (up's PID $up_pid)"
