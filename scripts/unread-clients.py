#!/usr/bin/env python3
"""What clients that ask for a large list or watch and never read cost a running `up`.

Usage: unread-clients.py DATA_DIR URL PID [--volumes N] [--watches W] [--lists L] [--hold S]

Creates volumes until N exist (16 writers), then opens W watches (`?watch=true`: every volume as
an initial event) and L lists of all volumes, each on its own TLS connection with a 4 KiB
receive buffer, sends the request and never reads. Prints the server's (PID) resident memory
before, and the most it reaches while the clients are held S seconds (default 10; `up` closes a
connection whose answer makes no progress for 60 s), then closes them.
"""
import argparse
import http.client
import json
import socket
import ssl
import threading
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data_dir")
    ap.add_argument("url")
    ap.add_argument("pid", type=int)
    ap.add_argument("--volumes", type=int, default=20000)
    ap.add_argument("--watches", type=int, default=30)
    ap.add_argument("--lists", type=int, default=30)
    ap.add_argument("--hold", type=float, default=10)
    a = ap.parse_args()
    token = open(f"{a.data_dir}/token").read().strip()
    ctx = ssl.create_default_context(cafile=f"{a.data_dir}/ca.crt")
    ctx.check_hostname = False
    host, port = a.url.split("//", 1)[1].rsplit(":", 1)
    port = int(port)
    auth = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}

    def create(start):
        c = http.client.HTTPSConnection(host, port, context=ctx)
        for i in range(start, a.volumes, 16):
            pv = {"apiVersion": "v1", "kind": "PersistentVolume",
                  "metadata": {"name": f"unread-{i:06}", "labels": {"set": "unread"}},
                  "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                           "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": f"/tmp/unread/{i}"}}}
            c.request("POST", "/api/v1/persistentvolumes", json.dumps(pv), auth)
            r = c.getresponse()
            r.read()
            if r.status not in (201, 409):
                raise SystemExit(f"create: {r.status}")
        c.close()

    writers = [threading.Thread(target=create, args=(s,)) for s in range(16)]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    time.sleep(2)
    before = rss_kib(a.pid)
    clients = []
    for path in ["/api/v1/persistentvolumes?watch=true"] * a.watches + ["/api/v1/persistentvolumes"] * a.lists:
        raw = socket.socket()
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        raw.connect((host, port))
        s = ctx.wrap_socket(raw)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
        clients.append(s)
    peak, t0 = before, time.monotonic()
    while time.monotonic() - t0 < a.hold:
        peak = max(peak, rss_kib(a.pid))
        time.sleep(0.2)
    for s in clients:
        s.close()
    print(f"{a.volumes} volumes, {a.watches} unread watches, {a.lists} unread lists: "
          f"RSS {before / 1024:.0f} MB before, {peak / 1024:.0f} MB at most while held (+{(peak - before) / 1024:.0f} MB)")


if __name__ == "__main__":
    main()
