#!/usr/bin/env python3
"""The controller differential: the same state, reconciled once by upstream's
kube-controller-manager (persistentvolume-binder-controller only) and once by `pv-controller run`,
on a real kube-apiserver; the results compared object by object and event by event.

Run by scripts/differential.sh, which starts the cluster; see there for usage. Per run:

1. wipe: every PersistentVolume, PersistentVolumeClaim, StorageClass, Pod, Node and Event is
   removed (finalizers lifted first) and the host-path root recreated, so that each run starts
   from the same empty cluster (namespaces stay: the binder does not read them);
2. load: the input's objects are created (Namespaces, StorageClasses in creationTimestamp order,
   Nodes, claims, volumes, Pods), then their `status` written through the status subresource, then
   those with a `deletionTimestamp` deleted (their finalizers keep them). kube-apiserver assigns
   new uids: every fixture uid is replaced by the real one wherever it appears (claimRef.uid,
   annotations, `pvc-<uid>` names), and mapped back in the result;
3. one controller, started fresh, runs until quiescent: nothing in the normalised objects or the
   set of events changes for SETTLE seconds (several resync periods), then it is stopped;
4. the objects and events are read and normalised: uids mapped back, resourceVersion,
   timestamps, managedFields and provisioned host-path directory names dropped.

Upstream's host-path recycler starts a pod and waits for it to finish; with no kubelet in this
cluster, the driver stands in for one: it empties the pod's host-path volume as the recycler
pod's `rm -rf` would, and marks the pod Succeeded.
"""

import base64
import difflib
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

SETTLE = float(os.environ.get("DIFF_SETTLE", "4"))  # seconds without change = quiescent
TIMEOUT = float(os.environ.get("DIFF_TIMEOUT", "90"))  # per run
RESYNC = os.environ.get("DIFF_RESYNC", "1s")
# Shadow mode (scripts/e2e-shadow.sh): `run --shadow` beside upstream's binder, as this user.
SHADOW_KUBECONFIG = os.environ.get("DIFF_SHADOW_KUBECONFIG")
SHADOW_SETTLE = float(os.environ.get("DIFF_SHADOW_SETTLE", "2"))
# In shadow mode only upstream's binder runs, with the shadow beside it, both without a host-path
# plugin (the shadow has none: it would write directories).
SHADOW_ONLY = bool(SHADOW_KUBECONFIG)
KCM_FLAGS = os.environ.get("DIFF_KCM_FLAGS", "").split()

KINDS = {  # kind -> (API prefix, plural, namespaced)
    "Namespace": ("/api/v1", "namespaces", False),
    "StorageClass": ("/apis/storage.k8s.io/v1", "storageclasses", False),
    "Node": ("/api/v1", "nodes", False),
    "PersistentVolumeClaim": ("/api/v1", "persistentvolumeclaims", True),
    "PersistentVolume": ("/api/v1", "persistentvolumes", False),
    "Pod": ("/api/v1", "pods", True),
}
LOAD_ORDER = ["Namespace", "StorageClass", "Node", "PersistentVolumeClaim", "PersistentVolume", "Pod"]
COMPARED = ["PersistentVolume", "PersistentVolumeClaim", "StorageClass", "Pod", "Node"]


class LoadError(Exception):
    """The input could not be loaded into kube-apiserver."""


class Api:
    """A minimal client for kube-apiserver with a bearer token (the cluster-admin kubeconfig)."""

    def __init__(self, kubeconfig):
        with open(kubeconfig) as f:
            kc = yaml.safe_load(f)
        cluster = kc["clusters"][0]["cluster"]
        self.server = cluster["server"]
        self.token = kc["users"][0]["user"]["token"]
        self.ctx = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())

    def call(self, method, path, body=None, ctype="application/json", ok404=False):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + self.token)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", ctype)
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=30) as r:
                return json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            if e.code == 404 and ok404:
                return None
            text = e.read().decode(errors="replace")
            try:
                text = json.loads(text).get("message", text)
            except ValueError:
                pass
            raise LoadError(f"{method} {path}: {e.code}: {text}") from None

    def path(self, kind, ns=None, name=None, sub=None):
        prefix, plural, namespaced = KINDS[kind]
        p = prefix
        if namespaced and ns:
            p += "/namespaces/" + ns
        p += "/" + plural
        if name:
            p += "/" + urllib.parse.quote(name)
        if sub:
            p += "/" + sub
        return p

    def list(self, kind):
        return self.call("GET", self.path(kind))["items"]

    def events(self):
        return self.call("GET", "/api/v1/events")["items"]


# --- input ---------------------------------------------------------------------------------------

def read_input(path):
    """(objects, scenario or None) of a scenario fixture or a plain state file."""
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    if len(docs) == 1 and isinstance(docs[0], dict) and "input" in docs[0] and "kind" not in docs[0]:
        return docs[0]["input"] or [], docs[0]
    objs = []
    for d in docs:
        if isinstance(d, dict) and d.get("kind") == "List":
            objs.extend(d.get("items") or [])
        elif isinstance(d, list):
            objs.extend(d)
        else:
            objs.append(d)
    return objs, None


def substitute(v, fn):
    """v with fn applied to every string in it."""
    if isinstance(v, str):
        return fn(v)
    if isinstance(v, list):
        return [substitute(x, fn) for x in v]
    if isinstance(v, dict):
        return {k: substitute(x, fn) for k, x in v.items()}
    return v


def uid_replacer(mapping):
    """A function replacing each key of mapping (a uid) by its value wherever it stands alone."""
    if not mapping:
        return lambda s: s
    keys = sorted(mapping, key=len, reverse=True)
    rx = re.compile("(?<![A-Za-z0-9])(" + "|".join(re.escape(k) for k in keys) + ")(?![A-Za-z0-9-])")
    return lambda s: rx.sub(lambda m: mapping[m.group(1)], s)


def ident(o):
    m = o.get("metadata") or {}
    return (o.get("kind", ""), m.get("namespace") or "", m.get("name", ""))


def load(api, objects, root):
    """Creates the input's objects as stored; returns {real uid: fixture uid or a stand-in}."""
    for i, o in enumerate(objects):
        if not isinstance(o, dict) or not o.get("kind"):
            raise LoadError(f"document {i}: not an object with a kind")
        if o["kind"] in KINDS and not (o.get("metadata") or {}).get("name"):
            raise LoadError(f"document {i} ({o['kind']}): metadata.name missing")
    # Other kinds kube-apiserver serves (ConfigMaps, Events of an earlier run, ...) do not concern
    # the controller; `pv-controller simulate` ignores them too. A kind it does not serve is an
    # error, as it would be for kubectl.
    for i, o in enumerate(objects):
        if o["kind"] not in KINDS:
            gv = str(o.get("apiVersion") or "")
            found = api.call("GET", ("/api/" if "/" not in gv else "/apis/") + gv, ok404=True) if gv else None
            if not any(r.get("kind") == o["kind"] for r in (found or {}).get("resources") or []):
                raise LoadError(f"document {i}: kube-apiserver serves no kind {o['kind']!r} in apiVersion {gv!r}")
    objects = [substitute(o, lambda s: s.replace("${ROOT}", root)) for o in objects if o["kind"] in KINDS]
    fixture_uids = {str(o["metadata"]["uid"]) for o in objects if o["metadata"].get("uid")}
    to_real = {}  # fixture uid -> real uid
    back = {}  # real uid -> fixture uid (or a stand-in naming the object)
    existing_ns = {n["metadata"]["name"] for n in api.list("Namespace")}
    wanted_ns = {(o.get("metadata") or {}).get("namespace") or "default"
                 for o in objects if KINDS[o["kind"]][2]}
    wanted_ns -= {o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"}
    for ns in sorted(wanted_ns - existing_ns):
        api.call("POST", api.path("Namespace"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    created = []
    for kind in LOAD_ORDER:
        group = [o for o in objects if o["kind"] == kind]
        # kube-apiserver stamps creationTimestamp itself (to the second): classes are created in
        # the input's order of creationTimestamp, a second apart where it differs, so that "the
        # newest default class" is the same one.
        group.sort(key=lambda o: (str((o.get("metadata") or {}).get("creationTimestamp") or ""), ident(o)))
        last_ts = None
        for o in group:
            meta = o.get("metadata") or {}
            if kind == "Namespace" and meta["name"] in existing_ns:
                continue
            ts = str(meta.get("creationTimestamp") or "")
            if kind == "StorageClass" and last_ts is not None and ts != last_ts:
                time.sleep(1.05)
            last_ts = ts
            body = substitute(o, uid_replacer(to_real))
            spec = body.get("spec") or {}
            if kind == "PersistentVolumeClaim" and uid_replacer({u: "" for u in fixture_uids})(
                    spec.get("volumeName") or "") != (spec.get("volumeName") or ""):
                # Names a volume after a uid not known yet (its own: `pvc-<uid>`): set below,
                # by an update (volumeName may be set once on an existing claim).
                del spec["volumeName"]
            m = body.setdefault("metadata", {})
            for k in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "managedFields", "generation", "selfLink"):
                m.pop(k, None)
            status = body.pop("status", None)
            ns = m.get("namespace") or ("default" if KINDS[kind][2] else None)
            if KINDS[kind][2]:
                m["namespace"] = ns
            got = api.call("POST", api.path(kind, ns), body)
            real = got["metadata"]["uid"]
            fixture_uid = meta.get("uid")
            if fixture_uid:
                to_real[str(fixture_uid)] = real
                back[real] = str(fixture_uid)
            else:
                back[real] = f"<uid of {kind} {(ns + '/') if ns else ''}{meta['name']}>"
            created.append((o, got, status))
    for o, got, status in created:
        kind, meta = o["kind"], o["metadata"]
        ns = got["metadata"].get("namespace")
        if kind == "PersistentVolumeClaim" and (o.get("spec") or {}).get("volumeName") \
                and not (got.get("spec") or {}).get("volumeName"):
            got["spec"]["volumeName"] = uid_replacer(to_real)(o["spec"]["volumeName"])
            got = api.call("PUT", api.path(kind, ns, got["metadata"]["name"]), got)
        if status and kind != "Namespace":
            got = api.call("GET", api.path(kind, ns, got["metadata"]["name"]))
            got["status"] = substitute(status, uid_replacer(to_real))
            api.call("PUT", api.path(kind, ns, got["metadata"]["name"], "status"), got)
        if meta.get("deletionTimestamp"):
            if not meta.get("finalizers"):
                raise LoadError(f"{kind} {meta['name']}: a deletionTimestamp without finalizers cannot be stored")
            api.call("DELETE", api.path(kind, ns, got["metadata"]["name"]))
    return back


def wipe(api, root, setup):
    """Removes every object a run may have left, and recreates the host-path root with setup."""
    for _ in range(50):
        left = 0
        for kind in ["Pod", "PersistentVolumeClaim", "PersistentVolume", "StorageClass", "Node"]:
            for o in api.list(kind):
                m = o["metadata"]
                p = api.path(kind, m.get("namespace"), m["name"])
                if m.get("finalizers"):
                    api.call("PATCH", p, {"metadata": {"finalizers": None}},
                             ctype="application/merge-patch+json", ok404=True)
                if not m.get("deletionTimestamp") or kind == "Pod":
                    api.call("DELETE", p + "?gracePeriodSeconds=0", ok404=True)
                left += 1
        for ns in {e["metadata"]["namespace"] for e in api.events()}:
            api.call("DELETE", f"/api/v1/namespaces/{ns}/events")
        if left == 0 and not api.events():
            break
        time.sleep(0.1)
    else:
        raise LoadError("the cluster could not be emptied")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    for d in (setup or {}).get("dirs") or []:
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for f in (setup or {}).get("files") or []:
        p = os.path.join(root, f)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as fh:
            fh.write("data")


# --- result --------------------------------------------------------------------------------------

def snapshot(api, back, input_pvs, root):
    """The normalised objects and the set of events, as comparable values."""
    fix = uid_replacer(back)
    objs = []
    for kind in COMPARED:
        for o in api.list(kind):
            o["kind"] = kind
            o["apiVersion"] = "storage.k8s.io/v1" if kind == "StorageClass" else "v1"
            m = o["metadata"]
            for k in ("resourceVersion", "creationTimestamp", "managedFields", "generation", "selfLink"):
                m.pop(k, None)
            if "deletionTimestamp" in m:
                m["deletionTimestamp"] = "<set>"
            real = m.pop("uid", "")
            if kind == "PersistentVolume":
                (o.get("status") or {}).pop("lastPhaseTransitionTime", None)
                ((o.get("spec") or {}).get("claimRef") or {}).pop("resourceVersion", None)
                hp = (o.get("spec") or {}).get("hostPath")
                # A provisioned volume's directory name is the provisioner's choice.
                if hp and real not in back and m["name"] not in input_pvs:
                    hp["path"] = "<provisioned>"
            if kind == "Pod":
                for c in (o.get("status") or {}).get("conditions") or []:
                    c.pop("lastTransitionTime", None)
                    c.pop("lastProbeTime", None)
                (o.get("status") or {}).pop("startTime", None)
            o = substitute(o, lambda s: fix(s).replace(root, "${ROOT}"))
            objs.append(o)
    objs.sort(key=ident)
    events = set()
    for e in api.events():
        io = e.get("involvedObject") or {}
        events.add((e.get("type", ""), e.get("reason", ""), io.get("kind", ""), io.get("namespace") or "",
                    io.get("name", ""), e.get("message", "")))
    events = sorted(tuple(fix(x).replace(root, "${ROOT}") for x in ev) for ev in events)
    return objs, events


def render(objs, events):
    lines = []
    for o in objs:
        lines.append("%s %s:" % (o["kind"], "/".join(x for x in ident(o)[1:] if x)))
        lines.extend("  " + l for l in json.dumps(o, indent=1, sort_keys=True).splitlines())
    for ev in events:
        t, reason, kind, ns, name, msg = ev
        lines.append(f"event {t} {reason} {kind} {(ns + '/') if ns else ''}{name}: {msg}")
    return lines


# --- controllers ---------------------------------------------------------------------------------

class Controller:
    def __init__(self, which, cfg, work, flags=()):
        self.which, self.cfg, self.log = which, cfg, os.path.join(work, which + ".log")
        self.flags = list(flags)  # upstream's: a shadow case's kcmFlags

    def start(self):
        c = self.cfg
        if self.which == "upstream":
            # Beside a shadow, upstream has no host-path plugin either: the shadow has none (it
            # would write directories), and the comparison is of decisions, not of plugins.
            hostpath = [] if SHADOW_ONLY else ["--enable-hostpath-provisioner"]
            argv = [os.path.join(c["bin"], "kube-controller-manager"), "--kubeconfig=" + c["kubeconfig"],
                    "--controllers=persistentvolume-binder-controller", *hostpath,
                    "--pvclaimbinder-sync-period=" + RESYNC, "--leader-elect=false", "--secure-port=0",
                    "--use-service-account-credentials=false", "-v=2", *KCM_FLAGS, *self.flags]
            self.ready = "Caches are synced"
        elif self.which == "shadow":
            argv = [c["ours"], "run", "--shadow", "--shadow-settle", f"{SHADOW_SETTLE}s",
                    "--kubeconfig", SHADOW_KUBECONFIG, "--resync-period", RESYNC, "--metrics-addr", "127.0.0.1:0"]
            self.ready = "caches synced, starting workers"
        else:
            argv = [c["ours"], "run", "--kubeconfig", c["kubeconfig"], "--resync-period", RESYNC,
                    "--hostpath-root", c["root"], "--metrics-addr", "127.0.0.1:0"]
            self.ready = "caches synced, starting workers"
        self.fh = open(self.log, "w")
        env = dict(os.environ, NO_COLOR="1")
        self.proc = subprocess.Popen(argv, stdout=self.fh, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        t0 = time.time()
        while True:
            with open(self.log, errors="replace") as f:
                if self.ready in f.read():
                    return
            if self.proc.poll() is not None:
                raise LoadError(f"{self.which} controller exited: see {self.log}")
            if time.time() - t0 > 60:
                raise LoadError(f"{self.which} controller not ready after 60s: see {self.log}")
            time.sleep(0.05)

    def report(self):
        """The shadow's /shadow, from the metrics address its log names."""
        with open(self.log, errors="replace") as f:
            m = re.search(r"serving /metrics[^\n]*addr=([0-9.]+:[0-9]+)", f.read())
        if not m:
            raise LoadError(f"shadow: no metrics address in {self.log}")
        self.url = f"http://{m.group(1)}"
        with urllib.request.urlopen(self.url + "/shadow", timeout=10) as r:
            return json.loads(r.read())

    def stop(self):
        # The result has been read: nothing the controller does on its way out counts.
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.fh.close()


def fake_kubelet(api, root):
    """Completes recycler pods: empties their host-path volume, marks them Succeeded."""
    for p in api.list("Pod"):
        m = p["metadata"]
        if not m["name"].startswith("recycler-for-") or (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for v in p["spec"].get("volumes") or []:
            path = (v.get("hostPath") or {}).get("path")
            if path and os.path.realpath(path).startswith(root + "/") and os.path.isdir(path):
                for e in os.listdir(path):
                    t = os.path.join(path, e)
                    shutil.rmtree(t) if os.path.isdir(t) and not os.path.islink(t) else os.remove(t)
        p["status"] = {"phase": "Succeeded"}
        try:
            api.call("PUT", api.path("Pod", m["namespace"], m["name"], "status"), p)
        except LoadError:
            pass  # changed meanwhile: the next poll retries


def run_once(api, which, objects, scenario, cfg, work):
    """Loads objects, runs one controller until quiescent; returns (objects, events, back)."""
    root = cfg["root"]
    wipe(api, root, (scenario or {}).get("setup"))
    back = load(api, objects, root)
    input_pvs = {o["metadata"]["name"] for o in objects if o.get("kind") == "PersistentVolume"}
    ctl = Controller(which, cfg, work, (scenario or {}).get("kcmFlags") or [])
    shadow = Controller("shadow", cfg, work) if SHADOW_KUBECONFIG and which == "upstream" else None
    late = (scenario or {}).get("late") or []
    if late and not shadow:
        raise LoadError("objects made `late` need the shadow beside upstream's binder (DIFF_SHADOW=1)")
    if shadow:
        shadow.start()
    if late:
        # A shadow case's objects made after the shadow decided and before the binder in charge
        # starts: the two decide from different states.
        try:
            wait_decided(shadow)
            back.update(load(api, late, root))
        except LoadError:
            shadow.stop()
            raise
        input_pvs |= {o["metadata"]["name"] for o in late if o.get("kind") == "PersistentVolume"}
    ctl.start()
    try:
        t0 = last_change = time.time()
        prev = None
        while True:
            # Both recycle through recycler pods (`run` as upstream does).
            fake_kubelet(api, root)
            cur = snapshot(api, back, input_pvs, root)
            now = time.time()
            if cur != prev:
                prev, last_change = cur, now
            elif now - last_change >= SETTLE:
                if shadow:
                    return cur[0], cur[1], back, shadow_report(shadow)
                return cur[0], cur[1], back
            if now - t0 > TIMEOUT:
                raise LoadError(f"{which}: not quiescent after {TIMEOUT:.0f}s")
            time.sleep(0.25)
    finally:
        ctl.stop()
        if shadow:
            shadow.stop()


def wait_decided(shadow, timeout=30):
    """Waits until the shadow has made a decision."""
    t0 = time.time()
    while True:
        rep = shadow.report()
        if rep["pending"] + rep["decisions"] > 0:
            return
        if time.time() - t0 > timeout:
            raise LoadError(f"shadow: no decision after {timeout}s: see {shadow.log}")
        time.sleep(0.1)


def shadow_report(shadow):
    """The shadow's report once every decision it made is judged (or waited out)."""
    t0 = time.time()
    while True:
        rep = shadow.report()
        if rep["pending"] == 0 or time.time() - t0 > 4 * SHADOW_SETTLE + 5:
            # What an operator would read: `pv-controller shadow report URL`.
            out = subprocess.run([shadow.cfg["ours"], "shadow", "report", shadow.url], capture_output=True, text=True)
            rep["text"] = out.stdout + out.stderr
            return rep
        time.sleep(0.25)


# --- expectations (the scenario's `expect`, as the scenario runner checks them) -----------------

def subset(e, a, present=True):
    if e is None:
        return not present or a is None
    if not present:
        return False
    if isinstance(e, dict):
        return isinstance(a, dict) and all(subset(v, a.get(k), k in a) for k, v in e.items())
    if isinstance(e, list):
        return isinstance(a, list) and len(e) == len(a) and all(subset(x, y) for x, y in zip(e, a))
    return e == a


def check_expect(scenario, objs, events):
    exp = scenario.get("expect") or {}
    errs = []
    for e in exp.get("objects") or []:
        a = next((o for o in objs if ident(o) == ident(e)), None)
        if ((a or {}).get("spec") or {}).get("hostPath", {}).get("path") == "<provisioned>" \
                and "path" in ((e.get("spec") or {}).get("hostPath") or {}):
            # The provisioner names the directory: upstream /tmp/hostpath_pv/<uuid>.
            e = json.loads(json.dumps(e))
            del e["spec"]["hostPath"]["path"]
        if a is None:
            errs.append(f"missing object {ident(e)}")
        elif not subset(e, a):
            errs.append(f"object {ident(e)} differs: expected (subset) {json.dumps(e, sort_keys=True)}")
    for a in exp.get("absent") or []:
        key = (a.get("kind", ""), a.get("namespace") or "", a.get("name", ""))
        if any(ident(o) == key for o in objs):
            errs.append(f"object {key} should not exist")
    for kind, n in (exp.get("counts") or {}).items():
        got = sum(1 for o in objs if o["kind"] == kind)
        if got != n:
            errs.append(f"expected {n} {kind} objects, found {got}")
    evs = [{"type": t, "reason": r, "involvedObject": {"kind": k, "namespace": ns, "name": n}, "message": m}
           for t, r, k, ns, n, m in events]
    for ev in evs:
        if not ev["involvedObject"]["namespace"]:
            del ev["involvedObject"]["namespace"]
    used = [False] * len(evs)
    for e in exp.get("events") or []:
        e = {k: v for k, v in e.items() if k != "count"}
        i = next((i for i, a in enumerate(evs) if not used[i] and subset(e, a)), None)
        if i is None:
            errs.append(f"missing event {json.dumps(e, sort_keys=True)}")
        else:
            used[i] = True
    if not exp.get("otherEvents"):
        for i, a in enumerate(evs):
            if not used[i]:
                errs.append("unexpected event %s %s on %s %s: %s" % (
                    a["type"], a["reason"], a["involvedObject"]["kind"], a["involvedObject"]["name"], a["message"]))
    return errs


# --- DIFFERENCES.md ------------------------------------------------------------------------------

CONTROLLER_SECTION = r"Controller \(scripts/differential\.sh\)"
SHADOW_SECTION = r"Shadow mode \(scripts/e2e-shadow\.sh\)"


def listed_differences(path, section=CONTROLLER_SECTION):
    """Entries of a section (the controller's by default): the `code` names that open a list
    item (before its first colon; an item may continue on indented lines). Items under a
    `### Fixed` heading record what was fixed and excuse nothing."""
    out = set()
    try:
        text = open(path).read()
    except OSError:
        return out
    m = re.search(r"^## " + section + r"\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    items, cur = [], None
    fixed = False
    for line in (m.group(1) if m else "").splitlines():
        if line.startswith("### "):
            fixed, cur = line[4:].strip().lower().startswith("fixed"), None
        elif fixed:
            continue
        elif re.match(r"\s*[-*]\s+", line):
            cur = [re.sub(r"^\s*[-*]\s+", "", line)]
            items.append(cur)
        elif cur is not None and line.startswith("  ") and line.strip():
            cur.append(line.strip())
        else:
            cur = None
    for item in items:
        mm = re.match(r"((?:`[^`]+`[,\s]*(?:and\s+)?)+)", " ".join(item))
        if mm:
            out.update(re.findall(r"`([^`]+)`", mm.group(1)))
    return out


class ShadowTally:
    """The shadow's results over the files: per file a verdict, and the decisions' totals."""

    def __init__(self, listed):
        self.listed = listed
        self.agree_files = self.differ_files = self.unlisted = 0
        self.totals = {"agree": 0, "equivalent": 0, "differ": 0, "pending": 0}

    def add(self, name, rep):
        """Prints the file's verdict (`agree NAME (N decisions)`, or `differ NAME ...` with
        `pv-controller shadow report`'s text); returns whether it had an unlisted difference."""
        for result in ("agree", "equivalent", "differ"):
            self.totals[result] += sum((rep["counts"].get(result) or {}).values())
        self.totals["pending"] += rep["pending"]
        diffs = [d for d in rep["differences"] if d["result"] == "differ"]
        if not diffs and rep["pending"] == 0:
            self.agree_files += 1
            equivalent = sum((rep["counts"].get("equivalent") or {}).values())
            also = f", {equivalent} equivalent" if equivalent else ""
            print(f"agree {name} ({rep['decisions']} decisions{also})", flush=True)
            if equivalent:
                print("".join("  " + l + "\n" for l in rep["text"].splitlines()), end="", flush=True)
            return False
        self.differ_files += 1
        print(f"differ {name} ({rep['decisions']} decisions, {rep['pending']} pending)", flush=True)
        print("".join("  " + l + "\n" for l in rep["text"].splitlines()), end="", flush=True)
        if {name, name.rsplit(".", 1)[0]} & self.listed:
            print("  (listed in conformance/DIFFERENCES.md)", flush=True)
            return False
        self.unlisted += 1
        print("  (not listed in conformance/DIFFERENCES.md)", flush=True)
        return True

    def summary(self):
        t = self.totals
        print(f"decisions: {t['agree']} agree, {t['equivalent']} equivalent, {t['differ']} differ, "
              f"{t['pending']} pending", flush=True)
        print(f"{self.agree_files} agree, {self.differ_files} differ, {self.unlisted} unlisted", flush=True)


def check_shadow_case(case, rep):
    """What a shadow case (tests/shadow/) expects of the shadow's report: `decisions` (a count
    per result), `differences` (each a subset of one /shadow entry), `report` (texts that
    `pv-controller shadow report` prints). Returns the ways the report disagrees."""
    exp, errs = case["shadow"], []
    for result, n in (exp.get("decisions") or {}).items():
        got = rep["pending"] if result == "pending" else sum((rep["counts"].get(result) or {}).values())
        if got != n:
            errs.append(f"expected {n} {result} decisions, found {got}")
    used = [False] * len(rep["differences"])
    for e in exp.get("differences") or []:
        i = next((i for i, d in enumerate(rep["differences"]) if not used[i] and subset(e, d)), None)
        if i is None:
            errs.append(f"no difference matches {json.dumps(e, sort_keys=True)}")
        else:
            used[i] = True
    for text in exp.get("report") or []:
        if text not in rep["text"]:
            errs.append(f"the report does not say {text!r}")
    return errs


def main_shadow(files, api, cfg, work, listed):
    """Each file loaded and settled by upstream's binder with the shadow beside it; prints per
    file the shadow's verdict, and, last, the totals. A shadow case (a file with a `shadow`
    section, tests/shadow/) is checked against what it expects instead: `expected NAME` or
    `unexpected NAME` with the reasons."""
    tally = ShadowTally(listed)
    unexpected = 0
    for path in files:
        name = os.path.basename(path)
        try:
            objects, scenario = read_input(path)
            if ((scenario or {}).get("expect") or {}).get("error"):
                continue  # rejected input: no controller runs
            rep = run_once(api, "upstream", objects, scenario, cfg, work)[3]
        except (OSError, yaml.YAMLError, LoadError) as e:
            print(f"differ {name}\n  error: {e}", flush=True)
            tally.differ_files += 1
            tally.unlisted += 1
            continue
        if "shadow" in (scenario or {}):
            errs = check_shadow_case(scenario, rep)
            print(f"{'unexpected' if errs else 'expected'} {name} ({rep['decisions']} decisions)", flush=True)
            print("".join(f"  {l}\n" for l in errs + rep["text"].splitlines()), end="", flush=True)
            unexpected += bool(errs)
            continue
        tally.add(name, rep)
    tally.summary()
    return 0 if tally.unlisted == 0 and unexpected == 0 else 1


def main():
    cfg = {"kubeconfig": os.environ["DIFF_KUBECONFIG"], "bin": os.environ["DIFF_KBIN"],
           "ours": os.environ["DIFF_OURS"], "root": os.environ["DIFF_ROOT"]}
    work = os.environ["DIFF_WORK"]
    files = sys.argv[1:]
    api = Api(cfg["kubeconfig"])
    listed = listed_differences(os.environ["DIFF_LISTED"])
    if SHADOW_ONLY:
        # What differs between run and KCM differs in the shadow too, and the shadow's own.
        listed |= listed_differences(os.environ["DIFF_LISTED"], SHADOW_SECTION)
        return main_shadow(files, api, cfg, work, listed)
    same = differ = unlisted = 0
    for path in files:
        name = os.path.basename(path)
        lines = []
        try:
            objects, scenario = read_input(path)
        except (OSError, yaml.YAMLError) as e:
            print(f"differ {name}\n  cannot read: {e}", flush=True)
            differ += 1
            unlisted += 1
            continue
        want_error = ((scenario or {}).get("expect") or {}).get("error")
        results = {}
        try:
            for which in ("upstream", "ours"):
                results[which] = run_once(api, which, objects, scenario, cfg, work)
        except LoadError as e:
            if want_error and not results:
                # Rejected input: neither controller runs; kube-apiserver must reject it too.
                print(f"same {name}", flush=True)
                same += 1
                continue
            lines.append(f"  error: {e}")
        if len(results) == 2:
            up, ours = results["upstream"], results["ours"]
            a, b = render(up[0], up[1]), render(ours[0], ours[1])
            if a != b:
                lines.extend("  " + l for l in difflib.unified_diff(a, b, "upstream", "ours", lineterm="", n=2))
            if scenario is not None:
                if want_error:
                    lines.append(f"  expect: an error containing {want_error!r}, but kube-apiserver accepted the input")
                else:
                    for err in check_expect(scenario, up[0], up[1]):
                        lines.append("  upstream vs expect: " + err)
        if lines:
            differ += 1
            metanames = ",".join(sorted({str((o.get("metadata") or {}).get("name"))
                                         for o in objects if isinstance(o, dict)}))
            if not ({name, name.rsplit(".", 1)[0], metanames} & listed):
                unlisted += 1
                lines.append("  (not listed in conformance/DIFFERENCES.md)")
            print(f"differ {name}", flush=True)
            print("\n".join(lines), flush=True)
        else:
            same += 1
            print(f"same {name}", flush=True)
    print(f"{same} same, {differ} differ", flush=True)
    return 0 if unlisted == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
