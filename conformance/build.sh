#!/usr/bin/env bash
# Builds the real Kubernetes control plane used as a test peer: kube-apiserver,
# kube-controller-manager and kube-scheduler of k8s.io/kubernetes (version pinned in go.mod)
# and an etcd server (etcd/go.mod), from the Go module proxy, into conformance/bin/; and, for
# scripts/e2e-csi.sh, upstream's CSI sidecars csi-provisioner, csi-attacher and csi-resizer and
# csi-test's mock-driver (versions pinned in CSI_TOOLS below), each built inside its own
# downloaded module with that module's go.mod and go.sum (external-provisioner's replace
# directives rule out `go install MOD@VERSION`).
#
# Skips the build when bin/ already holds binaries built from the same go.mod/go.sum files,
# this script (CSI_TOOLS included) and the same Go version (bin/.stamp); otherwise `go build`
# reuses Go's build cache, so a rebuild on a warm cache takes seconds. Builds at low priority
# (nice) so that it does not starve the rest of the machine.
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

# The CSI binaries: NAME MODULE VERSION PACKAGE (in the module). One place for their versions.
CSI_TOOLS=(
  "csi-provisioner github.com/kubernetes-csi/external-provisioner/v6 v6.4.0 ./cmd/csi-provisioner"
  "csi-attacher github.com/kubernetes-csi/external-attacher/v4 v4.13.0 ./cmd/csi-attacher"
  "csi-resizer github.com/kubernetes-csi/external-resizer/v2 v2.3.0 ./cmd/csi-resizer"
  "mock-driver github.com/kubernetes-csi/csi-test/v3 v3.1.1 ./cmd/mock-driver"
)

stamp() {
  { "$GO" version; printf '%s\n' "${CSI_TOOLS[@]}"; cat "$DIR/go.mod" "$DIR/go.sum" "$DIR/etcd/go.mod" "$DIR/etcd/go.sum" "$DIR/etcd/main.go" "$DIR/build.sh"; } | sha256sum | cut -d' ' -f1
}
WANT="$(stamp)"
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler etcd)
for t in "${CSI_TOOLS[@]}"; do BINARIES+=("${t%% *}"); done
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
T_CSI=$SECONDS
for t in "${CSI_TOOLS[@]}"; do
  read -r name mod ver pkg <<<"$t"
  echo "building $name ($mod $ver)" >&2
  # The module's directory in the module cache (read-only: the build writes only to bin/).
  moddir="$(cd "$DIR" && "$GO" mod download -json "$mod@$ver" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [[ -d "$moddir" ]] || { echo "conformance/build.sh: go mod download $mod@$ver gave no directory" >&2; exit 2; }
  (cd "$moddir" && nice -n 10 "$GO" build -trimpath -ldflags "-s -w -X main.version=$ver" -o "$BIN/$name.tmp" "$pkg")
  mv "$BIN/$name.tmp" "$BIN/$name"
done
echo "CSI sidecars and mock driver built in $((SECONDS - T_CSI))s" >&2
echo "$WANT" >"$BIN/.stamp"
echo "conformance binaries built in ${SECONDS}s ($K8S_VERSION)"
echo "$BIN"
