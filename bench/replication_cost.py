"""Where a core create's instructions go between the write region and the replication to the
other regions (docs/performance.md, "Direct mode"): callgrind, in-process, per create.

    python bench/replication_cost.py          # re-runs itself under valgrind --tool=callgrind

The account of bench/core_write_cost.py (default topology, 12 replicas) with its --item-bytes 200
--unmetered create. Each phase runs 200 times to warm up, zeroes the counters
(callgrind_control -z), runs 1,000 times and dumps:
* a create whose commit is then delivered to both other regions on its own (one link timer
  each, as with one request at a time on the server; virtual time jumps to each due time);
* a create with both links paused: the write region's work alone (parse, validate, stage,
  charge, admit, commit to 4 replicas, hand the commit to the links);
* an empty core timer, scheduled and run: what a timer costs in the core's scheduler;
* a backlog of 1,000 commits delivered by one timer per link: the other regions' apply alone.
"""
import glob
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import core_write_cost as C  # noqa: E402
from regionlab.emulator.core.scheduler import run_until_idle  # noqa: E402

N = 1000
WARMUP = 200
OUT = sys.argv[1] if len(sys.argv) > 1 else None


def total() -> int:
    newest = max(glob.glob(OUT + "*"), key=os.path.getmtime)
    with open(newest) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError("no totals in callgrind output")


def phase(name: str, fn, warm: bool = True) -> None:
    if warm:
        fn(WARMUP)
    subprocess.run(["callgrind_control", "-z", str(os.getpid())], capture_output=True)
    fn(N)
    subprocess.run(["callgrind_control", "-d", str(os.getpid())], capture_output=True)
    print(f"{name:58} {total() / N / 1000:7.1f} k", flush=True)


def main() -> None:
    C.ITEM_BYTES, C.UNMETERED = 200, True
    account, c = C.setup()
    region = account.write_regions[0]
    clock, sched = account.clock, account.scheduler
    bodies = iter([C.body(i, "flat") for i in range(3 * WARMUP + 3 * N)])

    def creates(deliver: bool):
        def run(n: int) -> None:
            for _ in range(n):
                raw, pk_json, values = next(bodies)
                C.create(account, c, raw, pk_json, values, region)
                if deliver:
                    run_until_idle(clock, sched)
        return run

    def links(state: str) -> None:
        for link in account.links.values():
            link.set_state(state)

    def empty_timers(n: int) -> None:
        for _ in range(n):
            sched.call_at(clock.now_ms() + 5, int)
            run_until_idle(clock, sched)

    def deliver(n: int) -> None:
        links("active")
        run_until_idle(clock, sched)

    phase("create, then delivered to each other region on its own", creates(True))
    links("paused")
    phase("create with the links paused (the write region alone)", creates(False))
    links("active")
    run_until_idle(clock, sched)            # what the paused phase queued
    phase("an empty core timer, scheduled and run", empty_timers)
    links("paused")
    creates(False)(N)                       # a backlog of N commits per link, delivered below
    phase("a backlog delivered by one timer per link (per commit)", deliver, warm=False)
    C._check_replicated(account, c, 2 * WARMUP + 3 * N)


def relaunch() -> None:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
                        __file__, out], stderr=subprocess.DEVNULL, check=True)


if __name__ == "__main__":
    if OUT is None:
        print(f"# replication_cost on {os.cpu_count()} CPUs, Python {sys.version.split()[0]}", flush=True)
        relaunch()
    else:
        main()
