#!/usr/bin/env bash
# Builds the real Kubernetes control plane used as a test peer: kube-apiserver,
# kube-controller-manager and kube-scheduler of k8s.io/kubernetes (version pinned in go.mod)
# and an etcd server (etcd/go.mod), from the Go module proxy, into conformance/bin/; and the Go
# tools the tests run (versions pinned in GO_TOOLS below): upstream's CSI sidecars
# csi-provisioner, csi-attacher, csi-resizer and csi-snapshotter, external-snapshotter's
# snapshot-controller and csi-test's mock-driver (scripts/e2e-csi.sh), helm (scripts/e2e-helm.sh),
# crane (scripts/build-image.sh) and krew with its manifest validator (scripts/e2e-krew.sh). Each
# tool is built inside its own downloaded module with that module's go.mod and go.sum
# (external-provisioner's replace directives rule out `go install MOD@VERSION`).
#
# And the manifests the tests apply that come with a Go module (GO_MANIFESTS below), linked, not
# copied, from the module cache into bin/: the VolumeSnapshot CRDs of external-snapshotter's
# client module, at the release of the snapshot binaries, in bin/crd/snapshot/ (three files, for
# `kubectl apply -f conformance/bin/crd/snapshot/`).
#
# Skips what bin/ already holds as built from the same inputs: the control plane when go.mod,
# go.sum, etcd/ and the Go version are those of bin/.stamp; each tool when its GO_TOOLS line and
# the Go version are those of bin/.stamp-NAME (so adding a tool rebuilds nothing else); each
# manifest directory when its GO_MANIFESTS line is that of its stamp and its links resolve (a
# cleaned module cache downloads the module again). Otherwise
# `go build` reuses Go's build cache, so a rebuild on a warm cache takes seconds. Builds at low
# priority (nice) so that it does not starve the rest of the machine.
#
# Usage: conformance/build.sh [--force] [--control-plane]
# --control-plane builds the control plane only (what scripts/real-cluster.sh needs), not the
# tools. Runs one at a time: a second build.sh waits for the first (a lock on bin/.lock), then
# finds what it built; each binary is built to a name of its own and renamed into place.
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

# external-snapshotter's release: its snapshot-controller and csi-snapshotter, and the CRDs of its
# client module (which that release's go.mod uses from the same tree).
SNAPSHOTTER=v8.6.0
# The Go tools: NAME MODULE VERSION PACKAGE (in the module) [VERSION_VARIABLE, set to VERSION by
# -ldflags -X; default main.version]. One place for their versions.
GO_TOOLS=(
  "csi-provisioner github.com/kubernetes-csi/external-provisioner/v6 v6.4.0 ./cmd/csi-provisioner"
  "csi-attacher github.com/kubernetes-csi/external-attacher/v4 v4.13.0 ./cmd/csi-attacher"
  "csi-resizer github.com/kubernetes-csi/external-resizer/v2 v2.3.0 ./cmd/csi-resizer"
  "csi-snapshotter github.com/kubernetes-csi/external-snapshotter/v8 $SNAPSHOTTER ./cmd/csi-snapshotter"
  "snapshot-controller github.com/kubernetes-csi/external-snapshotter/v8 $SNAPSHOTTER ./cmd/snapshot-controller"
  "mock-driver github.com/kubernetes-csi/csi-test/v3 v3.1.1 ./cmd/mock-driver"
  "helm helm.sh/helm/v4 v4.3.1 ./cmd/helm helm.sh/helm/v4/internal/version.version"
  "crane github.com/google/go-containerregistry v0.22.1 ./cmd/crane github.com/google/go-containerregistry/cmd/crane/cmd.Version"
  "validate-krew-manifest sigs.k8s.io/krew v0.4.3 ./cmd/validate-krew-manifest sigs.k8s.io/krew/internal/version.gitTag"
  "kubectl-krew sigs.k8s.io/krew v0.4.3 ./cmd/krew sigs.k8s.io/krew/internal/version.gitTag"
)
# The manifests: DIR (under bin/) MODULE VERSION FILE... (paths in the module). DIR holds a link
# named after each FILE's base name to that file in the module cache, and nothing else.
SNAPSHOT_CRDS=config/crd/snapshot.storage.k8s.io_volume
GO_MANIFESTS=(
  "crd/snapshot github.com/kubernetes-csi/external-snapshotter/client/v8 $SNAPSHOTTER ${SNAPSHOT_CRDS}snapshotclasses.yaml ${SNAPSHOT_CRDS}snapshotcontents.yaml ${SNAPSHOT_CRDS}snapshots.yaml"
)

PKG=k8s.io/component-base/version
LDFLAGS="-s -w -X $PKG.gitVersion=$K8S_VERSION -X $PKG.gitMajor=$MAJOR -X $PKG.gitMinor=$MINOR"
LDFLAGS+=" -X $PKG.gitTreeState=clean -X $PKG.buildDate=1970-01-01T00:00:00Z"
GO_VERSION="$("$GO" version)"
# What the control plane is built from; each tool's stamp is its GO_TOOLS line.
stamp() {
  { echo "$GO_VERSION"; echo "$LDFLAGS"; cat "$DIR/go.mod" "$DIR/go.sum" "$DIR/etcd/go.mod" "$DIR/etcd/go.sum" "$DIR/etcd/main.go"; } | sha256sum | cut -d' ' -f1
}
tool_stamp() { printf '%s\n%s\n' "$GO_VERSION" "$1" | sha256sum | cut -d' ' -f1; }
WANT="$(stamp)"
CONTROL_PLANE=(kube-apiserver kube-controller-manager kube-scheduler etcd)
FORCE="" ONLY_CONTROL_PLANE=""
for arg in "$@"; do
  case "$arg" in
    --force) FORCE=--force ;;
    --control-plane) ONLY_CONTROL_PLANE=1 ;;
    *) echo "usage: conformance/build.sh [--force] [--control-plane]" >&2; exit 2 ;;
  esac
done
control_plane_up_to_date() {
  [[ "$FORCE" != --force && -f "$BIN/.stamp" && "$(cat "$BIN/.stamp")" == "$WANT" ]] || return 1
  local b; for b in "${CONTROL_PLANE[@]}"; do [[ -x "$BIN/$b" ]] || return 1; done
}
tool_up_to_date() { # TOOL_LINE
  local name="${1%% *}"
  [[ "$FORCE" != --force && -x "$BIN/$name" && -f "$BIN/.stamp-$name" && "$(cat "$BIN/.stamp-$name")" == "$(tool_stamp "$1")" ]]
}
manifest_stamp_file() { local dir="${1%% *}"; echo "$BIN/.stamp-${dir//\//-}"; }
manifests_up_to_date() { # MANIFEST_LINE
  local dir file f
  read -r dir _ _ file <<<"$1"
  [[ "$FORCE" != --force && -f "$(manifest_stamp_file "$1")" && "$(cat "$(manifest_stamp_file "$1")")" == "$(tool_stamp "$1")" ]] || return 1
  for f in $file; do [[ -f "$BIN/$dir/$(basename "$f")" ]] || return 1; done
}
up_to_date() {
  control_plane_up_to_date || return 1
  [[ -n "$ONLY_CONTROL_PLANE" ]] && return 0
  local t; for t in "${GO_TOOLS[@]}"; do tool_up_to_date "$t" || return 1; done
  for t in "${GO_MANIFESTS[@]}"; do manifests_up_to_date "$t" || return 1; done
}
if up_to_date; then
  echo "conformance binaries up to date ($K8S_VERSION)"
  echo "$BIN"
  exit 0
fi

mkdir -p "$BIN"
# One build at a time; the one that waited finds what the other built.
exec 9>"$BIN/.lock"
if ! flock -n 9; then
  echo "conformance/build.sh: another build is running; waiting for it" >&2
  flock 9
fi
if up_to_date; then
  echo "conformance binaries up to date ($K8S_VERSION)"
  echo "$BIN"
  exit 0
fi
export GOFLAGS="${GOFLAGS:-} -mod=readonly" GOTOOLCHAIN=local CGO_ENABLED=0
SECONDS=0
if ! control_plane_up_to_date; then
  rm -f "$BIN/.stamp"
  for cmd in kube-apiserver kube-controller-manager kube-scheduler; do
    echo "building $cmd $K8S_VERSION" >&2
    (cd "$DIR" && nice -n 10 "$GO" build -trimpath -ldflags "$LDFLAGS" -o "$BIN/$cmd.tmp.$$" "k8s.io/kubernetes/cmd/$cmd")
    mv "$BIN/$cmd.tmp.$$" "$BIN/$cmd"
  done
  echo "building etcd $(awk '$1 == "require" && $2 == "go.etcd.io/etcd/server/v3" {print $3}' "$DIR/etcd/go.mod")" >&2
  (cd "$DIR/etcd" && nice -n 10 "$GO" build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp.$$" .)
  mv "$BIN/etcd.tmp.$$" "$BIN/etcd"
  echo "$WANT" >"$BIN/.stamp"
  echo "control plane built in ${SECONDS}s ($K8S_VERSION)" >&2
fi
T_TOOLS=$SECONDS
# module_dir MODULE VERSION: the module's directory in the module cache, downloaded when missing
# (read-only: the build writes only to bin/).
module_dir() {
  local d
  d="$(cd "$DIR" && "$GO" mod download -json "$1@$2" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [[ -d "$d" ]] || { echo "conformance/build.sh: go mod download $1@$2 gave no directory" >&2; exit 2; }
  echo "$d"
}
for t in "${GO_TOOLS[@]}"; do
  [[ -z "$ONLY_CONTROL_PLANE" ]] || break
  tool_up_to_date "$t" && continue
  read -r name mod ver pkg var <<<"$t"
  echo "building $name ($mod $ver)" >&2
  rm -f "$BIN/.stamp-$name"
  moddir="$(module_dir "$mod" "$ver")"
  # A replace of a module of the same repository by a relative directory (external-snapshotter's
  # `replace .../client/v8 => ./client`) names a directory the module's download leaves out (a
  # nested module is a download of its own): it points at that module's download of the same
  # version instead, in a copy of go.mod that the build reads (-modfile; the copy's go.sum beside it).
  modfile=()
  while read -r old new; do
    [[ -n "$old" && ! -e "$moddir/$new" ]] || continue
    if (( ! ${#modfile[@]} )); then
      mkdir -p "$BIN/.modfile.$$"
      cp "$moddir/go.mod" "$BIN/.modfile.$$/go.mod"
      cp "$moddir/go.sum" "$BIN/.modfile.$$/go.sum"
      modfile=(-modfile "$BIN/.modfile.$$/go.mod")
    fi
    nested="$(module_dir "$old" "$ver")"
    echo "  ($old: $new is not in the download; using $old@$ver)" >&2
    "$GO" mod edit -replace "$old=$nested" "$BIN/.modfile.$$/go.mod"
  done < <("$GO" mod edit -json "$moddir/go.mod" | python3 -c '
import json, sys
for r in json.load(sys.stdin).get("Replace") or []:
    new = r["New"]["Path"]
    if not r["New"].get("Version") and (new.startswith("./") or new.startswith("../")):
        print(r["Old"]["Path"], new)')
  (cd "$moddir" && nice -n 10 "$GO" build "${modfile[@]}" -trimpath -ldflags "-s -w -X ${var:-main.version}=$ver" -o "$BIN/$name.tmp.$$" "$pkg")
  rm -rf "$BIN/.modfile.$$"
  mv "$BIN/$name.tmp.$$" "$BIN/$name"
  tool_stamp "$t" >"$BIN/.stamp-$name"
done
for m in "${GO_MANIFESTS[@]}"; do
  [[ -z "$ONLY_CONTROL_PLANE" ]] || break
  manifests_up_to_date "$m" && continue
  read -r dir mod ver files <<<"$m"
  echo "linking $dir/ ($mod $ver)" >&2
  rm -f "$(manifest_stamp_file "$m")"
  moddir="$(module_dir "$mod" "$ver")"
  rm -rf "$BIN/$dir"
  mkdir -p "$BIN/$dir"
  for f in $files; do
    [[ -f "$moddir/$f" ]] || { echo "conformance/build.sh: $mod@$ver has no $f" >&2; exit 2; }
    ln -s "$moddir/$f" "$BIN/$dir/$(basename "$f")"
  done
  tool_stamp "$m" >"$(manifest_stamp_file "$m")"
done
echo "Go tools built in $((SECONDS - T_TOOLS))s" >&2
echo "conformance binaries built in ${SECONDS}s ($K8S_VERSION)"
echo "$BIN"
