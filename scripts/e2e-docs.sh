#!/usr/bin/env bash
# Runs every command of README.md and deploy/REPLACING.md as written, against `pv-controller up`,
# so the documentation cannot drift from the product.
#
# Commands are the lines of ```sh blocks, and inline `code` on prose lines that starts with
# kubectl, pv-controller, cargo or docker and is not a synopsis (no [optional] parts or
# UPPERCASE placeholders). They run in order, in one shell, in a scratch directory that holds
# the repository's examples/, deploy/ and scripts/ and where `.pv-controller/` is `up`'s data
# directory, exactly as a newcomer in the repository's directory would run them. Two
# substitutions, both for running next to other tests on one machine: `pv-controller up` gets
# `--listen 127.0.0.1:0 --metrics-addr 127.0.0.1:0` (free ports) and runs in the background
# until its `kubeconfig:`/`server:` lines; `cargo run --release --` is the built binary.
# Commands ending in ` -w` (watch) run for 3 s. Some commands are checked further (EXPECT).
#
# Commands that cannot run here are listed in EXCEPTIONS with the reason; a command that is
# neither run nor listed, or a listed one the documents no longer contain, fails the script.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d)"
BIN_DIR="${CARGO_TARGET_DIR:-$ROOT/target}/release"
UP_PID=""
cleanup() {
  if [[ -n "$UP_PID" ]]; then kill "$UP_PID" 2>/dev/null || true; wait "$UP_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { echo "FAIL: $*" >&2; [[ -f "$WORK/up.err" ]] && { echo "--- up stderr:"; tail -20 "$WORK/up.err"; } >&2; exit 1; }
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

command -v kubectl >/dev/null 2>&1 || { echo "skip: kubectl not installed (.ci/run installs it)"; exit 0; }
(cd "$ROOT" && cargo build --quiet --release --workspace) || fail "cargo build --release"

declare -A EXCEPTIONS=(
  ["cargo test --workspace"]="the test suite itself (.ci/run runs it, and this script)"
  ["bash .ci/run"]="the whole suite, which runs this script"
  ["cargo build --profile dist"]="a full LTO build takes many minutes; scripts/e2e-image.sh builds it (statically linked, scripts/build-dist.sh), tests/cli/dist_profile.rs checks the profile"
  ["scripts/build-image.sh /tmp/pv-controller-image"]="needs Go (crane) and the dist build; scripts/e2e-image.sh runs it and checks the layout"
  ["conformance/bin/crane push /tmp/pv-controller-image registry.example.com/pv-controller:v0.1.0"]="no registry here; scripts/e2e-image.sh pushes the layout so to crane's own registry on loopback"
  ["helm install pv-controller deploy/chart --namespace kube-system --set image.repository=registry.example.com/pv-controller"]="up serves no Deployments (apps/v1); scripts/e2e-helm.sh runs it on the real cluster"
  ["helm upgrade pv-controller deploy/chart --namespace kube-system --reuse-values --set resyncPeriod=30s"]="scripts/e2e-helm.sh runs it on the real cluster"
  ["helm uninstall pv-controller --namespace kube-system"]="scripts/e2e-helm.sh runs it on the real cluster"
  ["kubectl apply -k deploy/"]="up serves no Deployments (apps/v1); scripts/e2e-helm.sh runs it on the real cluster"
  ["scripts/build-krew.sh /tmp/pv-explain"]="needs the dist build; scripts/e2e-krew.sh runs it"
  ["kubectl krew install --manifest=/tmp/pv-explain/pv-explain.yaml --archive=/tmp/pv-explain/pv-explain-v0.1.0-linux-amd64.tar.gz"]="needs krew; scripts/e2e-krew.sh installs the archive so with krew built from sigs.k8s.io/krew"
  ["docker build -t registry.example.com/pv-controller:v0.1.0 ."]="no Docker daemon or registry here"
  ["docker push registry.example.com/pv-controller:v0.1.0"]="no Docker daemon or registry here"
  ["kubectl -n kube-system rollout status deployment/pv-controller"]="up serves no Deployments"
  ["kubectl -n kube-system get lease pv-controller -o jsonpath='{.spec.holderIdentity}{\"\\n\"}'"]="needs the Deployment of step 3; leader election is tested by tests/cli/run_cluster.rs, the chart's Lease by scripts/e2e-helm.sh"
  ["kubectl -n kube-system scale deployment/pv-controller --replicas=0"]="up serves no Deployments"
  ["kubectl delete -k deploy/"]="up serves no Deployments (apps/v1); scripts/e2e-helm.sh runs it on the real cluster"
  ["scripts/real-cluster.sh up /tmp/k --kcm '*,-persistentvolume-binder-controller' --scheduler"]="the real-cluster steps need Go; scripts/e2e-real.sh starts the bundled cluster this way and runs run as the deploy/ ServiceAccount"
  ["export KUBECONFIG=/tmp/k/kubeconfig"]="a real-cluster step (scripts/e2e-real.sh)"
  ["pv-controller kubeconfig --service-account kube-system/pv-controller > /tmp/k/pv-controller.kubeconfig"]="a real-cluster step (scripts/e2e-real.sh writes its ServiceAccount's kubeconfig so)"
  ["pv-controller kubeconfig --service-account kube-system/pv-controller > /tmp/k/new && mv /tmp/k/new /tmp/k/pv-controller.kubeconfig"]="a real-cluster step (scripts/e2e-real.sh revokes run's token and renews its kubeconfig so)"
  ["pv-controller run --kubeconfig /tmp/k/pv-controller.kubeconfig --hostpath-root /tmp/k/volumes --leader-elect"]="a real-cluster step (scripts/e2e-real.sh runs two replicas so)"
  ["kubectl apply --dry-run=server -k deploy/"]="up serves no Deployments (apps/v1); scripts/e2e-real.sh runs it against kube-apiserver"
  ["scripts/differential.sh"]="needs Go and takes half an hour; scripts/e2e-differential.sh runs the same script on a subset"
  ["scripts/differential.sh tests/scenarios/provision-hostpath-internal.yaml my-cluster-state.yaml"]="needs Go; scripts/e2e-differential.sh runs the script on scenario files"
  ["scripts/real-cluster.sh down /tmp/k"]="a real-cluster step (scripts/e2e-real.sh stops its cluster so)"
  ["conformance/build.sh"]="needs the Go-built sidecars and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written"
  ["export PATH=\$PWD/conformance/bin:\$PWD/target/release:\$PATH"]="needs the Go-built sidecars and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written"
  ["pv-controller up --data-dir csi-demo --listen 127.0.0.1:0 --metrics-addr 127.0.0.1:0 --scheduler --controllers '*,attachdetach' &"]="needs the Go-built sidecars and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written"
  ["export KUBECONFIG=\$PWD/csi-demo/kubeconfig CSI_ENDPOINT=\$PWD/csi-demo/csi.sock"]="needs the Go-built sidecars and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written"
  ["until kubectl --kubeconfig csi-demo/kubeconfig get --raw /readyz >/dev/null 2>&1; do sleep 0.2; done"]="waits for the CSI section's up; scripts/e2e-csi.sh runs the commands of this README section as written, and the block as one script"
  ["mock-driver --enable-topology &"]="needs the Go-built sidecars and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written"
  ["csi-provisioner --kubeconfig \$KUBECONFIG --csi-address \$CSI_ENDPOINT &"]="needs the Go-built sidecars and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written"
  ["csi-attacher --kubeconfig \$KUBECONFIG --csi-address \$CSI_ENDPOINT &"]="needs the Go-built sidecars and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written"
  ["csi-resizer --kubeconfig \$KUBECONFIG --csi-address \$CSI_ENDPOINT &"]="needs the Go-built sidecars and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written"
  ["kubectl apply -f examples/csi/"]="needs the Go-built sidecars and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written"
  ["kubectl wait pvc -n csi data --for=jsonpath='{.status.phase}'=Bound --timeout=30s"]="needs the Go-built sidecars and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written"
  ["kubectl apply -f conformance/bin/crd/snapshot/"]="needs the Go-built snapshot-controller, csi-snapshotter and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written, on both servers"
  ["kubectl wait crd --for=condition=Established --timeout=30s volumesnapshotclasses.snapshot.storage.k8s.io volumesnapshotcontents.snapshot.storage.k8s.io volumesnapshots.snapshot.storage.k8s.io"]="needs the Go-built snapshot-controller, csi-snapshotter and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written, on both servers"
  ["snapshot-controller --kubeconfig \$KUBECONFIG &"]="needs the Go-built snapshot-controller, csi-snapshotter and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written, on both servers"
  ["csi-snapshotter --kubeconfig \$KUBECONFIG --csi-address \$CSI_ENDPOINT &"]="needs the Go-built snapshot-controller, csi-snapshotter and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written, on both servers"
  ["kubectl apply -f examples/csi/snapshot/snapshotclass.yaml"]="needs the Go-built snapshot-controller, csi-snapshotter and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written, on both servers"
  ["kubectl apply -f examples/csi/snapshot/snapshot.yaml"]="needs the Go-built snapshot-controller, csi-snapshotter and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written, on both servers"
  ["kubectl wait volumesnapshot -n csi data-snapshot --for=jsonpath='{.status.readyToUse}'=true --timeout=30s"]="needs the Go-built snapshot-controller, csi-snapshotter and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written, on both servers"
  ["kubectl get volumesnapshot -n csi"]="needs the Go-built snapshot-controller, csi-snapshotter and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written, on both servers"
  ["kubectl apply -f examples/csi/snapshot/restore.yaml"]="needs the Go-built snapshot-controller, csi-snapshotter and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written, on both servers"
  ["kubectl wait pvc -n csi restored --for=jsonpath='{.status.phase}'=Bound --timeout=30s"]="needs the Go-built snapshot-controller, csi-snapshotter and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written, on both servers"
  ["kubectl delete pvc -n csi restored"]="needs the Go-built snapshot-controller, csi-snapshotter and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written, on both servers"
  ["kubectl delete volumesnapshot -n csi data-snapshot"]="needs the Go-built snapshot-controller, csi-snapshotter and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written, on both servers"
  ["kubectl patch node csi-node --subresource=status --type=merge -p '{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\"}],\"capacity\":{\"pods\":\"110\"},\"allocatable\":{\"pods\":\"110\"}}}'"]="needs the Go-built sidecars and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written, on both servers (kube-scheduler and KCM on the real cluster, the stand-ins on up)"
  ["kubectl apply -f examples/csi/pod/"]="needs the Go-built sidecars and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written, on both servers (kube-scheduler and KCM on the real cluster, the stand-ins on up)"
  ["kubectl wait pod -n csi app --for=jsonpath='{.spec.nodeName}'=csi-node --timeout=60s"]="needs the Go-built sidecars and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written, on both servers (kube-scheduler and KCM on the real cluster, the stand-ins on up)"
  ["kubectl get pvc -n csi app-data -o jsonpath='{.metadata.annotations.volume\\.kubernetes\\.io/selected-node}'"]="needs the Go-built sidecars and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written, on both servers (kube-scheduler and KCM on the real cluster, the stand-ins on up)"
  ["kubectl wait node csi-node --for=jsonpath='{.status.volumesAttached}' --timeout=30s"]="needs the Go-built sidecars and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written, on both servers (kube-scheduler and KCM on the real cluster, the stand-ins on up)"
  ["kubectl get volumeattachments"]="needs the Go-built sidecars and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written, on both servers (kube-scheduler and KCM on the real cluster, the stand-ins on up)"
  ["kubectl delete pod -n csi app --grace-period=0 --force"]="needs the Go-built sidecars and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written, on both servers (kube-scheduler and KCM on the real cluster, the stand-ins on up)"
  ["kubectl wait volumeattachment --all --for=delete --timeout=30s"]="needs the Go-built sidecars and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written, on both servers (kube-scheduler and KCM on the real cluster, the stand-ins on up)"
  ["kubectl delete pvc -n csi app-data"]="needs the Go-built sidecars and mock driver; scripts/e2e-csi.sh runs the commands of this README section as written, on both servers (kube-scheduler and KCM on the real cluster, the stand-ins on up)"
  ["kubectl apply -k deploy/shadow/"]="needs a real cluster with Deployments and KCM's binder; scripts/e2e-shadow.sh runs the shadow as deploy/shadow/'s ServiceAccount beside KCM on kube-apiserver"
  ["kubectl -n kube-system rollout status deployment/pv-controller-shadow"]="needs a real cluster with Deployments and KCM's binder; scripts/e2e-shadow.sh runs the shadow as deploy/shadow/'s ServiceAccount beside KCM on kube-apiserver"
  ["kubectl -n kube-system port-forward deployment/pv-controller-shadow 9090:9090 &"]="needs a real cluster with Deployments and KCM's binder; scripts/e2e-shadow.sh runs the shadow as deploy/shadow/'s ServiceAccount beside KCM on kube-apiserver"
  ["pv-controller shadow report http://127.0.0.1:9090"]="needs a real cluster with Deployments and KCM's binder; scripts/e2e-shadow.sh runs the shadow as deploy/shadow/'s ServiceAccount beside KCM on kube-apiserver"
  ["kubectl delete -k deploy/shadow/"]="needs a real cluster with Deployments and KCM's binder; scripts/e2e-shadow.sh runs the shadow as deploy/shadow/'s ServiceAccount beside KCM on kube-apiserver"
  ["kill \$(jobs -p)"]="ends the CSI and the binder sections' background jobs; scripts/e2e-csi.sh and scripts/e2e-protection.sh run those sections as written"
  ["pv-controller up --controllers '*,-persistentvolume-binder-controller' --data-dir binder-demo --listen 127.0.0.1:0 --metrics-addr 127.0.0.1:0 &"]="a second up, with run as its binder, beside this script's; scripts/e2e-protection.sh runs the commands of this README section as written"
  ["export KUBECONFIG=\$PWD/binder-demo/kubeconfig"]="a second up, with run as its binder, beside this script's; scripts/e2e-protection.sh runs the commands of this README section as written"
  ["pv-controller run --hostpath-root binder-demo/volumes --metrics-addr 127.0.0.1:0 &"]="a second up, with run as its binder, beside this script's; scripts/e2e-protection.sh runs the commands of this README section as written"
  ["kubectl create -f examples/up/"]="a second up, with run as its binder, beside this script's; scripts/e2e-protection.sh runs the commands of this README section as written"
  ["kubectl wait pvc -n demo small --for=jsonpath='{.status.phase}'=Bound --timeout=30s"]="a second up, with run as its binder, beside this script's; scripts/e2e-protection.sh runs the commands of this README section as written"
  ["kubectl delete pvc -n demo small --timeout=30s"]="a second up, with run as its binder, beside this script's; scripts/e2e-protection.sh runs the commands of this README section as written"
  ["PV_FAULT_SEEDS=30 cargo test -p pv-sim --release --test scenarios"]="a long run of a test .ci/run runs with defaults"
  ["PV_PROPTEST_CASES=2000 cargo test -p pv-sim --release --test sim properties::"]="a long run of a test .ci/run runs with defaults"
  ["PV_LOAD_N=20000 cargo test --release -p pv-apiserver --test load -- --nocapture"]="a long run of a test .ci/run runs with defaults"
)

# What some commands must print (an extended regex), retried for 30 s: binding is asynchronous.
declare -A EXPECT=(
  ["kubectl get pv"]="pvc-.*Bound"
  ["kubectl get pvc -n demo"]="reserved +Bound +pv-20g"
  ["ls .pv-controller/volumes/"]="^pvc-"
  ["kubectl describe pvc -n demo logs"]="ProvisioningSucceeded"
  ["pv-controller explain pvc demo/small"]="pv-5g"
  ["pv-controller explain pvc demo/small --kubeconfig .pv-controller/kubeconfig"]="pv-5g"
  ["pv-controller explain pvc data/small -f examples/cluster.yaml -o json"]="\"bestMatch\": \"pv-5g\""
  ["pv-controller simulate -f examples/cluster.yaml -o yaml"]="volumeName: pv-5g"
  ["cargo run --release -- simulate -f examples/cluster.yaml -o yaml"]="volumeName: pv-5g"
  ["pv-controller explain pvc demo/later"]="selected-node"
  ["kubectl get pvc -n demo small -o jsonpath='{.spec.volumeName}'"]="^pv-5g$"
  ["pv-controller explain pvc data/small -f examples/cluster.yaml -o yaml"]="^bestMatch: pv-5g$"
  ["pv-controller simulate -f examples/cluster.yaml -o changes"]="^  data/small → pv-5g$"
  ["pv-controller explain pod demo/web-0 -f examples/explain/web-0.yaml"]="^Verdict: volume-node-affinity-conflict"
  ["pv-controller explain pvc -A -f examples/cluster.yaml"]="^3 claims not Bound: 1 provision, 2 bind$"
  ["pv-controller explain pvc -n demo --kubeconfig .pv-controller/kubeconfig -o json"]="^\\["
)

# The commands, one per line: FILE:LINE<TAB>COMMAND.
python3 - "$ROOT" "$ROOT/README.md" "$ROOT/deploy/REPLACING.md" >"$WORK/commands" <<'PY'
import re, sys
START = ("kubectl ", "pv-controller ", "cargo ", "docker ")
def synopsis(c):
    if re.fullmatch(r"pv-controller [a-z]+", c):
        return True  # the name of a subcommand in prose, not a step
    return "[" in c or "..." in c or re.search(r"(^|[\s/=])[A-Z][A-Z_]*(\b|$)", c.split("#")[0]) and not re.match(r"^[A-Z_]+=", c)
root = sys.argv[1]
for path in sys.argv[2:]:
    name = path[len(root) + 1:]
    fence = None
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.rstrip("\n")
        if line.startswith("```"):
            fence = None if fence is not None else line[3:].strip()
            continue
        if fence is not None:
            c = re.sub(r"\s+#.*$", "", line).strip()  # comments are for the reader
            if fence in ("sh", "bash") and c and not c.startswith("#"):
                print(f"{name}:{n}\t{c}")
            continue
        if line.lstrip().startswith("|"):
            continue  # table rows name commands, they are not steps
        for c in re.findall(r"`([^`]+)`", line):
            if c.startswith(START) and not synopsis(c):
                print(f"{name}:{n}\t{c}")
PY

mkdir -p "$WORK/target"
ln -s "$BIN_DIR" "$WORK/target/release"
for d in examples deploy scripts; do ln -s "$ROOT/$d" "$WORK/$d"; done
cd "$WORK"
export KUBECACHEDIR="$WORK/kube-cache"
unset KUBECONFIG

start_up() { # ARGS...: `pv-controller up ARGS` in the background, on free ports
  "$BIN_DIR/pv-controller" up "$@" --listen 127.0.0.1:0 --metrics-addr 127.0.0.1:0 >"$WORK/up.out" 2>"$WORK/up.err" &
  UP_PID=$!
  wait_line "$WORK/up.out" '^server: ' "$UP_PID" 30
}

ran=0
declare -A SEEN=()
while IFS=$'\t' read -r where cmd; do
  SEEN["$cmd"]=1
  if [[ -n "${EXCEPTIONS[$cmd]+x}" ]]; then
    echo "skip ($where): $cmd — ${EXCEPTIONS[$cmd]}"
    continue
  fi
  run="$cmd"
  run="${run/#cargo run --release -- /pv-controller }"
  echo "run  ($where): $cmd"
  if [[ "$run" =~ ^pv-controller\ up( |$) ]]; then
    # shellcheck disable=SC2086  # the documented flags, split as the shell would
    start_up ${run#pv-controller up}
    ran=$((ran + 1))
    continue
  fi
  timeout=""
  [[ "$run" == *" -w" ]] && timeout="timeout 3"
  want="${EXPECT[$cmd]:-}"
  for attempt in $(seq 60); do
    set +e
    if [[ "$run" == export\ * ]]; then
      eval "$run"; rc=$?; : >"$WORK/out"; : >"$WORK/err"
    elif [[ "$run" == cargo\ * ]]; then
      (cd "$ROOT" && eval "$run") >"$WORK/out" 2>"$WORK/err"; rc=$?
    else
      eval "$timeout $run" >"$WORK/out" 2>"$WORK/err"; rc=$?
    fi
    set -e
    [[ -n "$timeout" && $rc -eq 124 ]] && rc=0
    if [[ $rc -eq 0 ]] && { [[ -z "$want" ]] || grep -Eq "$want" "$WORK/out"; }; then break; fi
    if [[ -z "$want" ]] || (( attempt == 60 )); then
      echo "--- stdout:"; cat "$WORK/out"; echo "--- stderr:"; cat "$WORK/err"
      [[ $rc -eq 0 ]] && fail "$where: \`$cmd\` did not print /$want/" || fail "$where: \`$cmd\` exited $rc"
    fi
    sleep 0.5
  done
  ran=$((ran + 1))
done <"$WORK/commands"

# Manifests of the commands that cannot run against `up` are still checked offline.
kubectl kustomize "$ROOT/deploy" >/dev/null || fail "kubectl kustomize deploy/ fails"

for c in "${!EXCEPTIONS[@]}"; do
  [[ -n "${SEEN[$c]+x}" ]] || fail "EXCEPTIONS lists \`$c\`, which no document contains any more"
done
echo "docs: $ran commands run, ${#EXCEPTIONS[@]} listed exceptions; all passed"
