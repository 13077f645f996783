"""Where a direct point read's instructions go: each step of the server's path, run in-process
on a node's connection object (no sockets) under callgrind, per call (docs/performance.md).

    python bench/direct_split.py          # re-runs itself under valgrind --tool=callgrind

Each phase runs its step 200 times to warm up, zeroes the counters (callgrind_control -z),
runs it 2,000 times and dumps: instructions / 2,000 is the step's cost.
"""
import glob, os, subprocess, sys, tempfile
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import uvloop
from emulator.testing import make_config
from emulator.runtime.server import Emulator
from emulator.core.documents import Writer
from emulator.core.container import canonical_pk_json
from emulator.runtime import direct_connection as DC
from emulator.gateway import documents, sessions
from client.protocol import direct as D
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
    frame = {"t": "req", "id": 1, "op": "read", "replica": key, "item": "3", "pk": '["p3"]'}
    raw = D.encode(frame)
    phase("empty", lambda: None)
    phase("data_received (whole)", lambda: conn.data_received(raw))
    dec = D.FrameDecoder()
    phase("decode", lambda: dec.feed(raw))
    phase("prepare", lambda: conn._prepare(frame, "read"))
    call, target, item = conn._prepare(frame, "read")
    phase("_read", lambda: DC._read(call, target, item))
    phase(" read_target", lambda: documents.read_target(call, target.container, item, False))
    rs, pk_json, id, cons, sess = documents.read_target(call, target.container, item, False)
    phase(" read_point", lambda: documents.read_point(call, target.container, rs, pk_json, id, cons, sess))
    phase(" token", lambda: sessions.token(rs, 50))
    res = DC._read(call, target, item)
    def ans():
        conn.pending += 1
        target.replica.in_flight += 1
        conn._answer(1, "read", call, target, dict(res))
        conn._out.clear()
    phase("answer", ans)
    r2 = dict(res, t="res", id=1, activity_id="x"*36, lsn=1, quorum_lsn=1, global_lsn=1, role="secondary")
    phase(" encode", lambda: D.encode(r2))
    phase(" resolve", lambda: node.resolve(key, False))
    await emu.stop()


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
