#!/usr/bin/env bash
# measure-body-rss.sh [BIN]: what one costly body costs `up`. For each body (a Pod of a million
# empty containers as JSON and as protobuf; the largest bodies the counts of crate::shape let
# through), starts `up --no-controller` afresh, sends the body once with curl (with and without
# dryRun=All), and prints the answer's code and time and the server's peak RSS (VmHWM) before
# and after. Figures in RELIABILITY.md ("Hostile clients").
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${1:-${CARGO_TARGET_DIR:-$ROOT/target}/release/pv-controller}"
WORK="$(mktemp -d)"
PID=""
trap '[[ -n "$PID" ]] && kill "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

python3 - "$WORK" <<'PY'
import sys
work = sys.argv[1]
def pod(name, spec):
    return b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"' + name + b'"},"spec":' + spec + b'}'
empty = lambda n: b'{"containers":[' + b','.join([b'{}'] * n) + b']}'
open(f"{work}/million.json", "wb").write(pod(b"p", empty(1_000_000)))
open(f"{work}/objects-16k.json", "wb").write(pod(b"q", empty(16_381)))
groups = b'{"containers":[{"name":"a","image":"i"}],"securityContext":{"supplementalGroups":[' + b','.join([b'0'] * 786_392) + b']}}'
open(f"{work}/values-786k.json", "wb").write(pod(b"g", groups))
def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7f) | 0x80); v >>= 7
    out.append(v); return bytes(out)
def field(num, b): return bytes([num << 3 | 2]) + varint(len(b)) + b
body = field(1, field(1, b"p")) + field(2, b"\x12\x00" * 1_000_000)
open(f"{work}/million.pb", "wb").write(b"k8s\0" + field(1, field(1, b"v1") + field(2, b"Pod")) + field(2, body))
PY

measure() {
  local body="$1" ct="$2" q="$3" dir="$WORK/up" port before after out
  rm -rf "$dir"; port=$(free_port)
  "$BIN" up --no-controller --listen "127.0.0.1:$port" --data-dir "$dir" --metrics-addr 127.0.0.1:0 >"$WORK/log" 2>&1 &
  PID=$!
  wait_line "$WORK/log" "^server: " "$PID" 30
  before=$(awk '/VmHWM/{print $2}' "/proc/$PID/status")
  out=$(curl -sS -o "$WORK/answer" -w '%{http_code} in %{time_total} s' --cacert "$dir/ca.crt" \
    -H "Authorization: Bearer $(cat "$dir/token")" -H "Content-Type: $ct" --data-binary @"$WORK/$body" \
    "https://127.0.0.1:$port/api/v1/namespaces/default/pods$q")
  after=$(awk '/VmHWM/{print $2}' "/proc/$PID/status")
  echo "$body ${q:-(no dryRun)}: $out; peak RSS $((before / 1024)) MB -> $((after / 1024)) MB; $(head -c 120 "$WORK/answer")"
  kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
}

for q in "?dryRun=All" ""; do
  measure million.json application/json "$q"
  measure million.pb application/vnd.kubernetes.protobuf "$q"
done
measure objects-16k.json application/json "?dryRun=All"
measure values-786k.json application/json "?dryRun=All"
