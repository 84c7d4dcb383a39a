#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets from the repository's test fixtures:
fuzz/corpus/{write,read,model}/seed-*. Run from anywhere; existing seeds are rewritten.
The input formats are those of fuzz/checks/api.rs and fuzz/checks/model.rs."""
import glob, json, os, re

FUZZ = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(FUZZ)
# The order of pv_apiserver::resources::all().
KINDS = ["persistentvolumes", "persistentvolumeclaims", "pods", "nodes", "namespaces", "services",
         "events", "storageclasses", "leases", "events.k8s.io"]
KIND_OF = {"PersistentVolume": 0, "PersistentVolumeClaim": 1, "Pod": 2, "Node": 3, "Namespace": 4,
           "Service": 5, "Event": 6, "StorageClass": 7, "Lease": 8}
# write: [verb, kind, o1, o2] + body. Verbs: create, update, merge, json, strategic, apply, delete.
# o1: body type (0 JSON, 1 YAML, 2 protobuf) | 4 status | 8 dryRun | fieldValidation << 4 (1 Warn)
#     | Accept << 6 (0 JSON, 1 YAML, 2 protobuf). o2: 1 fieldManager | 2 force | 4 namespace default.
WARN = 1 << 4

def put(target, name, data):
    d = os.path.join(FUZZ, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)

for f in sorted(glob.glob(os.path.join(REPO, "crates/apiserver/tests/protobuf/*.json"))):
    if f.endswith(".go.json"):
        continue
    obj = json.load(open(f))
    k = KIND_OF.get(obj.get("kind"))
    if obj.get("apiVersion") == "events.k8s.io/v1":
        k = 9
    if k is None:
        continue
    base = os.path.basename(f)[:-5]
    obj.setdefault("metadata", {})["name"] = "fz"
    obj["metadata"].pop("namespace", None)
    body = json.dumps(obj).encode()
    put("write", base + "-create", bytes([0, k, WARN, 0]) + body)
    put("write", base + "-update", bytes([1, k, WARN, 0]) + body)
    put("write", base + "-create-pb-answer", bytes([0, k, WARN | 2 << 6, 0]) + body)
    pb = f[:-5] + ".pb"
    if os.path.exists(pb):
        put("write", base + "-pb", bytes([0, k, 2 | WARN, 0]) + open(pb, "rb").read())
    if base == "deleteoptions":
        for kk in range(len(KINDS)):
            put("write", f"delete-{KINDS[kk]}", bytes([6, kk, WARN, 0]) + body)
            if os.path.exists(pb):
                put("write", f"delete-{KINDS[kk]}-pb", bytes([6, kk, 2 | WARN, 0]) + open(pb, "rb").read())
docs = []
for f in sorted(glob.glob(os.path.join(REPO, "examples/**/*.yaml"), recursive=True)) + \
         sorted(glob.glob(os.path.join(REPO, "tests/scenarios/*.yaml")))[:20]:
    for i, doc in enumerate(open(f).read().split("\n---")):
        m = re.search(r"^kind: *(\w+)", doc, re.M)
        if m and m.group(1) in KIND_OF and m.group(1) != "Namespace":
            docs.append((os.path.basename(f)[:-5] + f"-{i}", KIND_OF[m.group(1)], doc.strip() + "\n"))
for name, k, doc in docs[:60]:
    put("write", name + "-yaml", bytes([0, k, 1 | WARN | 1 << 6, 0]) + doc.encode())
patches = {
    2: '{"metadata":{"labels":{"a":"b"},"annotations":{"x":null}}}',
    3: '[{"op":"add","path":"/metadata/labels","value":{"a":"b"}},{"op":"test","path":"/metadata/name","value":"fz"},'
       '{"op":"copy","from":"/metadata/labels","path":"/metadata/annotations"}]',
    4: '{"metadata":{"finalizers":["a"]},"spec":{"accessModes":["ReadWriteMany"],"$retainKeys":["accessModes"]},'
       '"$setElementOrder/x":[]}',
    5: 'apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: fz\n  labels: {a: b}\n',
}
for verb, body in patches.items():
    for k in range(len(KINDS)):
        put("write", f"patch{verb}-{KINDS[k]}", bytes([verb, k, WARN, 1]) + body.encode())
        put("write", f"patch{verb}-{KINDS[k]}-status", bytes([verb, k, WARN | 4, 1]) + body.encode())
        put("write", f"patch{verb}-{KINDS[k]}-dry", bytes([verb, k, WARN | 8, 3]) + body.encode())

# read: path?query, then a newline and the Accept header.
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
PARTIAL = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
reads = ["/api/v1/persistentvolumes?limit=1", "/api/v1/namespaces/fuzz/persistentvolumeclaims/fz",
         "/api/v1/namespaces/fuzz/persistentvolumeclaims?labelSelector=app%3Da,tier+in+(b,c)&fieldSelector=metadata.name%3Dfz",
         "/api/v1/persistentvolumeclaims?labelSelector=!x,app!%3Db&fieldSelector=metadata.namespace!%3Ddefault",
         "/api/v1/pods?labelSelector=x.example.com/y,app+notin+(z)&fieldSelector=spec.nodeName%3D",
         "/api/v1/events?fieldSelector=involvedObject.kind%3DPod,reason%3DR,type%3D%3DNormal",
         "/api/v1/persistentvolumes?fieldSelector=status.phase%3DAvailable",
         "/apis/storage.k8s.io/v1/storageclasses?limit=2&continue=Zm9vL2Jhcg==",
         "/api/v1/pods?resourceVersion=0&resourceVersionMatch=NotOlderThan", "/api/v1/nodes/fz/status",
         "/apis/coordination.k8s.io/v1/namespaces/fuzz/leases?timeoutSeconds=5\n" + TABLE,
         "/api/v1/namespaces/fuzz/pods?includeObject=Object\n" + TABLE,
         "/api/v1/persistentvolumes\n" + PARTIAL,
         "/apis/events.k8s.io/v1/events?limit=500", "/api/v1/namespaces/fuzz",
         "/api/v1/namespaces/fuzz/events?watch=1", "/api/v1/persistentvolumes?watch=true&resourceVersion=1",
         "/api/v1/persistentvolumeclaims?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
         "/api/v1/persistentvolumes?watch=1\napplication/vnd.kubernetes.protobuf",
         "/api/v1/persistentvolumes/fz\napplication/vnd.kubernetes.protobuf",
         "/api/v1/persistentvolumes\napplication/yaml", "/api/v1/persistentvolumes?resourceVersion=999999",
         "/version", "/api", "/apis", "/apis/storage.k8s.io", "/api/v1", "/openapi/v3", "/openapi/v3/api/v1",
         "/readyz?verbose", "/readyz/storage", "/readyz/nothing"]
for i, p in enumerate(reads):
    put("read", str(i), p.encode())

# model: [even] + quantity, [odd] + LabelSelector JSON.
qs = set(["10Gi", "1.5G", "500m", "1e3", "0", "-1Gi", "1Ei", "0.000000001", "+12Mi", "1E-3"])
for f in glob.glob(os.path.join(REPO, "tests/scenarios/*.yaml")):
    qs.update(re.findall(r"storage: *\"?([0-9][0-9.eEinumkKMGTP+-]*)", open(f).read()))
for i, q in enumerate(sorted(qs)[:40]):
    put("model", f"q{i}", b"\0" + q.encode())
for i, s in enumerate(['{"matchLabels":{"a":"b"},"matchExpressions":[{"key":"k","operator":"In","values":["x"]}]}',
                       '{"matchExpressions":[{"key":"k","operator":"Exists"},{"key":"j","operator":"NotIn","values":["y"]}]}',
                       '{"matchExpressions":[{"key":"k","operator":"Bogus"}]}', '{}']):
    put("model", f"s{i}", b"\1" + s.encode())

# Inputs that once stopped a run because a check was wrong (the server behaves as upstream).
# A delete with a body takes its options from the body only: the query's dryRun=All is ignored.
put("write", "delete-body-options-over-query-dry-run",
    bytes([0xca, 0, 0x18, 3]) + b'{"metadata":{"labels":{"a":"b"},"annotation|":{"x":null}}}')
