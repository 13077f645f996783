"""Server CPU per item of a transactional batch, in-process: the gateway's batch path from a parsed
HTTP request to the encoded reply, the core's commit, and replication to all 12 replicas.

    python bench/batch_cost.py                          # µs of CPU per item, best of REPEATS runs
    python bench/batch_cost.py --profile                # plus a cProfile of one run (top functions)
    python bench/batch_cost.py --instructions           # instructions per item under callgrind
    python bench/batch_cost.py --data-dir               # the same with a --data-dir (relaxed)

An Emulator as `python -m emulator --no-ru-limits --partitions 10` runs it (3 regions, session,
on a uvloop loop with its real listeners, links and timers), a container like load_bench's, and
N items of ~950 B in transactional batches of 100 (load_bench.py's items, one logical partition
per batch, each batch full as load_bench's are once 100,000 items are under way), each handed to the global endpoint's Gateway.handle as the HTTP layer hands
it a request (gateway/http.py's Request, signed with the master key), and its reply encoded as the
connection would write it. The measured span ends when every region has applied every commit, so
it includes log shipping and the other regions' stores. Not included: reading the request off the
socket and HTTP head parsing (load_bench's end-to-end figure has them), and the load generator.

CPU is time.process_time() (this process only, so other work on the machine inflates it only
through caches and frequency); --instructions counts instructions with valgrind --tool=callgrind
between a zero and a dump of the counters around the same span, divided by the items, which does
not depend on the machine's load at all.
"""
import argparse
import asyncio
import cProfile
import glob
import os
import platform
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from email.utils import formatdate
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import uvloop  # noqa: E402

from load_bench import BATCH_ITEMS, COLL, DB, KEYS, sized_item  # noqa: E402
from rest_load import signed_headers  # noqa: E402
from regionlab.emulator.gateway.http import Request  # noqa: E402
from regionlab.emulator.gateway.server import Gateway  # noqa: E402
from regionlab.emulator.server import Emulator  # noqa: E402
from regionlab.emulator.testing import make_config  # noqa: E402

N_DEFAULT = 20_000
REPEATS = 3
PROFILE_LINES = 30


def full_batches(n: int):
    """(pk, items) of BATCH_ITEMS items each, the batches load_bench sends once every partition
    key has that many items waiting (as from the 100,000th item on): item k + KEYS * j for j
    of one hundred in a row goes with key k."""
    for b in range(n // BATCH_ITEMS):
        k, row = b % KEYS, b // KEYS
        group = [sized_item(k + KEYS * (row * BATCH_ITEMS + j))[0] for j in range(BATCH_ITEMS)]
        yield group[0]["pk"], group


def request(key: str, method: str, path: str, body: bytes, extra: dict) -> Request:
    headers = {k.lower(): v for k, v in signed_headers(key, method, path, formatdate(usegmt=True)).items()}
    headers.update(extra)
    headers["content-length"] = str(len(body))
    req = Request(method, path, "HTTP/1.1", headers)
    req.body = body
    req.length = len(body)
    return req


async def caught_up(account) -> None:
    """Until every region's replica sets have committed what the write region committed."""
    while True:
        behind = False
        for _, p in account.partitions():
            sets = list(p.replica_sets.values())
            top = max(rs.lsn for rs in sets)
            if any(rs.committed_lsn < top for rs in sets):
                behind = True
                break
        if not behind:
            return
        await asyncio.sleep(0.001)


async def run(n: int, data_dir: str | None, profile: bool, callgrind: bool) -> dict:
    options = dict(ru_limits=False, partitions=10)
    if data_dir is not None:
        options.update(data_dir=data_dir, durability="relaxed")
    emu = Emulator(make_config(**options))
    await emu.start()
    try:
        gw = Gateway(emu.services[None])
        key = emu.config.key
        import json
        for method, path, body, extra in (
                ("POST", "/dbs", {"id": DB}, {}),
                ("POST", f"/dbs/{DB}/colls", {"id": COLL, "partitionKey": {"paths": ["/pk"], "kind": "Hash",
                                                                          "version": 2}},
                 {"x-ms-offer-throughput": "400"})):
            r = await gw.handle(request(key, method, path, json.dumps(body).encode(), extra))
            assert r.status == 201, (r.status, r.body[:300])
        path = f"/dbs/{DB}/colls/{COLL}/docs"
        reqs = []
        for pk, group in full_batches(n):
            body = json.dumps([{"operationType": "Create", "resourceBody": d} for d in group]).encode()
            reqs.append(request(key, "POST", path, body, {
                "x-ms-cosmos-is-batch-request": "True", "x-ms-cosmos-batch-atomic": "True",
                "x-ms-documentdb-partitionkey": json.dumps([pk])}))
        prof = cProfile.Profile() if profile else None
        if callgrind:
            subprocess.run(["callgrind_control", "-z", str(os.getpid())], capture_output=True)
        cpu0, t0 = time.process_time(), time.perf_counter()
        if prof:
            prof.enable()
        out_bytes = 0
        for req in reqs:
            reply = await gw.handle(req)
            if reply.status != 200:
                raise RuntimeError(f"batch answered {reply.status}: {reply.body[:300]}")
            out_bytes += len(reply.encode(req.connection, False))
        await caught_up(emu.account)
        if prof:
            prof.disable()
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
        if callgrind:
            subprocess.run(["callgrind_control", "-d", str(os.getpid())], capture_output=True)
        return {"items": n, "cpu_us_per_item": cpu / n * 1e6, "wall_s": wall,
                "reply_bytes_per_item": out_bytes / n, "profile": prof}
    finally:
        await emu.stop()


def measure(n: int, data_dir: bool, profile: bool = False, callgrind: bool = False) -> dict:
    d = tempfile.mkdtemp(prefix="regionlab-batch-") if data_dir else None
    try:
        return uvloop.run(run(n, d, profile, callgrind))
    finally:
        if d:
            shutil.rmtree(d, ignore_errors=True)


def instructions(n: int, data_dir: bool, keep: str | None = None) -> float:
    """Instructions per item: this script under callgrind, counters zeroed before the batches.
    keep: a directory to leave the callgrind files in (for callgrind_annotate)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(keep or tmp, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__,
               "--items", str(n), "--under-callgrind"] + (["--data-dir"] if data_dir else [])
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        dumps = [f for f in glob.glob(out + "*") if not f.endswith(out)]
        newest = max(dumps or glob.glob(out + "*"), key=os.path.getmtime)
        for line in open(newest):
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1]) / n
    raise RuntimeError("callgrind wrote no totals")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=N_DEFAULT)
    ap.add_argument("--repeats", type=int, default=REPEATS)
    ap.add_argument("--data-dir", action="store_true", help="a --data-dir with relaxed durability")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--instructions", action="store_true")
    ap.add_argument("--keep", help="with --instructions: leave the callgrind files in this directory")
    ap.add_argument("--under-callgrind", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.under_callgrind:
        measure(args.items, args.data_dir, callgrind=True)
        return
    print(f"python {platform.python_version()}, load {os.getloadavg()[0]:.2f}; {args.items:,} items in batches of "
          f"{BATCH_ITEMS}, 3 regions{', --data-dir (relaxed)' if args.data_dir else ''}", flush=True)
    if args.instructions:
        print(f"  {instructions(args.items, args.data_dir, args.keep) / 1000:,.1f} k instructions per item")
        return
    runs = [measure(args.items, args.data_dir) for _ in range(args.repeats)]
    best = min(runs, key=lambda r: r["cpu_us_per_item"])
    print(f"  CPU per item: best {best['cpu_us_per_item']:.1f} µs (runs: "
          f"{', '.join(format(r['cpu_us_per_item'], '.1f') for r in runs)}); reply {best['reply_bytes_per_item']:.0f} B/item; "
          f"load {os.getloadavg()[0]:.2f}")
    if args.profile:
        prof = measure(args.items, args.data_dir, profile=True)["profile"]
        pstats.Stats(prof).sort_stats("tottime").print_stats(PROFILE_LINES)


if __name__ == "__main__":
    main()
