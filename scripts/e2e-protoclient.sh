#!/usr/bin/env bash
# End-to-end check of protobuf with upstream's own client: the Go tests in
# conformance/protoclient use client-go (k8s.io/client-go, the version the project pins) with
# protobuf as their only content type, as kube-controller-manager and kube-scheduler talk, to
# create, get, list, watch (plain and through an informer), update, update status and delete
# every served kind against `pv-controller up --no-controller`.
# Then the protobuf schema the API server transcodes with (crates/apiserver/src/protobuf/
# schema.json) is made again from the served kinds and must be the one committed.
# Needs Go (the module proxy the first time); skipped, saying so, when `go` is not installed.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
if ! command -v go >/dev/null 2>&1; then
  echo "skipped: go is not installed (conformance/protoclient needs it)"
  exit 0
fi
source "$ROOT/scripts/lib.sh"
(cd "$ROOT" && cargo build --quiet --release --locked --workspace)
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/pv-controller"
cd "$ROOT/conformance/protoclient"
# The test binary is kept in conformance/bin/ and built again only when this module's files or
# Go changed; it runs in its package's directory, as `go test` runs it.
# Then the protobuf schema (crates/apiserver/src/protobuf/schema.json) is made again from the
# served kinds and must be the one committed.
TEST_BIN="$(go_test_binary protoclient . .)" || fail "building conformance/protoclient's tests failed"
PV_CONTROLLER="$BIN" "$TEST_BIN" -test.count=1
# The protobuf schema the API server transcodes with is the one its generator makes now from the
# store's registry (pv-apiserver's `served` example) and k8s.io/api: a kind added to the registry
# without its schema, or a schema edited by hand, fails here.
SCHEMA="$(mktemp)"
trap 'rm -f "$SCHEMA"' EXIT
(cd "$ROOT" && cargo run --quiet --release --locked -p pv-apiserver --example served) \
  | go run ./schema > "$SCHEMA" 2>/dev/null || fail "conformance/protoclient/schema failed"
cmp -s "$SCHEMA" "$ROOT/crates/apiserver/src/protobuf/schema.json" \
  || fail "crates/apiserver/src/protobuf/schema.json is not what conformance/protoclient/schema makes of the served kinds now; run it (see its comment)"
echo "protobuf schema: generated from the served kinds, as committed"
echo "e2e-protoclient: ok"
