"""Bounded staleness in virtual time: a region may lag by at most K writes or T seconds; past the
bound, writes in the write region are throttled (429) and nothing is applied, and reads are
never served below the bound."""
import random

import pytest

from regionlab.emulator.core.account import Account, AccountConfig
from regionlab.emulator.core.documents import Writer, min_lsn_for
from regionlab.emulator.core.errors import CosmosError
from regionlab.emulator.core.scheduler import ManualClock, Scheduler, run_until_idle

K = 5


def _account(staleness_s=60):
    clock, scheduler = ManualClock(), Scheduler()
    cfg = AccountConfig(consistency="BoundedStaleness", staleness_ops=K, staleness_s=staleness_s,
                        lag_ms={("East US", "West US"): 1_000_000})   # West US effectively never catches up
    account = Account(cfg, clock, scheduler, random.Random(1))
    db = account.create_database({"id": "db"})
    c = account.create_container(db, {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}})
    return account, c, clock, scheduler


def _write(account, c, clock, i):
    w = Writer(c, "East US", '["p"]', ["p"], clock.now_ms())
    w.create({"id": str(i), "pk": "p"})
    return w.commit()


def test_writes_are_throttled_once_a_region_lags_k_operations():
    account, c, clock, scheduler = _account()
    for i in range(K):
        _write(account, c, clock, i)
    hub = c.partitions[0].replica_sets["East US"]
    with pytest.raises(CosmosError) as e:
        _write(account, c, clock, K)
    assert e.value.status == 429 and e.value.retry_after_ms > 0
    assert hub.lsn == K                       # the throttled write changed nothing


def test_writes_are_throttled_once_a_region_lags_t_seconds():
    account, c, clock, scheduler = _account(staleness_s=2)
    _write(account, c, clock, 0)
    clock.advance_to(clock.now_ms() + 2_001)
    with pytest.raises(CosmosError) as e:
        _write(account, c, clock, 1)
    assert e.value.status == 429


def test_writes_resume_when_the_lagging_region_catches_up():
    account, c, clock, scheduler = _account()
    link = account.links[("East US", "West US")]
    for i in range(K):
        _write(account, c, clock, i)
    link.lag_ms = 0
    run_until_idle(clock, scheduler, limit_ms=clock.now_ms() + 1_000_001)
    assert _write(account, c, clock, K) == K + 1


def test_reads_are_never_served_below_the_bound():
    account, c, clock, scheduler = _account()
    for i in range(K):
        _write(account, c, clock, i)
    west = c.partitions[0].replica_sets["West US"]
    assert min_lsn_for(west, "BoundedStaleness", None) == 0        # K behind at most: still inside
    run_until_idle(clock, scheduler, limit_ms=clock.now_ms() + 10)
    east_us_2 = c.partitions[0].replica_sets["East US 2"]
    assert east_us_2.committed_lsn >= min_lsn_for(east_us_2, "BoundedStaleness", None)
