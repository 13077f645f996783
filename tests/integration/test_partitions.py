"""Multi-partition and hierarchical-key containers through the official SDK, sync and aio: items
spread over every physical partition, and each one lands in the partition whose EPK range holds
the key's EPK as the SDK itself computes it (`feed_range_from_partition_key`), for string,
numeric, bool, null and MultiHash keys. Placement is read inside the server (`regionlab.call`).
"""
import asyncio

import pytest
from azure.cosmos import PartitionKey, exceptions

from sdk_harness import WireLog, item_count, make_aio_client, make_client

HIERARCHICAL = PartitionKey(path=["/tenant", "/user"], kind="MultiHash")


def placement(emu, db: str, coll: str, region: str = "East US") -> dict:
    """{item id: (min_epk, max_epk) of the physical partition holding it} in one region."""
    def where(account):
        out = {}
        for p in account.databases[db].containers[coll].partitions:
            rs = p.replica_sets[region]
            for v in rs.store.scan(rs.committed_lsn):
                out[v.key[1]] = (p.min_epk, p.max_epk)
        return out
    return emu.call(where)


def sdk_epk(container, pk) -> str:
    return container.feed_range_from_partition_key(pk)["Range"]["min"]


def assert_placed_by_epk(emu, container, db: str, coll: str, keys: dict) -> None:
    """keys: {item id: partition key value}. Each item sits in the range holding the SDK's EPK."""
    where = placement(emu, db, coll)
    assert set(where) == set(keys)
    for id, pk in keys.items():
        lo, hi = where[id]
        epk = sdk_epk(container, pk)
        assert lo <= epk and (epk < hi or hi == "FF"), (id, pk, epk, lo, hi)


@pytest.mark.regionlab_config(partitions=4)
def test_items_spread_over_every_partition_by_sdk_epk(regionlab, sdk_client):
    c = sdk_client.create_database("db").create_container("c", PartitionKey(path="/pk"))
    keys = {f"i{i}": f"user-{i}" for i in range(80)}
    for id, pk in keys.items():
        c.create_item({"id": id, "pk": pk})
    counts = item_count(regionlab, "db", "c")
    assert len(counts) == 4 and all(n > 0 for n in counts) and sum(counts) == 80
    assert_placed_by_epk(regionlab, c, "db", "c", keys)
    for id, pk in list(keys.items())[::7]:
        assert c.read_item(id, partition_key=pk)["pk"] == pk
    pages = list(c.read_all_items(max_item_count=7).by_page())
    assert sorted(d["id"] for p in pages for d in p) == sorted(keys)


def test_offer_throughput_40000_gives_four_partitions(regionlab):
    log = WireLog()
    with make_client(regionlab, raw_response_hook=log) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"), offer_throughput=40000)
        assert len(list(c.read_feed_ranges())) == 4
        for i in range(60):
            c.create_item({"id": f"i{i}", "pk": i % 20})
        counts = item_count(regionlab, "db", "c")
        assert len(counts) == 4 and all(n > 0 for n in counts)
        range_ids = {e.response_headers.get("x-ms-documentdb-partitionkeyrangeid")
                     for e in log.matching("POST", "/docs")}
        assert range_ids == {"0", "1", "2", "3"}
        c.delete_all_items_by_partition_key(3)
        assert sum(item_count(regionlab, "db", "c")) == 57
        with pytest.raises(exceptions.CosmosResourceNotFoundError):
            c.read_item("i3", partition_key=3)
        assert c.read_item("i4", partition_key=4)["pk"] == 4


@pytest.mark.regionlab_config(partitions=4)
def test_scalar_key_types_are_placed_by_sdk_epk(regionlab, sdk_client):
    c = sdk_client.create_database("db").create_container("c", PartitionKey(path="/pk"))
    values = [0, 1, -1, 2.5, 1e15, -123456789, True, False, None, "", "a", "ü", "x" * 200]
    keys = {f"k{i}": v for i, v in enumerate(values)}
    for id, pk in keys.items():
        c.create_item({"id": id, "pk": pk})
    assert_placed_by_epk(regionlab, c, "db", "c", keys)
    for id, pk in keys.items():
        assert c.read_item(id, partition_key=pk)["id"] == id


@pytest.mark.regionlab_config(partitions=4)
def test_hierarchical_key_crud(regionlab):
    log = WireLog()
    with make_client(regionlab, raw_response_hook=log) as client:
        c = client.create_database("db").create_container("h", HIERARCHICAL)
        assert c.read()["partitionKey"] == {"paths": ["/tenant", "/user"], "kind": "MultiHash", "version": 2}
        created = c.create_item({"id": "a", "tenant": "t1", "user": "u1", "n": 1})
        assert log.last.status == 201
        assert log.last.request_headers["x-ms-documentdb-partitionkey"] == '["t1","u1"]'
        assert c.read_item("a", partition_key=["t1", "u1"]) == created
        with pytest.raises(exceptions.CosmosResourceNotFoundError):
            c.read_item("a", partition_key=["t1", "u2"])
        c.create_item({"id": "a", "tenant": "t1", "user": "u2", "n": 10})     # same id, other key
        assert c.upsert_item({"id": "a", "tenant": "t1", "user": "u1", "n": 2})["n"] == 2
        assert log.last.status == 200
        assert c.replace_item("a", {"id": "a", "tenant": "t1", "user": "u1", "n": 3})["n"] == 3
        patched = c.patch_item("a", partition_key=["t1", "u1"],
                               patch_operations=[{"op": "incr", "path": "/n", "value": 4}])
        assert patched["n"] == 7
        assert c.read_item(created, partition_key=["t1", "u1"])["n"] == 7     # rid path
        c.delete_item("a", partition_key=["t1", "u1"])
        with pytest.raises(exceptions.CosmosResourceNotFoundError):
            c.read_item("a", partition_key=["t1", "u1"])
        assert c.read_item("a", partition_key=["t1", "u2"])["n"] == 10
        with pytest.raises(exceptions.CosmosResourceExistsError):
            c.create_item({"id": "a", "tenant": "t1", "user": "u2"})


@pytest.mark.regionlab_config(partitions=4)
def test_hierarchical_keys_are_placed_by_sdk_epk(regionlab, sdk_client):
    c = sdk_client.create_database("db").create_container("h", HIERARCHICAL)
    keys = {f"i{t}-{u}": [f"tenant-{t}", f"user-{u}"] for t in range(12) for u in range(3)}
    for id, (tenant, user) in keys.items():
        c.create_item({"id": id, "tenant": tenant, "user": user})
    counts = item_count(regionlab, "db", "h")
    assert all(n > 0 for n in counts) and sum(counts) == len(keys)
    assert_placed_by_epk(regionlab, c, "db", "h", keys)
    c.delete_all_items_by_partition_key(["tenant-0", "user-0"])
    assert sum(item_count(regionlab, "db", "h")) == len(keys) - 1
    assert c.read_item("i0-1", partition_key=["tenant-0", "user-1"])["user"] == "user-1"


@pytest.mark.regionlab_config(partitions=4)
def test_aio_multi_partition_and_hierarchical(regionlab):
    async def main():
        async with make_aio_client(regionlab) as client:
            db = await client.create_database("db")
            c = await db.create_container("c", PartitionKey(path="/pk"))
            for i in range(40):
                await c.create_item({"id": f"i{i}", "pk": f"p{i}"})
            pages = []
            async for page in c.read_all_items(max_item_count=5).by_page():
                pages.append([d["id"] async for d in page])
            assert sorted(i for p in pages for i in p) == sorted(f"i{i}" for i in range(40))
            h = await db.create_container("h", HIERARCHICAL)
            await h.create_item({"id": "x", "tenant": "t", "user": "u", "n": 1})
            await h.patch_item("x", partition_key=["t", "u"],
                               patch_operations=[{"op": "set", "path": "/n", "value": 2}])
            assert (await h.read_item("x", partition_key=["t", "u"]))["n"] == 2
            with pytest.raises(exceptions.CosmosResourceNotFoundError):
                await h.read_item("x", partition_key=["t", "v"])
            await h.delete_item("x", partition_key=["t", "u"])
            with pytest.raises(exceptions.CosmosResourceNotFoundError):
                await h.read_item("x", partition_key=["t", "u"])
    asyncio.run(main())
    counts = item_count(regionlab, "db", "c")
    assert all(n > 0 for n in counts) and sum(counts) == 40
