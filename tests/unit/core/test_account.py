"""Proves account.py builds the topology DESIGN.md describes, in virtual time: a write in the
write region reaches every other region after that link's lag (plus each region's intra-region
delay), partitions follow throughput (one per 10,000 RU/s) unless overridden, only write regions
accept writes (403/3), and database/container metadata answers 201/409/404 like the service."""
import pytest

from core_world import PK_DEF, World
from regionlab.emulator.core.account import Account, AccountConfig
from regionlab.emulator.core.geography import (LAG_CROSS_CONTINENT_MS, LAG_SAME_AREA_MS, LAG_SAME_CONTINENT_MS,
                                               default_lag_ms)
from regionlab.emulator.core.container import RU_PER_PARTITION
from regionlab.emulator.core.epk import EPK_MAX, EPK_MIN
from regionlab.emulator.core.errors import CosmosError
from regionlab.emulator.core.replica_set import REPLICA_COUNT
from regionlab.emulator.core.scheduler import ManualClock, Scheduler

REGIONS = ("East US", "East US 2", "West US")


def visible_in(w, c, region, id="x", pk="k"):
    doc, _, _ = w.read(c, region, pk, id)
    return doc is not None


def test_default_lags_follow_geography():
    assert default_lag_ms("East US", "East US 2") == LAG_SAME_AREA_MS
    assert default_lag_ms("East US", "West US") == LAG_SAME_CONTINENT_MS
    assert default_lag_ms("West US", "North Europe") == LAG_CROSS_CONTINENT_MS
    assert default_lag_ms("Atlantis", "East US") == LAG_SAME_CONTINENT_MS
    w = World()
    assert {k: l.lag_ms for k, l in w.account.links.items()}[("East US", "West US")] == LAG_SAME_CONTINENT_MS
    assert len(w.account.links) == 6


@pytest.mark.parametrize("delay_ms", [0, 7])
def test_a_write_reaches_every_region_after_the_link_lag(delay_ms):
    w = World(regions=REGIONS, intra_region_delay_ms=delay_ms)
    c = w.container()
    w.until(w.now_ms + 1000)
    t0 = w.now_ms
    status, _, lsn, rs = w.write(c, "k", "create", {"id": "x", "pk": "k"})
    assert (status, lsn) == (201, 1)
    # committed in the write region after its own delay, shipped, then committed by the read
    # region's quorum after its delay
    due = {"East US": t0 + delay_ms,
           "East US 2": t0 + 2 * delay_ms + LAG_SAME_AREA_MS,
           "West US": t0 + 2 * delay_ms + LAG_SAME_CONTINENT_MS}
    for region, at in sorted(due.items(), key=lambda kv: kv[1]):
        if at > w.now_ms:
            w.until(at - 1)
            assert not visible_in(w, c, region), f"{region} saw the write before {at}"
        w.until(at)
        assert visible_in(w, c, region), f"{region} had not got the write at {at}"
    for region in REGIONS:
        rs = c.partitions[0].for_read(region)
        assert rs.lsn == rs.committed_lsn == 1


def test_configured_lag_overrides_the_default():
    w = World(regions=REGIONS, lag_ms={("East US", "West US"): 250})
    c = w.container()
    t0 = w.now_ms
    w.write(c, "k", "create", {"id": "x", "pk": "k"})
    w.until(t0 + 249)
    assert visible_in(w, c, "East US 2") and not visible_in(w, c, "West US")
    w.until(t0 + 250)
    assert visible_in(w, c, "West US")


def test_many_writes_arrive_in_order_everywhere():
    w = World(regions=REGIONS, jitter_ms=20, intra_region_delay_ms=3)
    c = w.container()
    for i in range(40):
        w.write(c, "k", "upsert", {"id": "x", "pk": "k", "n": i})
        w.until(w.now_ms + 1)
    w.settle()
    for region in REGIONS:
        doc, rs, _ = w.read(c, region, "k", "x")
        assert doc["n"] == 39 and rs.committed_lsn == 40


@pytest.mark.parametrize("throughput, autoscale_max, count", [
    (None, None, 1), (400, None, 1), (RU_PER_PARTITION, None, 1), (RU_PER_PARTITION + 1, None, 2),
    (25_000, None, 3), (None, 40_000, 4),
])
def test_partition_count_follows_throughput(throughput, autoscale_max, count):
    w = World(regions=REGIONS)
    c = w.container(throughput=throughput, autoscale_max=autoscale_max)
    assert len(c.partitions) == count
    assert c.partitions[0].min_epk == EPK_MIN and c.partitions[-1].max_epk == EPK_MAX
    for a, b in zip(c.partitions, c.partitions[1:]):
        assert a.max_epk == b.min_epk
    for p in c.partitions:
        assert set(p.replica_sets) == set(REGIONS)
        assert all(len(rs.replicas) == REPLICA_COUNT for rs in p.replica_sets.values())


def test_partition_count_override():
    w = World(regions=REGIONS, partition_count=5)
    assert len(w.container(throughput=400).partitions) == 5
    assert len(w.container(coll_id="big", throughput=100_000).partitions) == 5


def test_only_the_write_region_accepts_writes():
    w = World(regions=REGIONS)
    c = w.container()
    for region in REGIONS[1:]:
        with pytest.raises(CosmosError) as e:
            w.write(c, "k", "create", {"id": "x", "pk": "k"}, region=region)
        assert (e.value.status, e.value.substatus, e.value.definite) == (403, 3, True)
    assert all(rs.lsn == 0 for rs in c.partitions[0].replica_sets.values())


def test_multi_write_accounts_accept_writes_everywhere():
    w = World(regions=REGIONS, multi_write=True)
    c = w.container()
    for i, region in enumerate(REGIONS):
        status, *_ = w.write(c, "k", "create", {"id": f"x{i}", "pk": "k"}, region=region)
        assert status == 201


def test_account_config_is_checked():
    with pytest.raises(ValueError):
        Account(AccountConfig(regions=()), ManualClock(), Scheduler(), None)
    with pytest.raises(ValueError):
        Account(AccountConfig(regions=("East US", "east us")), ManualClock(), Scheduler(), None)


def test_databases_create_conflict_lookup_delete():
    a = World().account
    db = a.create_database({"id": "db"})
    assert db.properties()["id"] == "db" and db.properties()["_rid"] == db.rid
    with pytest.raises(CosmosError) as e:
        a.create_database({"id": "db"})
    assert e.value.status == 409
    assert a.database("db") is db and a.database(db.rid, by_rid=True) is db
    a.delete_database(db)
    for lookup in (lambda: a.database("db"), lambda: a.database(db.rid, by_rid=True)):
        with pytest.raises(CosmosError) as e:
            lookup()
        assert e.value.status == 404
    assert a.create_database({"id": "db"}).rid != db.rid


@pytest.mark.parametrize("body", [{"id": "a/b"}, {"id": ""}, {}, ["id"], {"id": "a?b"}])
def test_bad_ids_are_400(body):
    a = World().account
    with pytest.raises(CosmosError) as e:
        a.create_database(body)
    assert e.value.status == 400
    db = a.create_database({"id": "db"})
    with pytest.raises(CosmosError) as e:
        a.create_container(db, {**body, "partitionKey": PK_DEF} if isinstance(body, dict) else body)
    assert e.value.status == 400


def test_containers_create_conflict_lookup_delete():
    a = World().account
    db, other = a.create_database({"id": "db"}), a.create_database({"id": "other"})
    c = a.create_container(db, {"id": "c", "partitionKey": PK_DEF}, throughput=400)
    assert c.offer_rid in a.offers
    assert c.properties()["partitionKey"]["paths"] == ["/pk"]
    with pytest.raises(CosmosError) as e:
        a.create_container(db, {"id": "c", "partitionKey": PK_DEF})
    assert e.value.status == 409
    a.create_container(other, {"id": "c", "partitionKey": PK_DEF})     # same id, other database
    assert a.container(db, "c") is c and a.container(db, c.rid, by_rid=True) is c
    with pytest.raises(CosmosError) as e:
        a.container(other, c.rid, by_rid=True)                          # another database's rid
    assert e.value.status == 404
    with pytest.raises(CosmosError) as e:
        a.create_container(db, {"id": "nopk"})
    assert e.value.status == 400
    a.delete_container(c)
    assert c.offer_rid not in a.offers
    with pytest.raises(CosmosError) as e:
        a.container(db, "c")
    assert e.value.status == 404


def test_deleting_a_database_deletes_its_containers():
    a = World().account
    db = a.create_database({"id": "db"}, throughput=400)
    cs = [a.create_container(db, {"id": f"c{i}", "partitionKey": PK_DEF}) for i in range(3)]
    a.delete_database(db)
    assert not any(c.rid in a.colls_by_rid for c in cs)
    assert db.offer_rid not in a.offers and a.offers == {}
