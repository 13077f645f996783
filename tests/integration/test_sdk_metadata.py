"""Account, database, container, partition-key-range and offer operations through the official
SDK, sync and aio, against a real regionlab server: discovery, CRUD and 409/404 on databases and
containers, manual and autoscale throughput (the /offers query and replace), and the pkranges
200-then-304 exchange the SDK needs to stop paging.
"""
import asyncio
import base64

import pytest
from azure.cosmos import PartitionKey, ThroughputProperties, exceptions

from sdk_harness import WireLog, assert_serves, make_aio_client, make_client


def _partition_count(emu, db: str, coll: str) -> int:
    return emu.call(lambda a: len(a.databases[db].containers[coll].partitions))


# ---- account -------------------------------------------------------------------------------
def test_get_database_account_lists_every_region(regionlab, sdk_client):
    acct = sdk_client.get_database_account()
    writable = {loc["name"]: loc["databaseAccountEndpoint"] for loc in acct.WritableLocations}
    readable = {loc["name"]: loc["databaseAccountEndpoint"] for loc in acct.ReadableLocations}
    assert writable == {"East US": regionlab.region_endpoints["East US"]}
    assert readable == regionlab.region_endpoints
    assert acct.ConsistencyPolicy["defaultConsistencyLevel"] == "Session"
    assert acct._EnableMultipleWritableLocations is False
    assert acct._EnablePerPartitionFailoverBehavior is False   # keeps PPAF and default hedging off


def test_aio_get_database_account(regionlab):
    async def main():
        async with make_aio_client(regionlab) as client:
            acct = await client._get_database_account()    # the aio client has no public name for it
            return {loc["name"] for loc in acct.ReadableLocations}
    assert asyncio.run(main()) == set(regionlab.regions)


WRONG_KEY = base64.b64encode(b"definitely not the account key!!" * 2).decode()


def test_wrong_key_is_401_sync_and_aio(regionlab, sdk_client, monkeypatch):
    # The SDK retries a failing account read 3 times with growing waits; one try is enough here.
    monkeypatch.setenv("AZURE_COSMOS_HEALTH_CHECK_MAX_RETRIES", "0")
    with pytest.raises(exceptions.CosmosHttpResponseError) as e:
        make_client(regionlab, key=WRONG_KEY)
    assert e.value.status_code == 401

    async def aio():
        async with make_aio_client(regionlab, key=WRONG_KEY) as client:
            await client.create_database("never")
    with pytest.raises(exceptions.CosmosHttpResponseError) as e:
        asyncio.run(aio())
    assert e.value.status_code == 401
    assert regionlab.call(lambda a: list(a.databases)) == []
    assert_serves(sdk_client)


# ---- databases -----------------------------------------------------------------------------
def test_database_create_read_list_delete(sdk_client):
    created = sdk_client.create_database("d1")
    props = created.read()
    assert props["id"] == "d1" and props["_self"].startswith("dbs/")
    sdk_client.create_database("d2")
    assert sorted(d["id"] for d in sdk_client.list_databases()) == ["d1", "d2"]
    with pytest.raises(exceptions.CosmosResourceExistsError) as e:
        sdk_client.create_database("d1")
    assert e.value.status_code == 409
    sdk_client.delete_database("d1")
    assert [d["id"] for d in sdk_client.list_databases()] == ["d2"]
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        sdk_client.get_database_client("d1").read()
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        sdk_client.delete_database("d1")
    assert sdk_client.create_database_if_not_exists("d2").read()["id"] == "d2"


def test_aio_database_create_read_list_delete(regionlab):
    async def main():
        async with make_aio_client(regionlab) as client:
            db = await client.create_database("d1")
            assert (await db.read())["id"] == "d1"
            await client.create_database("d2")
            assert sorted([d["id"] async for d in client.list_databases()]) == ["d1", "d2"]
            with pytest.raises(exceptions.CosmosResourceExistsError):
                await client.create_database("d1")
            await client.delete_database("d1")
            with pytest.raises(exceptions.CosmosResourceNotFoundError):
                await client.get_database_client("d1").read()
            assert [d["id"] async for d in client.list_databases()] == ["d2"]
    asyncio.run(main())


# ---- containers ----------------------------------------------------------------------------
def test_container_create_read_list_replace_delete(regionlab, sdk_client):
    db = sdk_client.create_database("db")
    c = db.create_container("c1", PartitionKey(path="/pk"), default_ttl=-1)
    props = c.read()
    assert props["partitionKey"]["paths"] == ["/pk"] and props["partitionKey"]["kind"] == "Hash"
    assert props["_self"].startswith(f"dbs/{db.read()['_rid']}/colls/")
    db.create_container("c2", PartitionKey(path="/other"))
    assert sorted(x["id"] for x in db.list_containers()) == ["c1", "c2"]
    with pytest.raises(exceptions.CosmosResourceExistsError):
        db.create_container("c1", PartitionKey(path="/pk"))

    replaced = db.replace_container(c, PartitionKey(path="/pk"), default_ttl=3600)
    assert replaced.read()["defaultTtl"] == 3600
    with pytest.raises(exceptions.CosmosHttpResponseError) as e:
        db.replace_container(c, PartitionKey(path="/changed"))
    assert e.value.status_code == 400

    db.delete_container("c1")
    assert [x["id"] for x in db.list_containers()] == ["c2"]
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        db.get_container_client("c1").read()
    # Deleting the database takes its containers with it.
    sdk_client.delete_database("db")
    assert regionlab.call(lambda a: len(a.colls_by_rid)) == 0


def test_container_with_manual_throughput(regionlab, sdk_client):
    db = sdk_client.create_database("db")
    c = db.create_container("c", PartitionKey(path="/pk"), offer_throughput=40000)
    assert c.get_throughput().offer_throughput == 40000
    assert _partition_count(regionlab, "db", "c") == 4
    c.replace_throughput(50000)
    tp = c.get_throughput()
    assert tp.offer_throughput == 50000 and tp.auto_scale_max_throughput is None


def test_container_with_autoscale_throughput(regionlab, sdk_client):
    db = sdk_client.create_database("db")
    c = db.create_container("auto", PartitionKey(path="/pk"),
                            offer_throughput=ThroughputProperties(auto_scale_max_throughput=20000))
    tp = c.get_throughput()
    assert tp.auto_scale_max_throughput == 20000
    assert _partition_count(regionlab, "db", "auto") == 2
    c.replace_throughput(ThroughputProperties(auto_scale_max_throughput=30000))
    assert c.get_throughput().auto_scale_max_throughput == 30000


def test_database_throughput_get_and_replace(sdk_client):
    db = sdk_client.create_database("shared", offer_throughput=1000)
    assert db.get_throughput().offer_throughput == 1000
    db.replace_throughput(2000)
    assert db.get_throughput().offer_throughput == 2000
    # A resource without an offer is not asserted: the /offers query correctly comes back empty,
    # but SDK 4.17.1 then raises its own 404/10004 into its container-recreate retry, which
    # crashes with an AttributeError (container_link is None) whatever the server does.


def test_aio_containers_and_throughput(regionlab):
    async def main():
        async with make_aio_client(regionlab) as client:
            db = await client.create_database("db", offer_throughput=800)
            assert (await db.get_throughput()).offer_throughput == 800
            await db.replace_throughput(900)
            assert (await db.get_throughput()).offer_throughput == 900
            c = await db.create_container("c", PartitionKey(path="/pk"), offer_throughput=20000)
            assert (await c.read())["partitionKey"]["paths"] == ["/pk"]
            assert (await c.get_throughput()).offer_throughput == 20000
            await c.replace_throughput(30000)
            assert (await c.get_throughput()).offer_throughput == 30000
            a = await db.create_container("a", PartitionKey(path="/pk"),
                                          offer_throughput=ThroughputProperties(auto_scale_max_throughput=4000))
            assert (await a.get_throughput()).auto_scale_max_throughput == 4000
            await a.replace_throughput(ThroughputProperties(auto_scale_max_throughput=6000))
            assert (await a.get_throughput()).auto_scale_max_throughput == 6000
            assert sorted([x["id"] async for x in db.list_containers()]) == ["a", "c"]
            await db.replace_container(c, PartitionKey(path="/pk"), default_ttl=60)
            assert (await c.read())["defaultTtl"] == 60
            with pytest.raises(exceptions.CosmosResourceExistsError):
                await db.create_container("c", PartitionKey(path="/pk"))
            await db.delete_container("c")
            with pytest.raises(exceptions.CosmosResourceNotFoundError):
                await db.get_container_client("c").read()
    asyncio.run(main())
    assert _partition_count(regionlab, "db", "a") == 1


# ---- partition key ranges ------------------------------------------------------------------
def _check_ranges(ranges: list, count: int) -> None:
    spans = sorted((r["Range"]["min"], r["Range"]["max"]) for r in ranges)
    assert len(spans) == count
    assert spans[0][0] == "" and spans[-1][1] == "FF"
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))


@pytest.mark.regionlab_config(partitions=4)
def test_read_feed_ranges_is_200_then_304(regionlab):
    log = WireLog()
    with make_client(regionlab, raw_response_hook=log) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        _check_ranges(list(c.read_feed_ranges()), 4)
    exchanges = log.matching("GET", "/pkranges")
    assert [e.status for e in exchanges[:2]] == [200, 304]
    etag = exchanges[0].response_headers["etag"]
    assert exchanges[1].request_headers["if-none-match"] == etag
    assert exchanges[1].response_headers["etag"] == etag


@pytest.mark.regionlab_config(partitions=3)
def test_aio_read_feed_ranges(regionlab):
    log = WireLog()

    async def main():
        async with make_aio_client(regionlab, raw_response_hook=log) as client:
            db = await client.create_database("db")
            c = await db.create_container("c", PartitionKey(path="/pk"))
            return [r async for r in c.read_feed_ranges()]
    _check_ranges(asyncio.run(main()), 3)
    assert log.statuses("GET", "/pkranges")[:2] == [200, 304]
