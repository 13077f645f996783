"""Python bytecodes per direct point create or read, by function: where the interpreter's work in
a request goes (docs/performance.md, "A direct create's envelope").

    python bench/direct_bytecodes.py                 # creates, 200 measured after 200 warm-up
    python bench/direct_bytecodes.py --op read       # point reads
    python bench/direct_bytecodes.py --top 80        # more functions
    python bench/direct_bytecodes.py --machinery     # and the replication machinery's sum

In-process: a regionlab of the default topology (3 regions, 12 replicas per partition), one
direct connection to the primary of partition 0 on a stand-in transport (no socket). Each create
is fed to the connection as one frame; then the loop runs until both links' deliveries (2 and
30 ms by default) are done, so the other regions' applies and the timers that run them are in the
count. sys.settrace counts opcode events per code object: a deterministic measure (the same code
gives the same count on any machine and any load), but of bytecodes, not instructions: work done
inside C functions (json, msgpack, hashing) counts as one call. For instructions use
bench/direct_split.py and bench/direct_bench.py (callgrind). --machinery also sums the functions
that commit a write to the replicas and carry it to the other regions (MACHINERY), clock reads
apart (docs/performance.md, "The replication machinery").
"""
import argparse
import asyncio
import collections
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvloop  # noqa: E402

from direct_split import connected  # noqa: E402
from regionlab.client.protocol import direct as D  # noqa: E402
from regionlab.emulator.server import Emulator  # noqa: E402
from regionlab.emulator.testing import make_config  # noqa: E402

WARMUP = 200
N = 200
KEYS = 50
DELIVERED_S = 0.035        # past the default topology's longest link lag (30 ms)
MACHINERY = re.compile(
    r"core/replica_set\.py:(_add|check_writable|apply_replicated|append|_replicate_to|_recompute_commit"
    r"|_drain_early|_refresh_lockstep)$|core/store\.py:(add|add_new|put|has)$"
    r"|core/partition\.py:(_recompute_global|_advance_global|_ship|_on_commit|for_write)$"
    r"|core/link\.py:|core/scheduler\.py:|runtime/clock\.py:(_fire|_arm|loop_time_at)$|core/account\.py:<lambda>$")


def _name(code) -> str:
    parts = code.co_filename.rsplit("/", 2)
    return f"{'/'.join(parts[-2:])}:{code.co_name}"


async def measure(op: str, n: int) -> collections.Counter:
    emu = Emulator(make_config(ru_limits=False))
    await emu.start()
    counts: collections.Counter = collections.Counter()
    try:
        a = emu.account
        db = a.create_database({"id": "b"})
        c = a.create_container(db, {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}})
        region = a.regions[0].name
        rs = c.partitions[0].replica_sets[region]
        index = next(i for i, r in enumerate(rs.replicas) if r.role == "primary")
        node = emu.direct.nodes[(region, a.placement.replica_nodes(region, c.rid, "0")[index])]
        conn = connected(node, emu.config.key)
        key = D.replica_key(c.rid, "0", index)

        def create(i: int) -> bytes:
            body = b'{"id":"t%d","pk":"p%d","f":"%s"}' % (i, i % KEYS, b"x" * 140)
            return D.encode(D.request(2, 1, "create", key, pk='["p%d"]' % (i % KEYS), body=body))
        frames = [create(i) for i in range(WARMUP + n)]
        if op == "read":
            frames = [D.encode(D.request(2, 1, "read", key, item=f"t{i % WARMUP}", pk='["p%d"]' % (i % KEYS)))
                      for i in range(WARMUP + n)]
            for i in range(WARMUP):              # the items the reads find
                conn.data_received(create(i))
        loop = asyncio.get_running_loop()

        async def one(frame: bytes) -> None:
            conn.data_received(frame)
            done = loop.create_future()
            loop.call_later(DELIVERED_S, done.set_result, None)
            await done

        for frame in frames[:WARMUP]:
            await one(frame)

        def tracer(frame, event, arg):
            frame.f_trace_opcodes = True
            name = _name(frame.f_code)

            def local(frame, event, arg):
                if event == "opcode":
                    counts[name] += 1
                return local
            return local
        for frame in frames[WARMUP:]:
            sys.settrace(tracer)
            await one(frame)
            sys.settrace(None)
    finally:
        sys.settrace(None)
        await emu.stop()
    return counts


def main(argv) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--op", choices=("create", "read"), default="create")
    p.add_argument("--requests", type=int, default=N)
    p.add_argument("--top", type=int, default=50)
    p.add_argument("--machinery", action="store_true", help="sum the replication machinery's functions")
    args = p.parse_args(argv)
    counts = uvloop.run(measure(args.op, args.requests))
    for code in ("bench/direct_bytecodes.py:one", "bench/direct_bytecodes.py:tracer",
                 "bench/direct_bytecodes.py:measure"):
        counts.pop(code, None)                     # the harness's own frames
    total = sum(counts.values())
    print(f"# direct point {args.op}: {total / args.requests:.0f} bytecodes per request "
          f"(Python {sys.version.split()[0]})")
    for name, count in counts.most_common(args.top):
        print(f"{count / args.requests:8.1f}  {name}")
    if args.machinery:
        mine = sum(k for name, k in counts.items() if MACHINERY.search(name))
        clock = sum(k for name, k in counts.items() if name.endswith("runtime/clock.py:now_ms"))
        print(f"replication machinery: {mine / args.requests:.0f} bytecodes per {args.op} "
              f"(clock reads apart: {clock / args.requests:.0f})")


if __name__ == "__main__":
    main(sys.argv[1:])
