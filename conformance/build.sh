#!/usr/bin/env bash
# Builds the real Kubernetes control plane used as a test peer: kube-apiserver,
# kube-controller-manager and kube-scheduler of k8s.io/kubernetes (version pinned in go.mod)
# and an etcd server (etcd/go.mod), from the Go module proxy, into conformance/bin/.
#
# Skips the build when bin/ already holds binaries built from the same go.mod/go.sum files,
# this script and the same Go version (bin/.stamp); otherwise `go build` reuses Go's build cache,
# so a rebuild on a warm cache takes seconds. Builds at low priority (nice) so that it does not
# starve the rest of the machine.
#
# Usage: conformance/build.sh [--force]
# Prints the bin/ directory on its last line.
set -euo pipefail

DIR="$(cd "$(dirname "$0")" && pwd)"
BIN="$DIR/bin"
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
[[ -x "$GO" ]] || { echo "conformance/build.sh: Go not installed (no 'go' on PATH, no /usr/local/go/bin/go)" >&2; exit 2; }

# The version the binaries report (/version, kubectl version): the k8s.io/kubernetes release in
# go.mod. Upstream's release build injects these through -ldflags as well.
K8S_VERSION="$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$DIR/go.mod")"
[[ "$K8S_VERSION" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]] || { echo "conformance/build.sh: cannot read the k8s.io/kubernetes version from go.mod" >&2; exit 2; }
MAJOR="${BASH_REMATCH[1]}" MINOR="${BASH_REMATCH[2]}"

stamp() {
  { "$GO" version; cat "$DIR/go.mod" "$DIR/go.sum" "$DIR/etcd/go.mod" "$DIR/etcd/go.sum" "$DIR/etcd/main.go" "$DIR/build.sh"; } | sha256sum | cut -d' ' -f1
}
WANT="$(stamp)"
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler etcd)
up_to_date() {
  [[ "${1:-}" != --force && -f "$BIN/.stamp" && "$(cat "$BIN/.stamp")" == "$WANT" ]] || return 1
  local b; for b in "${BINARIES[@]}"; do [[ -x "$BIN/$b" ]] || return 1; done
}
if up_to_date "${1:-}"; then
  echo "conformance binaries up to date ($K8S_VERSION)"
  echo "$BIN"
  exit 0
fi

mkdir -p "$BIN"
rm -f "$BIN/.stamp"
PKG=k8s.io/component-base/version
LDFLAGS="-s -w -X $PKG.gitVersion=$K8S_VERSION -X $PKG.gitMajor=$MAJOR -X $PKG.gitMinor=$MINOR"
LDFLAGS+=" -X $PKG.gitTreeState=clean -X $PKG.buildDate=1970-01-01T00:00:00Z"
export GOFLAGS="${GOFLAGS:-} -mod=readonly" GOTOOLCHAIN=local CGO_ENABLED=0
SECONDS=0
for cmd in kube-apiserver kube-controller-manager kube-scheduler; do
  echo "building $cmd $K8S_VERSION" >&2
  (cd "$DIR" && nice -n 10 "$GO" build -trimpath -ldflags "$LDFLAGS" -o "$BIN/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd")
  mv "$BIN/$cmd.tmp" "$BIN/$cmd"
done
echo "building etcd $(awk '$1 == "require" && $2 == "go.etcd.io/etcd/server/v3" {print $3}' "$DIR/etcd/go.mod")" >&2
(cd "$DIR/etcd" && nice -n 10 "$GO" build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" .)
mv "$BIN/etcd.tmp" "$BIN/etcd"
echo "$WANT" >"$BIN/.stamp"
echo "conformance binaries built in ${SECONDS}s ($K8S_VERSION)"
echo "$BIN"
