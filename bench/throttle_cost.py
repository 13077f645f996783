"""CPU cost of admission (core/throttle.py) and of computing a write's charge (core/charge.py),
per request, in virtual time: the budget check every request pays before it is applied.

    python bench/throttle_cost.py

Cases: an unmetered container with credits off (throttling effectively unlimited: the hot path),
a provisioned container, a provisioned container with credits on, a query over 4 partitions,
a throttle storm with share 0 on another op kind; then charge.staged() for a typical 1 KB write.
Prints microseconds per call and the machine; never asserts.
"""
import platform
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from regionlab.emulator.core import charge  # noqa: E402
from regionlab.emulator.core import throttle as th  # noqa: E402
from regionlab.emulator.core.account import Account, AccountConfig  # noqa: E402
from regionlab.emulator.core.container import canonical_pk_json  # noqa: E402
from regionlab.emulator.core.documents import Writer  # noqa: E402
from regionlab.emulator.core.scheduler import ManualClock, Scheduler  # noqa: E402

N = 200_000
PK = {"paths": ["/pk"], "kind": "Hash", "version": 2}


class TickingClock(ManualClock):
    """Virtual time that moves 1 ms every 50 calls, so windows roll over during a run."""
    __slots__ = ("_calls",)

    def __init__(self):
        super().__init__()
        self._calls = 0

    def now_ms(self) -> int:
        self._calls += 1
        if self._calls % 50 == 0:
            self._now_ms += 1
        return self._now_ms


def account(**throttle) -> Account:
    return Account(AccountConfig(partition_count=4, throttle=th.ThrottleConfig(**throttle)), TickingClock(),
                   Scheduler(), random.Random(0))


def per_call_us(fn, n: int = N) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def main() -> None:
    print(f"# {platform.processor() or platform.machine()}, {platform.python_implementation()} "
          f"{platform.python_version()}, {platform.system()}")
    cases = []
    a = account()
    db = a.create_database({"id": "db"})
    free = a.create_container(db, {"id": "free", "partitionKey": PK})
    paid = a.create_container(db, {"id": "paid", "partitionKey": PK}, throughput=10_000_000)
    t = a.throttle
    cases.append(("unmetered, credits off (hot path)", lambda: t.admit("East US", free, "0", 5.0, 1, th.CREATE)))
    cases.append(("provisioned container", lambda: t.admit("East US", paid, "0", 5.0, 1, th.CREATE)))
    b = account(credits_per_s=10_000_000)
    bdb = b.create_database({"id": "db"})
    bpaid = b.create_container(bdb, {"id": "paid", "partitionKey": PK}, throughput=10_000_000)
    cases.append(("provisioned + credits", lambda: b.throttle.admit("East US", bpaid, "0", 5.0, 1, th.CREATE)))
    cases.append(("query over 4 partitions", lambda: t.admit_many("East US", paid, ["0", "1", "2", "3"], 9.0, 10,
                                                                 th.QUERY, 40)))
    s = account()
    sdb = s.create_database({"id": "db"})
    sfree = s.create_container(sdb, {"id": "free", "partitionKey": PK})
    s.throttle.set_storm("East US", 0.0, op="read")
    cases.append(("storm on another kind", lambda: s.throttle.admit("East US", sfree, "0", 5.0, 1, th.CREATE)))
    for name, fn in cases:
        print(f"admit: {name:40s} {per_call_us(fn):6.2f} us")
    doc = {"id": "a", "pk": "p", "name": "widget", "n": 1, "tags": ["x", "y"], "payload": "x" * 800}
    w = Writer(free, "East US", canonical_pk_json(["p"]), ["p"], 0)
    w.create(dict(doc))
    print(f"charge.staged: 1 KB create, 7 terms          {per_call_us(lambda: charge.staged(w), N // 4):6.2f} us")


if __name__ == "__main__":
    main()
