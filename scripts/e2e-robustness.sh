#!/usr/bin/env bash
# Robustness as etcd tests itself (tests/robustness in etcd): concurrent clients against an API
# server while faults are injected, every request recorded (start, end, answer; no answer = unknown
# outcome), then the history checked by conformance/robustness/ (Go):
# - linearizable: per key (3 ConfigMaps, 3 PersistentVolumes, 3 PersistentVolumeClaims), with
#   porcupine, over creates, updates with and without a resourceVersion precondition, merge, JSON
#   and strategic-merge patches, deletes (with finalizers: terminating, then finalizers lifted),
#   GETs and lists in pages (limit/continue, every page of the first page's snapshot); a lost
#   acknowledged write, a stale read or a double success is a violation;
# - the watch properties (allowWatchBookmarks, resumed from the last version received, relisted
#   after 410): ordered, unique, atomic (every watch and every acknowledged write agree on what
#   happened at each resourceVersion), reliable (a stream that reached version E delivered every
#   change of its kind up to E, acknowledged writes included), resumable, bookmarkable (never
#   going back), initial-events (sendInitialEvents=true: ADDED for the state at R, then the
#   initial-events-end bookmark at R, compared with the state rebuilt from a list and the changes).
# Servers and faults:
# - `pv-controller up --no-controller` (target/release): kill -9 at random points, restarted on
#   the same data directory and port (clients reconnect);
# - the failpoints build (target/failpoints/pv-controller: `--features failpoints`, cargo profile
#   `failpoints`), aborting at the commit: commit-before-fsync, commit-after-fsync (durable, not yet
#   answered), commit-mid-batch (a batch forming under --commit-delay 20ms), each after a random
#   number of passes, restarted likewise;
# - disk full (root only): `up`'s data directory on a 48 MiB tmpfs filled up and emptied again,
#   with a kill -9 after each round: clients must see errors and lose no acknowledged write;
# - kube-apiserver + etcd (scripts/real-cluster.sh) as the control: kill -9 of kube-apiserver,
#   restarted with its command line (etcd keeps running). A property that fails there is not
#   asked of `up`;
# - a slow reader on each server: a watch that stops reading (4 KiB receive buffer) while 300
#   changes of 100 KB are made must be cut, what it got a prefix of the changes, and a watch
#   resumed from its last version must get the rest exactly or 410.
# Checks: the checker's own tests (`go test`: a planted stale read, lost write, duplicated and
# skipped watch event are caught), then per server and fault one check per property (8), one that
# the fault happened, and the slow reader per server; disk full adds one (clients saw errors).
# Last line: `N passed, M failed`; exits 1 when any failed. Skipped (exit 0) without Go.
#
#   scripts/e2e-robustness.sh
# ROBUSTNESS_SEED (1), ROBUSTNESS_DURATION (traffic per run: 12s; a soak: 30m), ROBUSTNESS_FAULTS
# (default: kill before-fsync after-fsync mid-batch disk-full slow-reader), ROBUSTNESS_SERVERS
# (default: up kube-apiserver), ROBUSTNESS_FAILPOINTS=0 skips the failpoints build and its faults,
# ROBUSTNESS_KEEP=DIR keeps the histories there, ROBUSTNESS_BIN=FILE tests that `pv-controller`
# binary instead of building target/release's (a long run that builds may go on meanwhile).
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
GO="$(command -v go || echo /usr/local/go/bin/go)"
if [[ ! -x "$GO" ]]; then echo "e2e-robustness: skipped: Go not installed"; exit 0; fi
SEED="${ROBUSTNESS_SEED:-1}"
DURATION="${ROBUSTNESS_DURATION:-12s}"
FAULTS="${ROBUSTNESS_FAULTS:-kill before-fsync after-fsync mid-batch disk-full slow-reader}"
SERVERS="${ROBUSTNESS_SERVERS:-up kube-apiserver}"
case "$DURATION" in
  *m) DUR_S=$(( ${DURATION%m} * 60 )) ;;
  *s) DUR_S=${DURATION%s} ;;
  *) DUR_S=$DURATION ;;
esac
# Long runs: each client pauses between operations, for a history porcupine can take whole.
PAUSE=0s
(( DUR_S > 300 )) && PAUSE=50ms
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="${ROBUSTNESS_BIN:-$TARGET/release/pv-controller}"
FPBIN="$TARGET/failpoints/pv-controller"
WORK="$(mktemp -d)"
MNT=""
SECONDS=0
PASSED=0 FAILED=0
cleanup() {
  touch "$WORK/stop" 2>/dev/null
  local f
  for f in "$WORK"/*.pid; do
    [[ -e "$f" ]] || continue
    kill -9 "$(cat "$f")" 2>/dev/null || true
  done
  wait 2>/dev/null
  [[ -d "$WORK/real" ]] && "$ROOT/scripts/real-cluster.sh" down "$WORK/real" >/dev/null 2>&1
  [[ -n "$MNT" ]] && umount "$MNT" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"
ulimit -c 0  # the failpoints abort: no core files
RANDOM=$SEED
pass() { PASSED=$((PASSED + 1)); echo "ok: $*"; }
bad() { FAILED=$((FAILED + 1)); echo "FAIL: $*" >&2; }

echo "== the checker and its tests"
RB="$WORK/robustness"
if (cd "$ROOT/conformance/robustness" && nice "$GO" test ./... >"$WORK/gotest.out" 2>&1); then
  pass "the checker catches a planted stale read, lost write, double create, duplicated, skipped and out-of-order watch event, a bookmark going back, wrong initial events, a finalizer lifted at a version never read ($(grep -c '^func Test' "$ROOT/conformance/robustness/check_test.go") tests)"
else
  cat "$WORK/gotest.out"; bad "go test of conformance/robustness"
fi
(cd "$ROOT/conformance/robustness" && nice "$GO" build -o "$RB" .) || fail "go build of conformance/robustness"

echo "== building pv-controller (release$([[ "${ROBUSTNESS_FAILPOINTS:-1}" != 0 ]] && echo ", and the failpoints build"))"
if [[ -z "${ROBUSTNESS_BIN:-}" ]]; then
  (cd "$ROOT" && nice cargo build --quiet --release --locked -p pv-controller) || fail "cargo build --release"
fi
HAVE_FP=0
if [[ "${ROBUSTNESS_FAILPOINTS:-1}" != 0 ]]; then
  t0=$SECONDS
  (cd "$ROOT" && CARGO_PROFILE_FAILPOINTS_DEBUG=0 nice cargo build --quiet --profile failpoints --locked --features failpoints -p pv-controller) \
    || fail "cargo build --profile failpoints --features failpoints"
  echo "   failpoints build: $((SECONDS - t0)) s"
  HAVE_FP=1
fi

# --- `up`, restarted by a fault loop -----------------------------------------------------------

# up_start NAME BINARY PORT DATA [ENV...]: starts `up` (its pid in $WORK/NAME.pid), waits for it.
up_start() {
  local name="$1" bin="$2" port="$3" data="$4" n; shift 4
  n=$(( $(cat "$WORK/$name.starts" 2>/dev/null || echo 0) + 1 )); echo "$n" >"$WORK/$name.starts"
  env "$@" "$bin" up --no-controller --data-dir "$data" --listen "127.0.0.1:$port" --metrics-addr 127.0.0.1:0 \
    ${UP_FLAGS:-} >"$WORK/$name.out.$n" 2>>"$WORK/$name.err" &
  echo $! >"$WORK/$name.pid"
  wait_line "$WORK/$name.out.$n" '^server: ' "$!" 60
}
# alive PID: running and not a zombie.
alive() { [[ -e "/proc/$1" && "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]]; }

namespace=robustness
# curl_up DATA PORT CURL_ARGS... PATH: a request to `up` with its kubeconfig's token and CA.
curl_up() {
  local data="$1" port="$2" path="${*: -1}"
  curl -s -o /dev/null -w '%{http_code}\n' --max-time 10 --cacert "$data/ca.crt" \
    -H "Authorization: Bearer $(awk '/token:/ {print $2}' "$data/kubeconfig")" "${@:3:$#-3}" "https://127.0.0.1:$port$path"
}
# big_writes DATA PORT: 20 creates of 900 KB ConfigMaps (label fill=1); prints each answer's code.
big_writes() {
  [[ -f "$WORK/big.json" ]] || python3 -c 'import json; print(json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"generateName": "fill-", "labels": {"fill": "1"}}, "data": {"v": "x" * 900000}}))' >"$WORK/big.json"
  local i
  for i in $(seq 20); do
    curl_up "$1" "$2" -H 'Content-Type: application/json' -X POST --data-binary "@$WORK/big.json" "/api/v1/namespaces/$namespace/configmaps"
  done
}

# fp_count FAULT: how many passes of its crash point before it fires (a batch of two or more
# forming is rarer than a commit).
fp_count() { if [[ "$1" == mid-batch ]]; then echo $(( 2 + RANDOM % 30 )); else echo $(( 50 + RANDOM % 400 )); fi; }

# fault_loop NAME FAULT BINARY PORT DATA UNTIL_S: injects FAULT into `up` until UNTIL_S seconds
# (SECONDS) have passed, restarting it each time; records in $WORK/NAME.kills when it found it dead.
fault_loop() {
  local name="$1" fault="$2" bin="$3" port="$4" data="$5" until="$6" pid fp
  local point="" env=()
  case "$fault" in
    before-fsync) point=commit-before-fsync ;;
    after-fsync) point=commit-after-fsync ;;
    mid-batch) point=commit-mid-batch ;;
  esac
  while (( SECONDS < until )); do
    pid="$(cat "$WORK/$name.pid")"
    case "$fault" in
      kill)
        sleep "$(( 1 + RANDOM % 3 )).$(( RANDOM % 10 ))"
        (( SECONDS < until )) || break
        kill -9 "$pid"
        while alive "$pid"; do sleep 0.02; done ;;
      disk-full)
        sleep 2
        # Fill the file system; large writes (900 KB ConfigMaps) make the store need new space
        # while the clients go on; then empty it and delete them.
        dd if=/dev/zero of="$MNT/filler" bs=64k 2>/dev/null
        big_writes "$data" "$port" >>"$WORK/$name.bigwrites"
        sleep 1
        rm -f "$MNT/filler"
        curl_up "$data" "$port" -X DELETE "/api/v1/namespaces/$namespace/configmaps?labelSelector=fill%3D1" >/dev/null
        sleep 2
        (( SECONDS < until )) || break
        kill -9 "$pid"
        while alive "$pid"; do sleep 0.02; done ;;
      *)
        # Wait for the failpoint to abort it (or the end).
        while alive "$pid" && (( SECONDS < until )); do sleep 0.05; done
        alive "$pid" && break ;;
    esac
    wait "$pid" 2>/dev/null
    date +%s%N >>"$WORK/$name.kills"
    env=()
    if [[ -n "$point" ]]; then
      fp="$point=$(fp_count "$fault")*off->return"
      env=("FAILPOINTS=$fp")
    fi
    up_start "$name" "$bin" "$port" "$data" "${env[@]}"
  done
  # A crash point may still fire once the faults are over, leaving the recorder's last requests
  # and final reads without a server: the run ends on a build without crash points.
  if [[ -n "$point" ]]; then
    pid="$(cat "$WORK/$name.pid")"
    kill -9 "$pid" 2>/dev/null
    while alive "$pid"; do sleep 0.02; done
    wait "$pid" 2>/dev/null
    date +%s%N >>"$WORK/$name.kills"
    up_start "$name" "$BIN" "$port" "$data"
  fi
}

# report NAME SERVER FAULT: checks the history NAME, one check per property, and that the
# fault happened (KILLS times).
report() {
  local name="$1" server="$2" fault="$3" kills="$WORK/$1.kills" line prop n
  touch "$kills"
  n="$(wc -l <"$kills")"
  if [[ "$fault" == slow-reader ]]; then :; elif (( n > 0 )); then
    pass "$server/$fault: the fault hit $n times"
  else
    bad "$server/$fault: the fault never hit"
  fi
  "$RB" check -kills "$kills" "$WORK/$name.json" >"$WORK/$name.check" 2>&1
  while IFS= read -r line; do
    case "$line" in
      "PASS "*) prop="${line#PASS }"; pass "$server/$fault: $prop" ;;
      "FAIL "*) prop="${line#FAIL }"; bad "$server/$fault: $prop" ;;
      *) echo "$line" >&2 ;;
    esac
  done <"$WORK/$name.check"
  grep -qE '^(PASS|FAIL) ' "$WORK/$name.check" || bad "$server/$fault: the checker answered nothing"
  [[ -n "${ROBUSTNESS_KEEP:-}" ]] && mkdir -p "$ROBUSTNESS_KEEP" && cp "$WORK/$name.json" "$WORK/$name.check" "$kills" "$ROBUSTNESS_KEEP/" 2>/dev/null
}

# run_up FAULT: one recorded run of `up` under FAULT.
run_up() {
  local fault="$1" name="up-$1" bin="$BIN" data="$WORK/up-$1/data" port env=()
  port="$(free_port)"
  mkdir -p "$WORK/up-$1"
  UP_FLAGS=""
  case "$fault" in
    before-fsync|after-fsync|mid-batch)
      (( HAVE_FP )) || { echo "   (skipped: $fault needs the failpoints build)"; return; }
      bin="$FPBIN"
      env=("FAILPOINTS=commit-$fault=$(fp_count "$fault")*off->return")
      [[ "$fault" == mid-batch ]] && UP_FLAGS="--commit-delay 20ms" ;;
    disk-full)
      MNT="$WORK/up-$1/tmpfs"; mkdir -p "$MNT"
      if ! mount -t tmpfs -o size=48m tmpfs "$MNT" 2>"$WORK/mount.err"; then
        echo "   (skipped: disk full needs a tmpfs mount, as root: $(cat "$WORK/mount.err"))"; MNT=""; return
      fi
      data="$MNT/data" ;;
  esac
  echo "== up: $fault ($DURATION of traffic, seed $SEED)"
  up_start "$name" "$bin" "$port" "$data" "${env[@]}"
  if [[ "$fault" == slow-reader ]]; then
    if "$RB" slowreader -kubeconfig "$data/kubeconfig" >"$WORK/$name.slow" 2>&1; then pass "up/$(sed 's/^PASS //' "$WORK/$name.slow")"
    else cat "$WORK/$name.slow" >&2; bad "up/slow-reader"; fi
  else
    fault_loop "$name" "$fault" "$bin" "$port" "$data" $(( SECONDS + DUR_S - 2 )) 2>>"$WORK/$name.loop.err" &
    local loop=$!
    "$RB" record -kubeconfig "$data/kubeconfig" -out "$WORK/$name.json" -server up -fault "$fault" \
      -duration "$DURATION" -seed "$SEED" -pause "$PAUSE" || bad "up/$fault: the recorder failed"
    wait "$loop"
    report "$name" up "$fault"
    if [[ "$fault" == disk-full ]]; then
      local e5 big5
      e5="$(sed -nE 's/.*\(([0-9]+) answered 5xx\).*/\1/p' "$WORK/$name.check" | head -1)"; e5="${e5:-0}"
      big5="$(grep -c '^5' "$WORK/$name.bigwrites" 2>/dev/null || echo 0)"
      if (( e5 + big5 > 0 )); then pass "up/disk-full: clients saw errors while the disk was full ($e5 of the recorded writes, $big5 of $(wc -l <"$WORK/$name.bigwrites") large writes answered 5xx)"
      else bad "up/disk-full: no client saw an error while the disk was full"; fi
    fi
  fi
  local pid; pid="$(cat "$WORK/$name.pid")"
  { kill -9 "$pid"; wait; } 2>/dev/null
  while alive "$pid"; do sleep 0.02; done
  rm -f "$WORK/$name.pid"
  if [[ -n "$MNT" ]]; then umount "$MNT" || umount -l "$MNT"; MNT=""; fi
  rm -rf "$WORK/up-$1"
}

# --- kube-apiserver ----------------------------------------------------------------------------

# apiserver_kill_loop UNTIL_S: kill -9 of kube-apiserver, restarted with its command line.
apiserver_kill_loop() {
  local until="$1" pidf="$WORK/real/pids/kube-apiserver.pid" pid cmd=()
  while (( SECONDS < until )); do
    sleep "$(( 2 + RANDOM % 3 )).$(( RANDOM % 10 ))"
    (( SECONDS < until )) || break
    pid="$(cat "$pidf")"
    mapfile -d '' -t cmd <"/proc/$pid/cmdline"
    kill -9 "$pid"
    while alive "$pid"; do sleep 0.02; done
    date +%s%N >>"$WORK/kube-kill.kills"
    # Restarted until it serves: its port may still be taken for a moment ("address already in use").
    local t0=$SECONDS npid=""
    until curl -sfk "$(awk '/^server:/ {print $2}' "$WORK/real.out")/readyz" >/dev/null 2>&1; do
      if [[ -z "$npid" ]] || ! alive "$npid"; then
        nohup "${cmd[@]}" >>"$WORK/real/logs/kube-apiserver.log" 2>&1 </dev/null &
        npid=$!; echo "$npid" >"$pidf"
      fi
      (( SECONDS - t0 < 90 )) || break
      sleep 0.5
    done
  done
}

run_kube() {
  echo "== kube-apiserver + etcd (scripts/real-cluster.sh)"
  "$ROOT/scripts/real-cluster.sh" up "$WORK/real" >"$WORK/real.out" 2>&1 || { cat "$WORK/real.out" >&2; bad "real-cluster.sh up"; return; }
  local f
  # The slow reader first: it needs no fault and the server as it started.
  for f in $(tr ' ' '\n' <<<"$FAULTS" | sort -r); do
    case "$f" in
      kill)
        echo "== kube-apiserver: kill ($DURATION of traffic, seed $SEED)"
        apiserver_kill_loop $(( SECONDS + DUR_S - 2 )) 2>>"$WORK/kube-kill.loop.err" &
        local loop=$!
        "$RB" record -kubeconfig "$WORK/real/kubeconfig" -out "$WORK/kube-kill.json" -server kube-apiserver -fault kill \
          -duration "$DURATION" -seed "$SEED" -pause "$PAUSE" || bad "kube-apiserver/kill: the recorder failed"
        wait "$loop"
        report kube-kill kube-apiserver kill
        local t0=$SECONDS
        until curl -sfk "$(awk '/^server:/ {print $2}' "$WORK/real.out")/readyz" >/dev/null 2>&1; do
          if (( SECONDS - t0 > 90 )); then
            tail -5 "$WORK/real/logs/kube-apiserver.log" >&2; bad "kube-apiserver/kill: kube-apiserver not ready 90 s after its last restart"; break
          fi
          sleep 0.5
        done ;;
      slow-reader)
        echo "== kube-apiserver: slow-reader"
        if "$RB" slowreader -kubeconfig "$WORK/real/kubeconfig" >"$WORK/kube.slow" 2>&1; then pass "kube-apiserver/$(sed 's/^PASS //' "$WORK/kube.slow")"
        else cat "$WORK/kube.slow" >&2; bad "kube-apiserver/slow-reader"; fi ;;
    esac
  done
  "$ROOT/scripts/real-cluster.sh" down "$WORK/real" >/dev/null 2>&1
}

for s in $SERVERS; do
  case "$s" in
    up) for f in $FAULTS; do run_up "$f"; done ;;
    kube-apiserver) run_kube ;;
  esac
done

echo "e2e-robustness: ${SECONDS}s (seed $SEED, $DURATION of traffic per run)"
echo "$PASSED passed, $FAILED failed"
(( FAILED == 0 ))
