"""Durable creates vs in-memory creates, and restart time with many items (docs/performance.md).

Each mode runs a fresh `python -m emulator` (memory only; --data-dir with --durability strict;
with relaxed) and the same signed REST creates at one concurrency (rest_load.py), one after
another in the same run on the same machine; durable throughput is reported as a fraction of
in-memory. Then a data dir is filled with RESTART_ITEMS items, the server stopped, and the time
from spawn to the ready line measured for a restart from it (restore included), next to a
start from an empty data dir.

    python bench/durability_bench.py [--creates 6000] [--concurrency 32] [--restart-items 100000]
"""
import argparse
import asyncio
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rest_load import run, setup  # noqa: E402
from server_proc import ServerProcess  # noqa: E402

WARMUP_CREATES = 1000
FILL_CONCURRENCY = 64
THROUGHPUT_RU = 100_000          # enough partitions and RU/s that throttling never answers


def creates(args: tuple, total: int, concurrency: int) -> dict:
    with ServerProcess(*args) as server:
        base, key = server.ready["account_endpoint"], server.ready["key"]
        asyncio.run(setup(base, key, "bench", "c", THROUGHPUT_RU))
        asyncio.run(run(base, key, "bench", "c", "create", concurrency, WARMUP_CREATES, id_prefix="warm"))
        result = asyncio.run(run(base, key, "bench", "c", "create", concurrency, total))
        result["server_cpu_s"] = server.cpu_s()
        return result


def restart(items: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        with ServerProcess("--data-dir", d, "--durability", "relaxed") as server:
            empty_ms = server.spawn_to_ready_ms
            base, key = server.ready["account_endpoint"], server.ready["key"]
            asyncio.run(setup(base, key, "bench", "c", THROUGHPUT_RU))
            filled = asyncio.run(run(base, key, "bench", "c", "create", FILL_CONCURRENCY, items))
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        with ServerProcess("--data-dir", d) as server:
            restored = server.ready["restored_items"]
            return {"items": items, "fill_errors": filled["errors"], "restored_items": restored,
                    "file_mb": round(size / 2**20, 1), "empty_start_ms": round(empty_ms),
                    "restart_ms": round(server.spawn_to_ready_ms)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--creates", type=int, default=6000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--restart-items", type=int, default=100_000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as strict_dir, tempfile.TemporaryDirectory() as relaxed_dir:
        modes = {"memory": (), "strict": ("--data-dir", strict_dir, "--durability", "strict"),
                 "relaxed": ("--data-dir", relaxed_dir, "--durability", "relaxed")}
        results = {name: creates(args, a.creates, a.concurrency) for name, args in modes.items()}
    memory = results["memory"]["ops_per_s"]
    for name, r in results.items():
        print(json.dumps({"mode": name, "ops_per_s": round(r["ops_per_s"]), "vs_memory": round(r["ops_per_s"] / memory, 2),
                          "p50_ms": round(r["p50_ms"], 2), "p99_ms": round(r["p99_ms"], 2), "errors": r["errors"],
                          "concurrency": r["concurrency"], "ops": r["ops"],
                          "server_cpu_s": round(r["server_cpu_s"], 1)}), flush=True)
    if a.restart_items:
        print(json.dumps({"restart": restart(a.restart_items)}), flush=True)


if __name__ == "__main__":
    main()
