#!/usr/bin/env bash
# The controller differential: each state file reconciled once by upstream's
# kube-controller-manager (only its persistentvolume-binder-controller, with
# --enable-hostpath-provisioner) and once by `pv-controller run`, on a real kube-apiserver 1.37
# (conformance/; needs Go), and the results compared.
#
#   scripts/differential.sh [STATE_FILE...]
#
# A state file is a scenario fixture (tests/scenarios/*.yaml: its `input`) or objects as
# `pv-controller simulate` takes them. Default: every scenario of tests/scenarios/.
#
# Prints one line per file, `same NAME` or `differ NAME` followed by the difference (a unified
# diff of the normalised objects and events, upstream first; for a scenario fixture also every
# way in which upstream's result disagrees with the fixture's `expect`), and as its last line
# `N same, M differ`. Exits 0 only when every differing file is listed in
# conformance/DIFFERENCES.md (section "Controller").
#
# One cluster serves every run: before each run every PersistentVolume, claim, StorageClass, Pod,
# Node and Event is removed and the controller process is new, so a run sees the same empty
# cluster a fresh one would (namespaces, which the binder does not read, are kept). kube-apiserver
# runs without the admission plugins that would change the input as it is loaded
# (DefaultStorageClass, StorageObjectInUseProtection, ServiceAccount): the input is the state as
# stored. See scripts/differential.py for the steps of one run.
# Env: DIFF_SETTLE (seconds without change that count as quiescent, default 4), DIFF_RESYNC
# (both controllers' resync period, default 1s), DIFF_TIMEOUT (per run, default 90),
# KEEP_WORK=1 keeps the work directory (controller logs).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
GO="$(command -v go || echo /usr/local/go/bin/go)"
if [[ ! -x "$GO" ]]; then echo "differential: skipped: Go not installed"; exit 0; fi
python3 -c 'import yaml' 2>/dev/null || python3 -m pip install --quiet pyyaml \
  || { echo "differential: needs python3 with PyYAML" >&2; exit 2; }

if [[ $# -eq 0 ]]; then
  set -- "$ROOT"/tests/scenarios/*.yaml
fi
for f in "$@"; do [[ -r "$f" ]] || { echo "differential: cannot read $f" >&2; exit 1; }; done

OURS="${CARGO_TARGET_DIR:-$ROOT/target}/release/pv-controller"
(cd "$ROOT" && cargo build --quiet --release --workspace) || { echo "differential: cargo build --release failed" >&2; exit 2; }
KBIN="$("$ROOT/conformance/build.sh" | tail -1)" || { echo "differential: conformance/build.sh failed" >&2; exit 2; }

# Upstream's host-path deleter accepts only paths under /tmp: the root must be there.
WORK="$(mktemp -d /tmp/pv-differential.XXXXXX)"
CLUSTER="$WORK/cluster"
cleanup() {
  "$ROOT/scripts/real-cluster.sh" down "$CLUSTER" >/dev/null 2>&1 || true
  [[ -n "${KEEP_WORK:-}" ]] && echo "differential: work directory kept: $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

REAL_CLUSTER_BIN="$KBIN" \
  APISERVER_FLAGS="--disable-admission-plugins=DefaultStorageClass,StorageObjectInUseProtection,ServiceAccount ${APISERVER_FLAGS:-}" \
  "$ROOT/scripts/real-cluster.sh" up "$CLUSTER" >"$WORK/cluster.out" 2>&1 \
  || { cat "$WORK/cluster.out" >&2; echo "differential: the cluster did not start" >&2; exit 2; }

# Shadow mode (DIFF_SHADOW=1, scripts/e2e-shadow.sh): `run --shadow` beside upstream's binder,
# as the ServiceAccount of deploy/shadow/ (read-only RBAC), its kubeconfig written by
# `pv-controller kubeconfig`; afterwards kube-apiserver's audit log must show requests from that
# user and not one write.
SHADOW_USER=system:serviceaccount:kube-system:pv-controller-shadow
if [[ -n "${DIFF_SHADOW:-}" ]]; then
  kubectl --kubeconfig "$CLUSTER/kubeconfig" apply -f "$ROOT/deploy/shadow/rbac.yaml" >/dev/null
  "$OURS" kubeconfig --kubeconfig "$CLUSTER/kubeconfig" --service-account kube-system/pv-controller-shadow \
    >"$WORK/shadow.kubeconfig" || { echo "differential: pv-controller kubeconfig failed" >&2; exit 2; }
  export DIFF_SHADOW_KUBECONFIG="$WORK/shadow.kubeconfig"
fi
rc=0
DIFF_KUBECONFIG="$CLUSTER/kubeconfig" DIFF_KBIN="$KBIN" DIFF_OURS="$OURS" DIFF_ROOT="$WORK/root" \
  DIFF_WORK="$WORK" DIFF_LISTED="$ROOT/conformance/DIFFERENCES.md" \
  python3 "$ROOT/scripts/differential.py" "$@" | tee "$WORK/result.out" || rc=$?
[[ -s "$WORK/result.out" ]] || rc=1
if [[ -n "${DIFF_SHADOW:-}" ]]; then
  python3 - "$CLUSTER/logs/audit.log" "$SHADOW_USER" <<'PY' || rc=1
import json, sys, collections
verbs = collections.Counter()
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("stage") == "ResponseComplete" and e.get("user", {}).get("username") == sys.argv[2]:
        verbs[e.get("verb")] += 1
writes = sum(n for v, n in verbs.items() if v not in ("get", "list", "watch"))
print(f"audit: {sum(verbs.values())} requests from {sys.argv[2]} ({', '.join(f'{v} {n}' for v, n in sorted(verbs.items()))}), {writes} writes")
sys.exit(0 if verbs and writes == 0 else 1)
PY
fi
exit "$rc"
