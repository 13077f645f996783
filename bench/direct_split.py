"""Where a direct point read's and create's instructions go: each step of the server's path, run
in-process on a node's connection object (no sockets) under callgrind, per call
(docs/performance.md). The last phase runs creates on the real event loop with their deliveries
to the other regions (the links' timers), one at a time with a loop turn between.

    python bench/direct_split.py          # re-runs itself under valgrind --tool=callgrind

Each phase runs its step 200 times to warm up, zeroes the counters (callgrind_control -z),
runs it 2,000 times and dumps: instructions / 2,000 is the step's cost.
"""
import asyncio, glob, os, subprocess, sys, tempfile
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import uvloop
from regionlab.emulator.testing import make_config
from regionlab.emulator.server import Emulator
from regionlab.emulator.core.documents import Writer
from regionlab.emulator.core.throttle import CREATE
from regionlab.emulator.core.validation import check_id, parse_json_body
from regionlab.emulator.core.container import canonical_pk_json
from regionlab.emulator.runtime import direct_ops
from regionlab.emulator.service import documents, responses, sessions
from regionlab.client.protocol import direct as D
OUT = sys.argv[1] if len(sys.argv) > 1 else None
N = 2000
WARMUP = 200
class T:
    def write(self, b): pass
    def set_write_buffer_limits(self, high): pass
    def close(self): pass
    def abort(self): pass
def total():
    newest = max(glob.glob(OUT + "*"), key=os.path.getmtime)
    for line in open(newest):
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
def phase(name, fn, n=N):
    """fn's instructions per call, from n calls after WARMUP."""
    for _ in range(WARMUP): fn()
    subprocess.run(["callgrind_control", "-z", str(os.getpid())], capture_output=True)
    for _ in range(n): fn()
    subprocess.run(["callgrind_control", "-d", str(os.getpid())], capture_output=True)
    print(f"{name:28} {total()/n/1000:7.1f} k", flush=True)
async def main():
    emu = Emulator(make_config(ru_limits=False))
    await emu.start()
    a = emu.account
    db = a.create_database({"id": "b"})
    c = a.create_container(db, {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}})
    for i in range(50):
        w = Writer(c, "East US", canonical_pk_json([f"p{i}"]), [f"p{i}"], a.clock.now_ms())
        w.create({"id": str(i), "pk": f"p{i}", "f": "x" * 140})
        w.commit()
    place = a.placement.replica_nodes("East US", c.rid, "0")
    node = emu.direct.nodes[("East US", place[1])]
    key = D.replica_key(c.rid, "0", 1)
    conn = node()
    conn.connection_made(T())
    conn.state = "ready"                   # the handshake is not what is measured
    conn.version, conn.compact = 2, True
    frame = D.request(2, 1, "read", key, item="3", pk='["p3"]')
    raw = D.encode(frame)
    phase("empty", lambda: None)
    phase("data_received (whole)", lambda: conn.data_received(raw))
    conn._out.clear()
    batch = b"".join(D.encode(D.request(2, i, "read", key, item=str(i % 50), pk=f'["p{i % 50}"]')) for i in range(32))

    def batched():
        conn.data_received(batch)
        conn._out.clear()
    phase("data_received, 32 reads in one buffer (per read)", batched, N // 32)
    print("  (divide the line above by 32)", flush=True)
    dec = D.FrameDecoder()
    phase("decode", lambda: dec.feed(raw))

    def array():
        conn._in_data = True
        conn._array(frame)
        conn._in_data = False
        conn._out.clear()
    phase("_array (after decode, before flush)", array)
    phase(" activity id", responses.activity_id)
    phase(" counters", lambda: conn.node.hot.__setitem__(0, conn.node.hot[0] + 1))

    def flush():
        conn._out += (b"1234", b"x" * 300)
        conn._flush()
    phase("flush (join + write)", flush)
    target = node.resolve(key, False)
    phase(" resolve", lambda: node.resolve(key, False))
    phase("read (direct_ops.read)", lambda: direct_ops.read(a, "East US", target, 1, "3", '["p3"]', None, None, None,
                                                             "x" * 36))
    phase(" token", lambda: sessions.token(target.rs, 50))
    res = direct_ops.read(a, "East US", target, 1, "3", '["p3"]', None, None, None, "x" * 36)
    phase(" encode", lambda: D.encode(res))

    def send():
        conn._send_reply(res)
        conn._out.clear()
    phase("send (encode + queue)", send)
    pkey = D.replica_key(c.rid, "0", next(i for i, r in enumerate(target.rs.replicas) if r.role == "primary"))
    pnode = emu.direct.nodes[("East US", place[int(pkey.rsplit("/", 1)[1])])]
    pconn = pnode()
    pconn.connection_made(T())
    pconn.state, pconn.version, pconn.compact = "ready", 2, True
    await create_stream(pconn, pkey)
    creates = iter([D.encode(D.request(2, 1, "create", pkey, pk='["p3"]',
                                       body=b'{"id":"n%d","pk":"p3","f":"%s"}' % (i, b"x" * 140)))
                    for i in range(WARMUP + N)])

    def create():
        pconn.data_received(next(creates))
        pconn._out.clear()
    phase("create: data_received (whole)", create)     # without the link deliveries (timers run later)
    core_bodies = iter([b'{"id":"k%d","pk":"p3","f":"%s"}' % (i, b"x" * 140) for i in range(WARMUP + N)])
    pk_json = canonical_pk_json(["p3"])

    def core_create():
        doc = parse_json_body(next(core_bodies))
        check_id(doc.get("id"))
        w = Writer(c, "East US", pk_json, ["p3"], a.clock.now_ms())
        w.create(doc)
        a.throttle.admit_writer(w, CREATE)
        w.commit()
    phase("create: the core's steps only", core_create)
    await create_steps(a, c, pconn, pkey)
    await emu.stop()


async def create_steps(a, c, pconn, pkey) -> None:
    """A direct create's own steps, one by one."""
    gw = pconn.gw
    target = pconn.node.resolve(pkey, True)
    phase(" create: resolve (the primary)", lambda: pconn.node.resolve(pkey, True))
    staged = iter([b'{"id":"s%d","pk":"p3","f":"%s"}' % (i, b"x" * 140) for i in range(2 * (WARMUP + N))])
    pk_json = canonical_pk_json(["p3"])

    def stage():
        return documents.stage_body(gw, gw.region, c, pk_json, ["p3"], next(staged), False, None)
    phase(" create: stage_body (parse, check, Writer, stage)", stage)

    def commit():
        writer, _, _ = stage()
        a.throttle.admit_writer(writer, CREATE)
        writer.commit()
    phase(" create: stage_body + admit + commit", commit)
    res = [2, 1, 201, 0, b"x" * 300, 5.71, sessions.token(target.rs, target.rs.lsn), 9, 9, 8, 9,
           '"00000000-0000-0000000000000009"', "primary", "x" * 36, None]
    phase(" create: the reply array's msgpack encode", lambda: D.pack(res))


async def create_stream(pconn, pkey) -> None:
    """Creates with their deliveries to the other regions, on the real loop. Run before the other
    create phases: those leave thousands of commits queued on the links (the loop does not turn
    in a synchronous phase) and stores that many items larger."""
    frames = iter([D.encode(D.request(2, 1, "create", pkey, pk='["p3"]',
                                      body=b'{"id":"t%d","pk":"p3","f":"%s"}' % (i, b"x" * 140)))
                   for i in range(WARMUP + N)])
    counts, created = pconn.node.hot, 1            # DirectNode.hot[HOT_CREATED]

    async def turn():
        await asyncio.sleep(0)

    async def stream():
        # One at a time, the loop turning once between, as between a client's requests: the
        # links' timers (2 and 30 ms) run in those turns, so the deliveries are in the count.
        answered = counts[created]
        pconn.data_received(next(frames))
        if counts[created] != answered + 1:
            raise RuntimeError("a create was not answered 201 at once")
        pconn._out.clear()
        await asyncio.sleep(0)
    await async_phase("the loop turning once (asyncio.sleep(0))", turn)
    await async_phase("create with its deliveries, back to back (+ a turn)", stream)


async def async_phase(name, fn, n=N):
    """phase() for a coroutine function."""
    for _ in range(WARMUP):
        await fn()
    subprocess.run(["callgrind_control", "-z", str(os.getpid())], capture_output=True)
    for _ in range(n):
        await fn()
    subprocess.run(["callgrind_control", "-d", str(os.getpid())], capture_output=True)
    print(f"{name:28} {total()/n/1000:7.1f} k", flush=True)


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
