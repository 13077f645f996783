"""Instructions per request, counted by valgrind's callgrind: a measure of server cost that does
not depend on what else the machine is doing (CPU-time numbers on a shared 2-core machine do).

    python bench/instructions.py            # regionlab point read and create, and bare aiohttp

The server runs under callgrind; after start-up and a warm-up, the counters are zeroed, N
requests are sent one at a time over a keep-alive connection, and the counters are dumped.
Instructions / N is the marginal cost of one request, HTTP parsing and writing included.
Multiply by the machine's nanoseconds per instruction (about 0.25-0.4 here) for a CPU time.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile
from email.utils import formatdate
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration import BARE  # noqa: E402
from regionlab.client.protocol.auth import authorization_header, resource_type_and_link  # noqa: E402
from regionlab.emulator import defaults  # noqa: E402

N = 300
WARMUP = 100


def signed(method: str, path: str, body=None, pk=None):
    date = formatdate(usegmt=True)
    rtype, link = resource_type_and_link(path)
    h = {"authorization": authorization_header(defaults.EMULATOR_KEY, method, rtype, link, date),
         "x-ms-date": date, "x-ms-version": "2020-07-15", "content-type": "application/json"}
    if pk is not None:
        h["x-ms-documentdb-partitionkey"] = json.dumps([pk])
    # Bodies compact, as the SDKs send them (azure-cosmos: separators=(",", ":"); JSON.stringify).
    return method, path, (json.dumps(body, separators=(",", ":")).encode() if body is not None else None), h


def start(cmd, out_dir):
    out = os.path.join(out_dir, "cg.out")
    proc = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return proc, proc.stdout.readline()


def requests(port, reqs):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    for method, path, body, headers in reqs:
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        r.read()
        if r.status >= 400:
            raise RuntimeError(f"{method} {path}: {r.status}")
    conn.close()


def measure(proc, port, reqs) -> float:
    requests(port, reqs[:WARMUP])
    subprocess.run(["callgrind_control", "-z", str(proc.pid)], capture_output=True, check=True)
    requests(port, reqs[WARMUP:])
    subprocess.run(["callgrind_control", "-d", str(proc.pid)], capture_output=True, text=True, check=True)
    return len(reqs) - WARMUP


def total_instructions(out_dir) -> int:
    newest = max(glob.glob(os.path.join(out_dir, "cg.out*")), key=os.path.getmtime)
    with open(newest) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    raise RuntimeError("no totals in callgrind output")


def run_regionlab(op: str) -> float:
    with tempfile.TemporaryDirectory() as d:
        proc, line = start([sys.executable, "-m", "regionlab.emulator", "--port", "0", "--control-port", "0"], d)
        try:
            base = json.loads(line)["account_endpoint"]
            port = int(base.rsplit(":", 1)[1].strip("/"))
            setup = [signed("POST", "/dbs", {"id": "b"}),
                     signed("POST", "/dbs/b/colls", {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}}),]
            requests(port, setup)
            # Big offer headers need another path; the default 400 RU/s is enough at this pace.
            n = WARMUP + N
            if op == "create":
                reqs = [signed("POST", "/dbs/b/colls/c/docs", {"id": str(i), "pk": f"p{i % 50}", "f": "x" * 140}, f"p{i % 50}")
                        for i in range(n)]
            else:
                requests(port, [signed("POST", "/dbs/b/colls/c/docs", {"id": str(i), "pk": f"p{i % 50}", "f": "x" * 140}, f"p{i % 50}")
                                for i in range(50)])
                reqs = [signed("GET", f"/dbs/b/colls/c/docs/{i % 50}", None, f"p{i % 50}") for i in range(n)]
            count = measure(proc, port, reqs)
            return total_instructions(d) / count
        finally:
            proc.terminate()
            proc.wait(60)


# The floor: an asyncio.Protocol on uvloop that answers every request head with a fixed reply.
RAW_PROTOCOL = """
import asyncio, uvloop
R = b'HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\nContent-Length: 10\\r\\n\\r\\n{"id":"x"}'
class P(asyncio.Protocol):
    def connection_made(self, t):
        self.t, self.buf = t, b""
    def data_received(self, d):
        self.buf += d
        while (i := self.buf.find(b"\\r\\n\\r\\n")) >= 0:
            self.buf = self.buf[i + 4:]
            self.t.write(R)
async def main():
    s = await asyncio.get_running_loop().create_server(P, "127.0.0.1", 0)
    print(s.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()
uvloop.run(main())
"""


def run_bare(source: str = BARE) -> float:
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "bare.py")
        Path(script).write_text(source)
        proc, line = start([sys.executable, script], d)
        try:
            port = int(line)
            reqs = [("GET", "/", None, {})] * (WARMUP + N)
            count = measure(proc, port, reqs)
            return total_instructions(d) / count
        finally:
            proc.terminate()
            proc.wait(60)


def main():
    rows = [("raw asyncio protocol on uvloop (the floor)", run_bare(RAW_PROTOCOL)),
            ("bare aiohttp+uvloop hello", run_bare()), ("regionlab point read", run_regionlab("read")),
            ("regionlab point create (3 regions x 4 replicas)", run_regionlab("create"))]
    for name, ins in rows:
        print(f"{name:48} {ins / 1000:8.1f} k instructions/request")


if __name__ == "__main__":
    main()
