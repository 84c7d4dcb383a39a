#!/usr/bin/env bash
# Builds the `dist` binary (Cargo.toml's profile: stripped, thin LTO, one codegen unit) statically
# linked, for an image with no base and a release archive that runs on any x86-64 Linux: the
# x86_64-unknown-linux-musl target when it is installed (or `rustup target add` installs it) and
# musl-gcc is there (Debian's musl-tools; mimalloc and ring compile C), otherwise glibc with every
# library static (-C target-feature=+crt-static). Checks the result with `file`.
#
# Usage: scripts/build-dist.sh
# Prints the binary's path (target/TARGET/dist/pv-controller) on its last line.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
die() { echo "build-dist: $*" >&2; exit 1; }
TARGET=x86_64-unknown-linux-musl
# Cargo's CARGO_PROFILE_DIST_* variables override the profile (.ci/run sets two): say so, since
# the binary is then not the one Cargo.toml describes.
OVERRIDES="$(env | grep '^CARGO_PROFILE_DIST_' | sort | tr '\n' ' ' || true)"
[[ -z "$OVERRIDES" ]] || echo "build-dist: the dist profile overridden by the environment: ${OVERRIDES% }" >&2
if ! rustup target list --installed 2>/dev/null | grep -qx "$TARGET"; then
  rustup target add "$TARGET" >/dev/null 2>&1 || true
fi
if rustup target list --installed 2>/dev/null | grep -qx "$TARGET" && command -v musl-gcc >/dev/null 2>&1; then
  echo "build-dist: building the dist binary for $TARGET" >&2
  (cd "$ROOT" && cargo build --quiet --profile dist --locked --bin pv-controller --target "$TARGET")
else
  TARGET=x86_64-unknown-linux-gnu
  echo "build-dist: musl not available (target or musl-gcc missing): building for $TARGET with +crt-static" >&2
  # With --target, RUSTFLAGS reach only the target's crates (not build scripts), and the output
  # goes to target/$TARGET/, apart from the dynamically linked target/dist/.
  (cd "$ROOT" && RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
    cargo build --quiet --profile dist --locked --bin pv-controller --target "$TARGET")
fi
BINARY="${CARGO_TARGET_DIR:-$ROOT/target}/$TARGET/dist/pv-controller"
[[ -x "$BINARY" ]] || die "$BINARY missing after the build"
LINKING="$(file -b "$BINARY")"
[[ "$LINKING" == *"statically linked"* || "$LINKING" == *"static-pie linked"* ]] || die "$BINARY is not statically linked: $LINKING"
echo "$BINARY"
