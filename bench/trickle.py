"""Does one client trickling a chunked body slow everyone else down?

    python bench/trickle.py                          # 20 s quiet, then 20 s with a trickler
    python bench/trickle.py --seconds 20 --rate 600 --chunk-bytes 1 --preload-kb 512

The server is a separate `python -m emulator` process (server_proc.py). A Python client does
point reads of one item, one at a time over keep-alive, and reports p50/p99; the server's CPU
(user+system from /proc) is sampled over the same time. First with nothing else going on, then
while another connection sends a chunked POST: `--preload-kb` of tiny chunks at once, then
more at `--rate` bytes/s, `--chunk-bytes` of data per chunk (each chunk one TCP segment).
Framing that re-parses the body from its first chunk on every read does work proportional to
everything received so far on every segment; linear framing does work proportional to the
segment. A phase must end within the server's 30 s body timeout (then the trickler gets 408).
Prints the machine; never asserts.
"""
import argparse
import asyncio
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gateway_bench import machine  # noqa: E402
from rest_load import request, setup, signed_headers  # noqa: E402
from server_proc import ServerProcess  # noqa: E402

DB, COLL = "trickle", "items"
FEED = f"/dbs/{DB}/colls/{COLL}/docs"


def percentile(values: list, q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


async def reads(base: str, key: str, seconds: float, server) -> dict:
    path = f"{FEED}/a"
    url = base.rstrip("/") + path
    latencies = []
    cpu0, t_end = server.cpu_s(), time.perf_counter() + seconds
    async with aiohttp.ClientSession() as session:
        while time.perf_counter() < t_end:
            h = signed_headers(key, "GET", path)
            h["x-ms-documentdb-partitionkey"] = '["p"]'
            t = time.perf_counter()
            async with session.get(url, headers=h) as r:
                await r.read()
                if r.status != 200:
                    raise RuntimeError(f"read failed: {r.status}")
            latencies.append((time.perf_counter() - t) * 1000)
    cpu = server.cpu_s() - cpu0
    return {"reads": len(latencies), "p50_ms": round(percentile(latencies, 0.5), 2),
            "p99_ms": round(percentile(latencies, 0.99), 2), "server_cpu_pct": round(100 * cpu / seconds, 1)}


def trickle(base: str, key: str, rate: float, chunk_bytes: int, preload_kb: int, stop: threading.Event,
            started: threading.Event) -> dict:
    """Send a chunked create: preload_kb of chunks at once, then `rate` bytes/s until stop is
    set, then end it; its status."""
    host, port = base.split("//", 1)[1].rstrip("/").split(":")
    headers = signed_headers(key, "POST", FEED)
    headers.update({"x-ms-documentdb-partitionkey": '["p"]', "transfer-encoding": "chunked"})
    head = "".join([f"POST {FEED} HTTP/1.1\r\nHost: {host}\r\n"] + [f"{k}: {v}\r\n" for k, v in headers.items()]
                   + ["\r\n"]).encode()
    sent = 0
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(head + b"%x\r\n%s\r\n" % (len(b'{"id":"slow","pk":"p","pad":"'), b'{"id":"slow","pk":"p","pad":"'))
        chunk = b"%x\r\n%s\r\n" % (chunk_bytes, b"x" * chunk_bytes)
        sock.sendall(chunk * (preload_kb * 1024 // len(chunk)))
        started.set()
        interval = len(chunk) / rate
        next_at = time.perf_counter()
        while not stop.is_set():
            sock.sendall(chunk)
            sent += 1
            next_at += interval
            stop.wait(max(0.0, next_at - time.perf_counter()))
        sock.sendall(b'2\r\n"}\r\n0\r\n\r\n')
        sock.settimeout(30)
        reply = sock.recv(65536)
    return {"chunks_sent": sent, "status": reply.split(b" ", 2)[1].decode() if reply else "closed"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="each phase (under the 30 s body timeout)")
    ap.add_argument("--preload-kb", type=int, default=512, help="chunks sent at once before the trickle")
    ap.add_argument("--rate", type=float, default=600.0, help="bytes/s the trickler sends")
    ap.add_argument("--chunk-bytes", type=int, default=1, help="data bytes per chunk")
    args = ap.parse_args()
    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores, python {info['python']}, {info['platform']}, "
          f"load {os.getloadavg()[0]:.2f}; {time.strftime('%Y-%m-%d %H:%M')}", flush=True)
    with ServerProcess() as server:
        base, key = server.ready["account_endpoint"], server.ready["key"]

        async def prepare():
            await setup(base, key, DB, COLL, 100_000)
            async with aiohttp.ClientSession() as s:
                await request(s, key, "POST", base, FEED, {"id": "a", "pk": "p"},
                              {"x-ms-documentdb-partitionkey": '["p"]'})
        asyncio.run(prepare())
        quiet = asyncio.run(reads(base, key, args.seconds, server))
        print(f"quiet:    {json.dumps(quiet)}", flush=True)
        stop, started, out = threading.Event(), threading.Event(), {}
        t = threading.Thread(target=lambda: out.update(
            trickle(base, key, args.rate, args.chunk_bytes, args.preload_kb, stop, started)))
        t.start()
        started.wait()
        loaded = asyncio.run(reads(base, key, args.seconds, server))
        stop.set()
        t.join()
        print(f"trickler: {json.dumps(loaded)}; trickler {json.dumps(out)}: {args.preload_kb} KB, then "
              f"{args.rate:g} B/s, {args.chunk_bytes} B per chunk", flush=True)


if __name__ == "__main__":
    main()
