"""What the official azure-cosmos aio SDK (4.17.1) pays for talking to regionlab and to the Node
peer (@vercel/cosmosdb-server), side by side in one run: the SDK is client-bound, so its own CPU
per operation decides how many operations per second it does.

    npm install --prefix /tmp/nodepeer @vercel/cosmosdb-server      # once; not a dependency of ours
    python bench/sdk_bench.py --peer /tmp/nodepeer [--seconds 4] [--rounds 3] [--concurrency 16]
    python bench/sdk_bench.py --peer /tmp/nodepeer --instructions    # client instructions per read (callgrind)

Servers (all running for the whole run; rounds alternate between them, medians reported):
  peer        the Node peer with keep-alive (`createHttpServer({keepAlive: true})`: as shipped, its
              CLI answers `connection: close` and the SDK reconnects for every request), which
              sends no session tokens, so the SDK tracks no session against it
  regionlab   `python -m emulator`, default 3 regions, Session: every item reply carries the
              session token, and the SDK does its session bookkeeping on every request
  regionlab (SDK at Eventual)  the same server, the client built with consistency_level="Eventual":
              the SDK does no session bookkeeping, as against the peer (a like-for-like row)

Operations per round, each by `concurrency` tasks for `seconds`: point reads of one ~150-byte
item, `SELECT * FROM c WHERE c.pk = @pk` with `partition_key=` (10 matching items, one page), and
creates of ~150-byte items (into a container of their own, so the read container stays at 11). The client's CPU time (time.process_time of this process) over a
phase divided by its operations is the SDK's cost; servers are separate processes.

`--instructions` runs the client under callgrind instead (point reads only, at the same
concurrency): two runs of 32 and 160 reads after a warm-up, the difference divided by 128, so
start-up and imports cancel out; independent of the machine's load.
"""
import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import uvloop  # noqa: E402
from azure.cosmos import PartitionKey  # noqa: E402
from azure.cosmos.aio import CosmosClient  # noqa: E402

from regionlab.emulator import defaults  # noqa: E402
from gateway_bench import machine  # noqa: E402
from server_proc import ServerProcess  # noqa: E402

KEY = defaults.EMULATOR_KEY
QUERY = "SELECT * FROM c WHERE c.pk = @pk"
QUERY_MATCHES = 10
CALLGRIND_READS = (32, 160)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def peer_process(peer_dir: str, node_args: tuple = ()) -> ServerProcess:
    index = os.path.join(peer_dir, "node_modules", "@vercel", "cosmosdb-server", "lib", "index.js")
    if not os.path.exists(index):
        raise SystemExit(f"no {index}: npm install --prefix {peer_dir} @vercel/cosmosdb-server")
    port = _free_port()
    script = (f"require({json.dumps(index)}).createHttpServer({{keepAlive: true}})"
              f".listen({port}, '127.0.0.1', () => console.log('ready'))")
    return ServerProcess(cmd=["node", *node_args, "-e", script], parse=lambda line: f"http://127.0.0.1:{port}/")


def client(url: str, kind: str) -> CosmosClient:
    if kind == "peer":               # the peer advertises https:// for its plain-http port (cosmos-wire §0.2)
        return CosmosClient(url, KEY, enable_endpoint_discovery=False)
    if kind == "eventual":
        return CosmosClient(url, KEY, consistency_level="Eventual")
    return CosmosClient(url, KEY)


async def container_of(c, name: str = "c"):
    db = await c.create_database_if_not_exists("sdkbench")
    return await db.create_container_if_not_exists(name, partition_key=PartitionKey(path="/pk"))


async def seed(url: str, kind: str) -> None:
    async with client(url, kind) as c:
        co = await container_of(c)
        await co.upsert_item({"id": "item", "pk": "p", "payload": "x" * 100})
        for i in range(QUERY_MATCHES):
            await co.upsert_item({"id": f"q{i}", "pk": "q", "payload": "x" * 100})


async def phase(co, op: str, concurrency: int, seconds: float, tag: str) -> dict:
    done = 0
    stop = time.perf_counter() + seconds
    seq = iter(range(10**9))

    async def one():
        if op == "read":
            await co.read_item("item", partition_key="p")
        elif op == "query":
            n = 0
            async for _ in co.query_items(QUERY, parameters=[{"name": "@pk", "value": "q"}], partition_key="q"):
                n += 1
            if n != QUERY_MATCHES:
                raise RuntimeError(f"query answered {n} items, expected {QUERY_MATCHES}")
        else:
            await co.create_item({"id": f"{tag}-{next(seq)}", "pk": f"w{next(seq) % 100}", "payload": "x" * 100})

    async def worker():
        nonlocal done
        while time.perf_counter() < stop:
            await one()
            done += 1
    await one()                                   # warm: caches, pools, query plan path
    cpu0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    return {"op": op, "ops": done, "ops_per_s": round(done / wall), "client_cpu_us_per_op": round(cpu / done * 1e6)}


async def one_round(url: str, kind: str, concurrency: int, seconds: float, tag: str) -> list:
    async with client(url, kind) as c:
        co, writes = await container_of(c), await container_of(c, "w")
        # creates go to their own container: the peer scans a whole container per query, so
        # creates in the read container would slow its next round's queries
        return [dict(await phase(writes if op == "create" else co, op, concurrency, seconds, tag), server=kind)
                for op in ("read", "query", "create")]


def throughput(args, servers: dict) -> None:
    runs = []
    for kind, url in servers.items():
        uvloop.run(seed(url, kind))
    for r in range(args.rounds):
        for kind, url in servers.items():
            for row in uvloop.run(one_round(url, kind, args.concurrency, args.seconds, f"r{r}{kind}")):
                print(json.dumps(row), flush=True)
                runs.append(row)
    print(f"load average at the end {os.getloadavg()}")
    for op in ("read", "query", "create"):
        peer = None
        for kind in servers:
            mine = [x for x in runs if x["server"] == kind and x["op"] == op]
            ops = statistics.median(x["ops_per_s"] for x in mine)
            cpu = statistics.median(x["client_cpu_us_per_op"] for x in mine)
            peer = peer or ops
            print(f"{op:6} {kind:9} {ops:7,.0f}/s  SDK CPU {cpu:6,.0f} µs/op  {ops / peer:5.2f}x the peer "
                  f"(rounds: {', '.join(str(x['ops_per_s']) for x in mine)})")


CLIENT = """
import asyncio, sys, uvloop
sys.path.insert(0, {root!r}); sys.path.insert(0, {bench!r})
import sdk_bench as b
url, kind, n, conc = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
async def main():
    async with b.client(url, kind) as c:
        co = await b.container_of(c)
        for _ in range(30):
            await co.read_item("item", partition_key="p")
        async def w(k):
            for _ in range(k):
                await co.read_item("item", partition_key="p")
        await asyncio.gather(*(w(n // conc) for _ in range(conc)))
uvloop.run(main())
"""


def _callgrind_total(script: str, url: str, kind: str, reads: int, concurrency: int) -> int:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        subprocess.run(["valgrind", "--tool=callgrind", "--fair-sched=yes", f"--callgrind-out-file={out}",
                        sys.executable, script, url, kind, str(reads), str(concurrency)],
                       check=True, capture_output=True)
        with open(out) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
    raise RuntimeError("no totals in callgrind output")


def instructions(args, servers: dict) -> None:
    here = Path(__file__).resolve().parent
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "client.py")
        Path(script).write_text(CLIENT.format(root=str(here.parent), bench=str(here)))
        for kind, url in servers.items():
            uvloop.run(seed(url, kind))
            lo, hi = (_callgrind_total(script, url, kind, n, args.concurrency) for n in CALLGRIND_READS)
            print(f"{kind:9} {(hi - lo) / (CALLGRIND_READS[1] - CALLGRIND_READS[0]) / 1000:8.1f} k instructions "
                  f"per SDK point read (c={args.concurrency})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer", required=True, help="the npm prefix holding @vercel/cosmosdb-server")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--instructions", action="store_true", help="client instructions per read, under callgrind")
    args = ap.parse_args()
    print(json.dumps(machine()), f"load average {os.getloadavg()}", time.strftime("%Y-%m-%d %H:%M:%S"), flush=True)
    with peer_process(args.peer) as peer, ServerProcess("--consistency", "Session") as ours:
        servers = {"peer": peer.ready, "regionlab": ours.ready["account_endpoint"],
                   "eventual": ours.ready["account_endpoint"]}
        (instructions if args.instructions else throughput)(args, servers)


if __name__ == "__main__":
    main()
