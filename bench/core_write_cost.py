"""CPU cost of a point create below the gateway: the core alone, no HTTP.

    python bench/core_write_cost.py                      # µs per create, best of REPEATS runs
    python bench/core_write_cost.py --profile            # plus a cProfile of one run
    python bench/core_write_cost.py --instructions       # instructions per create under callgrind

An Account with the default topology (East US writes; East US 2 and West US replicate over
links with the default lags; 4 replicas per region; session consistency) on a ManualClock and
the core Scheduler, as the simulator builds it. A container provisioned like the gateway bench's
(100,000 RU/s: 10 physical partitions, metered) takes N creates of a ~1 KB item over 1,000
logical partitions, each going through the calls the gateway's create path makes:
parse_item_body, check_id, Writer(...).create, Throttle.admit_writer, Writer.commit, and the
acknowledgement check. Virtual time moves one millisecond every RATE creates, running the timers
due (intra-region applies, link deliveries); at the end, time runs on until every region has
applied every write. So the cost per create includes replication to 4 replicas in each of the
3 regions. Not included: HTTP, auth, routing, the session token and the reply (gateway work).

Shapes: `flat` is {"id", "pk", "f": filler} like bench/gateway_bench.py; `nested` spreads about
the same bytes over ~40 properties in nested objects and arrays (validation and charge walk
every value, so they cost more there).

--instructions runs the driver under valgrind with N and 2N creates, and again with only the
set-up and the request bodies for N and 2N, and divides the difference of the differences by N,
so start-up, imports and making the bodies cancel out; the count does not depend on machine load.

--item-bytes and --unmetered reproduce bench/direct_bench.py's creates (a ~200-byte item, a
container of the default throughput with --no-ru-limits): the core's share of a gateway or direct
create there (docs/performance.md, "Direct mode").
"""
import argparse
import cProfile
import json
import os
import platform
import pstats
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from regionlab.emulator.core.account import Account, AccountConfig  # noqa: E402
from regionlab.emulator.core.container import canonical_pk_json  # noqa: E402
from regionlab.emulator.core.documents import Writer  # noqa: E402
from regionlab.emulator.core.scheduler import ManualClock, Scheduler, run_until_idle  # noqa: E402
from regionlab.emulator.core.throttle import CREATE, ThrottleConfig  # noqa: E402
from regionlab.emulator.core.validation import check_id, parse_item_body  # noqa: E402
from regionlab.emulator import interpreter  # noqa: E402
from regionlab.emulator.core.limits import ITEM_MAX_BYTES  # noqa: E402

N_DEFAULT = 20_000
RATE_DEFAULT = 3            # creates per virtual millisecond (about the measured 2,700/s)
REPEATS = 5
KEYS = 1000
THROUGHPUT_RU_PER_S = 100_000
ITEM_BYTES = 1024
UNMETERED = False           # --unmetered: default throughput, RU budgets off (as --no-ru-limits)


def compact(doc: dict) -> str:
    """JSON as the SDKs send it (azure-cosmos: separators=(",", ":"))."""
    return json.dumps(doc, separators=(",", ":"))


def body(i: int, shape: str) -> tuple[bytes, str, list]:
    pk = f"p{i % KEYS}"
    if shape == "flat":
        doc = {"id": f"d{i}", "pk": pk, "f": ""}
        doc["f"] = "x" * (ITEM_BYTES - len(compact(doc)))
    else:
        doc = {"id": f"d{i}", "pk": pk, "type": "order", "n": i, "price": i * 1.25, "ok": i % 2 == 0,
               "customer": {"name": f"customer {i % 977}", "email": f"c{i % 977}@example.com",
                            "address": {"street": f"{i % 300} Main St", "city": "Springfield",
                                        "zip": f"{10000 + i % 9000}", "country": "US"}},
               "lines": [{"sku": f"sku-{(i + k) % 500}", "qty": k + 1, "price": 9.99 + k} for k in range(5)],
               "tags": ["new", "priority", f"t{i % 7}"], "notes": None, "f": ""}
        doc["f"] = "y" * max(0, ITEM_BYTES - len(compact(doc)))
    raw = compact(doc).encode()
    values = [pk]
    return raw, canonical_pk_json(values), values


def setup():
    interpreter.install()                 # the store's memory as a serving emulator keeps it
    clock = ManualClock()
    scheduler = Scheduler()
    config = AccountConfig(throttle=ThrottleConfig(ru=False)) if UNMETERED else AccountConfig()
    account = Account(config, clock, scheduler, random.Random(0))
    db = account.create_database({"id": "b"})
    c = account.create_container(db, {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}},
                                 None if UNMETERED else THROUGHPUT_RU_PER_S)
    return account, c


def create(account, c, raw: bytes, pk_json: str, values: list, region: str) -> int:
    """What gateway/documents.create does below HTTP, in the same order."""
    doc, verbatim = parse_item_body(raw)
    if not isinstance(doc, dict) or len(raw) > ITEM_MAX_BYTES:
        raise AssertionError("the bench sends objects under the size limit")
    check_id(doc.get("id"))
    writer = Writer(c, region, pk_json, values, account.clock.now_ms())
    status, version = writer.create(doc, raw if verbatim else None)
    account.throttle.admit_writer(writer, CREATE)
    lsn = writer.commit()
    if writer.rs.committed_lsn < lsn:
        raise AssertionError("intra-region delay is 0: a create is committed at once")
    return status


def run(n: int, rate: int, shape: str, prof: cProfile.Profile | None = None, bodies_only: bool = False) -> float:
    """µs per create. Each body is made just before its create (as if it had just arrived), and
    making it is not timed."""
    account, c = setup()
    region = account.write_regions[0]
    if bodies_only:
        for i in range(n):
            body(i, shape)
        return 0.0
    clock, scheduler = account.clock, account.scheduler
    clock_ns = time.perf_counter_ns
    elapsed_ns = 0
    for i in range(n):
        raw, pk_json, values = body(i, shape)
        if prof is not None:
            prof.enable()
        t0 = clock_ns()
        create(account, c, raw, pk_json, values, region)
        if i % rate == rate - 1:
            clock.advance_to(clock.now_ms() + 1)
            scheduler.run_due(clock.now_ms())
        elapsed_ns += clock_ns() - t0
        if prof is not None:
            prof.disable()
    if prof is not None:
        prof.enable()
    t0 = clock_ns()
    run_until_idle(clock, scheduler)
    elapsed_ns += clock_ns() - t0
    if prof is not None:
        prof.disable()
    _check_replicated(account, c, n)
    return elapsed_ns / n / 1000


def _check_replicated(account, c, n: int) -> None:
    for p in c.partitions:
        lsns = {rs.region: (rs.committed_lsn, min(r.applied_lsn for r in rs.replicas))
                for rs in p.replica_sets.values()}
        if len(set(lsns.values())) != 1:
            raise AssertionError(f"partition {p.range_id} not fully replicated: {lsns}")
    total = sum(p.replica_sets[account.write_regions[0]].lsn for p in c.partitions)
    if total != n:
        raise AssertionError(f"{total} commits for {n} creates")


def instructions(n: int, rate: int, shape: str) -> float:
    def count(k: int, once: str) -> int:
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "cg.out")
            subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
                            __file__, "--n", str(k), "--rate", str(rate), "--shape", shape, once,
                            "--item-bytes", str(ITEM_BYTES)] + (["--unmetered"] if UNMETERED else []),
                           check=True, capture_output=True)
            text = Path(out).read_text(errors="replace")
            return int(re.search(r"^(?:summary|totals): (\d+)", text, re.M).group(1))
    creates = count(2 * n, "--once") - count(n, "--once")
    bodies = count(2 * n, "--bodies-only") - count(n, "--bodies-only")
    return (creates - bodies) / n


def main() -> None:
    global ITEM_BYTES, UNMETERED
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=N_DEFAULT)
    ap.add_argument("--rate", type=int, default=RATE_DEFAULT, help="creates per virtual millisecond")
    ap.add_argument("--shape", choices=("flat", "nested"), default="flat")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--instructions", action="store_true")
    ap.add_argument("--item-bytes", type=int, default=ITEM_BYTES)
    ap.add_argument("--unmetered", action="store_true", help="default throughput, no RU budgets")
    ap.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--bodies-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    ITEM_BYTES, UNMETERED = args.item_bytes, args.unmetered
    if args.once or args.bodies_only:
        run(args.n, args.rate, args.shape, bodies_only=args.bodies_only)
        return
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; "
          f"{args.n} creates of a {args.shape} ~{ITEM_BYTES} B item, {args.rate} per virtual ms")
    if args.instructions:
        ins = instructions(min(args.n, 2000), args.rate, args.shape)
        print(f"{ins / 1000:.1f} k instructions per create (callgrind)")
        return
    us = min(run(args.n, args.rate, args.shape) for _ in range(REPEATS))
    print(f"{us:.1f} µs per create (best of {REPEATS})", flush=True)
    if args.profile:
        prof = cProfile.Profile()
        run(args.n, args.rate, args.shape, prof)
        pstats.Stats(prof).sort_stats("tottime").print_stats(40)


if __name__ == "__main__":
    main()
