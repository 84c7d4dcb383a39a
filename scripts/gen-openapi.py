#!/usr/bin/env python3
"""Writes crates/apiserver/src/openapi/*.json: kube-apiserver's own OpenAPI documents, cut down
to the resources `pv-controller up` serves.

Usage: scripts/gen-openapi.py KUBECONFIG    (a kube-apiserver of the version k8s-openapi pins,
e.g. `scripts/real-cluster.sh up DIR`; needs PyYAML)

For each served group/version it fetches `/openapi/v3/<gv>` and keeps the paths of the served
resources (collection, object, and the `status`/`finalize` subresources `up` serves; no
deprecated `/watch/` paths) and every schema those paths reach; `/openapi/v2` is cut down the
same way. The server then serves these documents as they are, so `kubectl explain` and
schema-aware clients see upstream's schemas and descriptions. Run it again when the pinned
Kubernetes version changes.
"""

import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from api_differential import Server  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def served():
    """The built-in resources the API server serves, by group/version path (`api/v1`,
    `apis/GROUP/VERSION`): the store's registry as `cargo run -p pv-apiserver --example served`
    prints it, so that a kind added there needs no edit here."""
    out = subprocess.run(["cargo", "run", "-q", "--release", "-p", "pv-apiserver", "--example", "served"],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    gvs = {}
    for line in out.splitlines():
        r = json.loads(line)
        gv = "api/" + r["version"] if not r["group"] else f"apis/{r['group']}/{r['version']}"
        gvs.setdefault(gv, []).append(r["plural"])
    if not gvs:
        raise SystemExit("the served example printed no resource")
    return gvs


SERVED = {}
SUBRESOURCES = {"status", "finalize"}
OUT = os.path.join(ROOT, "crates", "apiserver", "src", "openapi")


def served_path(gv, path):
    """True for /GV/[namespaces/{namespace}/]RESOURCE[/{name}[/SUB]] of a served resource."""
    rest = path[len("/" + gv):].strip("/").split("/") if path.startswith("/" + gv + "/") else None
    if not rest or rest[0] == "watch":
        return False
    if rest[:2] == ["namespaces", "{namespace}"] and len(rest) > 2:
        rest = rest[2:]
    elif rest[:2] == ["namespaces", "{name}"]:
        rest = ["namespaces", "{name}"] + rest[2:]
    res, tail = rest[0], rest[1:]
    if res not in SERVED[gv]:
        return False
    return len(tail) == 0 or tail == ["{name}"] or (len(tail) == 2 and tail[1] in SUBRESOURCES)


def refs(node, out):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                out.add(v.rsplit("/", 1)[-1])
            else:
                refs(v, out)
    elif isinstance(node, list):
        for v in node:
            refs(v, out)


def closure(start, schemas):
    seen, todo = set(), list(start)
    while todo:
        name = todo.pop()
        if name in seen or name not in schemas:
            continue
        seen.add(name)
        more = set()
        refs(schemas[name], more)
        todo.extend(more - seen)
    return {k: schemas[k] for k in sorted(seen)}


def get_json(server, path):
    code, _, body = server.request("GET", path, None, {"Accept": "application/json"})
    if code != 200:
        raise SystemExit(f"GET {path}: {code}")
    return json.loads(body)


def main():
    SERVED.update(served())
    server = Server("kube-apiserver", sys.argv[1])
    os.makedirs(OUT, exist_ok=True)
    v2_paths = {}
    for gv in SERVED:
        doc = get_json(server, "/openapi/v3/" + gv)
        paths = {p: v for p, v in doc["paths"].items() if served_path(gv, p)}
        wanted = set()
        refs(paths, wanted)
        doc["paths"] = paths
        doc["components"]["schemas"] = closure(wanted, doc["components"]["schemas"])
        name = re.sub(r"[^a-z0-9]+", "_", gv) + ".json"
        with open(os.path.join(OUT, name), "w") as f:
            json.dump(doc, f, separators=(",", ":"), sort_keys=True)
        print(f"{name}: {len(paths)} paths, {len(doc['components']['schemas'])} schemas")
    v2 = get_json(server, "/openapi/v2")
    for p, v in v2["paths"].items():
        if any(served_path(gv, p) for gv in SERVED):
            v2_paths[p] = v
    wanted = set()
    refs(v2_paths, wanted)
    v2["paths"] = v2_paths
    v2["definitions"] = closure(wanted, v2["definitions"])
    with open(os.path.join(OUT, "v2.json"), "w") as f:
        json.dump(v2, f, separators=(",", ":"), sort_keys=True)
    print(f"v2.json: {len(v2_paths)} paths, {len(v2['definitions'])} definitions")


if __name__ == "__main__":
    main()
