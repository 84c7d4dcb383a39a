# Helpers shared by the end-to-end scripts. The sourcing script defines WORK (a scratch
# directory) before calling any of them, may define its own fail (print what helps, and exit)
# before sourcing, and may set POLL_S (wait_until's interval, default 0.2 s).

# fail MESSAGE: prints and exits 1 (unless the script brought its own).
declare -F fail >/dev/null || fail() { echo "FAIL: $*" >&2; exit 1; }
now_ms() { date +%s%3N; }
# free_port: a TCP port free on loopback now.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# wait_line FILE PATTERN PID TIMEOUT_S: waits until FILE has a line matching PATTERN (a server's
# stdout announcing itself); fails when process PID exits first or TIMEOUT_S passes.
wait_line() {
  local file="$1" pattern="$2" pid="$3" timeout="$4" t0; t0=$(now_ms)
  until grep -q -- "$pattern" "$file" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || fail "the server exited before printing '$pattern'"
    (( $(now_ms) - t0 < timeout * 1000 )) || fail "no line '$pattern' in $file within ${timeout}s"
    sleep 0.05
  done
}
pass() { PASSED=$((PASSED + 1)); echo "ok: $*"; }
# go_test_binary NAME DIR PACKAGE [GO_TEST_FLAG...]: prints the path of PACKAGE's test binary
# (`go test -c`, run in DIR), kept in conformance/bin/NAME.test beside the control plane that
# conformance/build.sh keeps there, and built again only when the Go version or a file under DIR
# (go.mod, go.sum, the sources) differs from what it was built from (bin/.stamp-NAME.test). The
# build runs at low priority; `building NAME.test` and its output go to standard error. Returns 1 when the build fails.
go_test_binary() {
  local name="$1" dir="$2" pkg="$3" bin stamp out
  shift 3
  bin="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/conformance/bin"
  out="$bin/$name.test"
  stamp="$({ go version; printf '%s\n' "$pkg" "$@"; (cd "$dir" && find . -type f | LC_ALL=C sort | xargs -d '\n' sha256sum); } | sha256sum | cut -d' ' -f1)"
  if [[ -x "$out" && -f "$bin/.stamp-$name.test" && "$(cat "$bin/.stamp-$name.test")" == "$stamp" ]]; then
    echo "$out"
    return 0
  fi
  mkdir -p "$bin"
  rm -f "$bin/.stamp-$name.test"
  echo "building $name.test" >&2
  (cd "$dir" && nice -n 10 go test "$@" -c -o "$out.tmp.$$" "$pkg") >&2 || { rm -f "$out.tmp.$$"; return 1; }
  mv "$out.tmp.$$" "$out"
  echo "$stamp" >"$bin/.stamp-$name.test"
  echo "$out"
}
# k NAME ARGS...: runs kubectl, requires exit 0 and an empty stderr; stdout kept in $WORK/out.
k() {
  local name="$1"; shift
  if ! kubectl "$@" >"$WORK/out" 2>"$WORK/err"; then
    echo "--- stdout:"; cat "$WORK/out"; echo "--- stderr:"; cat "$WORK/err"
    fail "$name: kubectl $* exited non-zero"
  fi
  # kubectl older than the served version by more than one minor warns about the skew (as it
  # does with any cluster); nothing else may reach stderr.
  sed -i '/^WARNING: version difference between client .* exceeds the supported minor version skew/d' "$WORK/err"
  if [[ -s "$WORK/err" ]]; then
    echo "--- stderr:"; cat "$WORK/err"
    fail "$name: kubectl $* printed to stderr"
  fi
  pass "$name"
}
# q ARGS...: kubectl for polling; prints stdout, requires exit 0 and an empty stderr.
q() {
  if ! kubectl "$@" 2>"$WORK/qerr" || [[ -s "$WORK/qerr" ]]; then
    cat "$WORK/qerr" >&2; fail "kubectl $* failed"
  fi
}
# expect PATTERN: the last k command's stdout must match (extended regex).
expect() { grep -Eq -- "$1" "$WORK/out" || { cat "$WORK/out"; fail "expected output matching: $1"; }; }
# wait_until DESC TIMEOUT_S COMMAND...: polls COMMAND until it succeeds.
wait_until() {
  local desc="$1" timeout="$2"; shift 2
  local t0; t0=$(now_ms)
  until "$@"; do
    (( $(now_ms) - t0 < timeout * 1000 )) || fail "timed out after ${timeout}s waiting for: $desc"
    sleep "${POLL_S:-0.2}"
  done
  WAITED_MS=$(( $(now_ms) - t0 ))
}
claim_phase_is() { [[ "$(q get pvc -n "${3:-demo}" "$1" -o jsonpath='{.status.phase}')" == "$2" ]]; }
pv_phase_is() { [[ "$(q get pv "$1" -o jsonpath='{.status.phase}')" == "$2" ]]; }
pv_gone() { [[ -z "$(q get pv "$1" --ignore-not-found -o name)" ]]; }
# examples_up_bound: the three claims of examples/up/ are Bound.
examples_up_bound() {
  [[ "$(q get pvc -n demo small logs reserved -o jsonpath='{range .items[*]}{.status.phase} {end}')" == "Bound Bound Bound " ]]
}
# apply_examples_up TIMEOUT_S WHO: applies the README's examples/up/ (ROOT is the repository),
# waits for its three claims to be Bound (WHO binds them, for the report), then
# check_examples_up_bindings.
apply_examples_up() {
  local timeout="$1" who="$2" t0; t0=$(now_ms)
  k "apply examples/up/" apply -f "$ROOT/examples/up/"
  wait_until "demo/small, demo/logs, demo/reserved Bound" "$timeout" examples_up_bound
  echo "   all three claims Bound $(( $(now_ms) - t0 )) ms after the apply started"
  pass "all three claims Bound by $who"
  check_examples_up_bindings
}
# check_examples_up_bindings: the static bindings any PV controller makes in examples/up/:
# demo/small on pv-5g, both pointers; demo/reserved on pv-20g. Sets LOGS_PV to the name the
# provisioned volume of demo/logs has.
check_examples_up_bindings() {
  k "small bound to pv-5g" get pvc -n demo small -o jsonpath='{.spec.volumeName} {.status.capacity.storage} {.metadata.annotations.pv\.kubernetes\.io/bind-completed}'
  expect '^pv-5g 5Gi yes$'
  k "pv-5g points back to small" get pv pv-5g -o jsonpath='{.spec.claimRef.namespace}/{.spec.claimRef.name} {.status.phase} {.metadata.annotations.pv\.kubernetes\.io/bound-by-controller}'
  expect '^demo/small Bound yes$'
  k "reserved bound to pv-20g" get pvc -n demo reserved -o jsonpath='{.spec.volumeName} {.status.capacity.storage}'
  expect '^pv-20g 20Gi$'
  k "uid of logs" get pvc -n demo logs -o jsonpath='{.metadata.uid}'
  [[ -s "$WORK/out" ]] || fail "demo/logs has no uid"
  LOGS_PV="pvc-$(cat "$WORK/out")"
}
# create_static_pair NAME NAMESPACE: creates pv-NAME (1Gi, NFS, no class) and the claim
# NAMESPACE/NAME that only it matches.
create_static_pair() {
  k "create pv-$1 and $2/$1" create -f - <<EOF
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-$1}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  nfs: {server: nfs.example.com, path: /exports/$1}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $1, namespace: $2}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  resources: {requests: {storage: 1Gi}}
EOF
}
# late_claim_waits TIMEOUT_S: creates demo/late (3Gi, no class), which no volume matches, and
# waits for what a PV controller says of it: a FailedBinding event (type Normal), shown by describe.
late_claim_waits() {
  k "create late claim" create -f - <<'EOF'
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: late, namespace: demo}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  resources: {requests: {storage: 3Gi}}
EOF
  wait_until "FailedBinding event for demo/late" "$1" late_failed_binding
  k "describe late" describe pvc -n demo late
  expect 'FailedBinding +.*no persistent volumes available for this claim and no storage class is set'
  pass "FailedBinding event for the unmatched claim"
}
# (grep reads all of it: `grep -q` would leave at the first match, and kubectl, still writing,
# would die of SIGPIPE and be reported failed.)
late_failed_binding() {
  q get events -n demo -o jsonpath='{range .items[*]}{.involvedObject.name} {.reason} {.type}{"\n"}{end}' | grep '^late FailedBinding Normal$' >/dev/null
}
# late_volume_binds_it TIMEOUT: creates pv-late (3Gi, NFS, label app=late), the volume demo/late
# waits for, and waits (kubectl wait's TIMEOUT, e.g. 30s) for the claim to be Bound to it.
# Sets LATE_MS to the milliseconds from the volume's creation to the claim's Bound.
late_volume_binds_it() {
  local t0; t0=$(now_ms)
  k "create matching volume pv-late" create -f - <<'EOF'
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-late, labels: {app: late}}
spec:
  capacity: {storage: 3Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  nfs: {server: nfs.example.com, path: /exports/late}
EOF
  k "wait for late Bound" wait -n demo pvc/late --for=jsonpath='{.status.phase}'=Bound --timeout="$1"
  LATE_MS=$(( $(now_ms) - t0 ))
  k "late bound to pv-late" get pvc -n demo late -o jsonpath='{.spec.volumeName}'
  expect '^pv-late$'
}
# real_and_ours_up [--kcm CONTROLLERS] [UP_FLAG...]: the two API servers a differential script
# compares (ROOT is the repository, BIN pv-controller): the real kube-apiserver and etcd
# (scripts/real-cluster.sh, in $WORK/real; with kube-controller-manager running CONTROLLERS when
# given) and `up` with UP_FLAGs (default: --no-controller; in $WORK/ours, its pid in UP_PID). Each
# has its kubeconfig in its directory. The sourcing script's EXIT trap calls real_and_ours_down.
real_and_ours_up() {
  local real=() ours=(--no-controller)
  if [[ "${1:-}" == --kcm ]]; then real=(--kcm "$2"); shift 2; fi
  (( $# == 0 )) || ours=("$@")
  "$ROOT/scripts/real-cluster.sh" up "$WORK/real" "${real[@]}" >"$WORK/real.out" 2>&1 || { cat "$WORK/real.out" >&2; fail "real-cluster.sh up"; }
  "$BIN" up "${ours[@]}" --data-dir "$WORK/ours" --listen 127.0.0.1:0 --metrics-addr 127.0.0.1:0 >"$WORK/up.out" 2>"$WORK/up.err" &
  UP_PID=$!
  wait_line "$WORK/up.out" '^server: ' "$UP_PID" 30
}
real_and_ours_down() {
  if [[ -n "${UP_PID:-}" ]]; then kill -9 "$UP_PID" 2>/dev/null || true; wait "$UP_PID" 2>/dev/null || true; fi
  "$ROOT/scripts/real-cluster.sh" down "$WORK/real" >/dev/null 2>&1 || true
}

# readme_commands HEADING [FILE]: the ```sh block under README.md's `## HEADING` (ROOT is the
# repository) into FILE ($WORK/readme.sh by default), one command a line, comments dropped, for
# readme_run.
readme_commands() {
  python3 - "$ROOT/README.md" "## $1" >"${2:-$WORK/readme.sh}" <<'PY' || fail "cannot read the commands of README.md's section '$1'"
import re, sys
lines, inside, fence = [], False, False
for line in open(sys.argv[1], encoding="utf-8"):
    line = line.rstrip("\n")
    if line.startswith("## "):
        inside = line == sys.argv[2]
        continue
    if inside and line.startswith("```"):
        if fence:
            break
        fence = line == "```sh"
        continue
    if inside and fence:
        c = re.sub(r"\s+#.*$", "", line).strip()
        if c and not c.startswith("#"):
            lines.append(c)
if not lines:
    sys.exit(f"README.md has no ```sh block under '{sys.argv[2]}'")
print("\n".join(lines))
PY
}

# readme_run SKIP_REGEX [ONLY_REGEX [FILE]]: runs the README's commands (of FILE, as
# readme_commands wrote it; $WORK/readme.sh by default) in order, in this shell (as the
# reader's shell runs them: `export` lines stay), but those matching SKIP_REGEX, and only those
# matching ONLY_REGEX when given. A command ending in `&` runs in the background, its output in
# $LOGS/NAME.log (NAME: the program), its pid kept (in PIDS, and in PID_OF[NAME] when the caller
# declared that associative array); `pv-controller up` is awaited until it
# prints its server line. Every other command must exit 0; its output is kept in $WORK/out.
readme_run() {
  local skip="$1" only="${2:-}" file="${3:-$WORK/readme.sh}" cmd name
  while IFS= read -r -u 3 cmd; do
    [[ -z "$only" || "$cmd" =~ $only ]] || continue
    if [[ -n "$skip" && "$cmd" =~ $skip ]]; then echo "   (not on this server: $cmd)"; continue; fi
    echo "   \$ $cmd"
    if [[ "$cmd" == *"&" ]]; then
      name="$(awk '{for (i = 1; i <= NF; i++) if ($i !~ /=/) {print $i; exit}}' <<<"$cmd")"
      eval "${cmd%&} </dev/null >>\"\$LOGS/$name.log\" 2>&1 &"
      PIDS+=("$!")
      if declare -p PID_OF >/dev/null 2>&1; then PID_OF[$name]=$!; fi
      if [[ "$name" == pv-controller ]]; then wait_line "$LOGS/$name.log" '^server: ' "$!" 30; fi
    elif ! eval "$cmd" >"$WORK/out" 2>"$WORK/err"; then
      cat "$WORK/out" "$WORK/err" >&2; fail "README command failed: $cmd"
    fi
  done 3<"$file"
}

# stop_all: stops every process this script started (SIGTERM, then SIGKILL after 15 s).
stop_all() {
  local p t0
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  t0=$(now_ms)
  for p in "${PIDS[@]}"; do
    while kill -0 "$p" 2>/dev/null && (( $(now_ms) - t0 < 15000 )); do sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  PIDS=()
}
