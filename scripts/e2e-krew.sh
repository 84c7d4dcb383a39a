#!/usr/bin/env bash
# The krew plugin `kubectl pv-explain`: deploy/krew/pv-explain.yaml validated by krew's own
# validate-krew-manifest (and a broken copy refused), the release archive and manifest of
# scripts/build-krew.sh validated the same way, then installed by krew itself (built from
# sigs.k8s.io/krew by conformance/build.sh) from that archive into a scratch KREW_ROOT, run as
# `kubectl pv-explain` on examples/cluster.yaml, and uninstalled.
#
# Needs Go (krew is built with it); skips, saying so, without it. Uses the `dist` binary of
# scripts/build-dist.sh (built on the first run). Last line: `e2e-krew: N checks passed`.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
GO="$(command -v go || echo /usr/local/go/bin/go)"
if [[ ! -x "$GO" ]]; then echo "e2e-krew: skipped: Go not installed (krew is built with it)"; exit 0; fi
WORK="$(mktemp -d)"
trap '[[ -n "${KEEP_WORK:-}" ]] || rm -rf "$WORK"' EXIT
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"
PASSED=0

CONF_BIN="$("$ROOT/conformance/build.sh" 2>"$WORK/build.err" | tail -1)" || { cat "$WORK/build.err" >&2; fail "conformance/build.sh"; }
VALIDATE="$CONF_BIN/validate-krew-manifest" KREW="$CONF_BIN/kubectl-krew"
[[ -x "$VALIDATE" && -x "$KREW" ]] || fail "conformance/build.sh did not build validate-krew-manifest and kubectl-krew"

# validate FILE: krew's structural validation (schema, name = file name, version, platforms).
validate() { "$VALIDATE" -manifest "$1" -skip-install >"$WORK/validate.out" 2>&1; }
validate "$ROOT/deploy/krew/pv-explain.yaml" || { cat "$WORK/validate.out"; fail "deploy/krew/pv-explain.yaml is not a valid krew manifest"; }
grep -q 'structural validation OK' "$WORK/validate.out" || { cat "$WORK/validate.out"; fail "validate-krew-manifest said no 'structural validation OK'"; }
pass "deploy/krew/pv-explain.yaml passes validate-krew-manifest"
VERSION="v$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml" | head -1)"
grep -qx "  version: $VERSION" "$ROOT/deploy/krew/pv-explain.yaml" || fail "the manifest's spec.version is not $VERSION (Cargo.toml)"
pass "the manifest's version is the controller's ($VERSION)"
mkdir -p "$WORK/bad"
sed 's/^      bin: .*//' "$ROOT/deploy/krew/pv-explain.yaml" >"$WORK/bad/pv-explain.yaml"
if validate "$WORK/bad/pv-explain.yaml"; then fail "a manifest without bin passed validation"; fi
pass "a manifest without bin is refused ($(grep -o 'bin[^"]*' "$WORK/validate.out" | head -1))"

"$ROOT/scripts/build-krew.sh" "$WORK/dist" >"$WORK/pack.out" 2>"$WORK/pack.err" || { cat "$WORK/pack.err"; fail "scripts/build-krew.sh"; }
ARCHIVE="$(sed -n 's/^archive: //p' "$WORK/pack.out")" MANIFEST="$(sed -n 's/^manifest: //p' "$WORK/pack.out")"
[[ "$(sha256sum "$ARCHIVE" | cut -d' ' -f1)" == "$(sed -n 's/^sha256: //p' "$WORK/pack.out")" ]] || fail "the archive's sha256 is not the one printed"
grep -q "sha256: \"$(sha256sum "$ARCHIVE" | cut -d' ' -f1)\"" "$MANIFEST" || fail "the release manifest does not carry the archive's sha256"
[[ "$(tar -tzf "$ARCHIVE" | sort | tr '\n' ' ')" == "LICENSE kubectl-pv_explain pv-controller " ]] || fail "archive holds: $(tar -tzf "$ARCHIVE")"
pass "scripts/build-krew.sh: the archive (script, binary, LICENSE) and a manifest with its sha256"
validate "$MANIFEST" || { cat "$WORK/validate.out"; fail "the release manifest is not valid"; }
pass "the release manifest passes validate-krew-manifest"

export KREW_ROOT="$WORK/krew"
"$KREW" install --manifest="$MANIFEST" --archive="$ARCHIVE" >"$WORK/install.out" 2>&1 || { cat "$WORK/install.out"; fail "krew install"; }
[[ -L "$KREW_ROOT/bin/kubectl-pv_explain" ]] || { cat "$WORK/install.out"; ls -R "$KREW_ROOT"; fail "krew did not link bin/kubectl-pv_explain"; }
pass "krew installs pv-explain from the archive"
# `krew list` and `krew uninstall` want a plugin index (a git clone of krew-index); this machine
# reaches no index, so an empty local repository stands in for it.
git init -q "$KREW_ROOT/index/default"
"$KREW" list >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "krew list"; }
# Installed from a manifest, not from an index: krew calls it detached.
grep -q "^detached/pv-explain\$" "$WORK/out" || { cat "$WORK/out"; fail "krew list does not show detached/pv-explain"; }
grep -q "^  version: $VERSION\$" "$KREW_ROOT/receipts/pv-explain.yaml" || fail "krew's receipt does not record $VERSION"
[[ -x "$KREW_ROOT/store/pv-explain/$VERSION/pv-controller" ]] || fail "the binary is not in krew's store"
pass "krew list: detached/pv-explain, $VERSION in its receipt, the binary in krew's store"
cd "$ROOT"
if command -v kubectl >/dev/null 2>&1; then
  PLUGIN=(env "PATH=$KREW_ROOT/bin:$PATH" kubectl pv-explain) HOW="kubectl pv-explain"
else
  PLUGIN=("$KREW_ROOT/bin/kubectl-pv_explain") HOW="krew's bin/kubectl-pv_explain (no kubectl)"
fi
env -u PV_CONTROLLER "${PLUGIN[@]}" pvc data/small -f examples/cluster.yaml -o json >"$WORK/out" 2>"$WORK/err" \
  || { cat "$WORK/err"; fail "$HOW pvc data/small -f examples/cluster.yaml"; }
grep -q '"bestMatch": "pv-5g"' "$WORK/out" || { cat "$WORK/out"; fail "$HOW: no bestMatch pv-5g"; }
pass "$HOW pvc data/small -f examples/cluster.yaml -o json: bestMatch pv-5g (the binary from the archive)"
"$KREW" uninstall pv-explain >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "krew uninstall"; }
[[ ! -e "$KREW_ROOT/bin/kubectl-pv_explain" && ! -e "$KREW_ROOT/store/pv-explain" ]] || fail "krew uninstall left the plugin"
pass "krew uninstall removes it"

echo "e2e-krew: $PASSED checks passed"
