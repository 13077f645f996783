"""Point create/read benchmark of the gateway against the default 3-region topology.

    python bench/gateway_bench.py            # full run (~1-2 min), writes bench/results/*.json
    python bench/gateway_bench.py --quick    # smaller counts

Every create really replicates: 4 replicas in the write region, and log shipping to the 4
replicas of each of the 2 other regions. The server runs as its own process; its CPU time is
read from /proc before and after each phase, so "server CPU µs/op" excludes the load
generator. Throughput at high concurrency is measured with wrk (a C load generator a Python
server cannot outrun) when it is installed; the Python generator gives latencies at c=1/16/64.
"""
import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from email.utils import formatdate
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import calibration  # noqa: E402
from rest_load import run, setup, signed_headers  # noqa: E402
from server_proc import ServerProcess  # noqa: E402

DB, COLL = "bench", "items"
WRK_IDS = 1000
# Enough provisioned throughput that the load is never throttled (10 partitions of 10,000 RU/s):
# these runs measure the server, not the RU budget.
BENCH_RU_PER_S = 100_000


def machine() -> dict:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform()}


def measured(server, fn):
    cpu0 = server.cpu_s()
    result = fn()
    cpu = server.cpu_s() - cpu0
    ops = result["ops"]
    result["server_cpu_us_per_op"] = cpu / ops * 1e6 if ops else float("nan")
    return result


def lua_signed_gets(key: str, targets: list) -> str:
    """A wrk script cycling over signed point reads; targets are (path, partition key value)."""
    date = formatdate(usegmt=True)
    rows = []
    for path, pk in targets:
        h = signed_headers(key, "GET", path, date)
        rows.append(f'{{"{path}", "{h["authorization"]}", {json.dumps(json.dumps([pk]))}}}')
    return ("local reqs = {" + ",\n".join(rows) + "}\nlocal n = 0\n"
            f'wrk.headers["x-ms-date"] = "{date}"\nwrk.headers["x-ms-version"] = "2020-07-15"\n'
            "request = function()\n  n = n % #reqs + 1\n  local r = reqs[n]\n"
            '  wrk.headers["authorization"] = r[2]\n  wrk.headers["x-ms-documentdb-partitionkey"] = r[3]\n'
            '  return wrk.format("GET", r[1])\nend\n')


def lua_reads(feed: str, id_prefix: str, key: str) -> str:
    return lua_signed_gets(key, [(f"{feed}/{id_prefix}{i}", f"p{i % 1000}") for i in range(WRK_IDS)])


def lua_creates(feed: str, key: str, filler_bytes: int, prefix: str = "") -> str:
    h = signed_headers(key, "POST", feed)
    filler = "x" * filler_bytes
    return (f'wrk.method = "POST"\nwrk.path = "{feed}"\n'
            f'wrk.headers["authorization"] = "{h["authorization"]}"\nwrk.headers["x-ms-date"] = "{h["x-ms-date"]}"\n'
            'wrk.headers["x-ms-version"] = "2020-07-15"\nwrk.headers["content-type"] = "application/json"\n'
            "local n = 0\nrequest = function()\n  n = n + 1\n  local pk = \"w\" .. (n % 1000)\n"
            '  wrk.headers["x-ms-documentdb-partitionkey"] = "[\\"" .. pk .. "\\"]"\n'
            f'  local body = "{{\\"id\\":\\"wrk{prefix}" .. n .. "\\",\\"pk\\":\\"" .. pk .. "\\",\\"f\\":\\"{filler}\\"}}"\n'
            '  return wrk.format(nil, nil, nil, body)\nend\n')


def wrk(url: str, script: str, connections: int, seconds: int) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(script)
    try:
        out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", f.name, url],
                             capture_output=True, text=True, timeout=seconds + 30).stdout
    finally:
        os.unlink(f.name)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)

    def pct(p):
        m = re.search(rf"\s{p}%\s+([\d.]+)(us|ms|s)", out)
        if not m:
            return float("nan")
        v, unit = float(m.group(1)), m.group(2)
        return v / 1000 if unit == "us" else v * 1000 if unit == "s" else v
    return {"ops": total, "ops_per_s": rps, "p50_ms": pct(50), "p99_ms": pct(99),
            "errors": (int(non2xx.group(1)) if non2xx else 0)
            + (sum(map(int, socket_errors.groups())) if socket_errors else 0), "concurrency": connections}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--wrk-seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3, help="wrk rounds (bare server, read, create); medians")
    args = ap.parse_args()
    n = {1: 2000, 16: 10000, 64: 20000} if not args.quick else {1: 500, 16: 2000, 64: 4000}
    results = {"machine": machine(), "when": time.strftime("%Y-%m-%d %H:%M:%S"), "runs": []}
    with ServerProcess() as server, calibration.bare_server() as bare_server:
        base, key = server.ready["account_endpoint"], server.ready["key"]
        results["spawn_to_ready_ms"] = round(server.spawn_to_ready_ms, 1)
        results["idle_rss_mb"] = round(server.rss_mb(), 1)
        asyncio.run(setup(base, key, DB, COLL, BENCH_RU_PER_S))
        for c in (1, 16, 64):
            for op in ("create", "read"):
                r = measured(server, lambda: asyncio.run(run(base, key, DB, COLL, op, c, n[c], id_prefix=f"c{c}-")))
                r["generator"] = "python"
                results["runs"].append(r)
                print(_row(r), flush=True)
        if shutil.which("wrk"):
            feed = f"/dbs/{DB}/colls/{COLL}/docs"
            rounds: dict = {"bare": [], "read": [], "create": []}
            for i in range(args.rounds):          # alternate, so a slow minute hits all three
                rounds["bare"].append(calibration.bare_run(bare_server, wrk, measured, args.wrk_seconds))
                for op, script in (("read", lua_reads(feed, "c64-", key)),
                                   ("create", lua_creates(feed, key, 140, prefix=f"r{i}-"))):
                    r = measured(server, lambda: wrk(base, script, 64, args.wrk_seconds))
                    r.update({"op": op, "generator": "wrk"})
                    rounds[op].append(r)
                print(f"round {i + 1}: " + ", ".join(f"{k} {v[-1]['ops_per_s']:,.0f}/s "
                                                     f"{v[-1]['server_cpu_us_per_op']:.1f} µs" for k, v in rounds.items()),
                      flush=True)
            medians = {k: calibration.median_run(v) for k, v in rounds.items()}
            results["rounds"] = rounds
            for op in ("read", "create", "bare"):
                results["runs"].append(medians[op])
                print(_row(medians[op]) + f"  (median of {args.rounds})", flush=True)
            _calibrated(results["runs"], medians["bare"])
            for op in ("read", "create"):           # the same, round by round
                ratios = sorted(r["server_cpu_us_per_op"] / b["server_cpu_us_per_op"]
                                for r, b in zip(rounds[op], rounds["bare"]))
                results[f"{op}_vs_bare_cpu_by_round"] = ratios
                print(f"  {op:6}: round by round {', '.join(f'{x:.2f}x' for x in ratios)} the bare server's CPU "
                      f"(median {ratios[len(ratios) // 2]:.2f}x)")
        else:
            print("wrk not installed (apt-get install wrk): skipping the C load generator runs")
        results["rss_after_mb"] = round(server.rss_mb(), 1)
    print(f"spawn-to-ready {results['spawn_to_ready_ms']} ms, idle RSS {results['idle_rss_mb']} MB, "
          f"RSS after load {results['rss_after_mb']} MB")
    print(json.dumps(results["machine"]))
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    (out / f"gateway-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(results, indent=2))


def _calibrated(runs: list, bare: dict) -> None:
    """The wrk runs relative to the bare server, and scaled to the issue's machine."""
    k = calibration.scale(bare)
    print(f"this machine today: bare aiohttp {bare['ops_per_s']:,.0f}/s at {bare['server_cpu_us_per_op']:.1f} µs "
          f"= {k:.2f}x slower than the issue's reference ({calibration.REFERENCE_BARE_PER_S:,}/s)")
    for r in runs:
        if r.get("generator") == "wrk" and r is not bare:
            r["vs_bare_cpu"] = r["server_cpu_us_per_op"] / bare["server_cpu_us_per_op"]
            r["vs_bare_ops"] = r["ops_per_s"] / bare["ops_per_s"]
            print(f"  {r['op']:6}: {r['vs_bare_cpu']:.2f}x the bare server's CPU per request, "
                  f"{r['vs_bare_ops']:.2f}x its throughput; on the reference machine about "
                  f"{r['server_cpu_us_per_op'] / k:.0f} µs and {r['ops_per_s'] * k:,.0f}/s")


def _row(r: dict) -> str:
    return (f"{r.get('generator','python'):6} {r['op']:6} c={r['concurrency']:<3} {r['ops_per_s']:9.0f} ops/s  "
            f"p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:7.2f} ms  server CPU {r['server_cpu_us_per_op']:6.1f} µs/op  "
            f"errors {r['errors']}")


if __name__ == "__main__":
    main()
