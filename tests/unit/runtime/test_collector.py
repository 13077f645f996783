"""The serving process's collector policy: a slow full collection freezes what survived it, a
deleted container unfreezes everything so its cycles can be reclaimed, and every pause and the
loop's lag land in their histograms. Real gc.collect() calls on this process's collector; the
process's gc state (thresholds, callbacks, frozen objects) is put back after each test."""
import asyncio
import gc
import random

import pytest

from regionlab.emulator.core.account import Account, AccountConfig
from regionlab.emulator.core.scheduler import ManualClock, Scheduler
from regionlab.emulator.runtime import collector as col


@pytest.fixture
def restore_gc():
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.mark.slow
def test_a_slow_full_collection_freezes_what_survived_it(restore_gc):
    c = col.Collector(policy=True, freeze_after_full_ms=0.0).start()
    try:
        assert gc.get_threshold() == (col.GEN0_THRESHOLD, col.GEN1_THRESHOLD, col.GEN2_THRESHOLD)
        assert c.freezes == 1 and gc.get_freeze_count() > 0       # what there was at start
        gc.unfreeze()
        gc.collect()
        assert c.freezes == 2 and gc.get_freeze_count() > 0
        assert c.pauses[2].n == 1 and c.pauses_cpu[2].n == 1
        assert sum(c.pauses[2].counts) == 1
    finally:
        c.stop()
    assert c._on_gc not in gc.callbacks


@pytest.mark.slow
def test_a_fast_full_collection_or_no_policy_freezes_nothing(restore_gc):
    gc.unfreeze()
    c = col.Collector(policy=False, freeze_after_full_ms=0.0).start()
    try:
        gc.collect()
        assert c.freezes == 0 and gc.get_freeze_count() == 0 and c.pauses[2].n == 1
    finally:
        c.stop()
    c = col.Collector(policy=True, freeze_after_full_ms=10_000.0).start()
    try:
        gc.unfreeze()
        gc.collect()
        assert c.freezes == 1 and gc.get_freeze_count() == 0       # only the one at start
    finally:
        c.stop()


@pytest.mark.slow
def test_deleting_a_container_unfreezes_so_its_cycles_can_be_collected(restore_gc):
    account = Account(AccountConfig(), ManualClock(), Scheduler(), random.Random(0))
    db = account.create_database({"id": "d"})
    coll = account.create_container(db, {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash"}})
    c = col.Collector(account, policy=True, freeze_after_full_ms=0.0).start()
    try:
        gc.collect()
        assert gc.get_freeze_count() > 0
        c._release_deleted()                      # nothing deleted: stays frozen
        assert gc.get_freeze_count() > 0 and c.unfreezes == 0
        account.delete_container(coll)
        c._release_deleted()
        assert c.unfreezes == 1 and c.pauses[2].n == 2     # unfrozen, then collected at once
    finally:
        c.stop()


def _stores_alive() -> int:
    from regionlab.emulator.core.store import VersionStore
    gc.unfreeze()                                 # frozen objects are not listed
    return sum(1 for o in gc.get_objects() if type(o) is VersionStore)


@pytest.mark.slow
def test_a_container_deleted_while_another_is_created_is_collected_at_once(restore_gc):
    """The sampler compared counts: a delete and a create between two samples (a soak's
    delete-then-create cycle) left the count as it was, nothing was unfrozen, and each deleted
    container stayed in memory for good (+71 MB per 40 MB cycle). And an unfreeze alone waited
    for a full collection that writes of untracked versions hardly bring."""
    account = Account(AccountConfig(), ManualClock(), Scheduler(), random.Random(0))
    db = account.create_database({"id": "d"})
    spec = {"partitionKey": {"paths": ["/pk"], "kind": "Hash"}}
    old = account.create_container(db, {"id": "old", **spec})
    old_stores = sum(len(p.replica_sets) for p in old.partitions)
    gc.unfreeze()
    gc.collect()                                  # earlier tests' garbage, frozen or not
    c = col.Collector(account, policy=True, freeze_after_full_ms=0.0).start()
    try:
        gc.collect()
        with_old = _stores_alive()
        gc.freeze()
        account.delete_container(old)
        del old
        new = account.create_container(db, {"id": "new", **spec})
        new_stores = sum(len(p.replica_sets) for p in new.partitions)
        c._release_deleted()
        assert c.unfreezes == 1 and c.pauses[2].n >= 2      # unfrozen and collected right away
        assert _stores_alive() == with_old - old_stores + new_stores     # other tests may hold some
        c._release_deleted()                                # nothing deleted since
        assert c.unfreezes == 1
    finally:
        c.stop()


class VirtualTimer:
    """The sampler's clock and sleep in virtual time: each sleep ends `late_s[i]` past its due
    time, then the next one waits until the test is done (the sampler stays parked)."""

    def __init__(self, late_s: list):
        self.now = 1000.0
        self.late_s = list(late_s)
        self.slept = []
        self.parked = asyncio.Event()

    def time(self) -> float:
        return self.now

    async def sleep(self, s: float) -> None:
        self.slept.append(s)
        if not self.late_s:
            self.parked.set()
            await asyncio.Event().wait()        # parked until stop() cancels the sampler
        self.now += s + self.late_s.pop(0)
        await asyncio.sleep(0)                  # yield as a real timer would


def test_the_loop_lag_sampler_records_how_late_its_timer_ran(restore_gc):
    timer = VirtualTimer([0.007, 0.0, 0.120])

    async def main():
        c = col.Collector(policy=False, lag_interval_ms=20, timer=(timer.time, timer.sleep)).start()
        try:
            await asyncio.wait_for(timer.parked.wait(), 10)
            return c
        finally:
            c.stop()
    c = asyncio.run(main())
    assert timer.slept == [0.02] * 4                       # due every 20 ms (the 4th never ends)
    assert c.lag.n == 3 and c.lag.max_ms == pytest.approx(120.0)
    assert c.lag.total_ms == pytest.approx(127.0)
    assert c.lag.counts[col.BUCKETS_MS.index(0.1)] == 1    # on time
    assert c.lag.counts[col.BUCKETS_MS.index(10)] == 1     # 7 ms late
    assert c.lag.counts[col.BUCKETS_MS.index(200)] == 1    # 120 ms late
    d = c.describe()
    assert d["loop_lag_ms"]["count"] == 3 and d["loop_lag_interval_ms"] == 20
    lines = c.metrics()
    assert any(line.startswith('regionlab_gc_pause_ms_bucket{generation="2",le="+Inf"}') for line in lines)
    assert 'regionlab_loop_lag_ms_bucket{le="10"} 2' in lines and "regionlab_loop_lag_ms_count 3" in lines
    assert any("due every 20 ms" in line for line in lines)


def test_the_lag_sampler_runs_on_the_loops_own_timer_by_default(restore_gc):
    async def main():
        c = col.Collector(policy=False).start()
        try:
            await asyncio.wait_for(c.sampled.wait(), 10)      # set by the first sample
            return c
        finally:
            c.stop()
    c = asyncio.run(main())
    assert c.lag.n >= 1 and c.lag.max_ms >= 0.0
    assert c.describe()["loop_lag_interval_ms"] == col.LAG_SAMPLE_INTERVAL_MS


async def next_samples(c, n: int) -> None:
    """Wait until the collector's loop sampler has taken n more samples."""
    for _ in range(n):
        c.sampled.clear()
        await asyncio.wait_for(c.sampled.wait(), 10)


def test_the_default_sampler_is_a_timer_of_the_loop_not_a_task(restore_gc):
    """A task sleeping in asyncio.sleep cost a future, a task step and a coroutine resume per
    sample, 20 times a second in an idle server: the sampler re-arms a plain loop timer."""
    async def main():
        before = len(asyncio.all_tasks())
        c = col.Collector(policy=False, lag_interval_ms=1).start()
        try:
            assert len(asyncio.all_tasks()) == before
            await next_samples(c, 3)                         # it re-arms itself after each sample
            return c
        finally:
            c.stop()
    c = asyncio.run(main())
    assert c.lag.n >= 3


def test_the_default_sampler_releases_a_deleted_container_within_its_check_interval(restore_gc):
    """The loop's own sampler looks for deletes every RELEASE_CHECK_SAMPLES samples (not every
    sample): a container deleted while it runs is unfrozen and collected by then."""
    account = Account(AccountConfig(), ManualClock(), Scheduler(), random.Random(0))
    db = account.create_database({"id": "d"})
    coll = account.create_container(db, {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash"}})

    async def main():
        c = col.Collector(account, policy=True, freeze_after_full_ms=0.0, lag_interval_ms=1).start()
        try:
            await next_samples(c, 1)                             # the first sample looked: nothing gone
            assert c.unfreezes == 0
            account.delete_container(coll)
            await next_samples(c, col.RELEASE_CHECK_SAMPLES)
            return c
        finally:
            c.stop()
    c = asyncio.run(main())
    assert c.unfreezes == 1


def test_histogram_buckets_are_cumulative_in_prometheus_text():
    h = col.Histogram()
    for ms in (0.05, 3, 3, 700, 5000):
        h.add(ms)
    lines = col._histogram_lines("x", h, "")
    assert 'x_bucket{le="0.1"} 1' in lines and 'x_bucket{le="5"} 3' in lines
    assert 'x_bucket{le="1000"} 4' in lines and 'x_bucket{le="+Inf"} 5' in lines
    assert "x_count 5" in lines and h.max_ms == 5000
