"""The bundled client against the official azure-cosmos aio SDK: client CPU per point read and
point reads/s at a given concurrency, same emulator, same run, alternating rounds.

    python bench/client_bench.py [--concurrency 16] [--seconds 5] [--rounds 3] [--clients ours,direct,sdk]
    python bench/client_bench.py --multi-write --clients ours,hedged,breaker,both   # policy overhead

The emulator runs as its own process (bench/server_proc.py), so this process's CPU time
(time.process_time) over a round is the client's alone: our client.aio.CosmosClient in gateway
mode (`ours`), ours in direct mode (`direct`: rlmp to the replicas, warmed up first), or
azure.cosmos.aio.CosmosClient (`sdk`), each on a uvloop loop, `concurrency` tasks reading one
item each in a loop. Each client reads its own item first (and discovers the account) before a
round is timed. Prints one JSON line per round and a summary with the medians, the ratios of
the medians, and each round's ratio of two clients that ran back to back (with their median:
on a shared machine the load moves between rounds more than between neighbours); numbers go to
docs/performance.md, never into tests.

What hedging and the circuit breaker cost when no fault is active: with `--multi-write` the
emulator's account takes writes in every region (the breaker only runs on such accounts), and
the gateway-mode kinds are `ours` (policies off: multiple_write_locations=False, no hedging),
`hedged` (availability_strategy=True: reads race the next region after 500 ms, which a healthy
region never reaches), `breaker` (multiple_write_locations=True: every read is counted per
partition and region) and `both`.
"""
import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import uvloop  # noqa: E402
from azure.cosmos import PartitionKey as SdkPartitionKey  # noqa: E402
from azure.cosmos.aio import CosmosClient as SdkClient  # noqa: E402

from regionlab.client.aio import CosmosClient, PartitionKey  # noqa: E402
from gateway_bench import machine  # noqa: E402
from server_proc import ServerProcess  # noqa: E402


async def setup(endpoint: str, key: str) -> None:
    async with CosmosClient(endpoint, credential=key) as client:
        db = await client.create_database_if_not_exists("bench")
        c = await db.create_container_if_not_exists("c", partition_key=PartitionKey(path="/pk"))
        await c.upsert_item({"id": "item", "pk": "p", "payload": "x" * 100})


POLICY_KINDS = {"hedged": {"availability_strategy": True, "multiple_write_locations": False},
                "breaker": {"multiple_write_locations": True},
                "both": {"availability_strategy": True, "multiple_write_locations": True}}


def make(kind: str, endpoint: str, key: str, multi_write: bool = False):
    if kind == "ours":
        # on a multi-write account, ours without the breaker is the baseline of the policy rows
        return CosmosClient(endpoint, credential=key, multiple_write_locations=not multi_write)
    if kind in POLICY_KINDS:
        return CosmosClient(endpoint, credential=key, **POLICY_KINDS[kind])
    if kind == "direct":
        return CosmosClient(endpoint, credential=key, connection_mode="direct")
    return SdkClient(endpoint, key)


async def one_round(kind: str, endpoint: str, key: str, concurrency: int, seconds: float,
                    multi_write: bool = False) -> dict:
    async with make(kind, endpoint, key, multi_write) as client:
        c = client.get_database_client("bench").get_container_client("c")
        if kind == "direct":
            await client.open_connections_and_init_caches([c], regions=1)
        await c.read_item("item", partition_key="p")           # warm: caches, pools
        done = 0
        stop = time.perf_counter() + seconds

        async def worker():
            nonlocal done
            while time.perf_counter() < stop:
                await c.read_item("item", partition_key="p")
                done += 1
        cpu0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    return {"client": kind, "concurrency": concurrency, "reads": done, "reads_per_s": round(done / wall),
            "client_cpu_us_per_read": round(cpu / done * 1e6, 1)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--clients", default="ours,direct,sdk",
                   help="which clients, comma-separated: ours, direct, sdk, hedged, breaker, both")
    p.add_argument("--multi-write", action="store_true", help="an account that takes writes in every region")
    args = p.parse_args()
    kinds = args.clients.split(",")
    runs = []
    with ServerProcess("--consistency", "Session", *(["--multi-write"] if args.multi_write else [])) as server:
        endpoint, key = server.ready["account_endpoint"], server.ready["key"]
        uvloop.run(setup(endpoint, key))
        for _ in range(args.rounds):
            for kind in kinds:
                run = uvloop.run(one_round(kind, endpoint, key, args.concurrency, args.seconds, args.multi_write))
                print(json.dumps(run), flush=True)
                runs.append(run)
    summary = {"machine": machine()}
    for kind in kinds:
        mine = [r for r in runs if r["client"] == kind]
        summary[kind] = {"reads_per_s": statistics.median(r["reads_per_s"] for r in mine),
                         "client_cpu_us_per_read": statistics.median(r["client_cpu_us_per_read"] for r in mine)}
    for a, b in (("ours", "sdk"), ("direct", "ours"), ("direct", "sdk"),
                 ("hedged", "ours"), ("breaker", "ours"), ("both", "ours")):
        if a in summary and b in summary:
            summary[f"cpu_ratio_{a}_to_{b}"] = round(summary[a]["client_cpu_us_per_read"]
                                                     / summary[b]["client_cpu_us_per_read"], 3)
            summary[f"throughput_ratio_{a}_to_{b}"] = round(summary[a]["reads_per_s"] / summary[b]["reads_per_s"], 2)
            # each round's pair (the two ran back to back, under the same load): a steadier figure
            pairs = [x["reads_per_s"] / y["reads_per_s"] for x, y in
                     zip((r for r in runs if r["client"] == a), (r for r in runs if r["client"] == b))]
            summary[f"round_throughput_ratios_{a}_to_{b}"] = [round(x, 2) for x in pairs]
            summary[f"median_round_throughput_ratio_{a}_to_{b}"] = round(statistics.median(pairs), 2)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
