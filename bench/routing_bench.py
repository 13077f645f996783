"""Read routing under live load: does weight / (in_flight + 1) converge to the weights?

A three-region emulator (in process, real sockets) with the primary not taking reads and
replica weights 1:2:3 on the three secondaries (index 0 is the primary), and a `latency` fault
holding every read reply of East US DELAY_MS, so reads really are in flight at once. CLIENTS
threads, each on its own keep-alive connection, read one item from East US's endpoint for
SECONDS; then the bench prints the reads each replica served and their ratio, and the machine.
With `--strategy connections` the account balances by connections instead (PUT /routing) and the
clients read at Eventual, the level a pin serves; the bench also prints how many connections
were pinned to each replica while they were all open.
Not an assert anywhere: docs/performance.md records what it printed.

    python bench/routing_bench.py [--clients 24] [--seconds 10] [--delay-ms 50] [--strategy connections]
"""
import argparse
import email.utils
import http.client
import json
import os
import platform
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from regionlab.client.protocol import auth  # noqa: E402
from regionlab.emulator.testing import running_emulator  # noqa: E402

WEIGHTS = [1, 1, 2, 3]          # primary (not taking reads), then three secondaries 1:2:3
PATH = "/dbs/db/colls/c/docs/x"


def control(emu, method, path, body=None):
    req = urllib.request.Request(emu.control_endpoint.rstrip("/") + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as resp:
        return json.loads(resp.read())


def headers(key, verb, path, extra=None):
    date = email.utils.formatdate(usegmt=True)
    rtype, link = auth.resource_type_and_link(path)
    h = {"x-ms-date": date, "x-ms-version": "2020-07-15",
         "authorization": auth.authorization_header(key, verb, rtype, link, date)}
    h.update(extra or {})
    return h


def setup(emu):
    for path, body in (("/dbs", {"id": "db"}),
                       ("/dbs/db/colls", {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}}),
                       ("/dbs/db/colls/c/docs", {"id": "x", "pk": "p"})):
        u = urllib.parse.urlsplit(emu.endpoint)
        conn = http.client.HTTPConnection(u.hostname, u.port)
        extra = {"content-type": "application/json", "x-ms-documentdb-partitionkey": '["p"]'}
        conn.request("POST", path, json.dumps(body), headers(emu.key, "POST", path, extra))
        assert conn.getresponse().status == 201
        conn.close()


def reader(emu, until, counts, i, extra, done, close):
    u = urllib.parse.urlsplit(emu.region_endpoints["East US"])
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    n = 0
    while time.monotonic() < until:
        conn.request("GET", PATH, headers=headers(emu.key, "GET", PATH, {"x-ms-documentdb-partitionkey": '["p"]',
                                                                        **extra}))
        resp = conn.getresponse()
        resp.read()
        n += resp.status == 200
    counts[i] = n
    done.wait()             # every connection still open: the main thread reads the pins
    close.wait()
    conn.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=24)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--delay-ms", type=int, default=50)
    ap.add_argument("--strategy", choices=("active_requests", "connections"), default="active_requests")
    args = ap.parse_args(argv)
    extra = {"x-ms-consistency-level": "Eventual"} if args.strategy == "connections" else {}
    with running_emulator(primary_accepts_reads=False, read_weights=WEIGHTS) as emu:
        setup(emu)
        control(emu, "PUT", "/routing", {"strategy": args.strategy})
        control(emu, "POST", "/faults", {"type": "latency", "region": "East US", "delay_ms": args.delay_ms,
                                         "op": "read", "seed": 1})
        until = time.monotonic() + args.seconds
        counts = [0] * args.clients
        done, close = threading.Barrier(args.clients + 1), threading.Barrier(args.clients + 1)
        threads = [threading.Thread(target=reader, args=(emu, until, counts, i, extra, done, close))
                   for i in range(args.clients)]
        for t in threads:
            t.start()
        done.wait()
        topo = control(emu, "GET", "/topology")
        close.wait()
        for t in threads:
            t.join()
    replicas = topo["databases"][0]["containers"][0]["partitions"][0]["regions"]["East US"]["replicas"]
    served = [r["reads_served"] for r in replicas]
    peaks = [r["in_flight_peak"] for r in replicas]
    secondaries = served[1:]
    unit = secondaries[0] or 1
    print(json.dumps({"bench": "routing", "strategy": args.strategy, "clients": args.clients, "seconds": args.seconds,
                      "delay_ms": args.delay_ms, "weights": WEIGHTS, "reads_ok": sum(counts),
                      "served_by_replica": served, "in_flight_peak": peaks,
                      "pinned_connections": [r["pinned_connections"] for r in replicas],
                      "served_ratio_secondaries": [round(n / unit, 2) for n in secondaries],
                      "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                                  "platform": platform.platform()}}))


if __name__ == "__main__":
    main()
