"""How fast is this machine today? The same wrk run against a bare aiohttp + uvloop "hello".

The foundation issue states its targets for a machine on which that bare server does about
38,000 requests/s (wrk, 1 thread, c=64). Machines here differ by 2-3x from day to day and
within minutes with what else runs on them, so the benchmarks keep the bare server running
beside the emulator and alternate wrk runs between the two (several rounds, medians): the
ratio to the bare server is what carries over between machines, the absolute numbers are what
this machine did.

    python bench/calibration.py            # the bare server alone
"""
import contextlib
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from server_proc import ServerProcess  # noqa: E402

REFERENCE_BARE_PER_S = 38_000        # the bare aiohttp+uvloop ceiling on its machine
BARE = """
import asyncio, uvloop
from aiohttp import web
async def h(req):
    return web.Response(body=b'{"id":"x"}', headers={"Content-Type": "application/json"})
async def main():
    srv = web.Server(h, access_log=None)
    s = await asyncio.get_running_loop().create_server(srv, "127.0.0.1", 0)
    print(s.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()
uvloop.run(main())
"""


@contextlib.contextmanager
def bare_server():
    """The bare server, running: a ServerProcess whose `ready` is its base URL."""
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "bare.py")
        Path(script).write_text(BARE)
        with ServerProcess(script=script, parse=lambda line: f"http://127.0.0.1:{int(line)}/") as bare:
            yield bare


def bare_run(bare, wrk, measured, seconds: int, connections: int = 64) -> dict:
    """One wrk run against the bare server: ops/s and server CPU µs per request."""
    r = measured(bare, lambda: wrk(bare.ready, "", connections, seconds))
    r.update({"op": "bare aiohttp hello", "generator": "wrk"})
    return r


def median_run(runs: list) -> dict:
    """The run with the median server CPU per operation (of an odd number of rounds)."""
    return sorted(runs, key=lambda r: r["server_cpu_us_per_op"])[len(runs) // 2]


def scale(bare: dict) -> float:
    """How much slower this machine is than the issue's (2.0 = half as fast)."""
    return REFERENCE_BARE_PER_S / bare["ops_per_s"]


def main() -> None:
    from gateway_bench import measured, wrk
    with bare_server() as bare:
        r = bare_run(bare, wrk, measured, 10)
    print(f"bare aiohttp+uvloop hello, wrk c=64: {r['ops_per_s']:,.0f} req/s, "
          f"{r['server_cpu_us_per_op']:.1f} µs server CPU per request; "
          f"this machine is {scale(r):.2f}x slower than the issue's ({REFERENCE_BARE_PER_S:,}/s)")


if __name__ == "__main__":
    main()
