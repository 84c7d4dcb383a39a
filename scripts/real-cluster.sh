#!/usr/bin/env bash
# A real Kubernetes control plane on loopback, for tests and for trying `pv-controller run`:
# etcd and kube-apiserver, optionally kube-controller-manager and kube-scheduler, built from the
# Go modules in conformance/ (conformance/build.sh; needs Go).
#
#   scripts/real-cluster.sh up DIR [--kcm CONTROLLERS] [--scheduler]
#   scripts/real-cluster.sh down DIR
#
# up: generates a CA and serving certificate (openssl), service-account signing keys and a token
# file under DIR, starts etcd and kube-apiserver on free loopback ports with
# --authorization-mode=Node,RBAC and the default admission plugins (StorageObjectInUseProtection,
# DefaultStorageClass, ... act as in any cluster), waits for /readyz and prints, as its last two
# lines:
#   kubeconfig: DIR/kubeconfig      (cluster-admin: a token of a system:masters user)
#   server: https://127.0.0.1:PORT
# --kcm CONTROLLERS starts kube-controller-manager with --controllers=CONTROLLERS (e.g.
# '*,-persistentvolume-binder-controller'), as system:kube-controller-manager with per-controller
# service-account credentials, as kubeadm runs it. --scheduler starts kube-scheduler (as
# system:kube-scheduler) and creates a Ready Node "node-1" (no kubelet: nothing runs the pods, but
# the scheduler binds them). With no kubelet the node would go NotReady after the node lifecycle
# controller's grace period, so KCM runs with --node-monitor-grace-period=24h.
# Logs: DIR/logs/*.log (audit.log: every API request, at level Metadata). Extra flags: ETCD_FLAGS, APISERVER_FLAGS, KCM_FLAGS, SCHEDULER_FLAGS.
#
# down: stops exactly the processes that up started in DIR (DIR/pids/*.pid; a PID is signalled
# only while it still runs a binary of this cluster), scheduler and KCM first, etcd last.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
usage() { echo "usage: $0 up DIR [--kcm CONTROLLERS] [--scheduler] | down DIR" >&2; exit 1; }
die() { echo "real-cluster: $*" >&2; exit 1; }
now_ms() { date +%s%3N; }

[[ $# -ge 2 ]] || usage
CMD="$1" DIR="$2"; shift 2
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
PIDS="$DIR/pids"

# is_ours NAME PID: the PID still runs the binary NAME started for this cluster (not a reused PID).
is_ours() {
  local cmdline
  cmdline="$({ tr '\0' ' ' <"/proc/$2/cmdline"; } 2>/dev/null)" || return 1
  [[ "$cmdline" == *"/$1 "* && "$cmdline" == *"$DIR"* ]]
}

stop_one() {
  local name="$1" f="$PIDS/$1.pid" pid t0
  [[ -f "$f" ]] || return 0
  pid="$(cat "$f")"
  if is_ours "$name" "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    t0=$(now_ms)
    while is_ours "$name" "$pid"; do
      if (( $(now_ms) - t0 > 10000 )); then kill -KILL "$pid" 2>/dev/null || true; fi
      (( $(now_ms) - t0 < 15000 )) || break
      sleep 0.1
    done
  fi
  rm -f "$f"
}

down() {
  local name
  for name in kube-scheduler kube-controller-manager kube-apiserver etcd; do stop_one "$name"; done
  echo "real-cluster: stopped ($DIR)"
}

if [[ "$CMD" == down ]]; then
  [[ $# -eq 0 ]] || usage
  down
  exit 0
fi
[[ "$CMD" == up ]] || usage

KCM_CONTROLLERS="" SCHEDULER=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --kcm) [[ $# -ge 2 ]] || usage; KCM_CONTROLLERS="$2"; shift 2 ;;
    --kcm=*) KCM_CONTROLLERS="${1#--kcm=}"; shift ;;
    --scheduler) SCHEDULER=1; shift ;;
    *) usage ;;
  esac
done
for f in "$PIDS"/*.pid; do
  [[ -e "$f" ]] || continue
  n="$(basename "$f" .pid)"
  if is_ours "$n" "$(cat "$f")"; then die "$n of $DIR is still running (pid $(cat "$f")); run '$0 down $DIR' first"; fi
  rm -f "$f"
done

# --- binaries -----------------------------------------------------------------------------------
BIN="${REAL_CLUSTER_BIN:-}"
if [[ -z "$BIN" ]]; then
  # Only the control plane; build.sh says on stderr what it builds (minutes on a new machine).
  BIN="$("$ROOT/conformance/build.sh" --control-plane | tail -1)" || die "conformance/build.sh failed"
fi
for b in etcd kube-apiserver kube-controller-manager kube-scheduler; do
  [[ -x "$BIN/$b" ]] || die "$BIN/$b missing"
done

# --- ports, certificates, keys, tokens ----------------------------------------------------------
free_ports() {
  python3 - "$1" <<'EOF'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}
read -r ETCD_PORT PEER_PORT API_PORT KCM_PORT SCHED_PORT <<<"$(free_ports 5)"
SERVER="https://127.0.0.1:$API_PORT"

PKI="$DIR/pki"
mkdir -p "$PKI" "$PIDS" "$DIR/logs"
if [[ ! -f "$PKI/ca.crt" ]]; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=real-cluster-ca" \
    -keyout "$PKI/ca.key" -out "$PKI/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
    -keyout "$PKI/apiserver.key" -out "$PKI/apiserver.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\n' >"$PKI/apiserver.ext"
  openssl x509 -req -in "$PKI/apiserver.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -extfile "$PKI/apiserver.ext" -out "$PKI/apiserver.crt" 2>/dev/null
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  chmod 600 "$PKI"/*.key
  token() { python3 -c 'import secrets; print(secrets.token_hex(16))'; }
  # token,user,uid,"groups"
  {
    echo "$(token),admin,admin,\"system:masters\""
    echo "$(token),system:kube-controller-manager,system:kube-controller-manager"
    echo "$(token),system:kube-scheduler,system:kube-scheduler"
  } >"$PKI/tokens.csv"
  chmod 600 "$PKI/tokens.csv"
fi
token_of() { awk -F, -v u="$1" '$2 == u {print $1}' "$PKI/tokens.csv"; }

# kubeconfig FILE USER: a kubeconfig for SERVER with USER's token.
kubeconfig() {
  local ca; ca="$(base64 -w0 <"$PKI/ca.crt")"
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: real-cluster
  cluster: {server: "$SERVER", certificate-authority-data: "$ca"}
users:
- name: $2
  user: {token: "$(token_of "$2")"}
contexts:
- name: real-cluster
  context: {cluster: real-cluster, user: $2}
current-context: real-cluster
EOF
  chmod 600 "$1"
}
kubeconfig "$DIR/kubeconfig" admin
kubeconfig "$DIR/kcm.kubeconfig" system:kube-controller-manager
kubeconfig "$DIR/scheduler.kubeconfig" system:kube-scheduler

# start NAME ARGS...: runs BIN/NAME in the background, logging to DIR/logs/NAME.log.
start() {
  local name="$1"; shift
  nohup "$BIN/$name" "$@" >>"$DIR/logs/$name.log" 2>&1 </dev/null &
  local pid=$! t0; t0=$(now_ms)
  echo "$pid" >"$PIDS/$name.pid"
  # Until the child has exec'd the binary, /proc shows this script's command line and is_ours
  # says no: on a loaded machine wait_for would take that for an exit.
  while ! is_ours "$name" "$pid" && kill -0 "$pid" 2>/dev/null && (( $(now_ms) - t0 < 10000 )); do sleep 0.01; done
}
fail_up() {
  local name="$1"; shift
  echo "real-cluster: $* (last lines of $DIR/logs/$name.log:)" >&2
  tail -20 "$DIR/logs/$name.log" >&2 || true
  down >/dev/null
  exit 1
}
# wait_for NAME TIMEOUT_S COMMAND...: polls COMMAND until it succeeds while NAME is alive.
wait_for() {
  local name="$1" timeout="$2" t0; shift 2
  t0=$(now_ms)
  until "$@" >/dev/null 2>&1; do
    is_ours "$name" "$(cat "$PIDS/$name.pid")" || fail_up "$name" "$name exited"
    (( $(now_ms) - t0 < timeout * 1000 )) || fail_up "$name" "$name not ready after ${timeout}s"
    sleep 0.2
  done
}
T0=$(now_ms)

# --- etcd ---------------------------------------------------------------------------------------
# No fsync: a test cluster on a shared machine; durability of etcd is not what is tested.
# shellcheck disable=SC2086
start etcd --name=real-cluster --data-dir="$DIR/etcd" \
  --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls="http://127.0.0.1:$PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$PEER_PORT" \
  --initial-cluster="real-cluster=http://127.0.0.1:$PEER_PORT" \
  --unsafe-no-fsync --log-level=warn ${ETCD_FLAGS:-}
wait_for etcd 60 curl -sf "http://127.0.0.1:$ETCD_PORT/health"

# --- kube-apiserver -----------------------------------------------------------------------------
# The requestheader flags (as kubeadm sets them; no front-proxy certificate is issued) fill the
# extension-apiserver-authentication ConfigMap that KCM and the scheduler read at start.
# --endpoint-reconciler-type=none: the `kubernetes` Service's endpoints may not be a loopback
# address, and nothing in this cluster routes to it.
# Every API request (not health checks) at level Metadata in DIR/logs/audit.log, one JSON per
# line: who did what to which resource, and the answer's code.
cat >"$DIR/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*", "/version"]
- level: Metadata
EOF
# shellcheck disable=SC2086
start kube-apiserver \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
  --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
  --client-ca-file="$PKI/ca.crt" --token-auth-file="$PKI/tokens.csv" \
  --requestheader-client-ca-file="$PKI/ca.crt" --requestheader-allowed-names=front-proxy-client \
  --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
  --requestheader-extra-headers-prefix=X-Remote-Extra- \
  --authorization-mode=Node,RBAC \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
  --service-cluster-ip-range=10.0.0.0/24 --endpoint-reconciler-type=none \
  --allow-privileged=true --profiling=false \
  --audit-policy-file="$DIR/audit-policy.yaml" --audit-log-path="$DIR/logs/audit.log" \
  --cert-dir="$DIR/apiserver-certs" ${APISERVER_FLAGS:-}
ADMIN_TOKEN="$(token_of admin)"
wait_for kube-apiserver 120 curl -sf --cacert "$PKI/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" "$SERVER/readyz"

# --- kube-controller-manager --------------------------------------------------------------------
if [[ -n "$KCM_CONTROLLERS" ]]; then
  # shellcheck disable=SC2086
  start kube-controller-manager \
    --kubeconfig="$DIR/kcm.kubeconfig" \
    --authentication-kubeconfig="$DIR/kcm.kubeconfig" --authorization-kubeconfig="$DIR/kcm.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --cert-dir="$DIR/kcm-certs" \
    --controllers="$KCM_CONTROLLERS" --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --node-monitor-grace-period=24h --node-startup-grace-period=24h \
    --leader-elect=true --profiling=false ${KCM_FLAGS:-}
  wait_for kube-controller-manager 120 curl -sfk "https://127.0.0.1:$KCM_PORT/healthz"
fi

# --- kube-scheduler and a Node ------------------------------------------------------------------
if (( SCHEDULER )); then
  # shellcheck disable=SC2086
  start kube-scheduler \
    --kubeconfig="$DIR/scheduler.kubeconfig" \
    --authentication-kubeconfig="$DIR/scheduler.kubeconfig" --authorization-kubeconfig="$DIR/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$SCHED_PORT" --cert-dir="$DIR/scheduler-certs" \
    --leader-elect=true --profiling=false ${SCHEDULER_FLAGS:-}
  wait_for kube-scheduler 120 curl -sfk "https://127.0.0.1:$SCHED_PORT/healthz"
  KC=(kubectl --kubeconfig "$DIR/kubeconfig")
  if ! "${KC[@]}" get node node-1 >/dev/null 2>&1; then
    "${KC[@]}" create -f - >/dev/null <<'EOF' || fail_up kube-apiserver "creating Node node-1 failed"
apiVersion: v1
kind: Node
metadata:
  name: node-1
  labels: {kubernetes.io/hostname: node-1, kubernetes.io/os: linux, kubernetes.io/arch: amd64}
EOF
  fi
  NOW="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  "${KC[@]}" patch node node-1 --subresource=status --type=merge -p "{\"status\":{
    \"capacity\":{\"cpu\":\"8\",\"memory\":\"16Gi\",\"pods\":\"110\",\"ephemeral-storage\":\"100Gi\"},
    \"allocatable\":{\"cpu\":\"8\",\"memory\":\"16Gi\",\"pods\":\"110\",\"ephemeral-storage\":\"100Gi\"},
    \"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\",\"message\":\"no kubelet: a test node\",
      \"lastHeartbeatTime\":\"$NOW\",\"lastTransitionTime\":\"$NOW\"}]}}" >/dev/null \
    || fail_up kube-apiserver "setting the status of Node node-1 failed"
fi

echo "real-cluster: $("$BIN/kube-apiserver" --version) up in $(( $(now_ms) - T0 )) ms (logs: $DIR/logs)"
echo "kubeconfig: $DIR/kubeconfig"
echo "server: $SERVER"
