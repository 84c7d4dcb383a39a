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
import sys

VERSION = "v1.37.2"
ROOTS = {
    "PersistentVolume": "io.k8s.api.core.v1.PersistentVolume",
    "PersistentVolumeClaim": "io.k8s.api.core.v1.PersistentVolumeClaim",
    "Pod": "io.k8s.api.core.v1.Pod",
    "Node": "io.k8s.api.core.v1.Node",
    "Namespace": "io.k8s.api.core.v1.Namespace",
    "Event": "io.k8s.api.core.v1.Event",
    "Service": "io.k8s.api.core.v1.Service",
    "StorageClass": "io.k8s.api.storage.v1.StorageClass",
    "CSIDriver": "io.k8s.api.storage.v1.CSIDriver",
    "CSINode": "io.k8s.api.storage.v1.CSINode",
    "VolumeAttachment": "io.k8s.api.storage.v1.VolumeAttachment",
    "CSIStorageCapacity": "io.k8s.api.storage.v1.CSIStorageCapacity",
    "VolumeAttributesClass": "io.k8s.api.storage.v1.VolumeAttributesClass",
    "Lease": "io.k8s.api.coordination.v1.Lease",
    "Secret": "io.k8s.api.core.v1.Secret",
    "ConfigMap": "io.k8s.api.core.v1.ConfigMap",
    "ServiceAccount": "io.k8s.api.core.v1.ServiceAccount",
    "events.k8s.io/Event": "io.k8s.api.events.v1.Event",
}


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
