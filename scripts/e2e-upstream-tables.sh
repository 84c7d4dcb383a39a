#!/usr/bin/env bash
# Upstream's unit-test tables as a regression corpus: every case of the table tests of
# k8s.io/kubernetes' pkg/controller/volume/persistentvolume (the release in conformance/go.mod),
# replayed through this controller.
#
# 1. conformance/upstream-tables (Go) copies upstream's package from the Go module cache into a
#    scratch module under target/upstream-tables/, adds a recorder, and runs upstream's tests
#    there: each case (initial objects, the sync it performs, the plugin's answers, injected API
#    errors and operations, expected objects and events) becomes a JSON file. Nothing of
#    upstream's is kept in this repository.
# 2. pv-upstream-tables replays each case through this controller (one sync of the same kind, or
#    a run to quiescence where upstream runs one; index searches through this controller's index)
#    and compares objects and events as upstream's test does. A case that differs must be listed
#    in conformance/DIFFERENCES.md ("Upstream's unit-test tables"), and a listed case must still
#    differ.
# 3. The comparison is shown to catch a difference: a case that came out the same, with one
#    expected field changed, must come out as differing (and unlisted).
#
# Fails when fewer than 200 cases are recorded or more than 5 % are not applicable. Prints a line
# per case and, last, `N same, M differ, K not applicable`. Skipped (exit 0) without Go.
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
GO="$(command -v go || echo /usr/local/go/bin/go)"
if [[ ! -x "$GO" ]]; then echo "e2e-upstream-tables: skipped: Go not installed"; exit 0; fi
export PATH="$(dirname "$GO"):$PATH"
fail() { echo "FAIL: $*" >&2; exit 1; }

OUT="$ROOT/target/upstream-tables"
WORK="$OUT/work"
CASES="$OUT/cases"
trap 'rm -rf "$WORK" "$OUT/planted"' EXIT
BIN="$ROOT/target/release/pv-upstream-tables"
if [[ ! -x "$BIN" ]]; then
  (cd "$ROOT" && cargo build --release --locked -p pv-upstream-tables) || fail "cannot build pv-upstream-tables"
fi

started=$SECONDS
(cd "$ROOT/conformance" && nice go run ./upstream-tables -work "$WORK" -out "$CASES") > "$OUT.log" 2>&1 \
  || { tail -40 "$OUT.log"; fail "recording upstream's cases failed (log: $OUT.log)"; }
tail -1 "$OUT.log"
echo "recorded in $((SECONDS - started)) s"

cases=$(find "$CASES" -name '*.json' | wc -l)
(( cases >= 200 )) || fail "only $cases cases recorded (upstream's tables hold more than 200)"

# The check of the check: a planted difference is found.
planted_from=$("$BIN" "$CASES" | awk '$1 == "same" && $2 ~ /^TestSync\// {print $2; exit}')
[[ -n "$planted_from" ]] || fail "no TestSync case came out the same"
mkdir -p "$OUT/planted"
python3 - "$CASES" "$OUT/planted" "$planted_from" <<'PY' || fail "cannot plant a difference"
import json, pathlib, sys
src, dst, name = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
for f in src.glob("*.json"):
    case = json.loads(f.read_text())
    if case.get("test") == name:
        claim = (case.get("expectedClaims") or case.get("initialClaims"))[0]
        claim.setdefault("status", {})["phase"] = "Lost" if claim.get("status", {}).get("phase") != "Lost" else "Bound"
        case["expectedClaims"] = [claim] + case.get("expectedClaims", [])[1:]
        (dst / f.name).write_text(json.dumps(case))
        break
else:
    sys.exit(1)
PY
planted=$("$BIN" "$OUT/planted" --listed "$ROOT/conformance/DIFFERENCES.md")
grep -q "^differ $planted_from (not listed)" <<< "$planted" && ! grep -q "^same " <<< "$planted" \
  || { echo "$planted"; fail "a planted difference in $planted_from was not found"; }
echo "ok: a difference planted in $planted_from is found"

"$BIN" "$CASES" --listed "$ROOT/conformance/DIFFERENCES.md" > "$OUT/result.txt"
rc=$?
cat "$OUT/result.txt"
(( rc == 0 )) || fail "a case differs that conformance/DIFFERENCES.md does not list, or a listed one no longer differs"
summary=$(tail -1 "$OUT/result.txt")
[[ "$summary" =~ ^([0-9]+)\ same,\ ([0-9]+)\ differ,\ ([0-9]+)\ not\ applicable$ ]] || fail "no summary line"
na=${BASH_REMATCH[3]}
(( na * 20 <= cases )) || fail "$na of $cases cases are not applicable (more than 5 %)"
