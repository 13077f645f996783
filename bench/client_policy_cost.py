"""What hedging and the partition-level circuit breaker cost a point read when no fault is
active, with the network taken out: the bundled client's pipeline over an in-memory transport
that answers at once (a canned account, container and item reply), so the CPU per read is the
client's own work and the policies' share of it is not lost in the noise of a shared machine.

    python bench/client_policy_cost.py [--reads 20000] [--rounds 5]
    python bench/client_policy_cost.py --instructions [--reads 2000]   # valgrind's count, not CPU time
    python bench/client_policy_cost.py --bytecodes                     # Python bytecodes of one read

Kinds as in client_bench.py on a multi-write account: `ours` (multiple_write_locations=False, no
hedging), `hedged` (availability_strategy=True), `breaker` (multiple_write_locations=True),
`both`. Rounds alternate the kinds; prints one JSON line per round and the medians. With
`--instructions` each kind runs once in its own process under callgrind (PYTHONHASHSEED=0, so
start-up is the same for every kind; the request date frozen, see freeze_date) and the extra
instructions per read of a kind are its total minus `ours`'s, over the reads: a figure the
machine's load moves less than CPU time. `--bytecodes` counts the Python bytecodes one read
executes (after three warm-up reads, traced with sys.settrace): exact and the same on every run,
blind to C work. Numbers go to docs/performance.md, never into tests.
"""
import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import uvloop  # noqa: E402

from regionlab.client.aio import CosmosClient  # noqa: E402
from regionlab.client.aio.transport import Reply  # noqa: E402
from client_bench import POLICY_KINDS  # noqa: E402
from gateway_bench import machine  # noqa: E402

KEY = "a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U="
REGIONS = {"East US": "http://east/", "East US 2": "http://east2/", "West US": "http://west/"}
ACCOUNT = json.dumps({
    "writableLocations": [{"name": n, "databaseAccountEndpoint": e} for n, e in REGIONS.items()],
    "readableLocations": [{"name": n, "databaseAccountEndpoint": e} for n, e in REGIONS.items()],
    "enableMultipleWriteLocations": True,
    "userConsistencyPolicy": {"defaultConsistencyLevel": "Session"}}).encode()
CONTAINER = json.dumps({"id": "c", "_self": "dbs/x/colls/y/",
                        "partitionKey": {"paths": ["/pk"], "kind": "Hash"}}).encode()
ITEM = json.dumps({"id": "item", "pk": "p", "payload": "x" * 100}).encode()
ITEM_HEADERS = {"x-ms-request-charge": "1", "x-ms-substatus": "0", "x-ms-session-token": "0:-1#12"}


class InstantTransport:
    async def send(self, endpoint, method, path, headers, body):
        if path == "/":
            return Reply(200, {}, ACCOUNT)
        if path.endswith("/colls/c"):
            return Reply(200, {}, CONTAINER)
        return Reply(200, ITEM_HEADERS, ITEM)

    async def close(self):
        pass


def options(kind: str) -> dict:
    return {"multiple_write_locations": False} if kind == "ours" else POLICY_KINDS[kind]


async def one_round(kind: str, reads: int) -> dict:
    async with CosmosClient("http://global/", KEY, transport=InstantTransport(), **options(kind)) as client:
        c = client.get_database_client("d").get_container_client("c")
        await c.read_item("item", partition_key="p")
        cpu0 = time.process_time()
        for _ in range(reads):
            await c.read_item("item", partition_key="p")
        cpu = time.process_time() - cpu0
    return {"client": kind, "reads": reads, "client_cpu_us_per_read": round(cpu / reads * 1e6, 2)}


def freeze_date() -> None:
    """The x-ms-date is formatted once a second (client/aio/request.py); under callgrind a second
    spans a few hundred reads or a few dozen as the machine's load slows the process, and that
    alone moved one kind's count by ~1,500 instructions a read from process to process. The
    counted child keeps the date it starts with (every kind alike)."""
    import types
    import regionlab.client.aio.request as request
    now = time.time()
    request.time = types.SimpleNamespace(time=lambda: now)


def instructions(kind: str, reads: int) -> int:
    """Instructions of one process doing `reads` reads of `kind`, counted by callgrind."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
         "--one", kind, "--reads", str(reads)],
        env={**os.environ, "PYTHONHASHSEED": "0"}, capture_output=True, text=True, check=True)
    return int(re.search(r"Collected : (\d+)", done.stderr).group(1))


def count_instructions(kinds: list, reads: int) -> None:
    totals = {}
    for kind in kinds:
        totals[kind] = instructions(kind, reads)
        print(json.dumps({"client": kind, "reads": reads, "instructions": totals[kind]}), flush=True)
    summary = {"machine": machine(), "reads": reads}
    for kind in kinds[1:]:
        summary[f"extra_instructions_per_read_{kind}"] = round((totals[kind] - totals["ours"]) / reads)
    print(json.dumps(summary))


async def bytecodes(kind: str) -> int:
    """Python bytecodes executed by one read of `kind` (the frames it runs, C calls excluded)."""
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        frame.f_trace_opcodes = True
        count += event == "opcode"
        return trace
    async with CosmosClient("http://global/", KEY, transport=InstantTransport(), **options(kind)) as client:
        c = client.get_database_client("d").get_container_client("c")
        for _ in range(3):
            await c.read_item("item", partition_key="p")
        sys.settrace(trace)
        await c.read_item("item", partition_key="p")
        sys.settrace(None)
    return count


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reads", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--instructions", action="store_true", help="count instructions under callgrind")
    p.add_argument("--bytecodes", action="store_true", help="count the Python bytecodes of one read")
    p.add_argument("--one", help=argparse.SUPPRESS)     # one kind, one round (the callgrind child)
    args = p.parse_args()
    kinds = ["ours", "hedged", "breaker", "both"]
    if args.one:
        freeze_date()
        uvloop.run(one_round(args.one, args.reads))
        return
    if args.instructions:
        return count_instructions(kinds, args.reads)
    if args.bytecodes:
        counts = {kind: uvloop.run(bytecodes(kind)) for kind in kinds}
        print(json.dumps({"machine": machine(), "bytecodes_per_read": counts,
                          **{f"extra_bytecodes_{k}": counts[k] - counts["ours"] for k in kinds[1:]}}))
        return
    runs = []
    for _ in range(args.rounds):
        for kind in kinds:
            run = uvloop.run(one_round(kind, args.reads))
            print(json.dumps(run), flush=True)
            runs.append(run)
    summary = {"machine": machine()}
    for kind in kinds:
        summary[kind] = statistics.median(r["client_cpu_us_per_read"] for r in runs if r["client"] == kind)
    for kind in kinds[1:]:
        summary[f"extra_us_{kind}"] = round(summary[kind] - summary["ours"], 2)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
