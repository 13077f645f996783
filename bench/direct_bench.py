"""Direct mode against the gateway, in the same server process (docs/performance.md, issue 12).

    python bench/direct_bench.py instructions   # callgrind: server instructions per request
    python bench/direct_bench.py throughput     # direct reads vs a bare uvloop+msgpack echo server
    python bench/direct_bench.py wakeups        # strace: loop wake-ups and writes per frame batch
    python bench/direct_bench.py fastpath       # what emulator/direct/point.py's fast path buys
    python bench/direct_bench.py                # all four

* instructions: one regionlab under valgrind's callgrind; after set-up and a warm-up the
  counters are zeroed, N requests go one at a time (gateway: HTTP keep-alive; direct: one
  connection, one request in flight), the counters are dumped; then the next phase. Instructions
  per request are the server's marginal cost, parsing and writing included, and do not depend on
  what else the machine is doing.
* throughput: a multiplexing load generator (C connections, D requests in flight on each, uvloop)
  against a direct node, alternated in rounds with the same generator against a bare
  uvloop+msgpack echo server speaking the same framing and protocol version (the ceiling: it
  decodes each frame and answers a reply of the same shape and size, a version 2 array, with
  nothing behind it). Medians; the ratio is what carries between machines.
* fastpath: the same load generator, point reads then creates, on the fast path (no request
  fault anywhere) and on the plain one (Service.handle and its path dispatch, which direct
  requests take while any request fault is on: here a latency fault on reads in another region,
  which touches none of them), alternated in rounds; medians.
* wakeups: strace logs the server's epoll_wait and write calls while B batches of K pipelined
  requests arrive, each batch in one send, and counts them from the first batch's read to the
  last reply's write (the idle seconds around, with the server's timers, left out): coalesced
  replies mean about one write and one wake-up per batch, not per request.
"""
import asyncio
import itertools
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from regionlab.client.protocol import direct as D  # noqa: E402
from instructions import requests, signed, start, total_instructions  # noqa: E402

N = 300
WARMUP = 100
ITEMS = 50
THROUGHPUT_S = 4
ROUNDS = 5
CONNECTIONS = 4
DEPTH = 32                     # requests in flight per connection
BATCHES = 20
BATCH_REQUESTS = 100
ITEM = {"f": "x" * 140}
CREATED = itertools.count()     # the ids of the creates the load makes


# ---- a blocking direct client (the bench's side; no emulator import) -------------------------
class Blocking:
    def __init__(self, port: int, key: str):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=300)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.dec = D.FrameDecoder()
        self.buf: list = []
        self.sock.sendall(D.encode(D.hello(agent="bench")))
        ch = self.next()
        self.version = ch["version"]
        self.sock.sendall(D.encode({"t": "auth", "mac": D.handshake_mac(key, ch["nonce"])}))
        assert self.next()["t"] == "ready"
        self.rid = 0

    def next(self) -> dict:
        while not self.buf:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("closed")
            self.buf += self.dec.feed(data)
        return self.buf.pop(0)

    def call(self, op, replica, **fields) -> dict:
        self.rid += 1
        self.sock.sendall(D.encode(D.request(self.version, self.rid, op, replica, **fields)))
        r = D.reply_fields(self.next())
        if r["status"] >= 400:
            raise RuntimeError(f"direct {fields.get('op')}: {r['status']}/{r['sub']}")
        return r


def addresses(port: int, key: str) -> dict:
    from email.utils import formatdate
    from regionlab.client.protocol.auth import authorization_header
    import http.client
    date = formatdate(usegmt=True)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    conn.request("GET", "/addresses/?$resolveFor=dbs/b/colls/c/docs", headers={
        "x-ms-date": date, "authorization": authorization_header(key, "GET", "addresses", "", date)})
    feed = json.loads(conn.getresponse().read())
    conn.close()
    primary = next(a for a in feed["Addresss"] if a["isPrimary"])
    secondary = next(a for a in feed["Addresss"] if not a["isPrimary"])
    return {"primary": D.parse_uri(primary["physcialUri"]), "secondary": D.parse_uri(secondary["physcialUri"])}


def setup(port: int) -> None:
    requests(port, [signed("POST", "/dbs", {"id": "b"}),
                    signed("POST", "/dbs/b/colls", {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash",
                                                                                 "version": 2}})])
    requests(port, [signed("POST", "/dbs/b/colls/c/docs", dict(ITEM, id=str(i), pk=f"p{i % ITEMS}"), f"p{i % ITEMS}")
                    for i in range(ITEMS)])


def _gateway_port(ready: dict) -> int:
    return int(ready["account_endpoint"].rsplit(":", 1)[1].strip("/"))


# ---- instructions -----------------------------------------------------------------------------
def instructions() -> list:
    from regionlab.emulator import defaults
    key = defaults.EMULATOR_KEY
    with tempfile.TemporaryDirectory() as d:
        proc, line = start([sys.executable, "-m", "regionlab.emulator", "--port", "0", "--control-port", "0",
                            "--no-ru-limits"], d)
        try:
            ready = json.loads(line)
            port = _gateway_port(ready)
            setup(port)
            addr = addresses(port, key)
            _, sport, skey = addr["secondary"]
            _, pport, pkey = addr["primary"]
            # Each connection opens at its phase's warm-up: one opened at the start sits idle while
            # the gateway phases run, and on a loaded machine under valgrind that can outlast the
            # node's idle timeout (60 s).
            conns = {}

            def reader():
                return conns.get("r") or conns.setdefault("r", Blocking(sport, key))

            def writer():
                return conns.get("w") or conns.setdefault("w", Blocking(pport, key))
            n = WARMUP + N
            phases = [
                ("gateway point read", lambda rng: requests(port, [signed("GET", f"/dbs/b/colls/c/docs/{i % ITEMS}", None,
                                                                         f"p{i % ITEMS}") for i in rng])),
                ("direct point read", lambda rng: [reader().call("read", skey, item=str(i % ITEMS),
                                                              pk=f'["p{i % ITEMS}"]') for i in rng]),
                ("gateway point create", lambda rng: requests(port, [signed("POST", "/dbs/b/colls/c/docs",
                                                                           dict(ITEM, id=f"g{i}", pk=f"p{i % ITEMS}"),
                                                                           f"p{i % ITEMS}") for i in rng])),
                ("direct point create", lambda rng: [writer().call("create", pkey, pk=f'["p{i % ITEMS}"]',
                                                                body=json.dumps(dict(ITEM, id=f"d{i}", pk=f"p{i % ITEMS}"),
                                                                               separators=(",", ":")).encode())
                                                    for i in rng])]
            rows = []
            for name, run in phases:
                run(range(WARMUP))
                subprocess.run(["callgrind_control", "-z", str(proc.pid)], capture_output=True, check=True)
                run(range(WARMUP, n))
                subprocess.run(["callgrind_control", "-d", str(proc.pid)], capture_output=True, check=True)
                rows.append((name, total_instructions(d) / N))
            return rows
        finally:
            proc.terminate()
            proc.wait(60)


# ---- throughput ---------------------------------------------------------------------------------
ECHO = """
import asyncio, struct, sys, uvloop, msgpack
sys.path.insert(0, %(root)r)
L = struct.Struct(">I")
BODY = b'{"id":"0","pk":"p0","f":"%(f)s","_rid":"AAAAAAAAAAAAAAAAAAAAAA==","_etag":"\\\\"0\\\\"","_ts":1}'
class P(asyncio.Protocol):
    def connection_made(self, t):
        self.t, self.buf = t, bytearray()
    def data_received(self, d):
        buf = self.buf
        buf += d
        out = []
        while len(buf) >= 4:
            n = L.unpack_from(buf)[0]
            if len(buf) < 4 + n:
                break
            req = msgpack.unpackb(bytes(buf[4:4 + n]))
            del buf[:4 + n]
            if type(req) is list:
                res = [2, req[1], 200, 0, BODY, 1.0, "0:0#1#1=1#2=0#3=0", 1, 1, 1, 1, '"0"', "secondary",
                       "%(activity)s", None]
            elif req["t"] == "hello":
                res = {"t": "challenge", "version": 2, "nonce": b"0" * 32}
            else:
                res = {"t": "ready"}
            b = msgpack.packb(res)
            out.append(L.pack(len(b)) + b)
        if out:
            self.t.write(b"".join(out))
async def main():
    s = await asyncio.get_running_loop().create_server(P, "127.0.0.1", 0)
    print(s.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()
uvloop.run(main())
"""


async def _load(port: int, key: str, replica: str, seconds: float, op: str = "read") -> float:
    """Replies per second from CONNECTIONS connections with DEPTH requests in flight each (point
    reads, or creates of new items)."""
    done = 0
    stop_at = time.perf_counter() + seconds

    def request(version: int, i: int) -> bytes:
        if op == "read":
            return D.encode(D.request(version, i, "read", replica, item=str(i % ITEMS), pk=f'["p{i % ITEMS}"]'))
        body = json.dumps(dict(ITEM, id=f"load{next(CREATED)}", pk=f"p{i % ITEMS}"), separators=(",", ":")).encode()
        return D.encode(D.request(version, i, "create", replica, pk=f'["p{i % ITEMS}"]', body=body))

    async def one():
        nonlocal done
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        dec = D.FrameDecoder()
        pending: list = []

        async def frame():
            while not pending:
                pending.extend(dec.feed(await reader.read(1 << 20)))
            return pending.pop(0)
        writer.write(D.encode(D.hello(agent="bench")))
        ch = await frame()
        writer.write(D.encode({"t": "auth", "mac": D.handshake_mac(key, ch["nonce"])}))
        await frame()
        version = ch["version"]
        writer.write(b"".join(request(version, i) for i in range(DEPTH)))
        while time.perf_counter() < stop_at:
            data = await reader.read(1 << 20)
            frames = dec.feed(data)
            done += len(frames)
            failed = [f for f in frames if f[2] >= 400]
            if failed:
                raise RuntimeError(f"direct {op}: {D.named_reply(failed[0])}")
            writer.write(b"".join(request(version, f[1]) for f in frames))
        writer.close()
    await asyncio.gather(*(one() for _ in range(CONNECTIONS)))
    return done / seconds


def throughput() -> list:
    import uvloop
    from regionlab.emulator import defaults
    from server_proc import ServerProcess
    key = defaults.EMULATOR_KEY
    root = str(Path(__file__).resolve().parent.parent)
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "echo.py")
        Path(script).write_text(ECHO % {"root": root, "f": ITEM["f"], "activity": "0" * 36})
        with ServerProcess(script=script, parse=int) as echo, \
                ServerProcess("--no-ru-limits") as emu:
            port = _gateway_port(emu.ready)
            setup(port)
            _, sport, skey = addresses(port, key)["secondary"]
            echo_rates, direct_rates = [], []
            for _ in range(ROUNDS):
                echo_rates.append(uvloop.run(_load(echo.ready, key, skey, THROUGHPUT_S)))
                direct_rates.append(uvloop.run(_load(sport, key, skey, THROUGHPUT_S)))
    e, r = statistics.median(echo_rates), statistics.median(direct_rates)
    return [("bare uvloop+msgpack echo (ceiling)", e), ("direct point read", r), ("ratio", r / e)]


def fastpath() -> list:
    """Point reads and creates per second on the fast path and on the plain one (medians)."""
    import urllib.request
    import uvloop
    from regionlab.emulator import defaults
    from server_proc import ServerProcess
    key = defaults.EMULATOR_KEY
    with ServerProcess("--no-ru-limits") as emu:
        port = _gateway_port(emu.ready)
        setup(port)
        addr = addresses(port, key)
        ctl = emu.ready["control_endpoint"].rstrip("/")
        fault = json.dumps({"type": "latency", "region": "West US", "delay_ms": 1, "op": "read"}).encode()
        rows = []
        for op, (_, rport, rkey) in (("read", addr["secondary"]), ("create", addr["primary"])):
            rates: dict = {"fast": [], "plain": []}
            for _ in range(ROUNDS):
                rates["fast"].append(uvloop.run(_load(rport, key, rkey, THROUGHPUT_S, op)))
                req = urllib.request.Request(ctl + "/faults", data=fault, method="POST",
                                             headers={"content-type": "application/json"})
                with urllib.request.urlopen(req, timeout=30) as r:
                    fid = json.loads(r.read())["id"]
                rates["plain"].append(uvloop.run(_load(rport, key, rkey, THROUGHPUT_S, op)))
                urllib.request.urlopen(urllib.request.Request(f"{ctl}/faults/{fid}", method="DELETE", headers={
                    "content-type": "application/json"}), timeout=30).read()
            fast, plain = statistics.median(rates["fast"]), statistics.median(rates["plain"])
            rows += [(f"direct point {op}, fast path", fast), (f"direct point {op}, plain path", plain),
                     (f"{op}: fast / plain", fast / plain)]
    return rows


# ---- wake-ups -----------------------------------------------------------------------------------
def wakeups() -> dict:
    from regionlab.emulator import defaults
    key = defaults.EMULATOR_KEY
    with tempfile.TemporaryDirectory() as d:
        proc = subprocess.Popen([sys.executable, "-m", "regionlab.emulator", "--port", "0", "--control-port", "0",
                                 "--no-ru-limits"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            ready = json.loads(proc.stdout.readline())
            port = _gateway_port(ready)
            setup(port)
            _, sport, skey = addresses(port, key)["secondary"]
            client = Blocking(sport, key)
            out = os.path.join(d, "strace.txt")
            tracer = subprocess.Popen(["strace", "-f", "-o", out, "-e", "trace=epoll_wait,epoll_pwait,write,writev,"
                                       "sendto,sendmsg,read,recvfrom", "-p", str(proc.pid)],
                                      stderr=subprocess.DEVNULL)
            time.sleep(1.0)                 # strace attaches asynchronously
            for b in range(BATCHES):
                batch = b"".join(D.encode(D.request(client.version, b * BATCH_REQUESTS + i, "read", skey,
                                                    item=str(i % ITEMS), pk=f'["p{i % ITEMS}"]'))
                                 for i in range(BATCH_REQUESTS))
                client.sock.sendall(batch)
                for _ in range(BATCH_REQUESTS):
                    client.next()
            time.sleep(0.5)
            tracer.terminate()
            tracer.wait(30)
            return _window_counts(Path(out).read_text().splitlines())
        finally:
            proc.terminate()
            proc.wait(60)


_SYSCALL = re.compile(r"^(?:\[pid\s+\d+\]\s+|\d+\s+)?(\w+)\(")


def _window_counts(lines: list) -> dict:
    """Syscalls from the first read of a batch to the last reply write: the wake-ups that the
    batches caused (the attach and idle seconds around them, with their timers, are left out).
    The wake-up that delivered the first batch comes before the window, so it is added."""
    calls = [m.group(1) for m in map(_SYSCALL.match, lines) if m]
    reads = [i for i, c in enumerate(calls) if c in ("read", "recvfrom")]
    writes = [i for i, c in enumerate(calls) if c in ("write", "writev", "sendto", "sendmsg")]
    counts: dict = {}
    if reads and writes:
        for c in calls[reads[0]:writes[-1] + 1]:
            counts[c] = counts.get(c, 0) + 1
        counts["epoll_pwait"] = counts.get("epoll_pwait", 0) + 1
    return counts


def machine() -> str:
    return f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, {os.uname().sysname} {os.uname().release}"


def main(argv) -> None:
    which = argv[1:] or ["instructions", "throughput", "wakeups", "fastpath"]
    print(f"# direct_bench on {machine()}")
    if "instructions" in which:
        rows = dict(instructions())
        for name, ins in rows.items():
            print(f"{name:28} {ins / 1000:8.1f} k instructions/request")
        print(f"direct/gateway read   {rows['direct point read'] / rows['gateway point read']:.2f}x")
        print(f"direct/gateway create {rows['direct point create'] / rows['gateway point create']:.2f}x")
    if "throughput" in which:
        for name, v in throughput():
            print(f"{name:36} {v:12,.2f}" + ("" if name == "ratio" else " replies/s"))
    if "fastpath" in which:
        for name, v in fastpath():
            print(f"{name:36} {v:12,.2f}" + ("" if ":" in name else " replies/s"))
    if "wakeups" in which:
        counts = wakeups()
        waits = counts.get("epoll_wait", 0) + counts.get("epoll_pwait", 0)
        writes = sum(counts.get(k, 0) for k in ("write", "writev", "sendto", "sendmsg"))
        print(f"{BATCHES} batches x {BATCH_REQUESTS} pipelined reads: {waits} loop wake-ups, {writes} writes "
              f"({waits / BATCHES:.1f} and {writes / BATCHES:.1f} per batch; {counts})")


if __name__ == "__main__":
    main(sys.argv)
