"""What each create, upsert, read and PK query leaves behind for the garbage collector, in the
real server with the real account: tracked objects by type, and what a full collection walks.

    python bench/gc_census.py --items 100000 --ops create query --seconds 3
    python bench/gc_census.py --items 100000 --ops query --profile   # + where a query's CPU goes

The server is `python -m emulator --no-ru-limits --partitions 10` with the collector policy on
(as tail_bench runs it), started through a small wrapper that answers SIGUSR1 by running the
command written to a file beside it: `settle` (a full collection, then gc.freeze(): from here
on gc.get_objects() lists only what came since), `census` (gc.get_count(), the tracked objects
of each generation by type, the frozen count, collections so far) and `prof start|stop` (cProfile
of the serving thread), `leak` (unfreeze, collect everything, freeze: the cyclic garbage that
freezing had kept alive). After the load, per operation: settle, census, wrk for --seconds (the
tail_bench scripts, c=16), census again. The difference, divided by the operations wrk made, is
what each operation left tracked and not yet freed: what the next full collection walks, unless
a younger collection untracked it first (a tuple or dict of atoms only) or something froze it.
"""
import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gateway_bench import wrk  # noqa: E402
from server_proc import ServerProcess  # noqa: E402
from tail_bench import load_into, scripts  # noqa: E402

WRAPPER = r'''
import cProfile, collections, gc, json, pstats, signal, sys, time
sys.path.insert(0, sys.argv.pop(1))          # this checkout's emulator, not the venv's
from regionlab.emulator.runtime import collector
CMD = sys.argv.pop(1)
_install = collector.install
prof = None

def census():
    gens = []
    for g in range(3):
        objs = gc.get_objects(generation=g)
        gens.append(dict(collections.Counter(type(o).__qualname__ for o in objs).most_common(25)))
        gens[-1]["*total*"] = len(objs)
    return {"count": gc.get_count(), "frozen": gc.get_freeze_count(), "gens": gens,
            "stats": [s["collections"] for s in gc.get_stats()]}

def on_signal():
    global prof
    words = open(CMD).read().split()
    out = {}
    if words[0] == "settle":
        gc.collect()
        gc.freeze()
    elif words[0] == "census":
        out = census()
    elif words[0] == "leak":
        frozen = gc.get_freeze_count()
        gc.unfreeze()
        out = {"frozen": frozen, "unreachable": gc.collect()}
        gc.freeze()
    elif words[0] == "prof" and words[1] == "start":
        prof = cProfile.Profile(time.thread_time)      # CPU, not wall: the machine is shared
        prof.enable()
    elif words[0] == "prof":
        prof.disable()
        pstats.Stats(prof, stream=open(words[2], "w")).sort_stats("cumulative").print_stats(60)
        pstats.Stats(prof, stream=open(words[2], "a")).sort_stats("tottime").print_stats(40)
    with open(CMD + ".out", "w") as f:
        json.dump(out, f)

def install(account, policy=True):
    import asyncio
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, on_signal)
    return _install(account, policy)

collector.install = install
from regionlab.emulator.cli import main
sys.exit(main(sys.argv[1:]))
'''


class Census:
    def __init__(self, server, cmd_path: str):
        self.server, self.cmd = server, cmd_path

    def ask(self, *words: str) -> dict:
        out = self.cmd + ".out"
        if os.path.exists(out):
            os.unlink(out)
        with open(self.cmd, "w") as f:
            f.write(" ".join(words))
        os.kill(self.server.proc.pid, signal.SIGUSR1)
        deadline = time.monotonic() + 120
        while not os.path.exists(out) or os.path.getsize(out) == 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no answer to {words}")
            time.sleep(0.05)
        time.sleep(0.05)
        return json.loads(Path(out).read_text())


def delta(before: dict, after: dict, ops: int) -> dict:
    types = {}
    for g in range(3):
        for name, n in after["gens"][g].items():
            types[name] = types.get(name, 0) + n
    left = {k: v for k, v in sorted(types.items(), key=lambda kv: -kv[1]) if k != "*total*"}
    total = types.get("*total*", 0)
    return {"ops": ops, "tracked_left": total, "per_op": round(total / max(ops, 1), 3),
            "by_type_per_op": {k: round(v / max(ops, 1), 3) for k, v in list(left.items())[:15]},
            "gens_total": [after["gens"][g]["*total*"] for g in range(3)],
            "collections": [a - b for a, b in zip(after["stats"], before["stats"])],
            "frozen": after["frozen"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--ops", nargs="*", default=["create", "upsert", "read", "query"])
    ap.add_argument("--profile", action="store_true", help="cProfile each run in the server")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gc-census-")
    cmd_path = os.path.join(tmp, "cmd")
    wrapper = os.path.join(tmp, "wrapper.py")
    Path(wrapper).write_text(WRAPPER)
    flags = ["--port", "0", "--control-port", "0", "--no-ru-limits", "--partitions", "10"]
    print(f"load {os.getloadavg()[0]:.2f}; {args.items:,} items; c={args.concurrency}, {args.seconds} s per op", flush=True)
    with ServerProcess(cmd=[sys.executable, wrapper, str(ROOT), cmd_path, *flags]) as server:
        base = server.ready["account_endpoint"].rstrip("/")
        key = server.ready["key"]
        load_into("regionlab", server, base, key, args.items)
        census = Census(server, cmd_path)
        for r, op in enumerate(args.ops):
            census.ask("settle")
            before = census.ask("census")
            if args.profile:
                census.ask("prof", "start")
            w = wrk(base, scripts(key, args.items, r, args.concurrency)[op](), args.concurrency, args.seconds)
            if args.profile:
                census.ask("prof", "stop", os.path.join(tmp, f"prof-{op}.txt"))
            after = census.ask("census")
            d = delta(before, after, w["ops"])
            print(f"{op}: {w['ops']:,} ops ({w['errors']} errors), {json.dumps(d)}", flush=True)
            if args.profile:
                print(f"  profile: {os.path.join(tmp, f'prof-{op}.txt')}", flush=True)
        leak = census.ask("leak")
        print(f"after all runs: {leak['frozen']:,} objects frozen, of which a full collection of everything "
              f"found {leak['unreachable']:,} unreachable (cyclic garbage the freezes kept)", flush=True)


if __name__ == "__main__":
    main()
