"""Tail latency with many items stored: wrk (pre-signed) point reads, creates, upserts and
partition-key queries at c=16 and c=64, and what the server's garbage collector did meanwhile.

    python bench/tail_bench.py                              # 1,000,000 items stored, 3 rounds
    python bench/tail_bench.py --items 100000 --seconds 5 --rounds 3
    python bench/tail_bench.py --gc-policy off              # the same without runtime/collector.py's policy
    python bench/tail_bench.py --peer /tmp/nodepeer --bare  # with the references, in the same run

References (issue 16: "measured in the same run as the Node peer and bare aiohttp"): --peer runs
the Node peer, @vercel/cosmosdb-server with keep-alive (`npm install --prefix /tmp/nodepeer
@vercel/cosmosdb-server`), filled with the same items by the same loader and measured with the
same wrk scripts right after each of our runs; it stores one copy and replicates nothing. It
scans every item for every query, so with more than PEER_QUERY_ITEMS_MAX items its query runs
are left out. --bare runs a bare aiohttp+uvloop server answering a fixed 10-byte JSON (the
ceiling of a Python HTTP server here), once per concurrency per round. Every row has the
server's CPU per operation (user+system from /proc over the run).

The server is `python -m emulator --no-ru-limits --partitions 10` (default 3 regions, session),
filled first by bench/load_bench.py's loader (transactional batches of ~950-byte items), with the
collector policy on (as the CLI runs it) or, with --gc-policy off, with CPython's defaults and
nothing frozen (the pauses are still measured). Then, round after round, each operation at each
concurrency runs for --seconds under wrk (1 thread, requests signed beforehand in its Lua
script):
* read: GET of 1,000 loaded items, cycled;
* create: POST of new ~950-byte items over 1,000 partition keys (ids counted up in wrk);
* upsert: POST with x-ms-documentdb-is-upsert of those 1,000 loaded items (each a replace);
* query: `SELECT * FROM c WHERE c.pk = @pk` on one of 1,000 partition keys, first page of 10.

Per run: ops/s, p50 and p99 (wrk --latency), p99/p50, and from `GET /debug/gc` before and
after: the collections in the run by generation, their summed CPU time, and every pause of
10 ms or more (wall and CPU) with its generation. The table shows the median over rounds. The
GC columns do not depend on other load on the machine; wrk's p99 does (the cores are shared).
"""
import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from email.utils import formatdate
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import calibration  # noqa: E402
from gateway_bench import machine, wrk  # noqa: E402
from load_bench import COLL, DB, ITEM_JSON_BYTES, KEYS, item, load  # noqa: E402
from rest_load import setup, signed_headers  # noqa: E402
from sdk_bench import peer_process  # noqa: E402
from server_proc import ServerProcess  # noqa: E402

TARGETS = 1000
RESULTS = Path(__file__).resolve().parent / "results"
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


def lua_creates(key: str, round_no: int) -> str:
    """New ~950-byte items with ids made in wrk itself (a counter), so no run ever runs out of
    fresh ids and answers 409s, however fast the server is."""
    h = signed_headers(key, "POST", FEED)
    head = "".join(f'wrk.headers["{k}"] = {json.dumps(v)}\n' for k, v in h.items())
    doc = item(0)
    doc.update(id="@ID@", pk="@PK@")
    before_id, rest = json.dumps(doc, separators=(",", ":")).split("@ID@")
    between, after_pk = rest.split("@PK@")
    return (f'wrk.method = "POST"\nwrk.path = "{FEED}"\n{head}local n = 0\n'
            "request = function()\n  n = n + 1\n"
            f'  local pk = "p" .. (n % {KEYS})\n'
            '  wrk.headers["x-ms-documentdb-partitionkey"] = "[\\"" .. pk .. "\\"]"\n'
            f'  local body = {json.dumps(before_id)} .. "new-{round_no}-" .. n .. {json.dumps(between)} .. pk .. {json.dumps(after_pk)}\n'
            "  return wrk.format(nil, nil, nil, body)\nend\n")


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


PEER_QUERY_ITEMS_MAX = 10_000     # the peer scans every item for every query (3,000 items: ~100 queries/s)
PEER_HEAP_MB = 8192               # V8's default old space is too small for a million ~1 KB items


def run_wrk(name: str, server, base: str, script: str, c: int, seconds: int, op: str, r: int) -> dict:
    cpu0 = server.cpu_s()
    w = wrk(base, script, c, seconds)
    w["server_cpu_us_per_op"] = round((server.cpu_s() - cpu0) / max(w["ops"], 1) * 1e6, 1)
    w.update(op=op, round=r, server=name)
    return w


def print_run(w: dict, extra: str = "") -> None:
    print(f"  round {w['round'] + 1} {w['server']:9} {w['op']:6} c={w['concurrency']:<3} {w['ops_per_s']:8,.0f}/s "
          f"p50 {w['p50_ms']:6.2f} p99 {w['p99_ms']:7.2f} ms ({w['p99_ms'] / (w['p50_ms'] or float('nan')):.1f}x) "
          f"cpu {w['server_cpu_us_per_op']:6.0f} µs/op errors {w['errors']}{extra}", flush=True)


def scripts(key: str, items: int, r: int, c: int) -> dict:
    return {"read": lambda: lua_reads(key, items), "upsert": lambda: lua_upserts(key, items),
            "query": lambda: lua_queries(key), "create": lambda: lua_creates(key, r * 1000 + c)}


def load_into(name: str, server, base: str, key: str, items: int) -> dict:
    asyncio.run(setup(base, key, DB, COLL, 400))
    idle = server.rss_mb()
    loaded = asyncio.run(load(base, items, 4, server, idle, key=key))
    print(f"{name}: loaded {loaded['items']:,} in {loaded['seconds']} s ({loaded['items_per_s']:,}/s), "
          f"RSS {server.rss_mb():.0f} MB (idle {idle:.0f}), failed batches {loaded['errors']}", flush=True)
    return loaded


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, nargs="*", default=[16, 64])
    ap.add_argument("--ops", nargs="*", default=["read", "create", "upsert", "query"])
    ap.add_argument("--gc-policy", choices=("on", "off"), default="on")
    ap.add_argument("--peer", help="npm prefix holding @vercel/cosmosdb-server: run the Node peer beside us")
    ap.add_argument("--peer-items", type=int, help="items the peer holds (default: --items)")
    ap.add_argument("--bare", action="store_true", help="run bare aiohttp+uvloop (a fixed reply) beside us")
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args()
    flags = ["--port", "0", "--control-port", "0", "--no-ru-limits", "--partitions", "10"]
    cmd = [sys.executable, "-m", "regionlab.emulator", *flags] if args.gc_policy == "on" else [sys.executable, "-c", NO_POLICY, *flags]
    peer_items = args.peer_items or args.items
    print(f"{json.dumps(machine())}, load {os.getloadavg()[0]:.2f}; "
          f"{args.items:,} items of ~{ITEM_JSON_BYTES} B stored, gc policy {args.gc_policy}, "
          f"wrk {args.seconds} s x {args.rounds} rounds"
          + (f"; Node peer with {peer_items:,} items" if args.peer else "") + ("; bare aiohttp" if args.bare else ""),
          flush=True)
    results = {"items": args.items, "peer_items": peer_items if args.peer else None, "gc_policy": args.gc_policy,
               "runs": [], "when": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": machine(),
               "loadavg_start": os.getloadavg()}
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(ServerProcess(cmd=cmd))
        base = server.ready["account_endpoint"].rstrip("/")
        ctl = server.ready["control_endpoint"].rstrip("/")
        key = server.ready["key"]
        results["load"] = load_into("regionlab", server, base, key, args.items)
        results["rss_after_load_mb"] = round(server.rss_mb(), 1)
        peer = bare = None
        if args.peer:
            peer = stack.enter_context(peer_process(args.peer, (f"--max-old-space-size={PEER_HEAP_MB}",)))
            results["peer_load"] = load_into("node peer", peer, peer.ready.rstrip("/"), key, peer_items)
        if args.bare:
            bare = stack.enter_context(calibration.bare_server())
        for r in range(args.rounds):
            for op in args.ops:
                for c in args.concurrency:
                    script = scripts(key, args.items, r, c)[op]()
                    before = asyncio.run(gc_state(ctl))
                    w = run_wrk("regionlab", server, base, script, c, args.seconds, op, r)
                    w["gc"] = gc_delta(before, asyncio.run(gc_state(ctl)))
                    results["runs"].append(w)
                    slow = ", ".join(f"gen{p['generation']} {p['ms']}/{p['cpu_ms']} ms" for p in w["gc"]["slow"])
                    print_run(w, f" gc {w['gc']['gen0']}/{w['gc']['gen1']}/{w['gc']['gen2']} "
                                 f"{w['gc']['gen0_cpu_ms'] + w['gc']['gen1_cpu_ms'] + w['gc']['gen2_cpu_ms']:.0f} ms"
                                 + (f"; >=10 ms: {slow}" if slow else ""))
                    if peer and (op != "query" or peer_items <= PEER_QUERY_ITEMS_MAX):
                        w = run_wrk("node peer", peer, peer.ready.rstrip("/"), scripts(key, peer_items, r, c)[op](),
                                    c, args.seconds, op, r)
                        results["runs"].append(w)
                        print_run(w)
            for c in args.concurrency if bare else ():
                w = run_wrk("bare", bare, bare.ready.rstrip("/"), "", c, args.seconds, "hello", r)
                results["runs"].append(w)
                print_run(w)
        results["gc_end"] = asyncio.run(gc_state(ctl))
        results["rss_end_mb"] = round(server.rss_mb(), 1)
        results["loadavg_end"] = os.getloadavg()
        out = Path(args.json) if args.json else RESULTS / f"tail-{time.strftime('%Y%m%d-%H%M%S')}.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(results, indent=1))    # before the servers stop (a 2 GB process takes a while)
        summary(args, results)


def summary(args, results: dict) -> None:
    print(f"\nmedians of {args.rounds} rounds ({args.items:,} items stored, gc policy {args.gc_policy}, "
          f"load {results['loadavg_start'][0]:.1f} at the start, {results['loadavg_end'][0]:.1f} at the end):")
    print("| op | c | server | ops/s | p50 ms | p99 ms | p99/p50 | server CPU µs/op | gen0/gen1/gen2 per run "
          "| GC CPU ms per run | pauses >= 10 ms (all rounds) |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for op in [*args.ops, "hello"]:
        for c in args.concurrency:
            for name in ("regionlab", "node peer", "bare"):
                rs = [x for x in results["runs"] if x["op"] == op and x["concurrency"] == c and x["server"] == name]
                if rs:
                    print(row(op, c, name, rs))


def row(op: str, c: int, name: str, rs: list) -> str:
    med = lambda k: statistics.median(x[k] for x in rs)  # noqa: E731
    head = (f"| {op} | {c} | {name} | {med('ops_per_s'):,.0f} | {med('p50_ms'):.2f} | {med('p99_ms'):.2f} | "
            f"{statistics.median(x['p99_ms'] / (x['p50_ms'] or float('nan')) for x in rs):.1f}x | {med('server_cpu_us_per_op'):,.0f} |")
    if "gc" not in rs[0]:
        return head + " | | |"
    gcs = [x["gc"] for x in rs]
    counts = "/".join(str(round(statistics.median(g[gen] for g in gcs))) for gen in ("gen0", "gen1", "gen2"))
    cpu = statistics.median(g["gen0_cpu_ms"] + g["gen1_cpu_ms"] + g["gen2_cpu_ms"] for g in gcs)
    slow = [f"gen{p['generation']} {p['ms']:.0f} ({p['cpu_ms']:.0f} CPU)" for g in gcs for p in g["slow"]]
    return head + f" {counts} | {cpu:.0f} | {', '.join(slow) or 'none'} |"


if __name__ == "__main__":
    main()
