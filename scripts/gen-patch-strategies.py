#!/usr/bin/env python3
"""Derives the strategic-merge-patch table the API server uses from upstream's OpenAPI spec.

Usage: scripts/gen-patch-strategies.py [SWAGGER_JSON] > crates/apiserver/src/patch_strategies.json

SWAGGER_JSON defaults to api/openapi-spec/swagger.json of k8s.io/kubernetes in the Go module
cache (the version the k8s-openapi feature pins). For every type reachable from the kinds the
server stores, the output keeps the fields that lead to another type (so a patch can follow
them) or that carry a patch strategy: `[type or null, strategy or null, merge key or null]`.
"""
import json
import os
import subprocess
import sys

VERSION = "v1.37.2"
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def roots(defs):
    """The served kinds (pv-apiserver's `served` example, the store's registry) by the name the API
    server looks their schema up by (the kind; `GROUP/Kind` for a kind a core one shares, as
    events.k8s.io's Event), each with its definition in upstream's spec; a kind without one (as
    apiextensions.k8s.io's, not in k8s.io/api) is named on standard error and left out."""
    out = subprocess.run(["cargo", "run", "-q", "--release", "-p", "pv-apiserver", "--example", "served"],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    served = [json.loads(line) for line in out.splitlines()]
    if not served:
        raise SystemExit("the served example printed no resource")
    core = {r["kind"] for r in served if not r["group"]}
    found = {}
    for r in served:
        group = r["group"].split(".")[0] if r["group"] else "core"
        name = f"io.k8s.api.{group}.{r['version']}.{r['kind']}"
        key = r["kind"] if not r["group"] or r["kind"] not in core else f"{r['group']}/{r['kind']}"
        if name in defs:
            found[key] = name
        else:
            print(f"gen-patch-strategies: {name} is not in upstream's spec: no patch strategies", file=sys.stderr)
    return found


def short(name):
    for p in ("io.k8s.api.", "io.k8s.apimachinery.pkg.apis.", "io.k8s.apimachinery.pkg."):
        if name.startswith(p):
            return name[len(p):]
    return name


def ref_of(prop):
    for p in (prop, prop.get("items", {}), prop.get("additionalProperties", {})):
        if isinstance(p, dict) and "$ref" in p:
            return p["$ref"].split("/")[-1]
    for p in prop.get("allOf", []):
        if "$ref" in p:
            return p["$ref"].split("/")[-1]
    return None


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser(
        f"~/go/pkg/mod/k8s.io/kubernetes@{VERSION}/api/openapi-spec/swagger.json")
    with open(path) as f:
        defs = json.load(f)["definitions"]
    ROOTS = roots(defs)
    types = {}
    todo = list(ROOTS.values())
    while todo:
        name = todo.pop()
        if short(name) in types:
            continue
        fields = {}
        for field, prop in sorted(defs[name].get("properties", {}).items()):
            ref = ref_of(prop)
            strategy = prop.get("x-kubernetes-patch-strategy")
            key = prop.get("x-kubernetes-patch-merge-key")
            if ref and defs.get(ref, {}).get("properties"):
                todo.append(ref)
            else:
                ref = None
            if ref or strategy:
                fields[field] = [short(ref) if ref else None, strategy, key]
        types[short(name)] = fields
    out = {"source": f"k8s.io/kubernetes@{VERSION} api/openapi-spec/swagger.json",
           "roots": {k: short(v) for k, v in ROOTS.items()},
           "types": dict(sorted(types.items()))}
    json.dump(out, sys.stdout, indent=0, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
