"""Soak benchmark: does the server's memory stay flat under a steady load on a fixed key set?

    python bench/soak.py                                  # ~9 min: 375 s warm-up, then 180 s measured
    python bench/soak.py --duration-s 600 --write-rate 400 --query-rate 10
    python bench/soak.py --duration-s 0 --delete-cycles 5 # only create/fill/delete cycles

The server is a separate `python -m emulator` process (server_proc.py; default 3 regions, 4
physical partitions), measured from outside: its resident set size (VmRSS from /proc) every
`--sample-s` seconds. After loading `--keys` items (`--item-bytes` each, 50 logical partitions)
the load runs open-loop at fixed rates:

* writes: upserts of random keys of the fixed set at `--write-rate` per second (so the data set
  does not grow: each write replaces a version);
* paged queries at `--query-rate` per second, alternating a partition-key query
  (`SELECT * FROM c WHERE c.pk = @pk`, pages of 10) and a cross-partition range query (pages
  of 25); three in four are read to their last page by following `x-ms-continuation`, one in
  four stops after its first page, as clients that only want the top of a result do.

Verdict: the RSS at the end of the warm-up is the baseline; the run is flat if no later
sample exceeds it by more than 10 %. The warm-up must outlast what the server keeps by design
for a while: each replica set retains its last LOG_RETAINED_COMMITS_MAX (10,000) commits (250 s
to fill at 200 writes/s over 4 partitions); a paged query pins nothing (its continuation
resumes by position). By default the warm-up is 1.25 times the log's fill time (313 s), and the
measured part lasts `--measure-s` after it. The RSS series, the verdict, the request counts, errors
and the machine are printed, and written to bench/results/soak-*.json. Never an assert.

`--delete-cycles N` also runs N cycles of: create a container, fill it with `--cycle-mb` of
items, delete it; the RSS after each cycle is printed (a deleted container must be freed, so
after the first cycle the RSS should not keep climbing).
"""
import argparse
import asyncio
import json
import os
import random
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from regionlab.emulator.core.replica_set import LOG_RETAINED_COMMITS_MAX  # noqa: E402
from gateway_bench import machine  # noqa: E402
from rest_load import request, setup, signed_headers  # noqa: E402
from server_proc import ServerProcess  # noqa: E402

DB, COLL = "soak", "items"
FEED = f"/dbs/{DB}/colls/{COLL}/docs"
LOGICAL_PARTITIONS = 50
PARTITIONS = 4
THROUGHPUT_RU_PER_S = 1_000_000     # never throttled: the soak is about memory, not budgets
BATCH_OPS = 100
LOAD_CONCURRENCY = 8
IN_FLIGHT_MAX = 64                  # open-loop pacing, but never more than this many requests at once
FLAT_GROWTH_MAX = 0.10              # the verdict: RSS within 10 % of the end of the warm-up
WARMUP_FACTOR = 1.25                # default warm-up: this many times the longest retention window
PK_PAGE_ITEMS, RANGE_PAGE_ITEMS, RANGE_SPAN = 10, 25, 200


def document(i: int, item_bytes: int, version: int = 0) -> dict:
    return {"id": f"k{i}", "pk": f"p{i % LOGICAL_PARTITIONS}", "n": i, "v": version,
            "pad": "x" * max(0, item_bytes - 80)}


def batch_headers(pk: str) -> dict:
    return {"x-ms-cosmos-is-batch-request": "True", "x-ms-cosmos-batch-atomic": "True",
            "x-ms-documentdb-partitionkey": json.dumps([pk])}


async def load(session, base: str, key: str, feed: str, keys: int, item_bytes: int, op: str = "Upsert") -> None:
    """Write keys items with transactional batches (one logical partition each)."""
    batches = []
    for p in range(LOGICAL_PARTITIONS):
        ids = list(range(p, keys, LOGICAL_PARTITIONS))
        for k in range(0, len(ids), BATCH_OPS):
            batches.append((f"p{p}", [{"operationType": op, "resourceBody": document(i, item_bytes)}
                                      for i in ids[k:k + BATCH_OPS]]))
    queue = iter(batches)

    async def worker():
        for pk, ops in queue:
            status, body = await request(session, key, "POST", base, feed, ops, batch_headers(pk))
            if status != 200:
                raise RuntimeError(f"batch failed: {status} {body[:300]}")
    await asyncio.gather(*(worker() for _ in range(LOAD_CONCURRENCY)))


class Load:
    """The steady load's counters and its two request kinds."""

    def __init__(self, session, base: str, key: str, keys: int, item_bytes: int, seed: int):
        self.session, self.base, self.key = session, base, key
        self.keys, self.item_bytes = keys, item_bytes
        self.rng = random.Random(seed)
        self.writes = self.queries = self.pages = self.errors = 0
        self.in_flight = 0
        self.query_seq = 0

    async def write(self) -> None:
        i = self.rng.randrange(self.keys)
        doc = document(i, self.item_bytes, self.writes)
        extra = {"x-ms-documentdb-partitionkey": json.dumps([doc["pk"]]), "x-ms-documentdb-is-upsert": "True"}
        status, _ = await request(self.session, self.key, "POST", self.base, FEED, doc, extra)
        self._count(status in (200, 201), "writes")

    async def query(self) -> None:
        self.query_seq += 1
        seq = self.query_seq
        if seq % 2:
            pk = f"p{self.rng.randrange(LOGICAL_PARTITIONS)}"
            body = {"query": "SELECT * FROM c WHERE c.pk = @pk", "parameters": [{"name": "@pk", "value": pk}]}
            page_items = PK_PAGE_ITEMS
        else:
            lo = self.rng.randrange(max(1, self.keys - RANGE_SPAN))
            body = {"query": "SELECT * FROM c WHERE c.n >= @lo AND c.n < @hi",
                    "parameters": [{"name": "@lo", "value": lo}, {"name": "@hi", "value": lo + RANGE_SPAN}]}
            pk, page_items = None, RANGE_PAGE_ITEMS
        all_pages = seq % 4 != 0
        continuation, ok = None, True
        while True:
            h = signed_headers(self.key, "POST", FEED)
            h.update({"content-type": "application/query+json", "x-ms-documentdb-isquery": "True",
                      "x-ms-documentdb-query-enablecrosspartition": "True", "x-ms-max-item-count": str(page_items)})
            if pk is not None:
                h["x-ms-documentdb-partitionkey"] = json.dumps([pk])
            if continuation:
                h["x-ms-continuation"] = continuation
            async with self.session.post(self.base.rstrip("/") + FEED, data=json.dumps(body).encode(),
                                         headers=h) as r:
                await r.read()
                ok = r.status == 200
                continuation = r.headers.get("x-ms-continuation")
            self.pages += 1
            if not ok or not continuation or not all_pages:
                break
        self._count(ok, "queries")

    def _count(self, ok: bool, what: str) -> None:
        if ok:
            setattr(self, what, getattr(self, what) + 1)
        else:
            self.errors += 1

    async def paced(self, op, rate_per_s: float, until: float) -> None:
        """Start op every 1/rate s until `until` (loop time), skipping a beat when IN_FLIGHT_MAX run."""
        if rate_per_s <= 0:
            return
        loop = asyncio.get_running_loop()
        interval, next_at, tasks = 1.0 / rate_per_s, loop.time(), set()
        while next_at < until:
            if self.in_flight < IN_FLIGHT_MAX:
                self.in_flight += 1
                t = asyncio.ensure_future(op())
                tasks.add(t)
                t.add_done_callback(lambda t: (tasks.discard(t), self._finished(t)))
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - loop.time()))
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _finished(self, task) -> None:
        self.in_flight -= 1
        if task.cancelled() or task.exception() is not None:
            self.errors += 1


async def soak(server, args) -> dict:
    base, key = server.ready["account_endpoint"], server.ready["key"]
    await setup(base, key, DB, COLL, THROUGHPUT_RU_PER_S)
    connector = aiohttp.TCPConnector(limit=IN_FLIGHT_MAX)
    async with aiohttp.ClientSession(connector=connector) as session:
        t0 = time.perf_counter()
        await load(session, base, key, FEED, args.keys, args.item_bytes)
        load_s = time.perf_counter() - t0
        print(f"loaded {args.keys} items of ~{args.item_bytes} B in {load_s:.1f} s; rss {server.rss_mb():.1f} MB",
              flush=True)
        work = Load(session, base, key, args.keys, args.item_bytes, args.seed)
        loop = asyncio.get_running_loop()
        start = loop.time()
        until = start + args.duration_s
        samples = []

        async def sample():
            while loop.time() < until:
                await asyncio.sleep(args.sample_s)
                t = loop.time() - start
                samples.append({"t_s": round(t, 1), "rss_mb": round(server.rss_mb(), 1),
                                "writes": work.writes, "queries": work.queries, "errors": work.errors})
                s = samples[-1]
                print(f"t={s['t_s']:6.1f}s rss={s['rss_mb']:7.1f} MB writes={s['writes']} "
                      f"queries={s['queries']} pages={work.pages} errors={s['errors']}"
                      + ("   (warm-up)" if t <= args.warmup_s else ""), flush=True)
        await asyncio.gather(work.paced(work.write, args.write_rate, until),
                             work.paced(work.query, args.query_rate, until), sample())
    return {"load_s": round(load_s, 1), "samples": samples, "writes": work.writes, "queries": work.queries,
            "pages": work.pages, "errors": work.errors, "verdict": verdict(samples, args.warmup_s)}


def verdict(samples: list, warmup_s: float) -> dict:
    after = [s for s in samples if s["t_s"] > warmup_s]
    warm = [s for s in samples if s["t_s"] <= warmup_s]
    if not after or not warm:
        return {"flat": None, "why": "the run is too short for a warm-up and a measured part"}
    baseline = warm[-1]["rss_mb"]
    peak = max(s["rss_mb"] for s in after)
    growth = (peak - baseline) / baseline
    return {"baseline_mb": baseline, "peak_mb": peak, "last_mb": after[-1]["rss_mb"],
            "growth": round(growth, 4), "flat": growth <= FLAT_GROWTH_MAX}


async def delete_cycles(server, args) -> list:
    """create / fill / delete cycles; RSS after each."""
    base, key = server.ready["account_endpoint"], server.ready["key"]
    item_bytes = 1000
    keys = args.cycle_mb * 1024 * 1024 // item_bytes
    out = []
    async with aiohttp.ClientSession() as session:
        await request(session, key, "POST", base, "/dbs", {"id": DB})       # 201, or 409 after a soak
        for n in range(args.delete_cycles):
            coll = f"cycle{n}"
            status, body = await request(session, key, "POST", base, f"/dbs/{DB}/colls",
                                         {"id": coll, "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}},
                                         {"x-ms-offer-throughput": str(THROUGHPUT_RU_PER_S)})
            if status != 201:
                raise RuntimeError(f"container create failed: {status} {body[:200]}")
            await load(session, base, key, f"/dbs/{DB}/colls/{coll}/docs", keys, item_bytes, "Create")
            full = server.rss_mb()
            status, _ = await request(session, key, "DELETE", base, f"/dbs/{DB}/colls/{coll}")
            if status != 204:
                raise RuntimeError(f"container delete failed: {status}")
            out.append({"cycle": n + 1, "full_mb": round(full, 1), "after_delete_mb": round(server.rss_mb(), 1)})
            print(f"cycle {n + 1}: {keys} items ({args.cycle_mb} MB) filled: rss {full:.1f} MB; "
                  f"deleted: rss {out[-1]['after_delete_mb']:.1f} MB", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration-s", type=float, default=None,
                    help="steady load, warm-up included (default: warm-up + --measure-s; 0: no soak)")
    ap.add_argument("--warmup-s", type=float, default=None,
                    help="default: 1.25 x the time the retained log takes to fill")
    ap.add_argument("--measure-s", type=float, default=180.0)
    ap.add_argument("--write-rate", type=float, default=200.0, help="upserts per second")
    ap.add_argument("--query-rate", type=float, default=5.0, help="paged queries per second")
    ap.add_argument("--keys", type=int, default=5000)
    ap.add_argument("--item-bytes", type=int, default=500)
    ap.add_argument("--sample-s", type=float, default=5.0)
    ap.add_argument("--delete-cycles", type=int, default=0)
    ap.add_argument("--cycle-mb", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.warmup_s is None:
        fill_s = LOG_RETAINED_COMMITS_MAX * PARTITIONS / args.write_rate if args.write_rate > 0 else 0.0
        args.warmup_s = round(max(30.0, WARMUP_FACTOR * fill_s))
    if args.duration_s is None:
        args.duration_s = args.warmup_s + args.measure_s
    info = machine()
    info["load_avg"] = os.getloadavg()[0]
    print(f"machine: {info['cpu']}, {info['cores']} cores, python {info['python']}, {info['platform']}, "
          f"load {info['load_avg']:.2f}; {time.strftime('%Y-%m-%d %H:%M')}", flush=True)
    result = {"machine": info, "args": vars(args), "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    with ServerProcess("--partitions", str(PARTITIONS)) as server:
        print(f"server ready in {server.spawn_to_ready_ms:.0f} ms; rss {server.rss_mb():.1f} MB", flush=True)
        if args.duration_s > 0:
            result["soak"] = asyncio.run(soak(server, args))
            v = result["soak"]["verdict"]
            if v["flat"] is None:
                print(f"verdict: none ({v['why']})")
            else:
                print(f"verdict: RSS {'FLAT' if v['flat'] else 'GROWS'}: baseline {v['baseline_mb']} MB at the end "
                      f"of the warm-up, peak {v['peak_mb']} MB (+{v['growth'] * 100:.1f} %, limit "
                      f"{FLAT_GROWTH_MAX * 100:.0f} %), last {v['last_mb']} MB; "
                      f"{result['soak']['writes']} writes, {result['soak']['queries']} queries, "
                      f"{result['soak']['errors']} errors")
        if args.delete_cycles:
            result["delete_cycles"] = asyncio.run(delete_cycles(server, args))
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    path = out / f"soak-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
