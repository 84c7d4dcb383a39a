#!/usr/bin/env bash
# What shadow mode costs beside the binder in charge: a real control plane (scripts/real-cluster.sh)
# whose kube-controller-manager runs only its persistentvolume-binder-controller, N bound pairs
# made by it (`pv-controller bench --pairs N`), then `pv-controller run --shadow` started beside it.
# Once the shadow's caches are synced and it has judged what it decided (nothing, on a settled
# cluster: every pair is bound as the shadow would bind it), both processes are sampled for a
# minute: resident memory (VmRSS) and CPU time used in that minute, and the shadow's time to
# sync. KCM runs with --kube-api-qps=1000 --kube-api-burst=2000 so that the pairs bind in minutes
# (its defaults, 20/30, take about eight at 10,000: BENCHMARKS.md). Needs Go.
#
#   scripts/bench-shadow.sh [N]     (default 10000)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
N="${1:-10000}"
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/pv-controller"
WORK="$(mktemp -d)"
SHADOW_PID=""
cleanup() {
  [[ -z "$SHADOW_PID" ]] || kill "$SHADOW_PID" 2>/dev/null || true
  "$ROOT/scripts/real-cluster.sh" down "$WORK/c" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
KCM_FLAGS="--pvclaimbinder-sync-period=15s --kube-api-qps=1000 --kube-api-burst=2000" "$ROOT/scripts/real-cluster.sh" up "$WORK/c" \
  --kcm persistentvolume-binder-controller >"$WORK/up.out" 2>&1 || { cat "$WORK/up.out"; exit 1; }
export KUBECONFIG="$WORK/c/kubeconfig"
"$BIN" bench --pairs "$N" --concurrency 64 --keep >"$WORK/bench.out" 2>&1 || { cat "$WORK/bench.out"; exit 1; }
tail -2 "$WORK/bench.out"
kcm="$(cat "$WORK/c/pids/kube-controller-manager.pid")"
t0=$(date +%s%3N)
"$BIN" run --shadow --metrics-addr 127.0.0.1:0 >"$WORK/shadow.log" 2>&1 &
SHADOW_PID=$!
until grep -q "caches synced, starting workers" "$WORK/shadow.log"; do sleep 0.1; done
echo "shadow: caches synced after $(( $(date +%s%3N) - t0 )) ms ($N pairs)"
sleep 30
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
hz=$(getconf CLK_TCK)
c_shadow=$(cpu "$SHADOW_PID") c_kcm=$(cpu "$kcm")
sleep 60
echo "over 60 s, settled, $N bound pairs:"
printf '  %-44s RSS %6d MiB, CPU %5.2f s\n' "kube-controller-manager (binder only)" $(( $(rss "$kcm") / 1024 )) "$(echo "($(cpu "$kcm") - $c_kcm) / $hz" | bc -l)"
printf '  %-44s RSS %6d MiB, CPU %5.2f s\n' "pv-controller run --shadow" $(( $(rss "$SHADOW_PID") / 1024 )) "$(echo "($(cpu "$SHADOW_PID") - $c_shadow) / $hz" | bc -l)"
addr="$(grep -oE 'serving /metrics[^ ]* .*addr=[0-9.]+:[0-9]+' "$WORK/shadow.log" | grep -oE '[0-9.]+:[0-9]+$')"
echo "  shadow report: $("$BIN" shadow report "http://$addr" | head -1)"
