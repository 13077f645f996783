"""Does a request cost more server CPU when the container holds more items? Point reads, creates,
partition-key queries and an indexed equality query at 1k, 100k and 1M stored items.

    python bench/scale_bench.py                          # 1,000 / 100,000 / 1,000,000 items
    python bench/scale_bench.py --sizes 1000,100000 --ops 3000 --rounds 3

For each size a fresh `python -m emulator --partitions 4` (default 3 regions, Session) is loaded
over HTTP with signed transactional batches (query_bench's documents: 100 logical partitions,
`cat` shared by 10 items, unique `n`), the way a client would, so every item is on 12 replicas.
Then, in rounds, each operation runs `--ops` times at c=16 from a Python generator of pre-signed
requests, and the server's CPU (user+system from /proc) over the phase divided by the requests
answered is its cost (the generator runs in this process, so none of its work is counted);
medians of the rounds. The first request of each kind after loading is timed on its own.

Operations: a point read of a random stored item; a create of a new ~200-byte item; query (a)
`SELECT * FROM c WHERE c.pk = @pk` with the partition key header and pages of 10 (the first page
only); query (b) `SELECT * FROM c WHERE c.cat = @cat` cross-partition (10 matches among all the
items, one of QUERY_VARIANTS values spread over the data; an index on `cat` is built by the
first such query). The request charge of (b) says how
many documents it loaded (charge.query: 0.02 RU per document loaded).
"""
import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
from email.utils import formatdate
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import query_bench as qb  # noqa: E402
from gateway_bench import machine  # noqa: E402
from rest_load import setup, signed_headers  # noqa: E402
from server_proc import ServerProcess  # noqa: E402

CONCURRENCY = 16
# Distinct parameter values of (a) and (b), the same at every size: the gateway caches compiled
# queries by text and parameters (COMPILED_QUERIES_CACHE_MAX_ENTRIES), so drawing among count/10 values would
# measure re-compiling (about 1 ms a query), not the data.
QUERY_VARIANTS = 100
OPS = ("point read", "create", "query (a) pk", "query (b) cat")


def requests_for(op: str, key: str, count: int, n: int, tag: str) -> list:
    """n pre-signed (method, path, body, headers) of one operation."""
    rnd = random.Random(n)
    date = formatdate(usegmt=True)
    out = []
    for k in range(n):
        if op == "point read":
            i = rnd.randrange(count)
            path = f"{qb.FEED}/d{i}"
            h = signed_headers(key, "GET", path, date)
            h["x-ms-documentdb-partitionkey"] = json.dumps([qb.document(i)["pk"]])
            out.append(("GET", path, None, h))
        elif op == "create":
            pk = f"p{k % qb.LOGICAL_PARTITIONS}"
            h = signed_headers(key, "POST", qb.FEED, date)
            h["x-ms-documentdb-partitionkey"] = json.dumps([pk])
            out.append(("POST", qb.FEED, json.dumps({"id": f"{tag}-{k}", "pk": pk, "f": "x" * 140}).encode(), h))
        elif op == "query (a) pk":
            pk = f"p{rnd.randrange(qb.LOGICAL_PARTITIONS)}"
            body = {"query": "SELECT * FROM c WHERE c.pk = @pk", "parameters": [{"name": "@pk", "value": pk}]}
            out.append(("POST", qb.FEED, json.dumps(body).encode(), qb.query_headers(key, pk, 10, date)))
        else:
            cat = f"c{rnd.randrange(QUERY_VARIANTS) * (count // qb.CAT_GROUP // QUERY_VARIANTS)}"
            body = {"query": "SELECT * FROM c WHERE c.cat = @cat", "parameters": [{"name": "@cat", "value": cat}]}
            out.append(("POST", qb.FEED, json.dumps(body).encode(), qb.query_headers(key, None, 100, date)))
    return out


async def drive(base: str, reqs: list, concurrency: int = CONCURRENCY) -> dict:
    """Send reqs at `concurrency`; status counts and the charges seen."""
    todo = iter(reqs)
    bad, charges = 0, []

    async def worker(session):
        nonlocal bad
        for method, path, body, h in todo:
            async with session.request(method, base.rstrip("/") + path, data=body, headers=h) as r:
                await r.read()
                bad += r.status >= 300
                charges.append(float(r.headers.get("x-ms-request-charge", "nan")))

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
    return {"errors": bad, "charge": statistics.median(charges)}


def measure_size(count: int, ops_n: int, rounds: int) -> dict:
    rows = {op: [] for op in OPS}
    with ServerProcess("--partitions", "4") as server:
        base, key = server.ready["account_endpoint"], server.ready["key"]
        asyncio.run(setup(base, key, qb.DB, qb.COLL, qb.THROUGHPUT_RU_PER_S))
        load_s = asyncio.run(qb.load(base, key, count))
        print(f"{count:,} items loaded in {load_s:.1f} s ({count / load_s:,.0f}/s), RSS {server.rss_mb():,.0f} MB",
              flush=True)
        for op in OPS:                               # warm: the first (b) builds the `cat` index
            t0 = time.perf_counter()
            first = asyncio.run(drive(base, requests_for(op, key, count, 1, "first"), 1))
            print(f"  {count:>9,} {op:14} first request {(time.perf_counter() - t0) * 1000:,.0f} ms {first}", flush=True)
            asyncio.run(drive(base, requests_for(op, key, count, 20, "warm")))
        for r in range(rounds):
            for op in OPS:
                reqs = requests_for(op, key, count, ops_n, f"r{r}")
                cpu0 = server.cpu_s()
                res = asyncio.run(drive(base, reqs))
                cpu_us = (server.cpu_s() - cpu0) / len(reqs) * 1e6
                rows[op].append(dict(res, cpu_us=cpu_us))
                print(f"  {count:>9,} {op:14} server CPU {cpu_us:7.0f} µs/op  charge {res['charge']:.2f} RU  "
                      f"errors {res['errors']}", flush=True)
    return {op: {"cpu_us": statistics.median(x["cpu_us"] for x in v), "charge": v[-1]["charge"],
                 "errors": sum(x["errors"] for x in v), "rounds": [round(x["cpu_us"]) for x in v]}
            for op, v in rows.items()} | {"load_s": load_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,100000,1000000")
    ap.add_argument("--ops", type=int, default=3000, help="requests per operation per round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(json.dumps(machine()), f"load average {os.getloadavg()}", time.strftime("%Y-%m-%d %H:%M:%S"), flush=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    results = {n: measure_size(n, args.ops, args.rounds) for n in sizes}
    print(f"load average at the end {os.getloadavg()}")
    first = results[sizes[0]]
    for op in OPS:
        cells = [f"{results[n][op]['cpu_us']:6.0f} µs ({results[n][op]['cpu_us'] / first[op]['cpu_us']:.2f}x, "
                 f"{results[n][op]['charge']:.2f} RU)" for n in sizes]
        print(f"{op:14} " + "  ".join(cells))
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    (out / f"scale-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(
        {"machine": machine(), "sizes": {str(k): v for k, v in results.items()}}, indent=2))


if __name__ == "__main__":
    main()
