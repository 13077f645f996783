"""Query benchmark: 100,000 documents in one container, queried through the real HTTP gateway.

    python bench/query_bench.py                # full run (~3-5 min), writes bench/results/queries-*.json
    python bench/query_bench.py --quick        # 20,000 documents, shorter runs

The server is a separate `python -m emulator` process (server_proc.py) with 4 physical
partitions and the default 3 regions, so every document is replicated to 12 replicas.
Documents are loaded over HTTP with signed transactional batches (100 creates per request,
one logical partition each), the way a client would; the load time is printed. Documents:
100 logical partitions `p0..p99` of 1,000 items each; `cat` shared by 10 consecutive items
(so its 10 matches spread over partitions), `n` unique 0..N-1, a ~150-byte `name`.

Queries (requests signed with client/protocol/auth.py, `x-ms-max-item-count` as noted):
  a  pk-equality   SELECT * FROM c WHERE c.pk = @pk, with the partition key header, page of 10
                   (returns 10 of the 1,000 items in that logical partition)
  b  eq-indexed    SELECT * FROM c WHERE c.cat = @cat            (10 matches, cross-partition)
  c  range         SELECT * FROM c WHERE c.n >= @lo AND c.n < @hi (10 matches, cross-partition)
  d  order-top     SELECT TOP 10 * FROM c ORDER BY c.n DESC       (cross-partition)
  e  count         SELECT VALUE COUNT(1) FROM c                   (cross-partition, a full scan)
For scale, a point read (GET of one item by id and partition key) runs through wrk on the same
server. Indexes are built by the first query that needs a path (a warm-up pass runs each query
once, and its time is printed).
Each query is measured with the Python generator at c=1 and c=16 (latency percentiles) and
with wrk at c=16 (throughput; a C load generator the server cannot be outrun by). Server CPU
per query is the server process's user+system time from /proc over the run, divided by the
queries answered. Numbers on a shared 2-core machine are noisy: the load average is recorded.
"""
import argparse
import asyncio
import json
import os
import shutil
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import calibration  # noqa: E402
from gateway_bench import lua_signed_gets, machine, measured, wrk  # noqa: E402
from rest_load import request, setup, signed_headers  # noqa: E402
from server_proc import ServerProcess  # noqa: E402

DB, COLL = "qbench", "items"
FEED = f"/dbs/{DB}/colls/{COLL}/docs"
LOGICAL_PARTITIONS = 100
CAT_GROUP = 10               # documents sharing one `cat` value
BATCH_OPS = 100              # creates per transactional batch (the service's maximum)
LOAD_CONCURRENCY = 8
THROUGHPUT_RU_PER_S = 1_000_000   # high enough that nothing here is throttled
WRK_VARIANTS = 200           # distinct parameter values cycled by the wrk script


def document(i: int) -> dict:
    return {"id": f"d{i}", "pk": f"p{i % LOGICAL_PARTITIONS}", "cat": f"c{i // CAT_GROUP}", "n": i,
            "name": f"item {i} " + "x" * 140}


async def load(base: str, key: str, count: int) -> float:
    """Create count documents with batches; returns seconds taken."""
    batches = []
    for p in range(LOGICAL_PARTITIONS):
        ids = list(range(p, count, LOGICAL_PARTITIONS))
        for k in range(0, len(ids), BATCH_OPS):
            ops = [{"operationType": "Create", "resourceBody": document(i)} for i in ids[k:k + BATCH_OPS]]
            batches.append((f"p{p}", ops))
    extra = {"x-ms-cosmos-is-batch-request": "True", "x-ms-cosmos-batch-atomic": "True"}
    queue = iter(batches)

    async def worker(session):
        for pk, ops in queue:
            status, body = await request(session, key, "POST", base, FEED, ops,
                                         dict(extra, **{"x-ms-documentdb-partitionkey": json.dumps([pk])}))
            if status != 200:
                raise RuntimeError(f"batch failed: {status} {body[:300]}")

    t0 = time.perf_counter()
    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(worker(session) for _ in range(LOAD_CONCURRENCY)))
    return time.perf_counter() - t0


def queries(count: int) -> dict:
    """name -> (text, list of (parameters, partition key or None), max item count)."""
    cats = count // CAT_GROUP
    step = max(1, cats // WRK_VARIANTS)
    return {
        "a pk-equality": ("SELECT * FROM c WHERE c.pk = @pk",
                          [([{"name": "@pk", "value": f"p{p}"}], f"p{p}") for p in range(LOGICAL_PARTITIONS)], 10),
        "b eq-indexed": ("SELECT * FROM c WHERE c.cat = @cat",
                         [([{"name": "@cat", "value": f"c{c}"}], None) for c in range(0, cats, step)], 100),
        "c range": ("SELECT * FROM c WHERE c.n >= @lo AND c.n < @hi",
                    [([{"name": "@lo", "value": lo}, {"name": "@hi", "value": lo + CAT_GROUP}], None)
                     for lo in range(0, count, count // WRK_VARIANTS)], 100),
        "d order-top": ("SELECT TOP 10 * FROM c ORDER BY c.n DESC", [([], None)], 100),
        "e count": ("SELECT VALUE COUNT(1) FROM c", [([], None)], 100),
    }


def query_headers(key: str, pk: str | None, max_items: int, date: str | None = None) -> dict:
    h = signed_headers(key, "POST", FEED, date)
    h.update({"content-type": "application/query+json", "x-ms-documentdb-isquery": "True",
              "x-ms-documentdb-query-enablecrosspartition": "True", "x-ms-max-item-count": str(max_items)})
    if pk is not None:
        h["x-ms-documentdb-partitionkey"] = json.dumps([pk])
    return h


async def run_python(base: str, key: str, text: str, variants: list, max_items: int,
                     concurrency: int, total: int, expect: int | None) -> dict:
    latencies, errors = [], 0
    counter = iter(range(total))
    bodies = [(json.dumps({"query": text, "parameters": params}).encode(), pk) for params, pk in variants]
    url = base.rstrip("/") + FEED

    async def worker(session):
        nonlocal errors
        for i in counter:
            body, pk = bodies[i % len(bodies)]
            h = query_headers(key, pk, max_items)
            t = time.perf_counter()
            async with session.post(url, data=body, headers=h) as r:
                raw = await r.read()
                ok = r.status == 200 and (expect is None or json.loads(raw)["_count"] == expect)
            latencies.append(time.perf_counter() - t)
            errors += not ok

    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=conn) as session:
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        elapsed = time.perf_counter() - t0
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000  # noqa: E731
    return {"concurrency": concurrency, "ops": len(latencies), "errors": errors, "ops_per_s": len(latencies) / elapsed,
            "p50_ms": pick(0.50), "p99_ms": pick(0.99), "generator": "python"}


def lua_queries(key: str, text: str, variants: list, max_items: int) -> str:
    h = query_headers(key, None, max_items)
    rows = []
    for params, pk in variants:
        body = json.dumps({"query": text, "parameters": params})
        pk_header = json.dumps(json.dumps([pk])) if pk is not None else "nil"
        rows.append(f"{{{json.dumps(body)}, {pk_header}}}")
    lines = ['wrk.method = "POST"', f'wrk.path = "{FEED}"']
    lines += [f'wrk.headers["{k}"] = {json.dumps(v)}' for k, v in h.items()]
    lines += ["local reqs = {" + ",\n".join(rows) + "}", "local n = 0",
              "request = function()", "  n = n % #reqs + 1", "  local r = reqs[n]",
              '  if r[2] then wrk.headers["x-ms-documentdb-partitionkey"] = r[2] end',
              "  return wrk.format(nil, nil, nil, r[1])", "end"]
    return "\n".join(lines) + "\n"


def lua_point_reads(key: str, count: int) -> str:
    return lua_signed_gets(key, [(f"{FEED}/d{i}", document(i)["pk"])
                                 for i in range(0, count, max(1, count // WRK_VARIANTS))])


def expected_count(name: str, count: int):
    return {"a pk-equality": 10, "b eq-indexed": CAT_GROUP, "c range": CAT_GROUP, "d order-top": 10, "e count": 1}[name]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--docs", type=int, default=None)
    ap.add_argument("--wrk-seconds", type=int, default=10)
    ap.add_argument("--only", default="", help="comma-separated query letters, e.g. a,b")
    args = ap.parse_args()
    count = args.docs or (20_000 if args.quick else 100_000)
    n_py = {1: 300, 16: 2000} if not args.quick else {1: 100, 16: 500}
    results = {"machine": machine(), "when": time.strftime("%Y-%m-%d %H:%M:%S"), "docs": count,
               "loadavg_start": os.getloadavg(), "runs": []}
    print(f"{json.dumps(results['machine'])}\nload average {os.getloadavg()}", flush=True)
    with ServerProcess("--partitions", "4") as server, calibration.bare_server() as bare_server:
        base, key = server.ready["account_endpoint"], server.ready["key"]
        asyncio.run(setup(base, key, DB, COLL, THROUGHPUT_RU_PER_S))
        load_s = asyncio.run(load(base, key, count))
        results.update(load_s=round(load_s, 1), rss_loaded_mb=round(server.rss_mb(), 1))
        print(f"loaded {count} documents in {load_s:.1f} s ({count / load_s:.0f} docs/s); "
              f"server RSS {server.rss_mb():.0f} MB", flush=True)
        if shutil.which("wrk"):
            r = measured(server, lambda: wrk(base, lua_point_reads(key, count), 16, args.wrk_seconds))
            r["generator"] = "wrk"
            _record(results, "point read", r)
            _beside_bare(results, r, calibration.bare_run(bare_server, wrk, measured, args.wrk_seconds, 16))
        for name, (text, variants, max_items) in queries(count).items():
            if args.only and name[0] not in args.only.split(","):
                continue
            expect = expected_count(name, count)
            t0 = time.perf_counter()
            warm = asyncio.run(run_python(base, key, text, variants[:1], max_items, 1, 1, expect))
            print(f"{name}: first query (builds indexes) {(time.perf_counter() - t0) * 1000:.0f} ms, "
                  f"errors {warm['errors']}", flush=True)
            for c, total in n_py.items():
                total = total if not name.startswith("e") else max(20, total // 50)
                r = measured(server, lambda: asyncio.run(run_python(base, key, text, variants, max_items, c, total, expect)))
                _record(results, name, r)
            if shutil.which("wrk") and not name.startswith("e"):
                r = measured(server, lambda: wrk(base, lua_queries(key, text, variants, max_items), 16, args.wrk_seconds))
                r["generator"] = "wrk"
                _record(results, name, r)
                _beside_bare(results, r, calibration.bare_run(bare_server, wrk, measured, args.wrk_seconds, 16))
        results["rss_after_mb"] = round(server.rss_mb(), 1)
    results["loadavg_end"] = os.getloadavg()
    print(f"load average at the end {os.getloadavg()}")
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    (out / f"queries-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(results, indent=2))


def _beside_bare(results: dict, r: dict, bare: dict) -> None:
    """r next to the bare server run right after it: the ratio, and r scaled to the issue's machine."""
    k = calibration.scale(bare)
    r["bare"] = bare
    r["vs_bare_cpu"] = r["server_cpu_us_per_op"] / bare["server_cpu_us_per_op"]
    print(f"  {'':13} bare aiohttp right after: {bare['ops_per_s']:,.0f}/s at {bare['server_cpu_us_per_op']:.0f} µs "
          f"({k:.2f}x slower than the issue's reference): {r['vs_bare_cpu']:.2f}x its CPU per request, "
          f"about {r['server_cpu_us_per_op'] / k:.0f} µs and {r['ops_per_s'] * k:,.0f}/s there", flush=True)


def _record(results: dict, name: str, r: dict) -> None:
    r["query"] = name
    results["runs"].append(r)
    print(f"  {name[:13]:13} {r['generator']:6} c={r['concurrency']:<3} {r['ops_per_s']:8.0f} q/s  p50 {r['p50_ms']:7.2f} ms  "
          f"p99 {r['p99_ms']:7.2f} ms  server CPU {r['server_cpu_us_per_op']:7.0f} µs/query  "
          f"errors {r['errors']}", flush=True)


if __name__ == "__main__":
    main()
