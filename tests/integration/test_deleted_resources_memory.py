"""Deleting a container, a database or a region frees its replica sets (and with them every item
version they store): after the SDK has written, read (session tokens), queried (paged) and been
metered through it, weak references to its replica sets are dead once the emulator's loop has run
gc.collect(), and the throttle keeps no buckets of a deleted container. A cut replication link
does not keep a deleted container's unshipped commits either.

Deterministic: replication is waited for (commit callbacks, not sleeps) before the delete, so no
in-flight shipment holds a replica set; the check is by weakref, not by RSS.
"""
import gc
import weakref

import pytest
from azure.cosmos import PartitionKey

from sdk_harness import make_client, wait_replicated

ITEMS = 60


def _fill(container) -> None:
    """Writes, session reads and a paged cross-partition query: every gateway path that keeps
    something per replica set (session-token text, snapshots, throttle buckets)."""
    for i in range(ITEMS):
        container.upsert_item({"id": str(i), "pk": str(i % 6), "text": "x" * 200})
    for i in range(0, ITEMS, 7):
        assert container.read_item(str(i), str(i % 6))["id"] == str(i)
    pages = container.query_items("SELECT * FROM c", enable_cross_partition_query=True,
                                  max_item_count=11).by_page()
    assert sum(len(list(page)) for page in pages) == ITEMS


def _replica_sets(emu, db: str, coll: str) -> list:
    return emu.call(lambda a: [rs for p in a.databases[db].containers[coll].partitions
                               for rs in p.replica_sets.values()])


def _replicated(emu, db: str, coll: str) -> None:
    """Until every region has committed everything its write region committed."""
    for region in emu.call(lambda a: [r.name for r in a.regions]):
        wait_replicated(emu, db, coll, region)


def _weak(sets: list) -> list:
    return [weakref.ref(rs) for rs in sets]


def _alive_after_gc(emu, refs: list) -> int:
    return emu.call(lambda _a: (gc.collect(), sum(r() is not None for r in refs))[1])


def _buckets_of(emu, rid: str) -> int:
    return emu.call(lambda a: sum(1 for key in a.throttle.buckets if key[1] == rid))


@pytest.mark.slow
@pytest.mark.regionlab_config(partitions=3)
def test_a_deleted_container_frees_its_replica_sets_and_buckets(regionlab):
    with make_client(regionlab) as client:
        db = client.create_database("db")
        c = db.create_container("items", PartitionKey(path="/pk"), offer_throughput=4000)
        _fill(c)
        _replicated(regionlab, "db", "items")
        refs = _weak(_replica_sets(regionlab, "db", "items"))
        rid = regionlab.call(lambda a: a.databases["db"].containers["items"].rid)
        assert len(refs) == 9 and _buckets_of(regionlab, rid) > 0
        db.delete_container("items")
        assert _alive_after_gc(regionlab, refs) == 0
        assert _buckets_of(regionlab, rid) == 0
        again = db.create_container("items", PartitionKey(path="/pk"))     # the name is free again
        again.upsert_item({"id": "a", "pk": "a"})
        assert again.read_item("a", "a")["id"] == "a"


@pytest.mark.slow
@pytest.mark.regionlab_config(partitions=2)
def test_a_deleted_database_frees_the_replica_sets_of_its_containers(regionlab):
    with make_client(regionlab) as client:
        db = client.create_database("db")
        refs = []
        for name in ("one", "two"):
            _fill(db.create_container(name, PartitionKey(path="/pk")))
            _replicated(regionlab, "db", name)
            refs += _weak(_replica_sets(regionlab, "db", name))
        client.delete_database("db")
        assert _alive_after_gc(regionlab, refs) == 0


@pytest.mark.regionlab_config(partitions=2)
def test_a_removed_region_frees_its_replica_sets(regionlab):
    with make_client(regionlab, preferred_locations=["West US"]) as client:      # reads served there
        c = client.create_database("db").create_container("items", PartitionKey(path="/pk"))
        _fill(c)
        _replicated(regionlab, "db", "items")
        refs = regionlab.call(lambda a: [weakref.ref(p.replica_sets["West US"])
                                         for p in a.databases["db"].containers["items"].partitions])
        regionlab.call(lambda a: a.remove_region("West US"))
        assert _alive_after_gc(regionlab, refs) == 0
        emu = regionlab.emulator                # nor its endpoint's gateway and HTTP server
        assert "West US" not in emu._listeners and "West US" not in emu.services
        assert len(emu._http_servers) == 3      # the global endpoint and the two regions left
    with make_client(regionlab) as client:          # a client that never knew West US
        c = client.get_database_client("db").get_container_client("items")
        c.upsert_item({"id": "after", "pk": "a"})
        assert c.read_item("after", "a")["id"] == "after"


@pytest.mark.regionlab_config(partitions=2)
def test_a_cut_link_does_not_keep_a_deleted_containers_backlog(regionlab):
    with make_client(regionlab) as client:
        db = client.create_database("db")
        c = db.create_container("items", PartitionKey(path="/pk"))
        _replicated(regionlab, "db", "items")
        regionlab.call(lambda a: a.links[("East US", "West US")].set_state("cut"))
        _fill(c)                                            # West US never gets these
        assert regionlab.call(lambda a: a.links[("East US", "West US")].backlog) > 0
        refs = _weak(_replica_sets(regionlab, "db", "items"))
        db.delete_container("items")
        assert _alive_after_gc(regionlab, refs) == 0
        assert regionlab.call(lambda a: a.links[("East US", "West US")].backlog) == 0
