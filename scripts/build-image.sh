#!/usr/bin/env bash
# Builds the pv-controller container image without a daemon: the `dist` binary (Cargo.toml's
# profile: stripped, thin LTO), statically linked so that the image needs no base (no libc, no
# shell), written as an OCI image layout to DIR (index.json, oci-layout, blobs/sha256/...).
#
# The image is assembled by crane (go-containerregistry, built by conformance/build.sh from the Go
# module proxy): the binary and an empty /tmp are one layer (GNU tar, owned by root, times and
# order fixed) appended to an empty OCI base, then the config is set as the Dockerfile sets it
# (entrypoint /pv-controller, cmd `run --metrics-addr=0.0.0.0:9090`, user 65532:65532, port
# 9090/tcp, linux/amd64) with the org.opencontainers.image.* labels (title, description,
# version, source, revision, licenses). crane writes to a registry, so a registry of crane's own
# (`crane registry serve`, in memory) listens on loopback while the script runs, and `crane pull
# --format oci` writes the layout from it.
#
# The binary is scripts/build-dist.sh's: musl, or glibc with everything static (see there).
#
# Usage: scripts/build-image.sh DIR [--source URL] [--tag TAG]
#   --source  org.opencontainers.image.source (default: Cargo.toml's `repository`, else the git
#             remote `origin`)
#   --tag     the tag the layout's index names (default: v + Cargo.toml's version)
# Push it with `crane push DIR REGISTRY/pv-controller:TAG`. Needs Go (for crane) and GNU tar.
# Prints `image: DIR`, `digest: sha256:...` and `size: N bytes (compressed layer)` last.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
die() { echo "build-image: $*" >&2; exit 1; }
[[ $# -ge 1 && "$1" != -* ]] || die "usage: scripts/build-image.sh DIR [--source URL] [--tag TAG]"
OUT="$1"; shift
VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml" | head -1)"
DESCRIPTION="$(sed -n 's/^description = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml" | head -1)"
LICENSE="$(sed -n 's/^license = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml" | head -1)"
SOURCE="$(sed -n 's/^repository = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml" | head -1)"
[[ -n "$SOURCE" ]] || SOURCE="$(git -C "$ROOT" remote get-url origin 2>/dev/null || true)"
TAG="v$VERSION"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --source) SOURCE="${2:?--source needs a URL}"; shift 2 ;;
    --tag) TAG="${2:?--tag needs a tag}"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
[[ -n "$VERSION" ]] || die "cannot read the version from Cargo.toml"
[[ -n "$SOURCE" ]] || die "no source URL: Cargo.toml has no repository and git no remote origin; pass --source URL"
[[ ! -e "$OUT" || -z "$(ls -A "$OUT")" ]] || die "$OUT exists and is not empty"
REVISION="$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"

# --- the static binary --------------------------------------------------------------------------
BINARY="$("$ROOT/scripts/build-dist.sh" | tail -1)" || die "scripts/build-dist.sh failed"

# --- crane --------------------------------------------------------------------------------------
CONF_BIN="$("$ROOT/conformance/build.sh" 2>/dev/null | tail -1)" || die "conformance/build.sh failed (needs Go)"
CRANE="$CONF_BIN/crane"
[[ -x "$CRANE" ]] || die "conformance/build.sh did not build crane"
WORK="$(mktemp -d)"
REGISTRY_PID=""
cleanup() {
  if [[ -n "$REGISTRY_PID" ]]; then kill "$REGISTRY_PID" 2>/dev/null || true; wait "$REGISTRY_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# The layer: /pv-controller (0755) and /tmp (1777), root-owned, fixed times and order.
mkdir -p "$WORK/rootfs/tmp"
install -m 0755 "$BINARY" "$WORK/rootfs/pv-controller"
chmod 1777 "$WORK/rootfs/tmp"
tar --create --file "$WORK/layer.tar" --directory "$WORK/rootfs" --sort=name --owner=0 --group=0 \
  --numeric-owner --mtime=@0 --format=pax --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  pv-controller tmp

: >"$WORK/registry.log"
"$CRANE" registry serve --address 127.0.0.1:0 2>>"$WORK/registry.log" &
REGISTRY_PID=$!
for _ in $(seq 100); do
  PORT="$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$WORK/registry.log")"
  [[ -n "$PORT" ]] && break
  kill -0 "$REGISTRY_PID" 2>/dev/null || { cat "$WORK/registry.log" >&2; die "crane registry serve exited"; }
  sleep 0.1
done
[[ -n "$PORT" ]] || die "crane registry serve did not say its port"
REF="127.0.0.1:$PORT/pv-controller:$TAG"

"$CRANE" append --oci-empty-base --new_layer "$WORK/layer.tar" --new_tag "$REF" >/dev/null 2>"$WORK/crane.log" \
  || { cat "$WORK/crane.log" >&2; die "crane append"; }
# The same entrypoint, cmd, user and port as the Dockerfile (scripts/e2e-image.sh compares them).
"$CRANE" mutate "$REF" --tag "$REF" --set-platform linux/amd64 \
  --entrypoint /pv-controller --cmd run,--metrics-addr=0.0.0.0:9090 --user 65532:65532 --exposed-ports 9090/tcp \
  --label org.opencontainers.image.title=pv-controller \
  --label "org.opencontainers.image.description=$DESCRIPTION" \
  --label "org.opencontainers.image.version=$VERSION" \
  --label "org.opencontainers.image.source=$SOURCE" \
  --label "org.opencontainers.image.revision=$REVISION" \
  --label "org.opencontainers.image.licenses=$LICENSE" >/dev/null 2>"$WORK/crane.log" \
  || { cat "$WORK/crane.log" >&2; die "crane mutate"; }
mkdir -p "$OUT"
"$CRANE" pull --format oci "$REF" "$OUT" 2>"$WORK/crane.log" || { cat "$WORK/crane.log" >&2; die "crane pull --format oci"; }
DIGEST="$("$CRANE" digest "$REF" 2>"$WORK/crane.log")" || { cat "$WORK/crane.log" >&2; die "crane digest"; }
SIZE="$("$CRANE" manifest "$REF" | python3 -c 'import json, sys; print(sum(l["size"] for l in json.load(sys.stdin)["layers"]))')"

echo "binary: $BINARY ($(stat -c %s "$BINARY") bytes)"
echo "image: $OUT"
echo "digest: $DIGEST"
echo "size: $SIZE bytes (compressed layer)"
