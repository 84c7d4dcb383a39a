#!/usr/bin/env python3
"""The API server differential: one corpus of requests, sent to two servers, answers compared.

Usage: api_differential.py REAL_KUBECONFIG OURS_KUBECONFIG DIFFERENCES_MD CASE_FILE...

A case file of conformance/api/ is a YAML mapping with `steps`, a list of requests sent in order
to each server (the real kube-apiserver first, then `pv-controller up`; each server gets the whole
case before the next case starts):

    description: what the case shows
    steps:
    - method: POST                       # default GET
      path: /api/v1/namespaces/{{ns}}/persistentvolumeclaims?dryRun=All
      contentType: application/json      # default: application/json when there is a body
      accept: application/json           # default: application/json
      body: {...}                        # a mapping is sent as JSON (or YAML for a YAML type);
                                         # a string is sent as it is
      save: {rv: metadata.resourceVersion}   # remember values of the answer for {{rv}} later
      watch: {events: 3, seconds: 3}     # a watch: read until 3 events or 3 s, compare them
      poll: {until: {code: 200, "status.conditions[type=Established].status": "True"}, seconds: 30}
                                         # send the request again (every 0.2 s, for at most
                                         # `seconds`, default 30) until every entry of `until`
                                         # holds: `code` the status code, any other key a path of
                                         # the body and the value there; the last answer is the
                                         # one compared (and saved). `unless: {code: 404}` (same
                                         # form) stops early on an answer that will not change
      compare: [code, body, headers]     # default: all three; `code` alone for volatile bodies
      select: groups[name={{case}}.example.com]  # compare only this part of the body (a path)
      ignore: [metadata.annotations.x]   # dotted paths blanked in both answers before comparing
      sort: [details.causes]             # lists compared as sets (where the server's order varies)
      managedFields: true                # compare managedFields too (dropped otherwise)
      sleep: 1                           # seconds to wait after the step

A path (`save`, `select`, `poll`) is dotted (`metadata.name`, `items.0.metadata.name`); a part
`[PATH=VALUE]` picks the first list item whose value at PATH is VALUE
(`status.conditions[type=Established].status`, `items[metadata.name=x.example.com]`).

`{{ns}}` is a namespace made for the case (created on both servers before its first step) and
`{{case}}` the case's name; cluster-scoped objects are named after the case so that cases do not
meet, and lists of cluster-scoped kinds select by label. `{{repeat N TEXT}}` is TEXT N times (for
bodies near a size limit).

A file of conformance/cases/ is a manifest instead: it is created with dryRun=All on both servers
(namespaced objects in the case's namespace).

Answers are normalised before they are compared: uids, timestamps and resourceVersions (which
differ between any two servers) become placeholders, names made from generateName keep their
prefix, managedFields are dropped, and a Table's Age cells are blanked. What is compared: the
status code, the body (a Status whole: reason, message, details and causes; an object or list as
normalised), the media type of the answer and the Warning headers.

Output: `same NAME` or `differ NAME` with the differences, per case (a difference no listing
covers is marked `!`); then `api-differential: N cases, S same, L differ only as listed, U with
unlisted differences`. Listings are lines under a heading that starts with `## API server` in
DIFFERENCES_MD that open with backquoted patterns: `- \\`CASE\\`` covers every difference of a
case, `- \\`CASE:LINE\\`` the differences whose reported line matches LINE (both globs).
Exit 0 only when every difference is covered and (with API_DIFF_WHOLE_CORPUS=1, the whole
corpus) every listing still covers one.
"""

import base64
import http.client
import json
import os
import re
import socket
import ssl
import sys
import time
import urllib.parse

import yaml

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")


class Server:
    """One API server, reached as its kubeconfig says."""

    def __init__(self, label, kubeconfig):
        self.label = label
        with open(kubeconfig) as f:
            kc = yaml.safe_load(f)
        cluster = kc["clusters"][0]["cluster"]
        user = kc["users"][0]["user"]
        url = urllib.parse.urlparse(cluster["server"])
        self.host, self.port = url.hostname, url.port or 443
        self.token = user.get("token", "")
        self.ctx = ssl.create_default_context()
        if "certificate-authority-data" in cluster:
            self.ctx.load_verify_locations(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        else:
            self.ctx.load_verify_locations(cafile=cluster["certificate-authority"])

    def conn(self, timeout=30):
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)

    def request(self, method, path, body=None, headers=None):
        h = {"Authorization": "Bearer " + self.token}
        h.update(headers or {})
        c = self.conn()
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            return r.status, r.getheaders(), data
        finally:
            c.close()

    def watch(self, path, headers, events, seconds):
        """Reads a watch stream until `events` events arrived or `seconds` passed."""
        h = {"Authorization": "Bearer " + self.token}
        h.update(headers)
        c = self.conn(timeout=seconds)
        out = []
        try:
            c.request("GET", path, headers=h)
            r = c.getresponse()
            if r.status != 200:
                return r.status, r.getheaders(), r.read()
            deadline = time.monotonic() + seconds
            buf = b""
            while len(out) < events and time.monotonic() < deadline:
                c.sock.settimeout(max(0.05, deadline - time.monotonic()))
                try:
                    chunk = r.read1(65536)
                except (socket.timeout, TimeoutError):
                    break
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        out.append(json.loads(line))
            return 200, r.getheaders(), json.dumps(out[:events]).encode()
        finally:
            c.close()


PATH_PART = re.compile(r"\[([^=\]]+)=([^\]]*)\]|([^.\[]+)")


def dotted(obj, path):
    cur = obj
    for m in PATH_PART.finditer(path):
        key, want, p = m.groups()
        if key is not None:
            items = cur if isinstance(cur, list) else []
            cur = next((x for x in items if isinstance(x, dict) and str(dotted(x, key)) == want), None)
        elif isinstance(cur, dict):
            cur = cur.get(p)
        elif isinstance(cur, list) and p.isdigit() and int(p) < len(cur):
            cur = cur[int(p)]
        else:
            return None
    return cur


def blank(obj, path):
    parts = path.split(".")
    cur = obj
    for p in parts[:-1]:
        if isinstance(cur, dict):
            cur = cur.get(p)
        elif isinstance(cur, list) and p.isdigit() and int(p) < len(cur):
            cur = cur[int(p)]
        elif isinstance(cur, list) and p == "*":
            for item in cur:
                blank(item, ".".join(parts[parts.index(p) + 1:]))
            return
        else:
            return
    if isinstance(cur, dict) and parts[-1] in cur:
        cur[parts[-1]] = "<ignored>"


def substitute(value, env):
    if isinstance(value, str):
        value = re.sub(r"\{\{repeat (\d+) ([^{}]*)\}\}", lambda m: m.group(2) * int(m.group(1)), value)
        return re.sub(r"\{\{(\w+)\}\}", lambda m: str(env.get(m.group(1), m.group(0))), value)
    if isinstance(value, list):
        return [substitute(v, env) for v in value]
    if isinstance(value, dict):
        return {substitute(k, env): substitute(v, env) for k, v in value.items()}
    return value


def normalise(v, managed=False):
    """Placeholders for what differs between any two servers (managedFields kept if `managed`)."""
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if k == "managedFields" and not managed:
                continue
            if k in ("resourceVersion",) and isinstance(x, str) and x:
                out[k] = "<rv>"
            elif k == "continue" and isinstance(x, str) and x:
                out[k] = "<continue>"
            elif k == "selfLink":
                continue
            else:
                out[k] = normalise(x, managed)
        meta = out.get("metadata")
        if isinstance(meta, dict) and meta.get("generateName") and isinstance(meta.get("name"), str):
            if meta["name"].startswith(meta["generateName"]):
                meta["name"] = meta["generateName"] + "<generated>"
        if out.get("kind") == "Table" and isinstance(out.get("columnDefinitions"), list):
            ages = [i for i, c in enumerate(out["columnDefinitions"]) if c.get("name") == "Age"]
            for row in out.get("rows") or []:
                for i in ages:
                    if i < len(row.get("cells", [])):
                        row["cells"][i] = "<age>"
        return out
    if isinstance(v, list):
        return [normalise(x, managed) for x in v]
    if isinstance(v, str):
        v = UUID.sub("<uid>", v)
        v = TIME.sub("<time>", v)
        return v
    return v


def media_type(headers):
    for k, v in headers:
        if k.lower() == "content-type":
            return v.split(";")[0].strip()
    return ""


def warnings(headers):
    return sorted(normalise(v) for k, v in headers if k.lower() == "warning")


class PlainLoader(yaml.SafeLoader):
    """YAML as a JSON client would read it: timestamps stay strings."""


PlainLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def parse_body(ctype, data):
    if not data:
        return None
    try:
        if "yaml" in ctype:
            return yaml.load(data, Loader=PlainLoader)
        if "json" in ctype:
            return json.loads(data)
    except Exception:  # noqa: BLE001 - an unparsable body is compared as text
        pass
    if "protobuf" in ctype:
        return "<protobuf %d bytes>" % len(data)
    return data.decode("utf-8", "replace")


def run_step(server, step, env):
    method = step.get("method", "GET")
    path = substitute(step["path"], env)
    headers = {"Accept": step.get("accept", "application/json")}
    body = step.get("body")
    data = None
    if body is not None:
        ctype = step.get("contentType", "application/json")
        headers["Content-Type"] = ctype
        body = substitute(body, env)
        if isinstance(body, str):
            data = body.encode()
        elif "yaml" in ctype:
            data = yaml.safe_dump(body).encode()
        else:
            data = json.dumps(body).encode()
    if "watch" in step:
        w = step["watch"]
        code, hdrs, raw = server.watch(path, headers, w.get("events", 1), w.get("seconds", 3))
        ctype = "application/json" if code == 200 else media_type(hdrs)
        got = parse_body(ctype, raw)
        hdrs = [(k, v) for k, v in hdrs if k.lower() != "content-type"] + [("Content-Type", media_type(hdrs))]
    else:
        poll = step.get("poll")
        until = substitute((poll or {}).get("until") or {}, env)
        unless = substitute((poll or {}).get("unless") or {}, env)
        deadline = time.monotonic() + (poll or {}).get("seconds", 30)
        while True:
            code, hdrs, raw = server.request(method, path, data, headers)
            got = parse_body(media_type(hdrs), raw)
            if not poll or holds(until, code, got) or (unless and holds(unless, code, got)) \
                    or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
    for name, p in (step.get("save") or {}).items():
        val = dotted(got, p) if isinstance(got, (dict, list)) else None
        env[name] = "" if val is None else val
    return {"code": code, "body": got, "type": media_type(hdrs), "warnings": warnings(hdrs)}


def holds(until, code, body):
    """Whether an answer meets every entry of a `poll` step's `until`."""
    for k, want in until.items():
        got = code if k == "code" else dotted(body, k) if isinstance(body, (dict, list)) else None
        if got != want:
            return False
    return True


def comparable(answer, step, env):
    body = answer["body"]
    if "select" in step:
        body = dotted(body, substitute(step["select"], env)) if isinstance(body, (dict, list)) else None
    body = normalise(body, step.get("managedFields", False))
    for p in step.get("ignore") or []:
        if isinstance(body, (dict, list)):
            blank(body, p)
    for p in step.get("sort") or []:
        parent, _, key = p.rpartition(".")
        holder = dotted(body, parent) if parent else body
        if isinstance(holder, dict) and isinstance(holder.get(key), list):
            holder[key] = sorted(holder[key], key=lambda x: json.dumps(x, sort_keys=True))
    what = step.get("compare", ["code", "body", "headers"])
    out = {}
    if "code" in what:
        out["code"] = answer["code"]
    if "body" in what:
        out["body"] = body
    if "headers" in what:
        out["type"] = answer["type"]
        out["warnings"] = answer["warnings"]
    return out


def diff(a, b, path=""):
    """Lines naming each place where a (real) and b (ours) differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            p = f"{path}.{k}" if path else str(k)
            if k not in a:
                out.append(f"{p}: kube-apiserver has none, ours {short(b[k])}")
            elif k not in b:
                out.append(f"{p}: kube-apiserver {short(a[k])}, ours has none")
            else:
                out += diff(a[k], b[k], p)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff(x, y, f"{path}[{i}]")
        return out
    if a != b:
        return [f"{path}: kube-apiserver {short(a)}, ours {short(b)}"]
    return []


def short(v):
    s = json.dumps(v, sort_keys=True)
    return s if len(s) <= 400 else s[:400] + "..."


MANIFEST_PATHS = {
    "PersistentVolume": "/api/v1/persistentvolumes",
    "PersistentVolumeClaim": "/api/v1/namespaces/{{ns}}/persistentvolumeclaims",
    "StorageClass": "/apis/storage.k8s.io/v1/storageclasses",
    "Pod": "/api/v1/namespaces/{{ns}}/pods",
    "Node": "/api/v1/nodes",
    "Namespace": "/api/v1/namespaces",
    "Event": "/api/v1/namespaces/{{ns}}/events",
    "Lease": "/apis/coordination.k8s.io/v1/namespaces/{{ns}}/leases",
}


def load_case(path):
    with open(path) as f:
        doc = yaml.safe_load(f)
    if isinstance(doc, dict) and "steps" in doc:
        return doc["steps"]
    if isinstance(doc, dict) and doc.get("kind") in MANIFEST_PATHS:
        doc.get("metadata", {}).pop("namespace", None)
        return [{"method": "POST", "path": MANIFEST_PATHS[doc["kind"]] + "?dryRun=All", "body": doc}]
    raise SystemExit(f"{path}: neither a case (a mapping with steps) nor a manifest of a served kind")


def listed_patterns(differences_md, heading="## API server"):
    """The patterns that open `- \`CASE[:LINE]\`, \`...\` reason` lines under the headings that
    start with `heading`."""
    patterns = []
    try:
        with open(differences_md) as f:
            text = f.read()
    except FileNotFoundError:
        return patterns
    section = False
    for line in text.splitlines():
        if line.startswith("## "):
            section = line.startswith(heading)
            continue
        m = re.match(r"\s*[-*] ((?:`[^`]+`(?:,\s*|\s+)?)+)", line) if section else None
        for pat in re.findall(r"`([^`]+)`", m.group(1)) if m else []:
            case, _, what = pat.partition(":")
            patterns.append((pat, case.strip(), what.strip() or "*"))
    return patterns


def glob(pattern):
    """`*` matches anything; every other character stands for itself (brackets too)."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.S)


def excused(name, line, patterns, used):
    """True when a listed pattern covers this difference line of case `name`."""
    hit = False
    for pat, case, what in patterns:
        if glob(case).fullmatch(name) and glob(what).fullmatch(line.strip()):
            used.add(pat)
            hit = True
    return hit


def case_name(path):
    return os.path.splitext(os.path.basename(path))[0]


def run_case(servers, path):
    name = case_name(path)
    steps = load_case(path)
    ns = ("api-" + name)[:63].rstrip("-")
    answers = []
    for s in servers:
        env = {"ns": ns, "case": name}
        s.request("POST", "/api/v1/namespaces", json.dumps({"metadata": {"name": ns}}).encode(),
                  {"Content-Type": "application/json"})
        got = []
        for step in steps:
            got.append(comparable(run_step(s, step, env), step, env))
            if step.get("sleep"):
                time.sleep(step["sleep"])
        answers.append(got)
    lines = []
    for i, (step, a, b) in enumerate(zip(steps, answers[0], answers[1])):
        d = diff(a, b)
        if d:
            what = step.get("method", "GET") + " " + step["path"]
            lines.append(f"  step {i + 1} ({what}):")
            lines += ["    " + x for x in d]
    return name, lines


def main():
    real_kc, ours_kc, differences_md, *cases = sys.argv[1:]
    whole = os.environ.get("API_DIFF_WHOLE_CORPUS") == "1"
    servers = [Server("kube-apiserver", real_kc), Server("pv-controller up", ours_kc)]
    patterns = listed_patterns(differences_md)
    used = set()
    same = listed = unlisted = 0
    for path in cases:
        name, lines = run_case(servers, path)
        if not lines:
            print(f"same {name}")
            same += 1
            continue
        details = [x for x in lines if not x.startswith("  step ")]
        open_ = [x for x in details if not excused(name, x, patterns, used)]
        print(f"differ {name}" + ("" if open_ else " (every difference listed)"))
        for line in lines:
            mark = "  " if line.startswith("  step ") or line not in open_ else "! "
            print(mark + line)
        if open_:
            unlisted += 1
        else:
            listed += 1
    stale = [p for p, _, _ in patterns if p not in used] if whole else []
    for p in stale:
        print(f"fixed: `{p}` in {differences_md} matches no difference any more; remove it")
    print(f"api-differential: {len(cases)} cases, {same} same, {listed} differ only as listed, "
          f"{unlisted} with unlisted differences (marked !)" + (f", {len(stale)} stale listings" if stale else ""))
    return 0 if unlisted == 0 and not stale else 1


if __name__ == "__main__":
    sys.exit(main())
