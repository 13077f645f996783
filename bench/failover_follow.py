"""How long writes stay down when the write region fails and the service fails over, per
outage mode and client: the bundled client in gateway and direct mode against the official
azure-cosmos aio SDK, same emulator build, same run.

    python bench/failover_follow.py [--detection-ms 2000] [--modes unavailable,reset,blackhole,refuse]
                                    [--clients ours,direct,sdk] [--writers 4] [--give-up-s 15]

Per (mode, client) a fresh in-process emulator (East US writes; East US 2, West US read) with
`detection_delay_ms`; the client prefers East US, then West US (the docs' checkout-failover
drill), with a 1 s per-request timeout (the SDK's `read_timeout`/`connection_timeout`, ours
`request_timeout_s`/`connect_timeout_s`) so a blackholed request ends. `writers` tasks create
items back to back (and one task reads a key the client wrote) while East US goes out in the
mode. Printed per row: when the service failed over (`failover_ms`, from the fault; the
emulator's detection delay), when the first write succeeded after the fault (`first_write_ms`),
the client's own share (`follow_ms` = first write - failover), the writes that failed meanwhile,
and the reads that failed during the outage. `null` first write: no write succeeded within
`give_up_s` after the failover. Numbers, not asserts: they go to docs/client.md.
"""
import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from azure.cosmos.aio import CosmosClient as SdkClient  # noqa: E402

from regionlab.client.aio import CosmosClient, PartitionKey  # noqa: E402
from regionlab.emulator.testing import running_emulator  # noqa: E402
from gateway_bench import machine  # noqa: E402

EAST, EAST2, WEST = "East US", "East US 2", "West US"
REQUEST_TIMEOUT_S = 1.0
MODES = ("unavailable", "reset", "blackhole", "refuse")
NO_LAG = {(a, b): 0 for a in (EAST, EAST2, WEST) for b in (EAST, EAST2, WEST) if a != b}


def make(kind: str, endpoint: str, key: str):
    if kind == "sdk":
        return SdkClient(endpoint, key, preferred_locations=[EAST, WEST], read_timeout=REQUEST_TIMEOUT_S,
                         connection_timeout=REQUEST_TIMEOUT_S)
    return CosmosClient(endpoint, credential=key, preferred_locations=[EAST, WEST],
                        connection_mode="direct" if kind.startswith("direct") else "gateway",
                        availability_strategy=kind.endswith("hedged"),
                        request_timeout_s=REQUEST_TIMEOUT_S, connect_timeout_s=REQUEST_TIMEOUT_S)


async def one(emu, kind: str, mode: str, writers: int, readers: int, give_up_s: float) -> dict:
    async with make(kind, emu.endpoint, emu.key) as client:
        db = await client.create_database_if_not_exists("bench")
        c = await db.create_container_if_not_exists("c", partition_key=PartitionKey(path="/pk"))
        await c.upsert_item({"id": "r", "pk": "r"})
        await c.read_item("r", partition_key="r")
        state = {"fault_s": None, "first_write_s": None, "write_errors": 0, "read_errors": 0, "reads": 0,
                 "stop": False, "errors": {}}

        async def writer(w):
            n = 0
            while not state["stop"]:
                n += 1
                started = time.perf_counter()
                try:
                    await c.create_item({"id": f"{kind}-{w}-{n}", "pk": f"k{n % 50}"})
                except Exception as e:       # noqa: BLE001 - any failure counts, by its kind
                    if state["fault_s"] is not None:
                        state["write_errors"] += 1
                        name = f"{getattr(e, 'status_code', None) or type(e).__name__}"
                        state["errors"][name] = state["errors"].get(name, 0) + 1
                    await asyncio.sleep(0.01)      # a failed write is retried by the app, not in a spin
                    continue
                # a write that left before the fault may still land in East US: not a recovery
                if state["fault_s"] is not None and started > state["fault_s"] and state["first_write_s"] is None:
                    state["first_write_s"] = time.perf_counter()

        async def reader():
            while not state["stop"]:
                try:
                    await c.read_item("r", partition_key="r")
                    if state["fault_s"] is not None:
                        state["reads"] += 1
                except Exception:                  # noqa: BLE001
                    if state["fault_s"] is not None:
                        state["read_errors"] += 1
                        state["reads"] += 1
                    await asyncio.sleep(0.01)

        tasks = [asyncio.ensure_future(writer(w)) for w in range(writers)] + \
            [asyncio.ensure_future(reader()) for _ in range(readers)]
        await asyncio.sleep(0.5)                           # steady state
        await asyncio.to_thread(emu.faults.region_outage, EAST, mode)
        state["fault_s"] = time.perf_counter()
        deadline = state["fault_s"] + emu_detection_s + give_up_s
        while state["first_write_s"] is None and time.perf_counter() < deadline:
            await asyncio.sleep(0.05)
        state["stop"] = True
        await asyncio.wait(tasks, timeout=2 * REQUEST_TIMEOUT_S + 1)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    failovers = [f for f in emu.failovers() if f["kind"] == "forced"]
    fault_started = emu.topology()["faults"][0]["started_ms"] if emu.topology()["faults"] else None
    failover_ms = failovers[0]["started_ms"] - fault_started if failovers and fault_started else None
    first = state["first_write_s"]
    first_ms = round((first - state["fault_s"]) * 1000) if first else None
    return {"mode": mode, "client": kind, "failover_ms": failover_ms, "first_write_ms": first_ms,
            "follow_ms": first_ms - failover_ms if first_ms is not None and failover_ms is not None else None,
            "write_errors": state["write_errors"], "write_errors_by_kind": state["errors"],
            "reads_during": state["reads"], "read_errors": state["read_errors"]}


emu_detection_s = 2.0


def main() -> None:
    global emu_detection_s
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--detection-ms", type=int, default=2000)
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--clients", default="ours,direct,sdk",
                   help="ours, hedged (availability_strategy=True), direct, direct-hedged, sdk")
    p.add_argument("--writers", type=int, default=4)
    p.add_argument("--readers", type=int, default=0, help="tasks reading a key meanwhile (0: writes only)")
    p.add_argument("--give-up-s", type=float, default=15.0)
    args = p.parse_args()
    emu_detection_s = args.detection_ms / 1000.0
    print(json.dumps({"machine": machine(), "detection_delay_ms": args.detection_ms, "writers": args.writers,
                      "readers": args.readers}), flush=True)
    for mode in args.modes.split(","):
        for kind in args.clients.split(","):
            with running_emulator(detection_delay_ms=args.detection_ms, lag_ms=NO_LAG) as emu:
                row = asyncio.run(one(emu, kind, mode, args.writers, args.readers, args.give_up_s))
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
