#!/usr/bin/env bash
# The Helm chart (deploy/chart/) with Helm itself (helm.sh/helm/v4, built by conformance/build.sh
# into conformance/bin/helm), offline and on the real cluster of scripts/real-cluster.sh.
#
# Offline: `helm lint --strict`; the chart's version is the controller's (Cargo.toml); the default
# rendering (two replicas, --leader-elect in the release's namespace, --metrics-secure, HTTPS
# probes, resources, non-root, read-only root filesystem, a PodDisruptionBudget, no host-path
# root); every value rendered as documented (workers, resync period, feature gates, log format,
# host-path root, extra args, node selector, tolerations, affinity, digest, ServiceMonitor);
# values.schema.json refusing each wrong value with a message naming it; the chart's RBAC the
# same objects as `kubectl kustomize deploy/` (deploy/rbac.yaml); the chart packaged, pushed to
# crane's registry on loopback as an OCI artifact and rendered from there as from the directory.
#
# On the real cluster (kube-apiserver with RBAC, KCM without its PV binder; no kubelet runs, so
# the Deployment's pods are never started): `helm install` creates the objects; `run`, started by
# hand with the Deployment's own arguments and a token of the chart's ServiceAccount, takes the
# Lease and binds a pair with no request refused; `helm upgrade` changes the Deployment and keeps
# the release when a value is wrong; `helm uninstall` leaves none of the chart's objects (its
# ReplicaSets and pods collected too). Then kustomize: `kubectl apply -k deploy/` and
# `kubectl delete -k deploy/`.
#
# Needs Go (for helm and the cluster) and kubectl; skips, saying so, without them.
# Last line: `e2e-helm: N checks passed`.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
GO="$(command -v go || echo /usr/local/go/bin/go)"
if [[ ! -x "$GO" ]]; then echo "e2e-helm: skipped: Go not installed (helm and the cluster are built with it)"; exit 0; fi
if ! command -v kubectl >/dev/null 2>&1; then echo "e2e-helm: skipped: kubectl not installed (.ci/run installs it)"; exit 0; fi
WORK="$(mktemp -d)"
CLUSTER="$WORK/cluster"
CHART="$ROOT/deploy/chart"
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/pv-controller"
RUN_PID="" REGISTRY_PID=""
cleanup() {
  local p
  for p in "$RUN_PID" "$REGISTRY_PID"; do
    if [[ -n "$p" ]]; then kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; fi
  done
  "$ROOT/scripts/real-cluster.sh" down "$CLUSTER" >/dev/null 2>&1 || true
  [[ -n "${KEEP_WORK:-}" ]] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
  echo "FAIL: $*" >&2
  [[ -f "$WORK/run.log" ]] && { echo "--- run log:"; tail -30 "$WORK/run.log"; } >&2
  exit 1
}
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"
PASSED=0

(cd "$ROOT" && cargo build --quiet --release --bin pv-controller) || fail "cargo build --release"
CONF_BIN="$("$ROOT/conformance/build.sh" 2>"$WORK/build.err" | tail -1)" || { cat "$WORK/build.err" >&2; fail "conformance/build.sh"; }
HELM="$CONF_BIN/helm"
[[ -x "$HELM" ]] || fail "conformance/build.sh did not build helm"
# Helm's own state (repositories, cache, plugins) stays in the scratch directory.
export HELM_CACHE_HOME="$WORK/helm/cache" HELM_CONFIG_HOME="$WORK/helm/config" HELM_DATA_HOME="$WORK/helm/data"
SECONDS=0

# h NAME ARGS...: runs helm, requires exit 0; stdout kept in $WORK/out.
h() {
  local name="$1"; shift
  "$HELM" "$@" >"$WORK/out" 2>"$WORK/err" || { echo "--- stdout:"; cat "$WORK/out"; echo "--- stderr:"; cat "$WORK/err"; fail "$name: helm $* exited non-zero"; }
  pass "$name"
}
# check NAME PYTHON: runs PYTHON with `docs` (the YAML documents of $WORK/out) and `find(kind,
# name=None)`; an AssertionError fails NAME with its message.
check() {
  local name="$1"
  python3 - "$WORK/out" "$2" <<'PY' || fail "$name"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
def find(kind, name=None):
    got = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(got) == 1, f"{len(got)} {kind} {name or ''} in the rendering: {[d['kind'] + '/' + d['metadata']['name'] for d in docs]}"
    return got[0]
def container():
    return find("Deployment")["spec"]["template"]["spec"]["containers"][0]
try:
    exec(sys.argv[2])
except AssertionError as e:
    print(f"assertion failed: {e}", file=sys.stderr)
    sys.exit(1)
PY
  pass "$name"
}

# --- offline: lint, version, defaults -----------------------------------------------------------
h "helm version" version --short
expect '^v4\.'
h "helm lint --strict" lint --strict "$CHART"
expect '1 chart\(s\) linted, 0 chart\(s\) failed'
CARGO_VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml" | head -1)"
h "helm show chart" show chart "$CHART"
grep -qx "appVersion: $CARGO_VERSION" "$WORK/out" || fail "Chart.yaml's appVersion is not Cargo.toml's version $CARGO_VERSION"
pass "the chart's appVersion is the controller's version ($CARGO_VERSION)"

h "helm template (defaults)" template pv-controller "$CHART" --namespace kube-system
check "defaults: two replicas, leader election in the release's namespace, secure metrics" '
d = find("Deployment", "pv-controller")
assert d["metadata"]["namespace"] == "kube-system"
assert d["spec"]["replicas"] == 2, d["spec"]["replicas"]
a = container()["args"]
assert a[0] == "run", a
for want in ["--leader-elect", "--leader-elect-namespace=kube-system", "--leader-elect-resource-name=pv-controller",
             "--metrics-addr=0.0.0.0:9090", "--metrics-secure", "--resync-period=15s", "--log-format=json"]:
    assert want in a, f"{want} not in {a}"
assert not any(x.startswith(("--hostpath-root", "--workers", "--feature-gates")) for x in a), a
assert container()["image"] == "pv-controller:v'"$CARGO_VERSION"'", container()["image"]
'
check "defaults: probes, resources, non-root, read-only root filesystem" '
c = container()
assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics", "scheme": "HTTPS"}, c["livenessProbe"]
assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics", "scheme": "HTTPS"}, c["readinessProbe"]
assert c["resources"] == {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "512Mi"}}, c["resources"]
assert c["securityContext"]["readOnlyRootFilesystem"] is True and c["securityContext"]["allowPrivilegeEscalation"] is False
assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
p = find("Deployment")["spec"]["template"]["spec"]
assert p["securityContext"]["runAsNonRoot"] is True and p["securityContext"]["runAsUser"] == 65532, p["securityContext"]
assert p["serviceAccountName"] == "pv-controller"
assert "volumes" not in p and "volumeMounts" not in c
assert p["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
assert p["tolerations"][0]["key"] == "node-role.kubernetes.io/control-plane"
'
check "defaults: a PodDisruptionBudget, no Service or ServiceMonitor" '
pdb = find("PodDisruptionBudget", "pv-controller")
assert pdb["spec"]["minAvailable"] == 1
assert pdb["spec"]["selector"]["matchLabels"] == find("Deployment")["spec"]["selector"]["matchLabels"]
assert not [d for d in docs if d["kind"] in ("Service", "ServiceMonitor")]
'
h "helm template -n other (another namespace and release name)" template ctl "$CHART" --namespace other --set replicaCount=1
check "names and namespace follow the release; no PodDisruptionBudget for one replica" '
d = find("Deployment", "ctl-pv-controller")
assert d["metadata"]["namespace"] == "other"
a = container()["args"]
assert "--leader-elect-namespace=other" in a and "--leader-elect-resource-name=ctl-pv-controller" in a, a
role = find("Role", "ctl-pv-controller-leader-election")
assert role["metadata"]["namespace"] == "other" and role["rules"][1]["resourceNames"] == ["ctl-pv-controller"], role
assert find("ClusterRoleBinding", "ctl-pv-controller")["subjects"] == [{"kind": "ServiceAccount", "name": "ctl-pv-controller", "namespace": "other"}]
assert not [x for x in docs if x["kind"] == "PodDisruptionBudget"]
'

# --- offline: every value -----------------------------------------------------------------------
cat >"$WORK/all.yaml" <<'EOF'
image: {repository: registry.example.com/storage/pv-controller, digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
imagePullSecrets: [{name: regcred}]
replicaCount: 3
workers: 8
resyncPeriod: 1m30s
featureGates: {VolumeAttributesClass: true, HonorPVReclaimPolicy: true}
logFormat: text
verbosity: 2
detailedEvents: true
hostPathRoot: /var/lib/pv-controller/volumes
extraArgs: [--pv-recycler-minimum-timeout-nfs=600]
metrics: {secure: false, port: 9443, serviceMonitor: {enabled: true, interval: 1m, labels: {release: prometheus}}}
podDisruptionBudget: {minAvailable: 2}
nodeSelector: {node-role.kubernetes.io/control-plane: ""}
tolerations: [{key: dedicated, operator: Equal, value: storage, effect: NoSchedule}]
affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: storage, operator: Exists}]}]}}}
podAnnotations: {example.com/team: storage}
EOF
h "helm template -f (every value set)" template pv-controller "$CHART" --namespace kube-system -f "$WORK/all.yaml"
check "every value reaches the Deployment" '
d = find("Deployment")
p = d["spec"]["template"]["spec"]
c = container()
assert d["spec"]["replicas"] == 3
assert c["image"] == "registry.example.com/storage/pv-controller@sha256:" + "0123456789abcdef" * 4, c["image"]
assert p["imagePullSecrets"] == [{"name": "regcred"}]
a = c["args"]
for want in ["--workers=8", "--resync-period=1m30s", "--feature-gates=HonorPVReclaimPolicy=true,VolumeAttributesClass=true",
             "--log-format=text", "--v=2", "--detailed-events", "--hostpath-root=/var/lib/pv-controller/volumes",
             "--pv-recycler-minimum-timeout-nfs=600", "--metrics-addr=0.0.0.0:9443"]:
    assert want in a, f"{want} not in {a}"
assert "--metrics-secure" not in a, a
assert c["livenessProbe"]["httpGet"]["scheme"] == "HTTP" and c["ports"][0]["containerPort"] == 9443
assert c["volumeMounts"] == [{"name": "hostpath-root", "mountPath": "/var/lib/pv-controller/volumes"}], c.get("volumeMounts")
assert p["volumes"] == [{"name": "hostpath-root", "hostPath": {"path": "/var/lib/pv-controller/volumes", "type": "DirectoryOrCreate"}}]
assert p["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
assert p["tolerations"] == [{"key": "dedicated", "operator": "Equal", "value": "storage", "effect": "NoSchedule"}]
assert list(p["affinity"]) == ["nodeAffinity"], p["affinity"]
assert d["spec"]["template"]["metadata"]["annotations"] == {"example.com/team": "storage"}
assert find("PodDisruptionBudget")["spec"]["minAvailable"] == 2
'
check "ServiceMonitor and its Service" '
svc = find("Service", "pv-controller-metrics")
assert svc["spec"]["ports"][0]["port"] == 9443 and svc["spec"]["ports"][0]["targetPort"] == "metrics"
assert svc["spec"]["selector"] == find("Deployment")["spec"]["selector"]["matchLabels"]
sm = find("ServiceMonitor", "pv-controller")
assert sm["metadata"]["labels"]["release"] == "prometheus"
ep = sm["spec"]["endpoints"][0]
assert ep["port"] == "metrics" and ep["scheme"] == "http" and ep["interval"] == "1m", ep
for k, v in sm["spec"]["selector"]["matchLabels"].items():
    assert svc["metadata"]["labels"][k] == v, (k, v)
'
h "helm template (secure ServiceMonitor)" template pv-controller "$CHART" --set metrics.serviceMonitor.enabled=true
check "a secure ServiceMonitor scrapes over HTTPS with Prometheus' token" '
ep = find("ServiceMonitor")["spec"]["endpoints"][0]
assert ep["scheme"] == "https" and ep["bearerTokenFile"].endswith("/serviceaccount/token") and ep["tlsConfig"] == {"insecureSkipVerify": True}, ep
'
h "helm template (affinity {})" template pv-controller "$CHART" --set-json 'affinity={}'
check "affinity {} sets none" 'assert "affinity" not in find("Deployment")["spec"]["template"]["spec"]'

# --- offline: the schema refuses wrong values ---------------------------------------------------
# refuse NAME PATTERN HELM_ARGS...: `helm template` with these values must fail, saying PATTERN.
refuse() {
  local name="$1" pattern="$2"; shift 2
  if "$HELM" template pv-controller "$CHART" "$@" >"$WORK/out" 2>"$WORK/err"; then
    fail "schema: $name: helm template $* succeeded"
  fi
  grep -Eq -- "$pattern" "$WORK/err" || { cat "$WORK/err"; fail "schema: $name: the error does not say /$pattern/"; }
  pass "schema refuses $name"
}
refuse "replicaCount 0" "replicaCount.*(minimum|less than)" --set replicaCount=0
refuse "replicaCount as a string" "replicaCount.*(integer|type)" --set-string replicaCount=two
refuse "an unknown log format" "logFormat" --set logFormat=xml
refuse "a resync period without a unit" "resyncPeriod" --set resyncPeriod=15
refuse "workers 0" "workers" --set workers=0
refuse "a feature gate that is not a bool" "featureGates" --set-string featureGates.VolumeAttributesClass=yes
refuse "a relative host-path root" "hostPathRoot" --set hostPathRoot=volumes
refuse "an unknown key (a typo)" "replicas" --set replicas=3
refuse "two replicas without leader election" "leaderElection" --set leaderElection.enabled=false
refuse "a malformed digest" "digest" --set image.digest=latest
refuse "an extra argument that is no flag" "extraArgs" --set 'extraArgs[0]=run'
refuse "a metrics port out of range" "port" --set metrics.port=70000
h "helm template (one replica without leader election)" template pv-controller "$CHART" --set replicaCount=1 --set leaderElection.enabled=false
check "one replica may run without leader election" 'assert not any(x.startswith("--leader-elect") for x in container()["args"])'

h "helm template (shadow mode)" template pv-controller "$CHART" --namespace kube-system --set shadow.enabled=true --set hostPathRoot=/var/lib/x
check "shadow mode: one replica, run --shadow, read-only RBAC, no Lease" '
d = find("Deployment")
a = container()["args"]
assert d["spec"]["replicas"] == 1, d["spec"]["replicas"]
assert "--shadow" in a and "--shadow-settle=20s" in a, a
assert not [x for x in a if x.startswith(("--leader-elect", "--metrics-secure", "--hostpath-root"))], a
assert container()["readinessProbe"]["httpGet"]["scheme"] == "HTTP"
verbs = {v for r in find("ClusterRole", "pv-controller")["rules"] for v in r["verbs"]}
assert verbs == {"get", "list", "watch"}, verbs
assert not [x for x in docs if x["kind"] in ("Role", "RoleBinding", "PodDisruptionBudget")]
'

# --- offline: one RBAC with kustomize -----------------------------------------------------------
h "helm template (RBAC)" template pv-controller "$CHART" --namespace kube-system
cp "$WORK/out" "$WORK/chart.yaml"
kubectl kustomize "$ROOT/deploy" >"$WORK/kustomize.yaml" || fail "kubectl kustomize deploy/"
python3 - "$WORK/chart.yaml" "$WORK/kustomize.yaml" <<'PY' || fail "the chart's RBAC differs from deploy/rbac.yaml"
import json, sys, yaml
RBAC = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
def rbac(path):
    out = {}
    for d in yaml.safe_load_all(open(path)):
        if not d or d["kind"] not in RBAC:
            continue
        m = d["metadata"]
        # The chart adds Helm's labels (instance, version, chart, managed-by); the name label is shared.
        labels = {k: v for k, v in m.get("labels", {}).items() if k == "app.kubernetes.io/name"}
        key = (d["kind"], m.get("namespace", ""), m["name"])
        out[key] = {"apiVersion": d["apiVersion"], "labels": labels,
                    **{f: d[f] for f in ("rules", "roleRef", "subjects") if f in d}}
    return out
chart, kust = rbac(sys.argv[1]), rbac(sys.argv[2])
bad = False
for key in sorted(set(chart) | set(kust)):
    if chart.get(key) != kust.get(key):
        bad = True
        print(f"{'/'.join(key)}:\n  chart:     {json.dumps(chart.get(key))}\n  kustomize: {json.dumps(kust.get(key))}", file=sys.stderr)
print(f"{len(chart)} RBAC objects, the same in both" if not bad else "differ", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
pass "the chart's RBAC objects are deploy/rbac.yaml's (kubectl kustomize deploy/)"

# --- the chart as an OCI artifact, through crane's registry on loopback ------------------------
"$CONF_BIN/crane" registry serve --address 127.0.0.1:0 2>"$WORK/registry.log" &
REGISTRY_PID=$!
registry_port() { grep -qs 'serving on port' "$WORK/registry.log"; }
wait_until "crane registry serve to listen" 10 registry_port
REGISTRY="127.0.0.1:$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$WORK/registry.log")"
h "helm package" package "$CHART" --destination "$WORK/pkg"
expect "pv-controller-$CARGO_VERSION\.tgz"
h "helm push (OCI)" push "$WORK/pkg/pv-controller-$CARGO_VERSION.tgz" "oci://$REGISTRY/charts" --plain-http
h "helm template from the OCI artifact" template pv-controller "oci://$REGISTRY/charts/pv-controller" --version "$CARGO_VERSION" \
  --plain-http --namespace kube-system
diff "$WORK/chart.yaml" "$WORK/out" >&2 || fail "the chart from the registry renders differently from deploy/chart/"
pass "the pushed chart renders as deploy/chart/ does"
kill "$REGISTRY_PID"; wait "$REGISTRY_PID" 2>/dev/null || true; REGISTRY_PID=""

# --- the real cluster ---------------------------------------------------------------------------
"$ROOT/scripts/real-cluster.sh" up "$CLUSTER" --kcm '*,-persistentvolume-binder-controller' >"$WORK/up.out" 2>&1 \
  || { cat "$WORK/up.out" >&2; fail "real-cluster.sh up"; }
export KUBECONFIG="$CLUSTER/kubeconfig" KUBECACHEDIR="$WORK/kube-cache"
pass "real cluster up ($(sed -n 's/^server: //p' "$WORK/up.out"))"

h "helm install" install pv-controller "$CHART" --namespace kube-system --set image.repository=registry.example.com/pv-controller
expect 'STATUS: deployed'
expect 'persistentvolume-binder'
pass "NOTES.txt says how to switch KCM's binder off"
OBJECTS=(deployment/pv-controller serviceaccount/pv-controller poddisruptionbudget/pv-controller
  role.rbac.authorization.k8s.io/pv-controller-leader-election rolebinding.rbac.authorization.k8s.io/pv-controller-leader-election
  clusterrole.rbac.authorization.k8s.io/pv-controller clusterrole.rbac.authorization.k8s.io/pv-controller-metrics-reader
  clusterrolebinding.rbac.authorization.k8s.io/pv-controller)
k "the chart's objects exist" get -n kube-system "${OBJECTS[@]}" -o jsonpath='{range .items[*]}{.kind}/{.metadata.name} {.metadata.labels.app\.kubernetes\.io/managed-by}{"\n"}{end}'
[[ "$(grep -c ' Helm$' "$WORK/out")" == "${#OBJECTS[@]}" ]] || { cat "$WORK/out"; fail "not every object is Helm's"; }
k "the Deployment as rendered" get deployment -n kube-system pv-controller -o jsonpath='{.spec.replicas} {.spec.template.spec.containers[0].image} {.spec.template.spec.serviceAccountName}'
expect "^2 registry.example.com/pv-controller:v$CARGO_VERSION pv-controller\$"
h "helm list" list -n kube-system
expect '^pv-controller\s+kube-system\s+1\s+.*deployed'

# run as the Deployment would: its arguments, the chart's ServiceAccount (RBAC checked by the
# real authorizer), metrics on a free loopback port instead of 0.0.0.0:9090.
SA_KC="$WORK/sa.kubeconfig"
"$BIN" kubeconfig --service-account kube-system/pv-controller --duration 1h >"$SA_KC" 2>"$WORK/err" || { cat "$WORK/err"; fail "pv-controller kubeconfig --service-account"; }
pass "a kubeconfig with a token of the chart's ServiceAccount"
k "whoami as the chart's ServiceAccount" --kubeconfig "$SA_KC" auth whoami
expect 'system:serviceaccount:kube-system:pv-controller'
mapfile -t ARGS < <(kubectl get deployment -n kube-system pv-controller -o jsonpath='{range .spec.template.spec.containers[0].args[*]}{@}{"\n"}{end}')
[[ "${ARGS[0]}" == run ]] || fail "the Deployment's first argument is ${ARGS[0]}, not run"
PORT="$(free_port)"
ARGS=("${ARGS[@]/#--metrics-addr=*/--metrics-addr=127.0.0.1:$PORT}")
echo "   pv-controller ${ARGS[*]}"
"$BIN" "${ARGS[@]}" --kubeconfig "$SA_KC" >"$WORK/run.out" 2>"$WORK/run.log" &
RUN_PID=$!
ready() { kill -0 "$RUN_PID" 2>/dev/null || fail "run exited"; [[ "$(curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:$PORT/readyz")" == 200 ]]; }
wait_until "run with the chart's arguments ready (/readyz over HTTPS)" 60 ready
pass "run with the Deployment's arguments is ready"
holder() { [[ -n "$(q get lease -n kube-system pv-controller -o jsonpath='{.spec.holderIdentity}' 2>/dev/null)" ]]; }
wait_until "the Lease kube-system/pv-controller held" 30 holder
pass "run holds the Lease the chart's Role allows"
create_static_pair helm default
k "the pair binds" wait -n default pvc/helm --for=jsonpath='{.status.phase}'=Bound --timeout=30s
wait_until "pv-helm Bound" 30 pv_phase_is pv-helm Bound
pass "the volume is Bound too"
# A whole word, as in e2e-real.sh: a log line's timestamp may hold the digits 403.
! grep -Eiq 'forbidden|\b403\b' "$WORK/run.log" || { grep -Ei 'forbidden|\b403\b' "$WORK/run.log" | head -5; fail "run was refused a request"; }
pass "no request of run refused (403)"
kill "$RUN_PID"; wait "$RUN_PID" || true; RUN_PID=""

# The README's upgrade, then more values at once.
h "helm upgrade (the README's)" upgrade pv-controller "$CHART" --namespace kube-system --reuse-values --set resyncPeriod=30s
k "the Deployment's resync period changed" get deployment -n kube-system pv-controller -o jsonpath='{.spec.template.spec.containers[0].args}'
expect '"--resync-period=30s"'
h "helm upgrade (replicas, log format, feature gates)" upgrade pv-controller "$CHART" --namespace kube-system --reuse-values \
  --set replicaCount=3 --set logFormat=text --set-json 'featureGates={"VolumeAttributesClass":true}'
k "the Deployment changed" get deployment -n kube-system pv-controller -o jsonpath='{.spec.replicas} {.spec.template.spec.containers[0].args}'
expect '^3 .*"--resync-period=30s".*"--log-format=text".*"--feature-gates=VolumeAttributesClass=true"'
h "helm history" history pv-controller -n kube-system
expect '^3\s.*deployed'
if "$HELM" upgrade pv-controller "$CHART" --namespace kube-system --reuse-values --set logFormat=xml >"$WORK/out" 2>"$WORK/err"; then
  fail "helm upgrade with logFormat=xml succeeded"
fi
grep -q logFormat "$WORK/err" || { cat "$WORK/err"; fail "helm upgrade with a wrong value: the error does not name logFormat"; }
k "a refused upgrade changes nothing" get deployment -n kube-system pv-controller -o jsonpath='{.spec.replicas} {.spec.template.spec.containers[0].args}'
expect '^3 .*"--log-format=text"'
h "helm status after the refused upgrade" status pv-controller -n kube-system
expect 'REVISION: 3'
pass "helm upgrade with a wrong value is refused by the schema; the release stays at revision 3"

h "helm uninstall" uninstall pv-controller --namespace kube-system
left() {
  kubectl get deployment,serviceaccount,poddisruptionbudget,service,role,rolebinding,secret,configmap -A \
    -l app.kubernetes.io/instance=pv-controller -o name
  kubectl get clusterrole,clusterrolebinding -l app.kubernetes.io/instance=pv-controller -o name
  kubectl get secret -n kube-system -l owner=helm -o name
}
[[ -z "$(left)" ]] || { left; fail "helm uninstall left objects behind"; }
# The Deployment's ReplicaSet and (unscheduled) pods go with it, by KCM's garbage collector.
owned_gone() { [[ -z "$(q get replicaset,pod -n kube-system -l app.kubernetes.io/instance=pv-controller -o name)" ]]; }
wait_until "the Deployment's ReplicaSets and pods collected" 60 owned_gone
for o in "${OBJECTS[@]}"; do
  [[ -z "$(kubectl get -n kube-system "$o" --ignore-not-found -o name)" ]] || fail "$o is left after helm uninstall"
done
pass "helm uninstall leaves none of the chart's objects, nor its release record"
h "helm list after uninstall" list -A -q
[[ ! -s "$WORK/out" ]] || fail "helm list -A still lists: $(cat "$WORK/out")"

# kustomize, the second way: the same objects, then gone again.
k "kubectl apply -k deploy/" apply -k "$ROOT/deploy/"
k "kustomize's objects exist" get -n kube-system "${OBJECTS[@]}" -o name
[[ "$(wc -l <"$WORK/out")" == "${#OBJECTS[@]}" ]] || { cat "$WORK/out"; fail "kubectl apply -k deploy/ did not create every object"; }
k "kustomize's image" get deployment -n kube-system pv-controller -o jsonpath='{.spec.template.spec.containers[0].image}'
expect "^pv-controller:v$CARGO_VERSION\$"
k "kubectl delete -k deploy/" delete -k "$ROOT/deploy/"
for o in "${OBJECTS[@]}"; do
  [[ -z "$(kubectl get -n kube-system "$o" --ignore-not-found -o name)" ]] || fail "$o is left after kubectl delete -k deploy/"
done
pass "kubectl delete -k deploy/ removes every object"

echo "e2e-helm: ${SECONDS}s (builds excluded)"
echo "e2e-helm: $PASSED checks passed"
