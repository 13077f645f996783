"""Gateway point reads and creates under wrk: this build against another one, interleaved.

    python bench/wrk_ab.py --base-python /work/base/.venv/bin/python --base-module emulator
    python bench/wrk_ab.py --base-python ... --rounds 5 --seconds 8 --connections 64

Both servers run side by side for the whole run (an idle one costs little), each with the same
database, container (100,000 RU/s: never throttled) and 1,000 items of ~200 bytes. Each round runs
wrk (one thread, C connections, pre-signed requests: gateway_bench.py's scripts) for the reads,
then the creates, against the base build and then this one, alternating which goes first from
round to round, so a busy minute of the shared machine falls on both alike. Reported: the medians
of ops/s and p99 per build and operation, and this build's median over the base's. The absolute
numbers move with the machine's load; the ratio is what carries. No asserts (bench/).

The base build is any other checkout with its own interpreter (e.g. a venv with the commit
installed editable) whose `python -m <module>` starts the emulator and prints its ready line;
before the `regionlab` name the module was `emulator`.
"""
import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gateway_bench import BENCH_RU_PER_S, WRK_IDS, lua_creates, lua_reads, measured, wrk  # noqa: E402
from rest_load import run, setup  # noqa: E402
from server_proc import ServerProcess  # noqa: E402

DB, COLL = "bench", "items"


def _server(python: str, module: str, tree: Path) -> ServerProcess:
    # From its own tree: `python -m` puts the working directory first on sys.path, and another
    # checkout's top-level emulator/ would shadow the build's.
    return ServerProcess(cmd=[python, "-m", module, "--port", "0", "--control-port", "0"], cwd=str(tree))


def _prepare(server: ServerProcess) -> str:
    base, key = server.ready["account_endpoint"], server.ready["key"]
    asyncio.run(setup(base, key, DB, COLL, BENCH_RU_PER_S))
    # The items the read script cycles over (gateway_bench.lua_reads: ids c64-0 ... c64-999).
    seeded = asyncio.run(run(base, key, DB, COLL, "create", 16, WRK_IDS, id_prefix="c64-"))
    if seeded["errors"]:
        raise RuntimeError(f"seeding {WRK_IDS} items failed {seeded['errors']} times")
    return base


def _commit(tree: Path) -> str:
    out = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "?"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-python", required=True, help="the interpreter of the build to compare with")
    ap.add_argument("--base-module", default="regionlab.emulator", help="its emulator module (015ae52: emulator)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--connections", type=int, default=64)
    args = ap.parse_args()
    # A venv's interpreter (<tree>/.venv/bin/python): its tree's commit names the base build.
    base_tree = Path(args.base_python).parent.parent.parent
    print(f"# wrk_ab on {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, {time.strftime('%Y-%m-%d %H:%M')}; "
          f"base {_commit(base_tree)} ({args.base_python}), this build {_commit(Path(__file__).resolve().parent)}",
          flush=True)
    results: dict = {(b, op): [] for b in ("base", "this") for op in ("read", "create")}
    here = Path(__file__).resolve().parent.parent
    with _server(args.base_python, args.base_module, base_tree) as base_srv, \
            _server(sys.executable, "regionlab.emulator", here) as this_srv:
        servers = {"base": (base_srv, _prepare(base_srv)), "this": (this_srv, _prepare(this_srv))}
        feed = f"/dbs/{DB}/colls/{COLL}/docs"
        for i in range(args.rounds):
            order = ("base", "this") if i % 2 == 0 else ("this", "base")
            for op in ("read", "create"):
                for build in order:
                    server, url = servers[build]
                    key = server.ready["key"]
                    script = lua_reads(feed, "c64-", key) if op == "read" else \
                        lua_creates(feed, key, 140, prefix=f"{build}{i}-")
                    r = measured(server, lambda: wrk(url, script, args.connections, args.seconds))
                    if r["errors"]:
                        raise RuntimeError(f"{build} {op}: {r['errors']} errors under wrk")
                    results[(build, op)].append(r)
                    print(f"round {i + 1} {op:6} {build:4}: {r['ops_per_s']:8,.0f} ops/s  p50 {r['p50_ms']:6.2f} ms  "
                          f"p99 {r['p99_ms']:6.2f} ms  server CPU {r['server_cpu_us_per_op']:6.1f} µs/op", flush=True)
    print(f"medians of {args.rounds} rounds, wrk -t1 -c{args.connections} -d{args.seconds}s:")
    for op in ("read", "create"):
        med = {b: {k: statistics.median(r[k] for r in results[(b, op)])
                   for k in ("ops_per_s", "p99_ms", "server_cpu_us_per_op")} for b in ("base", "this")}
        b, t = med["base"], med["this"]
        print(f"  {op:6}: base {b['ops_per_s']:8,.0f} ops/s p99 {b['p99_ms']:6.2f} ms {b['server_cpu_us_per_op']:6.1f} µs | "
              f"this {t['ops_per_s']:8,.0f} ops/s p99 {t['p99_ms']:6.2f} ms {t['server_cpu_us_per_op']:6.1f} µs | "
              f"this/base ops/s {t['ops_per_s'] / b['ops_per_s']:.2f}x, p99 {t['p99_ms'] / b['p99_ms']:.2f}x, "
              f"CPU/op {t['server_cpu_us_per_op'] / b['server_cpu_us_per_op']:.2f}x")


if __name__ == "__main__":
    main()
