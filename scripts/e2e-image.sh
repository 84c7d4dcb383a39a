#!/usr/bin/env bash
# The OCI image of scripts/build-image.sh, checked as a runtime would read it: the layout
# (oci-layout, index.json, every blob's digest and size), the config (linux/amd64, entrypoint
# /pv-controller, cmd, user 65532, port 9090, the org.opencontainers.image.* labels with the
# version and source) and the Dockerfile's ENTRYPOINT, CMD, USER and EXPOSE being the same; then
# the layer unpacked into an empty directory and the binary run from it, inside that directory
# as its root (chroot: no libc, no shell, nothing but the layer) when run as root: `--version`
# and `simulate` on examples/cluster.yaml; a second build giving the same digest; the layout
# pushed with `crane push` to crane's registry on loopback, arriving with the same digest.
#
# Needs Go (crane) and GNU tar; skips, saying so, without Go. The
# first run builds the `dist` binary (several minutes); later runs reuse it.
# Last line: `e2e-image: N checks passed`.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
GO="$(command -v go || echo /usr/local/go/bin/go)"
if [[ ! -x "$GO" ]]; then echo "e2e-image: skipped: Go not installed (crane is built with it)"; exit 0; fi
WORK="$(mktemp -d)"
trap '[[ -n "${KEEP_WORK:-}" ]] || rm -rf "$WORK"' EXIT
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"
PASSED=0
SECONDS=0

SOURCE=https://example.com/pv-controller
"$ROOT/scripts/build-image.sh" "$WORK/layout" --source "$SOURCE" >"$WORK/build.out" 2>"$WORK/build.err" \
  || { cat "$WORK/build.err" >&2; fail "scripts/build-image.sh"; }
cat "$WORK/build.out"
pass "scripts/build-image.sh wrote an OCI layout ($SECONDS s)"
VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml" | head -1)"
"$ROOT/scripts/build-image.sh" "$WORK/again" --source "$SOURCE" >"$WORK/again.out" 2>"$WORK/build.err" \
  || { cat "$WORK/build.err" >&2; fail "scripts/build-image.sh, a second time"; }
[[ "$(grep '^digest: ' "$WORK/again.out")" == "$(grep '^digest: ' "$WORK/build.out")" ]] || fail "a second build gave another digest"
pass "reproducible: the same binary and commit give the same digest"

# The layout and the config; the layer unpacked into $WORK/rootfs. Prints one `ok:` line per check.
python3 - "$WORK/layout" "$WORK/rootfs" "$ROOT/Dockerfile" "$VERSION" "$SOURCE" "$(git -C "$ROOT" rev-parse HEAD)" \
  "$(sed -n 's/^digest: //p' "$WORK/build.out")" >"$WORK/checks" <<'PY' || { cat "$WORK/checks"; fail "the image layout"; }
import hashlib, json, os, re, sys, tarfile
layout, rootfs, dockerfile, version, source, revision, digest = sys.argv[1:]
def ok(msg): print(f"ok: {msg}")
def blob(d):
    algo, hexd = d["digest"].split(":")
    data = open(os.path.join(layout, "blobs", algo, hexd), "rb").read()
    assert algo == "sha256" and hashlib.sha256(data).hexdigest() == hexd, f"blob {d['digest']}: wrong digest"
    assert len(data) == d["size"], f"blob {d['digest']}: {len(data)} bytes, descriptor says {d['size']}"
    return data

assert json.load(open(os.path.join(layout, "oci-layout"))) == {"imageLayoutVersion": "1.0.0"}
index = json.load(open(os.path.join(layout, "index.json")))
assert index["schemaVersion"] == 2 and len(index["manifests"]) == 1, index
desc = index["manifests"][0]
assert desc["mediaType"] == "application/vnd.oci.image.manifest.v1+json", desc
assert desc["digest"] == digest, f"index names {desc['digest']}, build-image.sh printed {digest}"
manifest = json.loads(blob(desc))
assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
assert manifest["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json", manifest["config"]
ok("oci-layout, index.json and the manifest (OCI media types; digest as printed)")
config = json.loads(blob(manifest["config"]))
layers = [blob(l) for l in manifest["layers"]]
assert all(l["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip" for l in manifest["layers"])
assert len(config["rootfs"]["diff_ids"]) == len(layers) == 1, config["rootfs"]
ok("every blob has the digest and size its descriptor says; one gzipped layer")

c = config["config"]
assert (config["os"], config["architecture"]) == ("linux", "amd64"), (config["os"], config["architecture"])
assert c["Entrypoint"] == ["/pv-controller"], c.get("Entrypoint")
assert c["User"] == "65532:65532", c.get("User")
assert c["Cmd"] == ["run", "--metrics-addr=0.0.0.0:9090"], c.get("Cmd")
assert c["ExposedPorts"] == {"9090/tcp": {}}, c.get("ExposedPorts")
ok("config: linux/amd64, entrypoint /pv-controller, user 65532:65532, cmd run, port 9090/tcp")
labels = c["Labels"]
want = {"org.opencontainers.image.title": "pv-controller", "org.opencontainers.image.version": version,
        "org.opencontainers.image.source": source, "org.opencontainers.image.revision": revision,
        "org.opencontainers.image.licenses": "Apache-2.0"}
for k, v in want.items():
    assert labels.get(k) == v, f"label {k}: {labels.get(k)!r}, expected {v!r}"
assert labels.get("org.opencontainers.image.description"), labels
ok(f"labels: org.opencontainers.image.version={version}, source, revision, title, licenses, description")

# The Dockerfile's final stage says the same.
text = open(dockerfile).read()
final = text[text.rindex("\nFROM "):]
def instr(name):
    m = re.findall(rf"^{name}\s+(.+)$", final, re.M)
    assert len(m) == 1, f"the Dockerfile's last stage has {len(m)} {name} lines"
    return m[0].strip()
assert json.loads(instr("ENTRYPOINT")) == c["Entrypoint"], instr("ENTRYPOINT")
assert json.loads(instr("CMD")) == c["Cmd"], instr("CMD")
assert instr("USER") == c["User"], instr("USER")
assert instr("EXPOSE") + "/tcp" in c["ExposedPorts"], instr("EXPOSE")
ok("the Dockerfile has the same ENTRYPOINT, CMD, USER and EXPOSE")

# diff_id is the uncompressed layer's digest.
import gzip, io
raw = gzip.decompress(layers[0])
assert "sha256:" + hashlib.sha256(raw).hexdigest() == config["rootfs"]["diff_ids"][0], "diff_id"
with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
    members = {m.name.rstrip("/"): m for m in tar.getmembers()}
    assert sorted(members) == ["pv-controller", "tmp"], sorted(members)
    b, t = members["pv-controller"], members["tmp"]
    assert b.isfile() and b.mode == 0o755 and (b.uid, b.gid) == (0, 0), (b.mode, b.uid)
    assert t.isdir() and t.mode == 0o1777, oct(t.mode)
    assert b.mtime == 0, b.mtime
    tar.extractall(rootfs, filter="fully_trusted")
ok("the layer: /pv-controller (0755, root, time 0) and /tmp (1777), its diff_id right")
PY
cat "$WORK/checks"
PASSED=$((PASSED + $(grep -c '^ok:' "$WORK/checks")))

# Pushed as the README says (crane push LAYOUT REF), to crane's own registry on loopback: the
# same digest arrives, and crane validates what it can pull back.
CRANE="$("$ROOT/conformance/build.sh" 2>/dev/null | tail -1)/crane"
: >"$WORK/registry.log"
"$CRANE" registry serve --address 127.0.0.1:0 2>>"$WORK/registry.log" &
REGISTRY_PID=$!
trap 'kill "$REGISTRY_PID" 2>/dev/null || true; wait "$REGISTRY_PID" 2>/dev/null || true; [[ -n "${KEEP_WORK:-}" ]] || rm -rf "$WORK"' EXIT
for _ in $(seq 100); do grep -q 'serving on port' "$WORK/registry.log" && break; sleep 0.1; done
REF="127.0.0.1:$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$WORK/registry.log")/pv-controller:v$VERSION"
"$CRANE" push "$WORK/layout" "$REF" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err"; fail "crane push LAYOUT $REF"; }
[[ "$("$CRANE" digest "$REF")" == "$(sed -n 's/^digest: //p' "$WORK/build.out")" ]] || fail "the pushed image has another digest"
"$CRANE" validate --remote "$REF" >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "crane validate --remote $REF"; }
pass "crane push of the layout: the same digest in the registry, and crane validate passes"

BIN="$WORK/rootfs/pv-controller"
file -b "$BIN" | grep -Eq 'statically linked|static-pie linked' || fail "the image's binary is not static: $(file -b "$BIN")"
if ldd "$BIN" >"$WORK/ldd" 2>&1; then grep -Eq 'statically linked|not a dynamic executable' "$WORK/ldd" || { cat "$WORK/ldd"; fail "ldd lists libraries"; }; fi
pass "the binary is statically linked ($(file -b "$BIN" | grep -Eo 'static(-pie)? linked'))"

# Run from the layer, with the layer as the whole filesystem where we may (root: chroot).
cp "$ROOT/examples/cluster.yaml" "$WORK/rootfs/tmp/cluster.yaml"
if [[ "$(id -u)" == 0 ]] && command -v chroot >/dev/null; then
  IN=(env -i "$(command -v chroot)" "$WORK/rootfs") P=/pv-controller F=/tmp/cluster.yaml WHERE="chrooted into the layer"
else
  IN=(env -i) P="$BIN" F="$WORK/rootfs/tmp/cluster.yaml" WHERE="from the layer (not root: no chroot)"
fi
"${IN[@]}" "$P" --version >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "pv-controller --version $WHERE"; }
grep -qx "pv-controller $VERSION" "$WORK/out" || { cat "$WORK/out"; fail "--version: expected 'pv-controller $VERSION'"; }
pass "pv-controller --version $WHERE: $(cat "$WORK/out")"
"${IN[@]}" "$P" simulate -f "$F" -o yaml >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err"; fail "simulate $WHERE"; }
grep -q 'volumeName: pv-5g' "$WORK/out" || { head -50 "$WORK/out"; fail "simulate $WHERE: data/small not bound to pv-5g"; }
pass "simulate -f examples/cluster.yaml $WHERE binds data/small to pv-5g"

echo "e2e-image: ${SECONDS}s"
echo "e2e-image: $PASSED checks passed"
