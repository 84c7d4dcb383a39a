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
