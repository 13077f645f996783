"""What the first queries after a bulk load cost everyone else: load N items through
transactional batches (load_bench.py), then run the first partition-key query and the first
indexed cross-partition equality query while a probe keeps reading one item, and print each
query's own latency and the probe's worst latency meanwhile (every endpoint shares one loop, so
a query that held it shows up as a long probe read).

    python bench/first_query_pause.py [--items 1000000]
"""
import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from load_bench import COLL, DB, CONCURRENCY, load  # noqa: E402
from rest_load import setup, signed_headers  # noqa: E402
from server_proc import ServerProcess  # noqa: E402

QUERIES = (("PK query (first)", "SELECT * FROM c WHERE c.pk = 'p7'", "p7"),
           ("indexed equality (first)", "SELECT * FROM c WHERE c.n = 123456", None),
           ("indexed equality (second)", "SELECT * FROM c WHERE c.n = 654321", None))


async def query(session, base, key, text, pk) -> tuple:
    path = f"/dbs/{DB}/colls/{COLL}/docs"
    h = signed_headers(key, "POST", path)
    h.update({"content-type": "application/query+json", "x-ms-documentdb-isquery": "True"})
    if pk is None:
        h["x-ms-documentdb-query-enablecrosspartition"] = "True"
    else:
        h["x-ms-documentdb-partitionkey"] = json.dumps([pk])
    t0, pages, charge, cont = time.perf_counter(), 0, 0.0, None
    while True:
        if cont:
            h["x-ms-continuation"] = cont
        async with session.post(base + path, data=json.dumps({"query": text}).encode(), headers=h) as r:
            await r.read()
            pages += 1
            charge += float(r.headers.get("x-ms-request-charge", 0))
            cont = r.headers.get("x-ms-continuation")
        if not cont:
            return (time.perf_counter() - t0) * 1000, pages, round(charge, 2)


async def probe(session, base, key, stop: asyncio.Event) -> float:
    path = f"/dbs/{DB}/colls/{COLL}/docs/item-0000001"
    worst = 0.0
    while not stop.is_set():
        h = signed_headers(key, "GET", path)
        h["x-ms-documentdb-partitionkey"] = '["p1"]'
        t0 = time.perf_counter()
        async with session.get(base + path, headers=h) as r:
            await r.read()
        worst = max(worst, (time.perf_counter() - t0) * 1000)
        await asyncio.sleep(0.005)
    return worst


async def measure(base, key) -> list:
    out = []
    async with aiohttp.ClientSession() as session:
        for name, text, pk in QUERIES:
            stop = asyncio.Event()
            prober = asyncio.create_task(probe(session, base, key, stop))
            await asyncio.sleep(0.05)
            ms, pages, charge = await query(session, base, key, text, pk)
            stop.set()
            out.append({"query": name, "ms": round(ms, 1), "pages": pages, "charge": charge,
                        "probe_worst_ms": round(await prober, 1)})
            print(json.dumps(out[-1]), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1_000_000)
    a = ap.parse_args()
    print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; {a.items:,} items", flush=True)
    with ServerProcess("--no-ru-limits", "--partitions", "10") as server:
        base, key = server.ready["account_endpoint"].rstrip("/"), server.ready["key"]
        asyncio.run(setup(base, key, DB, COLL, 400))
        idle = server.rss_mb()
        loaded = asyncio.run(load(base, a.items, CONCURRENCY, server, idle))
        print(f"loaded {loaded['items']:,} items in {loaded['seconds']} s", flush=True)
        asyncio.run(measure(base, key))


if __name__ == "__main__":
    main()
