# Helpers shared by the end-to-end scripts that drive kubectl. The sourcing script defines
# WORK (a scratch directory) and fail (print and exit) before calling any of them, and may set
# POLL_S (wait_until's interval, default 0.2 s).

now_ms() { date +%s%3N; }
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
