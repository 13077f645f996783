"""Load N items into a real server through transactional batches, with progress; items/s, the
server's memory per item, and its garbage-collector pauses while loading.

    python bench/load_bench.py                       # 1,000,000 items of ~950 B, default 3 regions
    python bench/load_bench.py --items 100000 --regions 1
    python bench/load_bench.py --items 1000000 --then-hold-s 0 --json out.json
    python bench/load_bench.py --items 1000000 --restart   # into a --data-dir, then time a restart

The server is `python -m emulator --no-ru-limits --partitions 10` (the default 3-region account,
or only East US with --regions 1; RU charges are computed and reported but not enforced, so the
load is never throttled). The loader (this process, aiohttp) keeps CONCURRENCY batches in flight,
each of BATCH_ITEMS creates of one logical partition (1,000 partition keys, round robin), signed
with the master key like any client. Every create is acknowledged by 3 of 4 replicas in East US
and shipped to the other regions, as any write.

Printed: progress every PROGRESS_EVERY_S (items, items/s so far, server RSS); at the checkpoints
10k / 100k / 1M (those reached) the server's RSS above its idle RSS (after the container was
created, before the first item) per item and as a multiple of the raw JSON sent; at the end
items/s overall, the server's CPU time per item (user+system from /proc: what the load costs the
server whatever else runs on the machine, and so what 1,000,000 items would take on a core of its
own) and this loader's, and the server's collector pauses (`GET /debug/gc`: counts, max and the pauses
of 10 ms or more by generation) and event-loop lag while loading.
"""
import argparse
import asyncio
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from email.utils import formatdate
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from rest_load import setup, signed_headers  # noqa: E402
from server_proc import ServerProcess  # noqa: E402

DB, COLL = "load", "items"
BATCH_ITEMS = 100                  # the service's limit for one transactional batch
CONCURRENCY = 4
KEYS = 1000
ITEM_JSON_BYTES = 950
PROGRESS_EVERY_S = 5.0
CHECKPOINTS = (10_000, 100_000, 1_000_000)
RESTART_READY_TIMEOUT_S = 600.0     # a restart restores every item before its ready line


def sized_item(i: int) -> tuple[dict, int]:
    """(item i, the bytes of its compact JSON): the filler brings it to ITEM_JSON_BYTES."""
    doc = {"id": f"item-{i:07d}", "pk": f"p{i % KEYS}", "n": i, "kind": "order",
           "price": round(i * 0.37, 2), "ok": i % 2 == 0, "f": ""}
    bare = len(json.dumps(doc, separators=(",", ":")))
    doc["f"] = "x" * (ITEM_JSON_BYTES - bare)
    return doc, max(bare, ITEM_JSON_BYTES)


def item(i: int) -> dict:
    return sized_item(i)[0]


def batches(n: int):
    """(pk, [items], their compact JSON bytes) of BATCH_ITEMS items each, every item of one
    batch on one partition key."""
    per_key: dict = {}
    for i in range(n):
        doc, size = sized_item(i)
        group = per_key.setdefault(doc["pk"], [[], 0])
        group[0].append(doc)
        group[1] += size
        if len(group[0]) == BATCH_ITEMS:
            yield doc["pk"], *per_key.pop(doc["pk"])
    for pk, (group, size) in per_key.items():
        yield pk, group, size


async def load(base: str, n: int, concurrency: int, server: ServerProcess, idle_mb: float, key: str | None = None) -> dict:
    """Load n items into DB/COLL at base; key defaults to the one in server's ready line."""
    path = f"/dbs/{DB}/colls/{COLL}/docs"
    headers = signed_headers(key or server.ready["key"], "POST", path, formatdate(usegmt=True))
    headers.update({"x-ms-cosmos-is-batch-request": "True", "x-ms-cosmos-batch-atomic": "True"})
    source = batches(n)
    done = {"items": 0, "raw": 0, "errors": 0}
    checkpoints = {}
    t0 = time.perf_counter()
    next_progress = [t0 + PROGRESS_EVERY_S]

    def report():
        now = time.perf_counter()
        items = done["items"]
        for mark in CHECKPOINTS:
            if mark not in checkpoints and items >= mark:
                above = (server.rss_mb() - idle_mb) * 1024 * 1024
                checkpoints[mark] = {"rss_above_idle_mb": round(above / 2**20, 1),
                                     "bytes_per_item": round(above / items), "x_raw": round(above / done["raw"], 2),
                                     "at_items": items}
        if now >= next_progress[0]:
            next_progress[0] = now + PROGRESS_EVERY_S
            print(f"  {items:>9,} items  {items / (now - t0):>8,.0f} items/s  server RSS {server.rss_mb():,.0f} MB"
                  f"  load {os.getloadavg()[0]:.1f}", flush=True)

    async def worker(session):
        for pk, group, raw in source:
            body = json.dumps([{"operationType": "Create", "resourceBody": d} for d in group]).encode()
            h = dict(headers)
            h["x-ms-documentdb-partitionkey"] = json.dumps([pk])
            async with session.post(base + path, data=body, headers=h) as r:
                await r.read()
                if r.status != 200:
                    done["errors"] += 1
                    continue
            done["items"] += len(group)
            done["raw"] += raw
            report()

    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=conn) as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
    elapsed = time.perf_counter() - t0
    return {"items": done["items"], "errors": done["errors"], "raw_bytes": done["raw"], "seconds": round(elapsed, 2),
            "items_per_s": round(done["items"] / elapsed), "checkpoints": checkpoints}


async def control(base: str, path: str) -> dict:
    async with aiohttp.ClientSession() as s, s.get(base + path) as r:
        return await r.json()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--regions", type=int, default=3, choices=(1, 3))
    ap.add_argument("--concurrency", type=int, default=CONCURRENCY)
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--restart", action="store_true",
                    help="load into a --data-dir (relaxed durability), then restart from it and time spawn to ready")
    args = ap.parse_args()
    flags = ["--no-ru-limits", "--partitions", "10"]
    data_dir = None
    if args.restart:
        data_dir = tempfile.mkdtemp(prefix="regionlab-load-")
        flags += ["--data-dir", data_dir, "--durability", "relaxed"]
    if args.regions == 1:
        flags += ["--regions", "East US"]
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; "
          f"{args.items:,} items of ~{ITEM_JSON_BYTES} B in batches of {BATCH_ITEMS}, {args.concurrency} in flight, "
          f"{args.regions} region(s)", flush=True)
    with ServerProcess(*flags) as server:
        base = server.ready["account_endpoint"].rstrip("/")
        ctl = server.ready["control_endpoint"].rstrip("/")
        asyncio.run(setup(base, server.ready["key"], DB, COLL, 400))
        idle_mb = server.rss_mb()
        cpu0, mine0 = server.cpu_s(), time.process_time()
        out = asyncio.run(load(base, args.items, args.concurrency, server, idle_mb))
        out["server_cpu_us_per_item"] = round((server.cpu_s() - cpu0) / max(out["items"], 1) * 1e6, 1)
        out["loader_cpu_us_per_item"] = round((time.process_time() - mine0) / max(out["items"], 1) * 1e6, 1)
        out["idle_rss_mb"] = round(idle_mb, 1)
        out["final_rss_above_idle_mb"] = round(server.rss_mb() - idle_mb, 1)
        out["gc"] = asyncio.run(control(ctl, "/debug/gc"))
    if data_dir is not None:
        out["restart"] = restart(flags, data_dir)
    out.update(regions=args.regions, load_average=os.getloadavg()[0], python=platform.python_version())
    print(f"loaded {out['items']:,} items in {out['seconds']} s: {out['items_per_s']:,} items/s "
          f"({out['errors']} failed batches); idle RSS {out['idle_rss_mb']} MB")
    print(f"  server CPU {out['server_cpu_us_per_item']} µs per item: one core to itself would load "
          f"{1e6 / out['server_cpu_us_per_item']:,.0f} items/s (1,000,000 in "
          f"{out['server_cpu_us_per_item']:.0f} s); the loader (this process) {out['loader_cpu_us_per_item']} µs per item")
    for mark, c in sorted(out["checkpoints"].items()):
        print(f"  at {mark:>9,} items: RSS +{c['rss_above_idle_mb']:,} MB = {c['bytes_per_item']:,} B/item "
              f"= {c['x_raw']}x the raw JSON")
    g = out["gc"]
    if g.get("installed"):
        for gen, h in g["pauses_ms"].items():
            cpu = g["pauses_cpu_ms"][gen]
            print(f"  gc {gen}: {h['count']} pauses, {h['total_ms']:.0f} ms in all, max {h['max_ms']:.1f} ms "
                  f"(CPU time: {cpu['total_ms']:.0f} ms in all, max {cpu['max_ms']:.1f} ms)")
        print(f"  freezes {g['freezes']}, frozen objects {g['frozen_objects']:,}; loop lag max "
              f"{g['loop_lag_ms']['max_ms']:.1f} ms over {g['loop_lag_ms']['count']} samples")
        for p in g["slow_pauses"]:
            print(f"    slow pause: gen{p['generation']} {p['ms']} ms ({p['cpu_ms']} ms CPU) at {p['at_s']} s, "
                  f"froze after: {p['frozen_after']}")
    if "restart" in out:
        r = out["restart"]
        print(f"  restart with {r['restored_items']:,} items stored ({r['file_mb']:,} MB on disk): spawn to ready "
              f"{r['spawn_to_ready_ms'] / 1000:.1f} s, RSS {r['rss_mb']:,.0f} MB")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


def restart(flags: list, data_dir: str) -> dict:
    """Start again from the data dir the load filled; the ready line comes after the restore."""
    size = sum(os.path.getsize(os.path.join(data_dir, f)) for f in os.listdir(data_dir))
    try:
        with ServerProcess(*flags, ready_timeout_s=RESTART_READY_TIMEOUT_S) as server:
            return {"restored_items": server.ready["restored_items"], "spawn_to_ready_ms": round(server.spawn_to_ready_ms),
                    "file_mb": round(size / 2**20, 1), "rss_mb": round(server.rss_mb(), 1)}
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
