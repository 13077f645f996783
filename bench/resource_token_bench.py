"""What a resource token costs the server per point read, against a master-key signature.

    python bench/resource_token_bench.py            # 4 phases of 4,000 reads at concurrency 16
    python bench/resource_token_bench.py --quick    # 4 phases of 1,000

The server runs as its own process (`python -m regionlab.emulator`); its CPU time is read from
/proc around each phase, so "server CPU µs/read" excludes the load generator. Phases alternate
(master, token, master, token) after one unmeasured phase of each, and each kind's figure is its
two measured phases together; the ratio token/master is the number to read (both measured in the
same run, on the same items). Master-key reads repeat the same signed requests (one date for
the run), so they hit the verifier's cache of accepted signatures and skip the HMAC; token reads
hit the verified-token cache, then check the expiry, the permission and the grant on every
request.
"""
import argparse
import asyncio
import json
import sys
import time
import urllib.parse
from email.utils import formatdate
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gateway_bench import machine  # noqa: E402
from rest_load import request, run, setup, signed_headers  # noqa: E402
from server_proc import ServerProcess  # noqa: E402

DB, COLL = "bench", "items"
CONCURRENCY = 16


async def _token(base: str, key: str) -> str:
    async with aiohttp.ClientSession() as s:
        await request(s, key, "POST", base, f"/dbs/{DB}/users", {"id": "reader"})
        status, body = await request(s, key, "POST", base, f"/dbs/{DB}/users/reader/permissions",
                                     {"id": "p", "permissionMode": "Read", "resource": f"dbs/{DB}/colls/{COLL}"})
        if status != 201:
            raise RuntimeError(f"permission create failed: {status} {body[:200]}")
        return json.loads(body)["_token"]


def _headers(kind: str, key: str, token: str, total: int) -> list:
    """Every read's headers, made before the phase so that both kinds load the server at the
    pace of the same generator (signing in the loop slowed the master-key phases, and the
    server's time-proportional work, timers and sweeps, then counted against fewer reads)."""
    date = formatdate(usegmt=True)
    quoted = urllib.parse.quote(token, safe="-_.!~*'()")
    out = []
    for i in range(total):
        path = f"/dbs/{DB}/colls/{COLL}/docs/{i}"
        h = (signed_headers(key, "GET", path, date) if kind == "master" else
             {"authorization": quoted, "x-ms-date": date, "x-ms-version": "2020-07-15"})
        h["x-ms-documentdb-partitionkey"] = json.dumps([f"p{i % 1000}"])
        out.append((path, h))
    return out


async def _reads(base: str, requests: list) -> dict:
    pending = iter(requests)
    errors = 0

    async def worker(session):
        nonlocal errors
        for path, h in pending:
            async with session.get(base.rstrip("/") + path, headers=h) as r:
                await r.read()
                errors += r.status != 200

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as session:
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(CONCURRENCY)))
        elapsed = time.perf_counter() - t0
    return {"ops": len(requests), "errors": errors, "elapsed_s": elapsed}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    reads = 1000 if parser.parse_args().quick else 4000
    with ServerProcess() as server:
        base, key = server.ready["account_endpoint"], server.ready["key"]
        asyncio.run(setup(base, key, DB, COLL, throughput=100_000))
        asyncio.run(run(base, key, DB, COLL, "create", CONCURRENCY, reads))
        token = asyncio.run(_token(base, key))
        phases = {"master": [], "token": []}
        warm_up = ("master", "token")           # unmeasured: the caches and the server's code paths
        for n, kind in enumerate(warm_up + ("master", "token", "master", "token")):
            requests = _headers(kind, key, token, reads)
            cpu0 = server.cpu_s()
            result = asyncio.run(_reads(base, requests))
            if result["errors"]:
                raise RuntimeError(f"{kind} reads failed: {result['errors']} errors")
            if n >= len(warm_up):
                phases[kind].append((server.cpu_s() - cpu0, result["ops"], result["elapsed_s"]))
    print(json.dumps(machine()))
    us = {}
    for kind, runs in phases.items():
        cpu = sum(c for c, _, _ in runs)
        ops = sum(n for _, n, _ in runs)
        us[kind] = cpu / ops * 1e6
        print(f"{kind:>6}: {ops} reads, server CPU {us[kind]:.1f} µs/read, "
              f"{ops / sum(e for _, _, e in runs):.0f} reads/s (generator-bound)")
    print(f"token / master server CPU per read: {us['token'] / us['master']:.2f}")


if __name__ == "__main__":
    main()
