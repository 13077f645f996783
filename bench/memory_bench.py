"""Memory per stored item, and what a full garbage collection costs, in the core alone (no HTTP).

    python bench/memory_bench.py                         # 10k and 100k items, 1 and 3 regions
    python bench/memory_bench.py --items 1000000 --regions 3

Each run is its own child process (so the RSS of one does not include the last): an Account
with the default topology (East US writes; East US 2 and West US replicate over links; 4
replicas per region; session consistency) or only East US with --regions 1, on a ManualClock as
the simulator builds it, a container of 100,000 RU/s (10 physical partitions) with the default
indexing policy, and N creates of a ~950-byte JSON item over 1,000 logical partitions, each going
through the core calls the gateway's create makes (bench/core_write_cost.py `create`); then
virtual time runs until every region has applied every write.

Printed per run: the raw JSON bytes loaded, the RSS above the idle process (VmRSS after the
account was built, before the first create), that per item and as a multiple of the raw JSON,
the GC-tracked objects left per item, and how long one full collection (gc.collect()) takes
with everything stored, before and after gc.freeze().
"""
import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

ITEM_JSON_BYTES = 950          # the item: ~950 bytes of JSON as the client sends it
KEYS = 1000


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def item(i: int) -> bytes:
    doc = {"id": f"item-{i:07d}", "pk": f"p{i % KEYS}", "n": i, "kind": "order",
           "price": round(i * 0.37, 2), "ok": i % 2 == 0, "f": ""}
    doc["f"] = "x" * (ITEM_JSON_BYTES - len(json.dumps(doc, separators=(",", ":"))))
    return json.dumps(doc, separators=(",", ":")).encode()


def one_run(n: int, regions: int) -> dict:
    import random
    from regionlab.emulator.core.account import Account, AccountConfig
    from regionlab.emulator.core.container import canonical_pk_json
    from regionlab.emulator.core.scheduler import ManualClock, Scheduler, run_until_idle
    from regionlab.emulator import interpreter
    from core_write_cost import create

    interpreter.install()                 # the store's memory as a serving emulator keeps it
    clock, scheduler = ManualClock(), Scheduler()
    config = AccountConfig() if regions == 3 else AccountConfig(regions=("East US",))
    account = Account(config, clock, scheduler, random.Random(0))
    db = account.create_database({"id": "b"})
    c = account.create_container(db, {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}},
                                 100_000)
    region = account.write_regions[0]
    pk_cache = {}
    gc.collect()
    idle = rss_bytes()
    raw_total = 0
    t0 = time.perf_counter()
    for i in range(n):
        raw = item(i)
        raw_total += len(raw)
        pk = f"p{i % KEYS}"
        pk_json, values = pk_cache.get(pk) or pk_cache.setdefault(pk, (canonical_pk_json([pk]), [pk]))
        create(account, c, raw, pk_json, [pk], region)
        if i % 3 == 2:
            clock.advance_to(clock.now_ms() + 1)
            scheduler.run_due(clock.now_ms())
    run_until_idle(clock, scheduler)
    load_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    gc.collect()
    full_s = time.perf_counter() - t1
    tracked = len(gc.get_objects())
    above = rss_bytes() - idle
    gc.freeze()
    t2 = time.perf_counter()
    gc.collect()
    frozen_s = time.perf_counter() - t2
    return {"items": n, "regions": len(account.regions), "raw_bytes": raw_total, "rss_above_idle": above,
            "bytes_per_item": above / n, "x_raw": above / raw_total, "tracked_objects": tracked,
            "tracked_per_item": tracked / n, "gc_full_ms": full_s * 1000, "gc_full_after_freeze_ms": frozen_s * 1000,
            "load_items_per_s": n / load_s}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, nargs="*", default=[10_000, 100_000])
    ap.add_argument("--regions", type=int, nargs="*", default=[1, 3], choices=(1, 3))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(one_run(args.items[0], args.regions[0])))
        return
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(f"{'items':>9} {'regions':>7} {'raw MB':>8} {'RSS+ MB':>8} {'B/item':>7} {'x raw':>6} "
          f"{'tracked/item':>12} {'full gc ms':>10} {'frozen ms':>9} {'items/s':>8}")
    for regions in args.regions:
        for n in args.items:
            out = subprocess.run([sys.executable, __file__, "--child", "--items", str(n), "--regions", str(regions)],
                                 check=True, capture_output=True, text=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            print(f"{r['items']:>9,} {r['regions']:>7} {r['raw_bytes'] / 1e6:>8.1f} {r['rss_above_idle'] / 1e6:>8.1f} "
                  f"{r['bytes_per_item']:>7,.0f} {r['x_raw']:>6.2f} {r['tracked_per_item']:>12.2f} "
                  f"{r['gc_full_ms']:>10.1f} {r['gc_full_after_freeze_ms']:>9.1f} {r['load_items_per_s']:>8,.0f}",
                  flush=True)


if __name__ == "__main__":
    main()
