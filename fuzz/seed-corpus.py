#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets from the repository's test fixtures:
fuzz/corpus/{write,selectors,path,model}/seed-*. Run from anywhere; existing seeds are rewritten."""
import glob, json, os, re

FUZZ = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(FUZZ)
# The order of pv_apiserver::resources::all().
KINDS = ["persistentvolumes", "persistentvolumeclaims", "pods", "nodes", "namespaces", "services",
         "events", "storageclasses", "leases", "events.k8s.io"]
KIND_OF = {"PersistentVolume": 0, "PersistentVolumeClaim": 1, "Pod": 2, "Node": 3, "Namespace": 4,
           "Service": 5, "Event": 6, "StorageClass": 7, "Lease": 8}

def put(target, name, data):
    d = os.path.join(FUZZ, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)

# write: [verb, kind, content type, options] + body.
for f in sorted(glob.glob(os.path.join(REPO, "crates/apiserver/tests/protobuf/*.json"))):
    if f.endswith(".go.json"):
        continue
    obj = json.load(open(f))
    k = KIND_OF.get(obj.get("kind"))
    if k is None:
        continue
    base = os.path.basename(f)[:-5]
    put("write", base + "-json", bytes([0, k, 0, 1]) + json.dumps(obj).encode())
    put("write", base + "-update", bytes([1, k, 0, 0]) + json.dumps(obj).encode())
    pb = f[:-5] + ".pb"
    if os.path.exists(pb):
        put("write", base + "-pb", bytes([0, k, 2, 1]) + open(pb, "rb").read())
docs = []
for f in sorted(glob.glob(os.path.join(REPO, "examples/**/*.yaml"), recursive=True)) + \
         sorted(glob.glob(os.path.join(REPO, "tests/scenarios/*.yaml")))[:40]:
    for i, doc in enumerate(open(f).read().split("\n---")):
        m = re.search(r"^kind: *(\w+)", doc, re.M)
        if m and m.group(1) in KIND_OF:
            docs.append((os.path.basename(f)[:-5] + f"-{i}", KIND_OF[m.group(1)], doc.strip() + "\n"))
for name, k, doc in docs:
    put("write", name + "-yaml", bytes([0, k, 1, 1]) + doc.encode())
patches = {
    2: '{"metadata":{"labels":{"a":"b"},"annotations":{"x":null}}}',
    3: '[{"op":"add","path":"/metadata/labels","value":{"a":"b"}},{"op":"test","path":"/metadata/name","value":"fz"},'
       '{"op":"copy","from":"/metadata","path":"/metadata/annotations"}]',
    4: '{"metadata":{"finalizers":["a"]},"spec":{"accessModes":["ReadWriteMany"],"$retainKeys":["accessModes"]},'
       '"$setElementOrder/x":[]}',
    5: 'apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: fz\n  labels: {a: b}\n',
}
for verb, body in patches.items():
    for k in range(len(KINDS)):
        put("write", f"patch{verb}-{KINDS[k]}", bytes([verb, k, 0, 1]) + body.encode())
        put("write", f"patch{verb}-{KINDS[k]}-status", bytes([verb, k, 0, 5]) + body.encode())

# selectors: [kind] + label selector \n field selector.
sels = ["app=a,tier in (b,c)\nmetadata.name=fz", "!x,app!=b\nmetadata.namespace!=default",
        "x.example.com/y,app notin (z)\nspec.nodeName=", "\ninvolvedObject.kind=Pod,reason=R,type==Normal",
        "a==b\nstatus.phase=Running", "app in (a),tier\nsource=x"]
for i, s in enumerate(sels):
    for k in range(len(KINDS)):
        put("selectors", f"{i}-{KINDS[k]}", bytes([k]) + s.encode())

# path: path?query.
paths = ["/api/v1/persistentvolumes?limit=1", "/api/v1/namespaces/fuzz/persistentvolumeclaims/fz",
         "/api/v1/namespaces/fuzz/persistentvolumeclaims?labelSelector=app%3Da&fieldSelector=metadata.name%3Dfz",
         "/apis/storage.k8s.io/v1/storageclasses?limit=2&continue=Zm9vL2Jhcg==",
         "/api/v1/pods?resourceVersion=0&resourceVersionMatch=NotOlderThan", "/api/v1/nodes/fz/status",
         "/apis/coordination.k8s.io/v1/namespaces/fuzz/leases?timeoutSeconds=5&accept=application/json;as=Table;v=v1;g=meta.k8s.io",
         "/apis/events.k8s.io/v1/events?limit=500", "/api/v1/namespaces/fuzz", "/api/v1/namespaces/fuzz/events?watch=1"]
for i, p in enumerate(paths):
    put("path", str(i), p.encode())

# model: [even] + quantity, [odd] + LabelSelector JSON.
qs = set(["10Gi", "1.5G", "500m", "1e3", "0", "-1Gi", "1Ei", "0.000000001", "+12Mi", "1E-3"])
for f in glob.glob(os.path.join(REPO, "tests/scenarios/*.yaml")):
    qs.update(re.findall(r"storage: *\"?([0-9][0-9.eEinumkKMGTP+-]*)", open(f).read()))
for i, q in enumerate(sorted(qs)):
    put("model", f"q{i}", b"\0" + q.encode())
for i, s in enumerate(['{"matchLabels":{"a":"b"},"matchExpressions":[{"key":"k","operator":"In","values":["x"]}]}',
                       '{"matchExpressions":[{"key":"k","operator":"Exists"},{"key":"j","operator":"NotIn","values":["y"]}]}',
                       '{"matchExpressions":[{"key":"k","operator":"Bogus"}]}', '{}']):
    put("model", f"s{i}", b"\1" + s.encode())
