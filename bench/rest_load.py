"""A load generator that speaks the Cosmos REST API directly (no SDK): signed point creates
and point reads at a fixed concurrency, with latency percentiles.

Python measures itself as much as the server above ~10,000 requests/s on this machine, so the
throughput ceiling of the server is measured with wrk (see gateway_bench.py); this generator
gives honest latencies at low concurrency and drives creates with unique bodies.
"""
import asyncio
import json
import time
from email.utils import formatdate

import aiohttp

from regionlab.client.protocol.auth import authorization_header, resource_type_and_link


def signed_headers(key: str, verb: str, path: str, date: str | None = None) -> dict:
    date = date or formatdate(usegmt=True)
    rtype, link = resource_type_and_link(path)
    return {"authorization": authorization_header(key, verb, rtype, link, date), "x-ms-date": date,
            "x-ms-version": "2020-07-15", "content-type": "application/json"}


async def request(session, key, verb, base, path, body=None, extra=None):
    h = signed_headers(key, verb, path)
    if extra:
        h.update(extra)
    data = json.dumps(body).encode() if body is not None else None
    async with session.request(verb, base.rstrip("/") + path, data=data, headers=h) as r:
        return r.status, await r.read()


async def setup(base: str, key: str, db: str, coll: str, throughput: int = 400) -> None:
    async with aiohttp.ClientSession() as s:
        await request(s, key, "POST", base, "/dbs", {"id": db})
        st, body = await request(s, key, "POST", base, f"/dbs/{db}/colls",
                                 {"id": coll, "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}},
                                 {"x-ms-offer-throughput": str(throughput)})
        if st not in (201, 409):
            raise RuntimeError(f"container create failed: {st} {body[:200]}")


async def run(base: str, key: str, db: str, coll: str, op: str, concurrency: int, total: int,
              item_bytes: int = 200, id_prefix: str = "") -> dict:
    """op is 'create' or 'read'; reads hit ids 0..total-1 written by an earlier create run."""
    latencies = []
    errors = 0
    counter = iter(range(total))
    filler = "x" * max(0, item_bytes - 60)
    date = formatdate(usegmt=True)
    feed = f"/dbs/{db}/colls/{coll}/docs"
    create_h = signed_headers(key, "POST", feed, date)

    async def worker(session):
        nonlocal errors
        for i in counter:
            pk = f"p{i % 1000}"
            doc_id = f"{id_prefix}{i}"
            if op == "create":
                h = dict(create_h)
                h["x-ms-documentdb-partitionkey"] = json.dumps([pk])
                body = json.dumps({"id": doc_id, "pk": pk, "f": filler}).encode()
                t = time.perf_counter()
                async with session.post(base.rstrip("/") + feed, data=body, headers=h) as r:
                    await r.read()
                    ok = r.status == 201
            else:
                path = f"{feed}/{doc_id}"
                h = signed_headers(key, "GET", path, date)
                h["x-ms-documentdb-partitionkey"] = json.dumps([pk])
                t = time.perf_counter()
                async with session.get(base.rstrip("/") + path, headers=h) as r:
                    await r.read()
                    ok = r.status == 200
            latencies.append(time.perf_counter() - t)
            if not ok:
                errors += 1

    conn = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    async with aiohttp.ClientSession(connector=conn) as session:
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        elapsed = time.perf_counter() - t0
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000
    return {"op": op, "concurrency": concurrency, "ops": len(latencies), "errors": errors,
            "elapsed_s": elapsed, "ops_per_s": len(latencies) / elapsed,
            "p50_ms": pick(0.50), "p99_ms": pick(0.99)}
