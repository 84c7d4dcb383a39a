#!/usr/bin/env python3
"""The concurrent API differential: the same races, run by N clients at once against two servers.

Usage: api_concurrency.py REAL_KUBECONFIG OURS_KUBECONFIG DIFFERENCES_MD [RACE...]

Each race is run on the real kube-apiserver, then on `pv-controller up`, by N client threads (each
with its own keep-alive connection) in a namespace of its own. Which client wins a race differs
from run to run, so what is compared is what does not: the multiset of answers the clients got
(status code, reason and the Status message with the object's name as `<name>`), and the objects
the race leaves behind, normalised as scripts/api_differential.py does (uids, timestamps and
resourceVersions as placeholders, managedFields dropped). The races:

  create-same-name     every client creates the same OPS claims: one 201 per name, the rest 409
  patch-without-rv     merge, JSON and strategic-merge patches without a resourceVersion, each
                       adding its own annotation or label to one claim: all apply
  apply-managers       server-side apply, one field manager per client, each its own label
  put-stale-rv         rounds: all clients PUT with the version read before the round; one wins
  put-without-rv       PUTs of the whole claim without a resourceVersion: all apply
  put-lease-without-rv the same for a Lease, whose strategy refuses an unconditional update
  put-status-without-rv  the same through a claim's status subresource
  patch-stale-rv       rounds: merge and strategic patches carrying the version read before the
                       round; one wins
  update-retry         read-modify-write with the version read, retried on 409 (client-go's
                       RetryOnConflict): the 200s and the final object are compared, not the
                       number of 409s
  delete-finalizers    rounds: a claim with a finalizer per client; each client deletes it, then
                       removes its own finalizer (strategic patch); the last removal ends it

Output: `same RACE` or `differ RACE` with the differences (a difference no listing covers is
marked `!`); last line `api-concurrency: N races, S same, D differ (U unlisted)`. Listings are
lines under a heading of DIFFERENCES_MD that starts with `## Concurrency`: `- \\`RACE\\`` or
`- \\`RACE:LINE\\`` (globs), as for the API differential. Exit 0 only when every difference is
listed. CONC_CLIENTS and CONC_OPS set N (default 8) and OPS (default 40).
"""

import collections
import http.client
import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from api_differential import Server, diff, excused, listed_patterns, normalise  # noqa: E402

N = int(os.environ.get("CONC_CLIENTS", "8"))
OPS = int(os.environ.get("CONC_OPS", "40"))
ROUNDS = max(1, OPS // 4)

PVCS = "/api/v1/namespaces/{ns}/persistentvolumeclaims"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
MERGE = "application/merge-patch+json"
JSONPATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


class Client:
    """One client of a server: a keep-alive connection, opened again after a failure."""

    def __init__(self, server):
        self.server = server
        self.c = None

    def request(self, method, path, body=None, ctype="application/json"):
        h = {"Authorization": "Bearer " + self.server.token, "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = ctype
        if self.c is None:
            self.c = self.server.conn()
        try:
            self.c.request(method, path, body=data, headers=h)
            r = self.c.getresponse()
            raw = r.read()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            return 0, {"error": type(e).__name__}
        try:
            return r.status, json.loads(raw) if raw else None
        except ValueError:
            return r.status, raw.decode("utf-8", "replace")

    def close(self):
        if self.c is not None:
            self.c.close()
            self.c = None


def outcome(method, code, body, name=""):
    """What a client got, as compared: the code, and a Status's reason and message."""
    if isinstance(body, dict) and body.get("kind") == "Status":
        msg = normalise(body.get("message", ""))
        if name:
            msg = msg.replace(f'"{name}"', '"<name>"')
        return f"{method} {code} {body.get('reason', '')}: {msg}"
    if method == "DELETE" and isinstance(body, dict):
        deleting = "deletionTimestamp" in (body.get("metadata") or {})
        return f"{method} {code} {'object being deleted' if deleting else 'object'}"
    if code == 0:
        return f"{method} no answer ({body.get('error')})"
    return f"{method} {code}"


def parallel(fn):
    """Runs fn(client_index, barrier) on N threads; returns their results in client order."""
    barrier = threading.Barrier(N)
    results = [None] * N
    errors = []

    def run(i):
        try:
            results[i] = fn(i, barrier)
        except Exception as e:  # noqa: BLE001 - a failing client is reported, not swallowed
            errors.append(f"client {i}: {type(e).__name__}: {e}")
            barrier.abort()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(N)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("; ".join(errors))
    return results


def claim(name, **meta):
    m = {"name": name}
    m.update(meta)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": m,
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                     "resources": {"requests": {"storage": "1Gi"}}}}


def must(client, method, path, body=None, ctype="application/json", want=(200, 201)):
    code, got = client.request(method, path, body, ctype)
    if code not in want:
        raise RuntimeError(f"{method} {path}: {code} {got}")
    return got


def final(obj, blanks=()):
    """An object as compared: normalised, the named label values blanked."""
    out = normalise(obj)
    labels = (out.get("metadata") or {}).get("labels") or {}
    for k in blanks:
        if k in labels:
            labels[k] = "<last writer>"
    return out


def race_create_same_name(server, ns):
    path = PVCS.format(ns=ns)

    def client(c, barrier):
        cl = Client(server)
        got = []
        for i in range(OPS):
            name = f"c-{i}"
            code, body = cl.request("POST", path, claim(name, labels={"race": "create"}))
            got.append(outcome("POST", code, body, name))
        cl.close()
        return got

    answers = parallel(client)
    cl = Client(server)
    items = must(cl, "GET", path + "?labelSelector=race%3Dcreate")["items"]
    cl.close()
    return answers, {"items": [final(o) for o in sorted(items, key=lambda o: o["metadata"]["name"])]}


def race_patch_without_rv(server, ns):
    path = PVCS.format(ns=ns) + "/p"
    setup = Client(server)
    must(setup, "POST", PVCS.format(ns=ns), claim("p", annotations={"seed": "x"}, labels={"seed": "x"}))

    def client(c, barrier):
        cl = Client(server)
        got = []
        for i in range(OPS):
            key = f"c{c}-{i}"
            kind = (c + i) % 3
            if kind == 0:
                code, body = cl.request("PATCH", path, {"metadata": {"annotations": {"m-" + key: "v"}}}, MERGE)
                got.append(outcome("PATCH merge", code, body, "p"))
            elif kind == 1:
                op = [{"op": "add", "path": "/metadata/annotations/j-" + key, "value": "v"}]
                code, body = cl.request("PATCH", path, op, JSONPATCH)
                got.append(outcome("PATCH json", code, body, "p"))
            else:
                code, body = cl.request("PATCH", path, {"metadata": {"labels": {"s-" + key: "v"}}}, STRATEGIC)
                got.append(outcome("PATCH strategic", code, body, "p"))
        cl.close()
        return got

    answers = parallel(client)
    obj = must(setup, "GET", path)
    setup.close()
    return answers, final(obj)


def race_apply_managers(server, ns):
    path = PVCS.format(ns=ns) + "/a"
    setup = Client(server)
    must(setup, "POST", PVCS.format(ns=ns), claim("a"))

    def client(c, barrier):
        cl = Client(server)
        got = []
        for i in range(OPS):
            body = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": {"name": "a", "labels": {f"m{c}": f"v{i}"}}}
            code, answer = cl.request("PATCH", path + f"?fieldManager=m{c}", body, APPLY)
            got.append(outcome("PATCH apply", code, answer, "a"))
        cl.close()
        return got

    answers = parallel(client)
    obj = must(setup, "GET", path)
    setup.close()
    return answers, final(obj)


def race_put_stale_rv(server, ns):
    path = PVCS.format(ns=ns) + "/u"
    setup = Client(server)
    must(setup, "POST", PVCS.format(ns=ns), claim("u"))
    read = {}

    def client(c, barrier):
        cl = Client(server)
        got = []
        for r in range(ROUNDS):
            barrier.wait()
            if c == 0:
                read["obj"] = must(cl, "GET", path)
            barrier.wait()
            obj = json.loads(json.dumps(read["obj"]))
            obj["metadata"].setdefault("labels", {})["writer"] = f"c{c}-{r}"
            code, body = cl.request("PUT", path, obj)
            got.append(outcome("PUT", code, body, "u"))
        cl.close()
        return got

    answers = parallel(client)
    obj = must(setup, "GET", path)
    setup.close()
    checks = [] if obj["metadata"]["labels"]["writer"].endswith(f"-{ROUNDS - 1}") else ["the last round's write is not the last"]
    return answers, {"object": final(obj, ["writer"]), "checks": checks}


def race_patch_stale_rv(server, ns):
    path = PVCS.format(ns=ns) + "/s"
    setup = Client(server)
    must(setup, "POST", PVCS.format(ns=ns), claim("s"))
    read = {}

    def client(c, barrier):
        cl = Client(server)
        got = []
        for r in range(ROUNDS):
            barrier.wait()
            if c == 0:
                read["rv"] = must(cl, "GET", path)["metadata"]["resourceVersion"]
            barrier.wait()
            patch = {"metadata": {"resourceVersion": read["rv"], "labels": {"writer": f"c{c}-{r}"}}}
            code, body = cl.request("PATCH", path, patch, MERGE if r % 2 else STRATEGIC)
            got.append(outcome("PATCH " + ("merge" if r % 2 else "strategic"), code, body, "s"))
        cl.close()
        return got

    answers = parallel(client)
    obj = must(setup, "GET", path)
    setup.close()
    checks = [] if obj["metadata"]["labels"]["writer"].endswith(f"-{ROUNDS - 1}") else ["the last round's write is not the last"]
    return answers, {"object": final(obj, ["writer"]), "checks": checks}


def without_version(obj):
    obj = json.loads(json.dumps(obj))
    for k in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
        obj["metadata"].pop(k, None)
    return obj


def race_put_without_rv(server, ns, collection, body, subresource=""):
    path = collection.format(ns=ns) + "/" + body["metadata"]["name"] + subresource
    setup = Client(server)
    template = without_version(must(setup, "POST", collection.format(ns=ns), body))

    def client(c, barrier):
        cl = Client(server)
        got = []
        for i in range(OPS):
            obj = json.loads(json.dumps(template))
            obj["metadata"].setdefault("labels", {})["writer"] = f"c{c}-{i}"
            code, answer = cl.request("PUT", path, obj)
            got.append(outcome("PUT", code, answer, body["metadata"]["name"]))
        cl.close()
        return got

    answers = parallel(client)
    obj = must(setup, "GET", path)
    setup.close()
    writer = (obj["metadata"].get("labels") or {}).get("writer")
    checks = [] if writer is None or writer.endswith(f"-{OPS - 1}") else [f"the last write is {writer}, not a client's last"]
    return answers, {"object": final(obj, ["writer"]), "checks": checks}


def race_update_retry(server, ns):
    path = PVCS.format(ns=ns) + "/r"
    setup = Client(server)
    must(setup, "POST", PVCS.format(ns=ns), claim("r", annotations={"seed": "x"}))
    ops = max(1, OPS // 2)

    def client(c, barrier):
        cl = Client(server)
        got = []
        for i in range(ops):
            for _ in range(1000):
                obj = must(cl, "GET", path)
                obj["metadata"]["annotations"][f"r-c{c}-{i}"] = "v"
                code, body = cl.request("PUT", path, obj)
                o = outcome("PUT", code, body, "r")
                if code != 409:
                    got.append(o)
                    break
                # How many 409s a client meets depends on timing; their kinds are compared.
                got.append(o + " (retried; not counted)")
        cl.close()
        return got

    answers = parallel(client)
    obj = must(setup, "GET", path)
    setup.close()
    return answers, final(obj)


def race_delete_finalizers(server, ns):
    coll = PVCS.format(ns=ns)
    fins = [f"example.com/c{c}" for c in range(N)]
    gone = []

    def client(c, barrier):
        cl = Client(server)
        got = []
        for r in range(ROUNDS):
            name = f"d-{r}"
            if c == 0:
                must(cl, "POST", coll, claim(name, finalizers=fins))
                # Only the clients' finalizers (kube-apiserver's admission adds the protection one).
                must(cl, "PATCH", f"{coll}/{name}", {"metadata": {"finalizers": fins}}, MERGE)
            barrier.wait()
            code, body = cl.request("DELETE", f"{coll}/{name}")
            got.append(outcome("DELETE", code, body, name))
            patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": [fins[c]]}}
            code, body = cl.request("PATCH", f"{coll}/{name}", patch, STRATEGIC)
            got.append(outcome("PATCH strategic", code, body, name))
            barrier.wait()
            if c == 0:
                code, body = cl.request("GET", f"{coll}/{name}")
                gone.append(outcome("GET after", code, body, name))
        cl.close()
        return got

    answers = parallel(client)
    return answers, {"after": collections.Counter(gone)}


RACES = {
    "create-same-name": race_create_same_name,
    "patch-without-rv": race_patch_without_rv,
    "apply-managers": race_apply_managers,
    "put-stale-rv": race_put_stale_rv,
    "put-without-rv": lambda s, ns: race_put_without_rv(s, ns, PVCS, claim("w")),
    "put-lease-without-rv": lambda s, ns: race_put_without_rv(
        s, ns, LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
                        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}),
    "put-status-without-rv": lambda s, ns: race_put_without_rv(s, ns, PVCS, claim("t"), "/status"),
    "patch-stale-rv": race_patch_stale_rv,
    "update-retry": race_update_retry,
    "delete-finalizers": race_delete_finalizers,
}


def tally(answers):
    """The multiset of answers: retried 409s by kind only, the rest with their counts."""
    counts = collections.Counter(a for got in answers for a in got)
    return {k: ("seen" if k.endswith("(retried; not counted)") else n) for k, n in sorted(counts.items())}


def run_race(servers, name):
    results = []
    for s in servers:
        ns = f"conc-{name}"[:63]
        setup = Client(s)
        setup.request("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
        setup.close()
        answers, after = RACES[name](s, ns)
        results.append({"answers": tally(answers), "after": json.loads(json.dumps(after, sort_keys=True))})
    return results


def main():
    real_kc, ours_kc, differences_md, *names = sys.argv[1:]
    names = names or list(RACES)
    unknown = [n for n in names if n not in RACES]
    if unknown:
        raise SystemExit(f"unknown race(s) {', '.join(unknown)}; known: {', '.join(RACES)}")
    servers = [Server("kube-apiserver", real_kc), Server("pv-controller up", ours_kc)]
    patterns = listed_patterns(differences_md, "## Concurrency")
    used = set()
    same = differ = unlisted = 0
    for name in names:
        real, ours = run_race(servers, name)
        lines = diff(real, ours)
        summary = ", ".join(f"{n}× {k}" for k, n in real["answers"].items() if n != "seen")
        if not lines:
            print(f"same {name} ({summary})")
            same += 1
            continue
        differ += 1
        open_ = [x for x in lines if not excused(name, x, patterns, used)]
        print(f"differ {name}" + ("" if open_ else " (every difference listed)"))
        for line in lines:
            print(("! " if line in open_ else "  ") + "  " + line)
        unlisted += bool(open_)
    print(f"api-concurrency: {len(names)} races ({N} clients × {OPS} operations), {same} same, "
          f"{differ} differ ({unlisted} with unlisted differences, marked !)")
    return 0 if unlisted == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
