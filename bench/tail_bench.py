"""Tail latency with many items stored: wrk (pre-signed) point reads, creates, upserts and
partition-key queries at c=16 and c=64, and what the server's garbage collector did meanwhile.

    python bench/tail_bench.py                              # 1,000,000 items stored, 3 rounds
    python bench/tail_bench.py --items 100000 --seconds 5 --rounds 3
    python bench/tail_bench.py --gc-policy off              # the same without runtime/collector.py's policy

The server is `python -m emulator --no-ru-limits --partitions 10` (default 3 regions, session),
filled first by bench/load_bench.py's loader (transactional batches of ~950-byte items), with the
collector policy on (as the CLI runs it) or, with --gc-policy off, with CPython's defaults and
nothing frozen (the pauses are still measured). Then, round after round, each operation at each
concurrency runs for --seconds under wrk (1 thread, requests signed beforehand in its Lua
script):
* read: GET of 1,000 loaded items, cycled;
* create: POST of new ~950-byte items over 1,000 partition keys;
* upsert: POST with x-ms-documentdb-is-upsert of those 1,000 loaded items (each a replace);
* query: `SELECT * FROM c WHERE c.pk = @pk` on one of 1,000 partition keys, first page of 10.

Per run: ops/s, p50 and p99 (wrk --latency), p99/p50, and from `GET /debug/gc` before and
after: the collections in the run by generation, their summed CPU time, and every pause of
10 ms or more (wall and CPU) with its generation. The table shows the median over rounds. The
GC columns do not depend on other load on the machine; wrk's p99 does (the cores are shared).
"""
import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from email.utils import formatdate
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gateway_bench import wrk  # noqa: E402
from load_bench import COLL, DB, ITEM_JSON_BYTES, KEYS, item, load  # noqa: E402
from rest_load import setup, signed_headers  # noqa: E402
from server_proc import ServerProcess  # noqa: E402

TARGETS = 1000
FEED = f"/dbs/{DB}/colls/{COLL}/docs"
NO_POLICY = ("import sys\nfrom emulator.runtime import collector\n_install = collector.install\n"
             "collector.install = lambda account, policy=True: _install(account, policy=False)\n"
             "from emulator.cli import main\nsys.exit(main(sys.argv[1:]))\n")


def _lua_table(rows: list) -> str:
    return "local reqs = {" + ",\n".join("{" + ", ".join(json.dumps(x) for x in r) + "}" for r in rows) + "}\n"


def lua_reads(key: str, n: int) -> str:
    date = formatdate(usegmt=True)
    rows = []
    for i in range(0, n, max(1, n // TARGETS)):
        path = f"{FEED}/item-{i:07d}"
        rows.append((path, signed_headers(key, "GET", path, date)["authorization"], json.dumps([f"p{i % KEYS}"])))
    return (_lua_table(rows) + f'local n = 0\nwrk.headers["x-ms-date"] = "{date}"\nwrk.headers["x-ms-version"] = "2020-07-15"\n'
            "request = function()\n  n = n % #reqs + 1\n  local r = reqs[n]\n"
            '  wrk.headers["authorization"] = r[2]\n  wrk.headers["x-ms-documentdb-partitionkey"] = r[3]\n'
            '  return wrk.format("GET", r[1])\nend\n')


def _lua_posts(key: str, rows: list, extra: dict) -> str:
    """rows: (partition key header, body); one signature serves every POST to the feed."""
    h = signed_headers(key, "POST", FEED)
    h.update(extra)
    head = "".join(f'wrk.headers["{k}"] = {json.dumps(v)}\n' for k, v in h.items())
    return (_lua_table(rows) + f'wrk.method = "POST"\nwrk.path = "{FEED}"\n{head}local n = 0\n'
            "request = function()\n  n = n % #reqs + 1\n  local r = reqs[n]\n"
            '  wrk.headers["x-ms-documentdb-partitionkey"] = r[1]\n  return wrk.format(nil, nil, nil, r[2])\nend\n')


def lua_creates(key: str, round_no: int, count: int) -> str:
    rows = []
    for j in range(count):
        doc = item(j)
        doc["id"] = f"new-{round_no}-{j}"
        rows.append((json.dumps([doc["pk"]]), json.dumps(doc, separators=(",", ":"))))
    return _lua_posts(key, rows, {})


def lua_upserts(key: str, n: int) -> str:
    rows = []
    for i in range(0, n, max(1, n // TARGETS)):
        doc = item(i)
        doc["n"] = -i
        rows.append((json.dumps([doc["pk"]]), json.dumps(doc, separators=(",", ":"))))
    return _lua_posts(key, rows, {"x-ms-documentdb-is-upsert": "True"})


def lua_queries(key: str) -> str:
    rows = [(json.dumps([f"p{k}"]), json.dumps({"query": "SELECT * FROM c WHERE c.pk = @pk",
                                                 "parameters": [{"name": "@pk", "value": f"p{k}"}]}))
            for k in range(KEYS)]
    return _lua_posts(key, rows, {"content-type": "application/query+json", "x-ms-documentdb-isquery": "True",
                                  "x-ms-max-item-count": "10"})


async def gc_state(ctl: str) -> dict:
    async with aiohttp.ClientSession() as s, s.get(ctl + "/debug/gc") as r:
        return await r.json()


def gc_delta(before: dict, after: dict) -> dict:
    out = {}
    for gen in ("gen0", "gen1", "gen2"):
        out[gen] = after["pauses_ms"][gen]["count"] - before["pauses_ms"][gen]["count"]
        out[gen + "_cpu_ms"] = round(after["pauses_cpu_ms"][gen]["total_ms"] - before["pauses_cpu_ms"][gen]["total_ms"], 1)
    seen = {(p["at_s"], p["generation"]) for p in before["slow_pauses"]}
    out["slow"] = [p for p in after["slow_pauses"] if (p["at_s"], p["generation"]) not in seen]
    out["lag_max_ms_total"] = after["loop_lag_ms"]["max_ms"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, nargs="*", default=[16, 64])
    ap.add_argument("--ops", nargs="*", default=["read", "create", "upsert", "query"])
    ap.add_argument("--gc-policy", choices=("on", "off"), default="on")
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args()
    flags = ["--port", "0", "--control-port", "0", "--no-ru-limits", "--partitions", "10"]
    cmd = [sys.executable, "-m", "emulator", *flags] if args.gc_policy == "on" else [sys.executable, "-c", NO_POLICY, *flags]
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; "
          f"{args.items:,} items of ~{ITEM_JSON_BYTES} B stored, gc policy {args.gc_policy}, "
          f"wrk {args.seconds} s x {args.rounds} rounds", flush=True)
    results = {"items": args.items, "gc_policy": args.gc_policy, "runs": [], "when": time.strftime("%Y-%m-%d %H:%M:%S")}
    with ServerProcess(cmd=cmd) as server:
        base = server.ready["account_endpoint"].rstrip("/")
        ctl = server.ready["control_endpoint"].rstrip("/")
        key = server.ready["key"]
        asyncio.run(setup(base, key, DB, COLL, 400))
        idle = server.rss_mb()
        loaded = asyncio.run(load(base, args.items, 4, server, idle))
        results["load"] = loaded
        results["rss_after_load_mb"] = round(server.rss_mb(), 1)
        print(f"loaded {loaded['items']:,} in {loaded['seconds']} s ({loaded['items_per_s']:,}/s), "
              f"RSS {results['rss_after_load_mb']} MB (idle {idle:.0f})", flush=True)
        for r in range(args.rounds):
            for op in args.ops:
                for c in args.concurrency:
                    script = {"read": lambda: lua_reads(key, args.items), "upsert": lambda: lua_upserts(key, args.items),
                              "query": lambda: lua_queries(key),
                              "create": lambda: lua_creates(key, r * 1000 + c, 20_000)}[op]()
                    before = asyncio.run(gc_state(ctl))
                    cpu0 = server.cpu_s()
                    w = wrk(base, script, c, args.seconds)
                    w["server_cpu_us_per_op"] = round((server.cpu_s() - cpu0) / max(w["ops"], 1) * 1e6, 1)
                    w.update(op=op, round=r, gc=gc_delta(before, asyncio.run(gc_state(ctl))))
                    results["runs"].append(w)
                    slow = ", ".join(f"gen{p['generation']} {p['ms']}/{p['cpu_ms']} ms" for p in w["gc"]["slow"])
                    print(f"  round {r + 1} {op:6} c={c:<3} {w['ops_per_s']:8,.0f}/s p50 {w['p50_ms']:6.2f} p99 "
                          f"{w['p99_ms']:7.2f} ms ({w['p99_ms'] / w['p50_ms']:.1f}x) errors {w['errors']} "
                          f"gc {w['gc']['gen0']}/{w['gc']['gen1']}/{w['gc']['gen2']} "
                          f"cpu {w['gc']['gen0_cpu_ms'] + w['gc']['gen1_cpu_ms'] + w['gc']['gen2_cpu_ms']:.0f} ms"
                          + (f"; >=10 ms: {slow}" if slow else ""), flush=True)
        results["gc_end"] = asyncio.run(gc_state(ctl))
        results["rss_end_mb"] = round(server.rss_mb(), 1)
        if args.json:                   # before the server is stopped (a 2 GB process takes a while)
            Path(args.json).write_text(json.dumps(results, indent=1))
        summary(args, results)


def summary(args, results: dict) -> None:
    print(f"\nmedians of {args.rounds} rounds ({args.items:,} items stored, gc policy {args.gc_policy}, "
          f"load {os.getloadavg()[0]:.1f}):")
    print("| op | c | ops/s | p50 ms | p99 ms | p99/p50 | gen0/gen1/gen2 per run | GC CPU ms per run | pauses >= 10 ms (all rounds) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for op in args.ops:
        for c in args.concurrency:
            rs = [x for x in results["runs"] if x["op"] == op and x["concurrency"] == c]
            med = lambda k: statistics.median(x[k] for x in rs)  # noqa: E731
            gcs = [x["gc"] for x in rs]
            counts = "/".join(str(round(statistics.median(g[gen] for g in gcs))) for gen in ("gen0", "gen1", "gen2"))
            cpu = statistics.median(g["gen0_cpu_ms"] + g["gen1_cpu_ms"] + g["gen2_cpu_ms"] for g in gcs)
            slow = [f"gen{p['generation']} {p['ms']:.0f} ({p['cpu_ms']:.0f} CPU)" for g in gcs for p in g["slow"]]
            print(f"| {op} | {c} | {med('ops_per_s'):,.0f} | {med('p50_ms'):.2f} | {med('p99_ms'):.2f} | "
                  f"{statistics.median(x['p99_ms'] / x['p50_ms'] for x in rs):.1f}x | {counts} | {cpu:.0f} | "
                  f"{', '.join(slow) or 'none'} |")


if __name__ == "__main__":
    main()
