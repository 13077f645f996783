"""Paged queries read every page at the first page's snapshot: a pinned snapshot survives later
writes (its versions are not pruned), and a continuation whose snapshot expired or whose
history a failover rewrote is refused with a clear 400 instead of answering from another state.
Driven on a real core replica set in virtual time."""
import random

import pytest

from emulator.core.account import Account, AccountConfig
from emulator.core.documents import Writer
from emulator.core.errors import CosmosError
from emulator.core.scheduler import ManualClock, Scheduler
from emulator.gateway.queries import QUERY_SNAPSHOT_TTL_MS, _snapshot_lsn


def _put(c, clock, value):
    w = Writer(c, "East US", '["p"]', ["p"], clock.now_ms())
    w.upsert({"id": "x", "pk": "p", "v": value})
    return w.commit()


def _setup():
    clock, scheduler = ManualClock(), Scheduler()
    account = Account(AccountConfig(regions=("East US",)), clock, scheduler, random.Random(1))
    db = account.create_database({"id": "db"})
    c = account.create_container(db, {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}})
    return c, clock, c.partitions[0].replica_sets["East US"]


def test_a_pinned_snapshot_keeps_its_versions_through_later_writes():
    c, clock, rs = _setup()
    lsn = _put(c, clock, 1)
    rs.pin(lsn, clock.now_ms() + QUERY_SNAPSHOT_TTL_MS)
    for v in range(2, 6):
        _put(c, clock, v)
    assert _snapshot_lsn(rs, {"0": [rs.epoch, lsn]}) == lsn
    assert rs.store.get(('["p"]', "x"), lsn).doc["v"] == 1


def test_an_expired_snapshot_is_refused():
    c, clock, rs = _setup()
    lsn = _put(c, clock, 1)
    rs.pin(lsn, clock.now_ms() + QUERY_SNAPSHOT_TTL_MS)
    clock.advance_to(clock.now_ms() + QUERY_SNAPSHOT_TTL_MS + 1)
    _put(c, clock, 2)                                  # the floor moves past the old snapshot
    with pytest.raises(CosmosError) as e:
        _snapshot_lsn(rs, {"0": [rs.epoch, lsn]})
    assert e.value.status == 400 and "expired" in e.value.message


def test_a_snapshot_from_an_older_epoch_is_refused():
    c, clock, rs = _setup()
    lsn = _put(c, clock, 1)
    rs.pin(lsn, clock.now_ms() + QUERY_SNAPSHOT_TTL_MS)
    rs.new_epoch()                                     # a forced failover rewrote history here
    with pytest.raises(CosmosError) as e:
        _snapshot_lsn(rs, {"0": [rs.epoch - 1, lsn]})
    assert e.value.status == 400


def test_a_malformed_snapshot_is_refused():
    c, clock, rs = _setup()
    with pytest.raises(CosmosError) as e:
        _snapshot_lsn(rs, {"7": [0, 1]})
    assert e.value.status == 400 and "restart the query" in e.value.message
