"""Where a direct point read's and create's instructions go: each layer of the server's path, run
in-process on a node's connection object (no socket) under callgrind, per call (docs/direct.md,
"Performance"). The layers, outside in: the session (emulator/direct/session.py: decode, the
request's envelope, the reply's encoding), the node's target resolution, the adapter and the
fast path (adapter.py, point.py), the service's read (service/documents.py read_point); and the
same request through the plain path (Service.handle and its path dispatch), which is what the
fast path saves. The last phases run creates on the real event loop with their deliveries to
the other regions (the links' timers), one at a time with a loop turn between.

    python bench/direct_split.py          # re-runs itself under valgrind --tool=callgrind

Each phase runs its step 200 times to warm up, zeroes the counters (callgrind_control -z),
runs it 2,000 times and dumps: instructions / 2,000 is the step's cost (an empty step's cost,
the harness's own, is the first line).
"""
import asyncio
import glob
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvloop  # noqa: E402

from regionlab.client.protocol import direct as D  # noqa: E402
from regionlab.emulator.core.container import canonical_pk_json  # noqa: E402
from regionlab.emulator.core.documents import Writer  # noqa: E402
from regionlab.emulator.direct import adapter, point  # noqa: E402
from regionlab.emulator.server import Emulator  # noqa: E402
from regionlab.emulator.service import documents  # noqa: E402
from regionlab.emulator.testing import make_config  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else None
N = 2000
WARMUP = 200
ITEMS = 50


class Transport:
    """What a direct connection writes to: kept only while `kept` is a list (the handshake)."""
    def __init__(self):
        self.kept = []

    def write(self, data):
        if self.kept is not None:
            self.kept.append(data)

    def writelines(self, chunks):
        self.write(b"".join(chunks))

    def set_write_buffer_limits(self, high): pass
    def close(self): pass
    def abort(self): pass


def connected(node, key: str):
    """A connection to node with the real handshake done, in process (not measured)."""
    conn = node()
    transport = Transport()
    conn.connection_made(transport)
    conn.data_received(D.encode(D.hello()))
    (challenge,) = D.FrameDecoder().feed(b"".join(transport.kept))
    conn.data_received(D.encode(D.auth(D.handshake_mac(key, challenge["nonce"]))))
    assert D.FrameDecoder().feed(b"".join(transport.kept))[-1] == {"t": D.READY}
    transport.kept = None
    return conn


def total() -> int:
    newest = max(glob.glob(OUT + "*"), key=os.path.getmtime)
    for line in open(newest):
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])


def phase(name: str, fn, n: int = N) -> None:
    """fn's instructions per call, from n calls after WARMUP."""
    for _ in range(WARMUP):
        fn()
    subprocess.run(["callgrind_control", "-z", str(os.getpid())], capture_output=True)
    for _ in range(n):
        fn()
    subprocess.run(["callgrind_control", "-d", str(os.getpid())], capture_output=True)
    print(f"{name:52} {total() / n / 1000:7.1f} k", flush=True)


async def main() -> None:
    emu = Emulator(make_config(ru_limits=False))
    await emu.start()
    a = emu.account
    db = a.create_database({"id": "b"})
    c = a.create_container(db, {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}})
    for i in range(ITEMS):
        w = Writer(c, "East US", canonical_pk_json([f"p{i}"]), [f"p{i}"], a.clock.now_ms())
        w.create({"id": str(i), "pk": f"p{i}", "f": "x" * 140})
        w.commit()
    place = a.placement.replica_nodes("East US", c.rid, "0")
    rs = c.partitions[0].replica_sets["East US"]
    secondary = next(i for i, r in enumerate(rs.replicas) if r.role != "primary")
    node = emu.direct.nodes[("East US", place[secondary])]
    key = D.replica_key(c.rid, "0", secondary)
    conn = connected(node, emu.config.key)
    await reads(conn, node, key, c)
    primary = next(i for i, r in enumerate(rs.replicas) if r.role == "primary")
    pnode = emu.direct.nodes[("East US", place[primary])]
    pkey = D.replica_key(c.rid, "0", primary)
    await creates(connected(pnode, emu.config.key), pnode, pkey)
    await emu.stop()


async def reads(conn, node, key: str, c) -> None:
    frame = D.request(2, 1, "read", key, item="3", pk='["p3"]')
    raw = D.encode(frame)
    session = conn.session
    phase("empty", lambda: None)
    phase("read: data_received (whole)", lambda: conn.data_received(raw))
    batch = b"".join(D.encode(D.request(2, i, "read", key, item=str(i % ITEMS), pk=f'["p{i % ITEMS}"]'))
                     for i in range(32))
    phase("read: data_received, 32 reads in one buffer (x32)", lambda: conn.data_received(batch), N // 32)
    phase(" session.receive (decode)", lambda: session.receive(raw))
    phase(" session.frame (the request's envelope, + a copy)", lambda: session.frame(list(frame)))
    phase("  the copy", lambda: list(frame))
    phase(" targets.resolve", lambda: node.targets.resolve(key, False))
    target = node.targets.resolve(key, False)
    req = session.frame(list(frame))
    phase(" adapter.serve (resolve, fields, point.read)", lambda: adapter.serve(node, req, True, [None, None]))
    parsed = ('["p3"]', ["p3"])
    phase("  point.read", lambda: point.read(target, 1, "3", None, parsed, "x" * 36))
    phase("   documents.read_point (the service's)", lambda: documents.read_point(
        target.reader, c, target.rs, '["p3"]', "3", "Session", None))
    res = point.read(target, 1, "3", None, parsed, "x" * 36)

    def send():
        session.send_reply(res)
        session.out.clear()
    phase(" session.send_reply (encode + queue)", send)

    def flush():
        session.out.append(b"x" * 300)
        conn._flush()
    phase(" flush (join + write)", flush)
    phase("the plain path: adapter.serve(..., fast=False)", lambda: adapter.serve(node, req, False, [None, None]))


async def creates(conn, node, key: str) -> None:
    await create_stream(conn, node, key)
    frames = iter([D.encode(D.request(2, 1, "create", key, pk='["p3"]',
                                      body=b'{"id":"n%d","pk":"p3","f":"%s"}' % (i, b"x" * 140)))
                   for i in range(WARMUP + N)])
    phase("create: data_received (whole)", lambda: conn.data_received(next(frames)))   # deliveries come later
    target = node.targets.resolve(key, True)
    bodies = iter([b'{"id":"g%d","pk":"p3","f":"%s"}' % (i, b"x" * 140) for i in range(WARMUP + N)])
    phase("the plain path: adapter.serve(..., fast=False)", lambda: adapter.serve(
        node, [1, 1, "create", key, None, '["p3"]', next(bodies), None], False, [None, None]))
    pk_json = canonical_pk_json(["p3"])
    a = node.svc.account
    c = target.container
    docs = iter([{"id": f"k{i}", "pk": "p3", "f": "x" * 140} for i in range(WARMUP + N)])

    def core_create():
        w = Writer(c, "East US", pk_json, ["p3"], a.clock.now_ms())
        w.create(next(docs))
        a.throttle.admit_writer(w, "create")
        w.commit()
    phase("create: the core's steps only", core_create)


async def create_stream(conn, node, key: str) -> None:
    """Creates with their deliveries to the other regions, on the real loop. Run before the other
    create phases: those leave thousands of commits queued on the links (the loop does not turn
    in a synchronous phase) and stores that many items larger."""
    frames = iter([D.encode(D.request(2, 1, "create", key, pk='["p3"]',
                                      body=b'{"id":"t%d","pk":"p3","f":"%s"}' % (i, b"x" * 140)))
                   for i in range(WARMUP + N)])
    counts = node.svc.requests_served
    created = ("create", key, 201, 0)

    async def turn():
        await asyncio.sleep(0)

    async def stream():
        # One at a time, the loop turning once between, as between a client's requests: the
        # links' timers (2 and 30 ms) run in those turns, so the deliveries are in the count.
        answered = counts[created]
        conn.data_received(next(frames))
        if counts[created] != answered + 1:
            raise RuntimeError("a create was not answered 201 at once")
        await asyncio.sleep(0)
    await async_phase("the loop turning once (asyncio.sleep(0))", turn)
    await async_phase("create with its deliveries, back to back (+ a turn)", stream)


async def async_phase(name: str, fn, n: int = N) -> None:
    """phase() for a coroutine function."""
    for _ in range(WARMUP):
        await fn()
    subprocess.run(["callgrind_control", "-z", str(os.getpid())], capture_output=True)
    for _ in range(n):
        await fn()
    subprocess.run(["callgrind_control", "-d", str(os.getpid())], capture_output=True)
    print(f"{name:52} {total() / n / 1000:7.1f} k", flush=True)


def relaunch() -> None:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
                        __file__, out], stderr=subprocess.DEVNULL, check=True)


if __name__ == "__main__":
    if OUT is None:
        print(f"# direct_split on {os.cpu_count()} CPUs, Python {sys.version.split()[0]}", flush=True)
        relaunch()
    else:
        uvloop.run(main())
