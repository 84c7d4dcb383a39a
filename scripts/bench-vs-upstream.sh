#!/usr/bin/env bash
# Side by side on one machine, in one run: upstream's PV binder (kube-controller-manager from
# conformance/, only its persistentvolume-binder-controller, its default flags plus
# --enable-hostpath-provisioner) and `pv-controller run` (default flags plus --hostpath-root), each
# on a fresh real control plane (etcd + kube-apiserver, scripts/real-cluster.sh), on the same
# workloads:
#   - `bench --pairs N`: N static pairs;
#   - `bench --claims N --class bench-hostpath`: N claims provisioned by the host-path plugin;
# and the API server's ceiling for each workload, on a fresh control plane with no controller:
# `bench --pairs N --bind-itself`, the bench making exactly the five writes per pair a controller
# makes (the new volume's phase Available, then the four of the bind) itself, and `bench --claims N
# --class bench-hostpath --bind-itself`, the bench making the requests a controller makes per
# provisioned claim; each with 32, 64, 128 and 256 in flight (CEILING_CONCURRENCY="..." to change
# the list; each on a fresh control plane): the ceiling is the best of them, reported with the
# concurrency that reached it.
#
#   scripts/bench-vs-upstream.sh N [--pairs-only | --claims-only] [--upstream-qps Q] [--upstream-window D]
#                                [--no-cleanup] [--keep-logs DIR] [--plot DIR]
#
# --upstream-qps Q runs upstream's binder with its client limit lifted, --kube-api-qps=Q
# --kube-api-burst=2Q, as large clusters run it (its default, QPS 20 and burst 30, caps it at
# about 4 binds/s: 5 requests per bind).
# --upstream-window D gives upstream's run D (a duration as `bench --timeout` takes it, e.g. 25m),
# the creates included, and keeps what it bound by then: its row is marked partial, with how many
# of N were Bound, its binds/s over the window and its percentiles over the claims it bound. For
# sizes where upstream would take hours (its matching scans every volume of a class for each
# claim, so its binds/s fall as N grows).
# --pairs-only and --claims-only run one workload (and its ceiling). --no-cleanup passes --keep to every bench: nothing is timed after the last bind,
# and each control plane is torn down right after its run anyway, so this only skips the
# deletes, which upstream makes at its client's QPS 20 (about 1,000 s for 10,000 pairs).
# --plot DIR is where the charts go (default: the --keep-logs DIR if given, else the current
# directory): one SVG per workload, bench-vs-upstream-WORKLOAD-N.svg, with every claim's time to
# Bound (logarithmic scale) against its creation time for upstream, ours and the workload's best
# ceiling run, one colour each (`bench --plot-data` for each run, then `bench plot`).
#
# Prints one JSON report per run (bench -o json, with the controller's CPU seconds and peak RSS
# added as controllerCpuSeconds / controllerPeakRssBytes), the charts' paths, a table, and as its last line:
#   ours/upstream binds/s: X.X, upstream/ours p50: Y.Y
# (for the static pairs, or for the claims with --claims-only). Needs Go (conformance/build.sh)
# and openssl; builds nothing else.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${PV_CONTROLLER:-$ROOT/target/release/pv-controller}"
usage() { echo "usage: $0 N [--pairs-only | --claims-only] [--upstream-qps Q] [--upstream-window D] [--no-cleanup] [--keep-logs DIR] [--plot DIR]" >&2; exit 2; }
[[ $# -ge 1 && "$1" =~ ^[0-9]+$ && "$1" -gt 0 ]] || usage
N="$1"; shift
PAIRS=1 CLAIMS=1 NO_CLEANUP=0 KEEP="" QPS="" PLOT="" WINDOW=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --pairs-only) CLAIMS=0; shift ;;
    --claims-only) PAIRS=0; shift ;;
    --no-cleanup) NO_CLEANUP=1; shift ;;
    --keep-logs) [[ $# -ge 2 ]] || usage; KEEP="$2"; shift 2 ;;
    --plot) [[ $# -ge 2 && -n "$2" ]] || usage; PLOT="$2"; shift 2 ;;
    --upstream-window) [[ $# -ge 2 && "$2" =~ ^[0-9]+(s|m|h)$ ]] || usage; WINDOW="$2"; shift 2 ;;
    --upstream-qps) [[ $# -ge 2 && "$2" =~ ^[0-9]+$ && "$2" -gt 0 ]] || usage; QPS="$2"; shift 2 ;;
    *) usage ;;
  esac
done
(( PAIRS || CLAIMS )) || usage
PLOT="${PLOT:-${KEEP:-.}}"
mkdir -p "$PLOT" || { echo "bench-vs-upstream: cannot create --plot $PLOT" >&2; exit 2; }
PLOT="$(cd "$PLOT" && pwd)"
[[ -x "$BIN" ]] || { echo "bench-vs-upstream: $BIN not built (cargo build --release)" >&2; exit 2; }
"$ROOT/conformance/build.sh" >/dev/null
KCM="$ROOT/conformance/bin/kube-controller-manager"
TIMEOUT="${BENCH_TIMEOUT:-60m}"
CEILING_CONCURRENCY="${CEILING_CONCURRENCY:-32 64 128 256}"
UPSTREAM_QPS=()
[[ -n "$QPS" ]] && UPSTREAM_QPS=(--kube-api-qps="$QPS" --kube-api-burst="$((2 * QPS))")

WORK="$(mktemp -d)"
CLUSTER="" CTRL_PID=""
cleanup() {
  [[ -n "$CTRL_PID" ]] && { kill "$CTRL_PID" 2>/dev/null || true; wait "$CTRL_PID" 2>/dev/null || true; }
  [[ -n "$CLUSTER" ]] && "$ROOT/scripts/real-cluster.sh" down "$CLUSTER" >/dev/null 2>&1 || true
  if [[ -n "$KEEP" ]]; then mkdir -p "$KEEP" && cp -a "$WORK/." "$KEEP/"; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# cpu_seconds PID: user + system CPU time of PID so far.
cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
# peak_rss PID: VmHWM in bytes.
peak_rss() { awk '$1 == "VmHWM:" {print $2 * 1024}' "/proc/$1/status"; }

# one CONTROLLER WORKLOAD...: a fresh control plane, the controller (upstream, ours or none),
# the bench; appends the bench's JSON report, with the controller's figures, to $WORK/reports.
one() {
  local controller="$1"; shift
  local workload="$1"
  local name="$controller-$workload$CEILING_TAG" kc volumes="$WORK/volumes-$controller-$workload"
  shift
  CLUSTER="$WORK/cluster-$name"
  # Every configuration runs beside kube-controller-manager's pv- and pvc-protection
  # controllers, as a cluster does: the API server's StorageObjectInUseProtection puts their
  # finalizers on every volume and claim, and without them the bench's cleanup never finishes.
  "$ROOT/scripts/real-cluster.sh" up "$CLUSTER" \
    --kcm persistentvolume-protection-controller,persistentvolumeclaim-protection-controller \
    >"$WORK/$name.cluster.log" 2>&1 \
    || { cat "$WORK/$name.cluster.log" >&2; exit 1; }
  kc="$CLUSTER/kubeconfig"
  kubectl_apply_class "$kc"
  case "$controller" in
    upstream)
      # Upstream's in-tree host-path provisioner makes its directories under /tmp/hostpath_pv,
      # whatever the class says; the ones this run adds are removed after it (below).
      ls /tmp/hostpath_pv 2>/dev/null | sort >"$WORK/$name.hostpath-before" || true
      # As kubeadm runs it (own credentials per controller), the binder alone.
      "$KCM" --kubeconfig="$CLUSTER/kcm.kubeconfig" --controllers=persistentvolume-binder-controller \
        --use-service-account-credentials=true --service-account-private-key-file="$CLUSTER/pki/sa.key" \
        --root-ca-file="$CLUSTER/pki/ca.crt" --enable-hostpath-provisioner --leader-elect=false \
        --bind-address=127.0.0.1 --secure-port=0 "${UPSTREAM_QPS[@]}" >"$WORK/$name.controller.log" 2>&1 &
      CTRL_PID=$! ;;
    ours)
      mkdir -p "$volumes"
      "$BIN" run --kubeconfig "$kc" --hostpath-root "$volumes" --metrics-addr 127.0.0.1:0 \
        >"$WORK/$name.controller.log" 2>&1 &
      CTRL_PID=$! ;;
    none) CTRL_PID="" ;;
  esac
  local bench_flags=("$@")
  # The ceiling binds by itself and nothing ever releases its volumes, so pv-protection holds
  # them after the delete: its objects are left to the cluster, which is torn down next.
  [[ "$controller" == none ]] && bench_flags+=(--bind-itself --keep)
  (( NO_CLEANUP )) && [[ "$controller" != none ]] && bench_flags+=(--keep)
  local concurrency=32 i label
  for ((i = 0; i < ${#bench_flags[@]}; i++)); do [[ "${bench_flags[$i]}" == --concurrency ]] && concurrency="${bench_flags[$((i + 1))]}"; done
  case "$controller" in
    upstream) label="upstream${QPS:+ qps=$QPS}" ;;
    none) label="ceiling c=$concurrency (the bench $([[ "$workload" == claims ]] && echo "provisions and binds" || echo binds))" ;;
    *) label="$controller" ;;
  esac
  # Every claim's creation time and time to Bound, for the chart (`bench plot`, at the end).
  bench_flags+=(--plot-data "$WORK/$name.points.json" --label "$label")
  local timeout="$TIMEOUT" partial=0
  [[ "$controller" == upstream && -n "$WINDOW" ]] && timeout="$WINDOW"
  if ! "$BIN" bench --kubeconfig "$kc" -o json --timeout "$timeout" "${bench_flags[@]}" >"$WORK/$name.json" 2>"$WORK/$name.bench.err"; then
    # Upstream's window ended first: its report stands, marked partial.
    if [[ "$timeout" == "$WINDOW" ]] && grep -q 'not every claim became Bound' "$WORK/$name.bench.err" \
      && python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if 0 < r["bound"] < r["n"] else 1)' "$WORK/$name.json"; then
      partial=1
      echo "bench-vs-upstream: $name: the window of $WINDOW ended: $(tail -1 "$WORK/$name.bench.err")" >&2
    else
      echo "bench-vs-upstream: $name failed: $(tail -3 "$WORK/$name.bench.err")" >&2
      exit 1
    fi
  fi
  local cpu=null rss=null
  if [[ -n "$CTRL_PID" ]]; then
    kill -0 "$CTRL_PID" 2>/dev/null || { echo "bench-vs-upstream: the $controller controller exited: $(tail -5 "$WORK/$name.controller.log")" >&2; exit 1; }
    cpu="$(cpu_seconds "$CTRL_PID")" rss="$(peak_rss "$CTRL_PID")"
    kill "$CTRL_PID"; wait "$CTRL_PID" 2>/dev/null || true; CTRL_PID=""
    if [[ "$controller" == upstream ]]; then
      comm -13 "$WORK/$name.hostpath-before" <(ls /tmp/hostpath_pv 2>/dev/null | sort) \
        | while read -r d; do rm -rf "/tmp/hostpath_pv/$d"; done
    fi
  fi
  python3 - "$WORK/$name.json" "$controller" "$cpu" "$rss" "$concurrency" "$([[ "$controller" == upstream ]] && echo "$QPS")" "$partial" >>"$WORK/reports" <<'EOF'
import json, sys
path, controller, cpu, rss = sys.argv[1:5]
r = json.load(open(path))
r["partial"] = sys.argv[7] == "1"
r["controller"] = controller
r["controllerCpuSeconds"] = None if cpu == "null" else float(cpu)
r["controllerPeakRssBytes"] = None if rss == "null" else int(rss)
r["concurrency"] = int(sys.argv[5])
r["upstreamQps"] = int(sys.argv[6]) if sys.argv[6] else None
print(json.dumps(r))
EOF
  tail -1 "$WORK/reports"
  "$ROOT/scripts/real-cluster.sh" down "$CLUSTER" >/dev/null 2>&1 || true
  CLUSTER=""
}

# The provisioning class of the --claims workload: the in-tree host-path provisioner, which
# upstream's binder runs itself with --enable-hostpath-provisioner, as ours does with
# --hostpath-root.
kubectl_apply_class() {
  kubectl --kubeconfig "$1" apply -f - >/dev/null <<'EOF'
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: bench-hostpath}
provisioner: kubernetes.io/host-path
reclaimPolicy: Delete
EOF
}

: >"$WORK/reports"
CEILING_TAG=""
if (( PAIRS )); then
  for controller in upstream ours; do
    one "$controller" pairs --pairs "$N"
  done
  for c in $CEILING_CONCURRENCY; do
    CEILING_TAG="-c$c"
    one none pairs --pairs "$N" --concurrency "$c"
  done
  CEILING_TAG=""
fi
if (( CLAIMS )); then
  for controller in upstream ours; do
    one "$controller" claims --claims "$N" --class bench-hostpath
  done
  for c in $CEILING_CONCURRENCY; do
    CEILING_TAG="-c$c"
    one none claims --claims "$N" --class bench-hostpath --concurrency "$c"
  done
  CEILING_TAG=""
fi

# One chart per workload: upstream, ours and, for the pairs, the ceiling run that reached the
# most binds/s. A chart that cannot be drawn is said on stderr; the comparison still stands.
chart() {
  local workload="$1" out="$PLOT/bench-vs-upstream-$1-$N.svg"
  shift
  if "$BIN" bench plot --log-y --out "$out" "$@" 2>"$WORK/chart-$workload.err"; then
    echo "chart ($workload): $out"
  else
    echo "bench-vs-upstream: no chart for $workload: $(tail -1 "$WORK/chart-$workload.err")" >&2
  fi
}
for workload in pairs claims; do
  [[ "$workload" == pairs ]] && (( ! PAIRS )) && continue
  [[ "$workload" == claims ]] && (( ! CLAIMS )) && continue
  best="$(python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ceilings = [r for r in rows if r["controller"] == "none" and r["workload"] == sys.argv[2]]
print(max(ceilings, key=lambda r: r["bindsPerSecond"])["concurrency"] if ceilings else "")
' "$WORK/reports" "$workload")"
  files=("$WORK/upstream-$workload.points.json" "$WORK/ours-$workload.points.json")
  [[ -n "$best" ]] && files+=("$WORK/none-$workload-c$best.points.json")
  chart "$workload" "${files[@]}"
done

python3 - "$WORK/reports" "$N" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
n = sys.argv[2]
def f(x, fmt="{:.1f}"):
    return "-" if x is None else fmt.format(x)
print(f"\n{'controller':<18} {'workload':<8} {'N':>6} {'wall s':>8} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9} {'binds/s':>8} {'CPU s':>7} {'CPU ms/bind':>11} {'peak RSS MiB':>12}")
for r in rows:
    cpu = r.get("controllerCpuSeconds")
    per = None if cpu is None or not r["bound"] else cpu * 1e3 / r["bound"]
    rss = r.get("controllerPeakRssBytes")
    name = {"none": f"ceiling c={r['concurrency']}", "upstream": "upstream" + (f" qps={r['upstreamQps']}" if r.get("upstreamQps") else "")}.get(r["controller"], r["controller"])
    if r.get("partial"):
        name += "*"
    print(f"{name:<18} {r['workload']:<8} {r['n']:>6} {r['wallSeconds']:>8.2f} {f(r['p50Ms']):>9} {f(r['p99Ms']):>9} {f(r['maxMs']):>9} "
          f"{r['bindsPerSecond']:>8.1f} {f(cpu, '{:.2f}'):>7} {f(per, '{:.2f}'):>11} {f(None if rss is None else rss / 2**20):>12}")
by = {(r["controller"], r["workload"]): r for r in rows if r["controller"] != "none"}
workload = "pairs" if ("ours", "pairs") in by else "claims"
up, ours = by[("upstream", workload)], by[("ours", workload)]
for w in ("pairs", "claims"):
    ceilings = [r for r in rows if r["controller"] == "none" and r["workload"] == w]
    if ceilings:
        best = max(ceilings, key=lambda r: r["bindsPerSecond"])
        print(f"\nceiling ({w}): {best['bindsPerSecond']:.1f} binds/s, reached with {best['concurrency']} {w} in flight"
              f" (of {', '.join(str(r['concurrency']) for r in ceilings)})")
        print(f"ours/ceiling binds/s ({w}): {by[('ours', w)]['bindsPerSecond'] / best['bindsPerSecond']:.2f}")
if up.get("partial"):
    print(f"* partial: its window ended with {up['bound']} of {up['n']} claims Bound; binds/s over the window,"
          f" percentiles over the claims it bound (so upstream/ours p50 is understated)")
print("upstream: " + (f"--kube-api-qps={up['upstreamQps']} --kube-api-burst={2 * up['upstreamQps']}" if up.get("upstreamQps") else "its default client limit (QPS 20, burst 30)"))
print(f"ours/upstream binds/s: {ours['bindsPerSecond'] / up['bindsPerSecond']:.1f}, upstream/ours p50: {up['p50Ms'] / ours['p50Ms']:.1f}")
EOF
