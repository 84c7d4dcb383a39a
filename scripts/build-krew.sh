#!/usr/bin/env bash
# Packs the krew plugin `kubectl pv-explain` for linux/amd64: DIR/pv-explain-vVERSION-linux-amd64.tar.gz
# (scripts/kubectl-pv_explain, the static `dist` binary of scripts/build-dist.sh, LICENSE; root-owned,
# fixed times) and DIR/pv-explain.yaml, deploy/krew/pv-explain.yaml with the archive's sha256 and
# URL filled in. Upload the archive to URL and submit the manifest.
#
# Usage: scripts/build-krew.sh DIR [--uri URL]   (default URL: the manifest's, for a local install:
#   kubectl krew install --manifest=DIR/pv-explain.yaml --archive=DIR/pv-explain-v...-linux-amd64.tar.gz)
# Prints `archive: PATH`, `manifest: PATH` and `sha256: HEX` last.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
die() { echo "build-krew: $*" >&2; exit 1; }
[[ $# -ge 1 && "$1" != -* ]] || die "usage: scripts/build-krew.sh DIR [--uri URL]"
OUT="$1"; shift
URI=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --uri) URI="${2:?--uri needs a URL}"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
MANIFEST="$ROOT/deploy/krew/pv-explain.yaml"
VERSION="v$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml" | head -1)"
grep -qx "  version: $VERSION" "$MANIFEST" || die "deploy/krew/pv-explain.yaml's spec.version is not $VERSION (Cargo.toml)"
BINARY="$("$ROOT/scripts/build-dist.sh" | tail -1)" || die "scripts/build-dist.sh failed"

mkdir -p "$OUT"
STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
install -m 0755 "$ROOT/scripts/kubectl-pv_explain" "$STAGE/kubectl-pv_explain"
install -m 0755 "$BINARY" "$STAGE/pv-controller"
install -m 0644 "$ROOT/LICENSE" "$STAGE/LICENSE"
ARCHIVE="$OUT/pv-explain-$VERSION-linux-amd64.tar.gz"
tar --create --directory "$STAGE" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
  kubectl-pv_explain pv-controller LICENSE | gzip -n -9 >"$ARCHIVE"
SHA="$(sha256sum "$ARCHIVE" | cut -d' ' -f1)"
sed -e "s|^\(      sha256: \).*|\1\"$SHA\"|" ${URI:+-e "s|^\(      uri: \).*|\1$URI|"} "$MANIFEST" >"$OUT/pv-explain.yaml"
grep -q "sha256: \"$SHA\"" "$OUT/pv-explain.yaml" || die "could not fill in the sha256"
echo "archive: $ARCHIVE"
echo "manifest: $OUT/pv-explain.yaml"
echo "sha256: $SHA"
