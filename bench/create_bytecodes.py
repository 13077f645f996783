"""Python bytecodes per direct create, per function: a deterministic proxy for instructions
(docs/performance.md, "The replication machinery"), in-process, with the create's deliveries to
the other regions (each create waits a loop turn past the longest link's lag).

    python bench/create_bytecodes.py [creates] [--machinery]

A real Emulator on this event loop (uvloop); a direct connection fed request frames straight into
`data_received` (no socket). After as many creates again to warm up, sys.settrace counts every
opcode event per function. --machinery also sums the functions that commit a write to the
replicas and carry it to the other regions (MACHINERY), clock reads apart.
"""
import asyncio
import collections
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvloop  # noqa: E402

from client.protocol import direct as D  # noqa: E402
from emulator.runtime.server import Emulator  # noqa: E402
from emulator.testing import make_config  # noqa: E402

DELIVERED_S = 0.035                    # past the default topology's longest link lag (30 ms)
MACHINERY = re.compile(
    r"core/replica_set\.py:(_add|check_writable|apply_replicated|append|_replicate_to|_recompute_commit"
    r"|_drain_early|_refresh_lockstep)$|core/store\.py:(add|add_new|put|has)$"
    r"|core/partition\.py:(_recompute_global|_advance_global|_ship|_on_commit|for_write)$"
    r"|core/link\.py:|core/scheduler\.py:|runtime/clock\.py:(_fire|_arm|loop_time_at)$|core/account\.py:<lambda>$")


class Sink:
    """The transport a direct connection writes its replies to: dropped."""

    def write(self, data): pass
    def set_write_buffer_limits(self, high): pass
    def close(self): pass
    def abort(self): pass


def tracer(counts):
    def trace(frame, event, arg):
        frame.f_trace_opcodes = True
        code = frame.f_code
        parts = code.co_filename.rsplit("/", 2)
        name = f"{parts[-2]}/{parts[-1]}:{code.co_name}"

        def local(frame, event, arg):
            if event == "opcode":
                counts[name] += 1
            return local
        return local
    return trace


async def main(n: int, machinery: bool) -> None:
    emu = Emulator(make_config(ru_limits=False))
    await emu.start()
    a = emu.account
    db = a.create_database({"id": "b"})
    c = a.create_container(db, {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}})
    region = a.write_regions[0]
    rs = c.partitions[0].replica_sets[region]
    primary = next(i for i, r in enumerate(rs.replicas) if r is rs.primary)
    node = a.placement.replica_nodes(region, c.rid, "0")[primary]
    conn = emu.direct.nodes[(region, node)]()
    conn.connection_made(Sink())
    conn.state, conn.version, conn.compact = "ready", 2, True
    key = D.replica_key(c.rid, "0", primary)
    frames = [D.encode(D.request(2, 1, "create", key, pk='["p%d"]' % (i % 50),
                                 body=b'{"id":"t%d","pk":"p%d","f":"%s"}' % (i, i % 50, b"x" * 140)))
              for i in range(2 * n)]
    loop = asyncio.get_running_loop()

    async def one(frame):
        conn.data_received(frame)
        conn._out.clear()
        done = loop.create_future()
        loop.call_later(DELIVERED_S, done.set_result, None)
        await done
    for f in frames[:n]:
        await one(f)
    counts = collections.Counter()
    sys.settrace(tracer(counts))
    for f in frames[n:]:
        await one(f)
    sys.settrace(None)
    print(f"# create_bytecodes on {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    print(f"bytecodes per create: {sum(counts.values()) / n:.0f}")
    for name, k in counts.most_common(40):
        print(f"{k / n:8.1f}  {name}")
    if machinery:
        mine = sum(k for name, k in counts.items() if MACHINERY.search(name))
        clock = sum(k for name, k in counts.items() if name.endswith("runtime/clock.py:now_ms"))
        print(f"replication machinery: {mine / n:.0f} bytecodes per create (clock reads apart: {clock / n:.0f})")
    await emu.stop()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    uvloop.run(main(int(args[0]) if args else 200, "--machinery" in sys.argv))
