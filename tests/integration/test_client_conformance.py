"""Proves the bundled client is a drop-in for the official azure-cosmos SDK: the same operations,
written once against the shared API names, run through our sync client and through the SDK's on
twin containers of one real emulator, and their results (system properties aside), the errors'
status and substatus, and the change feeds compare equal. Then the aio face against the SDK's aio
client, and the sync client shared by threads. The first two run our client in gateway and in
direct mode; databases and containers (query, list, replace, manual and autoscale throughput,
delete) compare the same way; `from_connection_string` reads the same string as the SDK's, and
`get_database_account` gives the same fields."""
import asyncio
import threading

import pytest
from azure.cosmos import CosmosClient as SdkClient, PartitionKey as SdkPartitionKey
from azure.cosmos import ThroughputProperties as SdkThroughputProperties
from azure.cosmos import exceptions as sdk_exceptions
from azure.cosmos.aio import CosmosClient as SdkAioClient

from regionlab.client import CosmosClient, CosmosHttpResponseError, PartitionKey, ThroughputProperties
from regionlab.client.aio import CosmosClient as AioCosmosClient

SYSTEM = {"_rid", "_self", "_etag", "_ts", "_attachments", "_lsn"}
THREADS = 8
WRITES_PER_THREAD = 25


def clean(value):
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items() if k not in SYSTEM}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


def outcome(fn):
    """An operation's comparable result: its cleaned value, or its error's status/substatus."""
    try:
        return ("ok", clean(fn()))
    except (CosmosHttpResponseError, sdk_exceptions.CosmosHttpResponseError) as e:
        return ("error", e.status_code, e.sub_status)


def batch_failure(c, operations, partition_key):
    """A failing transactional batch: which operation failed, its status, every operation's status
    (the SDK's CosmosBatchOperationError is not a CosmosHttpResponseError, ours is one too)."""
    try:
        c.execute_item_batch(operations, partition_key=partition_key)
    except Exception as e:
        if type(e).__name__ != "CosmosBatchOperationError":
            raise
        return e.error_index, e.status_code, [r["statusCode"] for r in e.operation_responses]
    return "no error"


def script(c):
    """Every operation, in order, against container proxy c (ours or the SDK's)."""
    out = []
    run = lambda fn: out.append(outcome(fn))
    for i in range(6):
        run(lambda i=i: c.create_item({"id": f"i{i}", "pk": f"p{i % 2}", "n": i, "tags": ["a", i]}))
    run(lambda: c.create_item({"id": "i0", "pk": "p0"}))                     # 409
    run(lambda: c.read_item("i1", partition_key="p1"))
    run(lambda: c.read_item("missing", partition_key="p1"))                  # 404/0
    run(lambda: c.upsert_item({"id": "i1", "pk": "p1", "n": 10}))
    run(lambda: c.upsert_item({"id": "u", "pk": "p1", "n": 99}))
    run(lambda: c.replace_item("i2", {"id": "i2", "pk": "p0", "n": 20}))
    run(lambda: c.patch_item("i3", partition_key="p1",
                             patch_operations=[{"op": "incr", "path": "/n", "value": 5},
                                               {"op": "add", "path": "/new", "value": True}]))
    run(lambda: c.patch_item("i3", partition_key="p1", patch_operations=[{"op": "set", "path": "/x", "value": 1}],
                             filter_predicate="FROM c WHERE c.n = 0"))        # 412
    run(lambda: list(c.query_items("SELECT c.id, c.n FROM c WHERE c.n > @n ORDER BY c.n",
                                   parameters=[{"name": "@n", "value": 2}], enable_cross_partition_query=True)))
    run(lambda: list(c.query_items("SELECT VALUE COUNT(1) FROM c", partition_key="p0")))
    run(lambda: sorted(i["id"] for i in c.query_items("SELECT * FROM c", enable_cross_partition_query=True,
                                                      max_item_count=2)))
    run(lambda: [len(list(p)) for p in c.query_items("SELECT * FROM c", partition_key="p1",
                                                     max_item_count=2).by_page()])
    run(lambda: sorted(i["id"] for i in c.read_all_items()))
    run(lambda: sorted(i["id"] for i in c.read_items([("i1", "p1"), ("missing", "p1"), ("i2", "p0")])))
    run(lambda: c.feed_range_from_partition_key("p1"))
    run(lambda: sorted(i["id"] for i in c.query_items_change_feed(feed_range=c.feed_range_from_partition_key("p1"),
                                                                  start_time="Beginning")))
    run(lambda: [c.is_feed_range_subset(r, c.feed_range_from_partition_key("p1")) for r in c.read_feed_ranges()])
    run(lambda: [r["statusCode"] for r in c.execute_item_batch(
        [("create", ({"id": "b1", "pk": "p0"},)), ("upsert", ({"id": "i0", "pk": "p0", "n": 0},)),
         ("read", ("i2",)), ("replace", ("i4", {"id": "i4", "pk": "p0", "n": 4})),
         ("patch", ("b1", [{"op": "add", "path": "/k", "value": 1}])), ("delete", ("i4",))],
        partition_key="p0")])
    run(lambda: batch_failure(c, [("upsert", ({"id": "b2", "pk": "p0"},)), ("create", ({"id": "i0", "pk": "p0"},)),
                                  ("read", ("i2",))], "p0"))                   # 409 at 1: nothing applied
    run(lambda: c.read_item("b2", partition_key="p0"))                          # 404: the batch was atomic
    # The SDK answers a delete with None; ours with an empty (so equally falsy) dict that carries
    # the diagnostics and charge: compare what callers test, its truth.
    run(lambda: bool(c.delete_item("i5", partition_key="p1")))
    run(lambda: c.delete_item("i5", partition_key="p1"))                     # 404
    run(lambda: sorted((i["id"], i.get("n")) for i in c.query_items_change_feed(start_time="Beginning")))
    run(lambda: sorted(i["id"] for i in c.query_items_change_feed(start_time="Beginning", partition_key="p1")))
    run(lambda: sorted(i["id"] for i in c.query_items_change_feed(is_start_from_beginning=True, partition_key="p0")))
    run(lambda: bool(c.delete_all_items_by_partition_key("p1")))            # falsy: the SDK's None
    run(lambda: sorted(i["id"] for i in c.read_all_items()))
    run(lambda: (c.id, c.container_link.split("/", 2)[2]))                   # dbs/<db>/colls/c
    run(lambda: c.get_throughput().offer_throughput)
    run(lambda: c.replace_throughput(800).offer_throughput)
    return out



def throughput(tp) -> tuple:
    return tp.offer_throughput, tp.auto_scale_max_throughput


def metadata_script(client, P, TP, name):
    """Databases and containers: create, query, list, replace, throughput, delete (ours or the SDK's)."""
    out = []
    run = lambda fn: out.append(outcome(fn))
    db = client.create_database(name)
    run(lambda: (db.id == name, db.database_link == f"dbs/{name}"))
    run(lambda: [d["id"] == name for d in client.query_databases(
        "SELECT * FROM r WHERE r.id = @id", parameters=[{"name": "@id", "value": name}])])
    run(lambda: name in [d["id"] for d in client.list_databases()])
    for cid in ("a", "b"):
        db.create_container(cid, partition_key=P(path="/pk"), offer_throughput=400)
    run(lambda: [c["id"] for c in db.query_containers("SELECT * FROM r WHERE r.id = 'b'")])
    run(lambda: sorted(c["id"] for c in db.list_containers()))
    run(lambda: db.create_container("a", partition_key=P(path="/pk")))                  # 409
    run(lambda: db.replace_container("a", partition_key=P(path="/pk"), default_ttl=60).read()["defaultTtl"])
    run(lambda: db.get_container_client("a").read()["partitionKey"]["paths"])
    run(lambda: db.get_container_client("b").get_throughput().offer_throughput)
    auto = db.create_container("auto", partition_key=P(path="/pk"),
                               offer_throughput=TP(auto_scale_max_throughput=4000))
    run(lambda: throughput(auto.get_throughput()))
    run(lambda: throughput(auto.replace_throughput(TP(auto_scale_max_throughput=6000))))
    run(lambda: throughput(auto.get_throughput()))
    run(lambda: throughput(db.get_container_client("a").replace_throughput(TP(offer_throughput=700))))
    shared = client.create_database(f"{name}-shared", offer_throughput=TP(offer_throughput=1000))
    run(lambda: throughput(shared.get_throughput()))
    run(lambda: throughput(shared.replace_throughput(2000)))
    client.delete_database(shared)
    db.delete_container("b")
    run(lambda: db.get_container_client("b").read())                                  # 404
    client.delete_database(name)
    run(lambda: db.read())                                                            # 404
    return out


def test_databases_and_containers_give_the_same_results_as_the_sdk(regionlab):
    with CosmosClient(regionlab.endpoint, credential=regionlab.key) as ours, \
            SdkClient(regionlab.endpoint, regionlab.key) as sdk:
        got = metadata_script(ours, PartitionKey, ThroughputProperties, "m-ours")
        expected = metadata_script(sdk, SdkPartitionKey, SdkThroughputProperties, "m-sdk")
    assert len(got) == len(expected) == 17
    for i, (a, b) in enumerate(zip(got, expected)):
        assert a == b, f"operation {i}: ours {a} != sdk {b}"

def test_a_query_over_several_ranges_needs_the_flag_as_with_the_sdk(regionlab):
    """The sync SDK sends x-ms-documentdb-query-enablecrosspartition only when asked, and the
    service refuses a query over several ranges without it: the sync client does the same."""
    emu = regionlab
    with CosmosClient(emu.endpoint, credential=emu.key) as ours, SdkClient(emu.endpoint, emu.key) as sdk:
        results = []
        for db, pk in ((ours.create_database("ours-x"), PartitionKey), (sdk.create_database("sdk-x"), SdkPartitionKey)):
            c = db.create_container("c", partition_key=pk(path="/pk"), offer_throughput=20000)
            assert len(list(c.read_feed_ranges())) > 1
            c.create_item({"id": "a", "pk": "a"})
            results.append([outcome(lambda: list(c.query_items("SELECT c.id FROM c"))),
                            outcome(lambda: list(c.query_items("SELECT c.id FROM c", enable_cross_partition_query=True)))])
    assert results[0] == results[1]
    assert results[0][0][:2] == ("error", 400) and results[0][1] == ("ok", [{"id": "a"}])


@pytest.mark.parametrize("mode", ["gateway", "direct"])
def test_the_same_operations_give_the_same_results_as_the_sdk(regionlab, mode):
    emu = regionlab
    with CosmosClient(emu.endpoint, credential=emu.key, connection_mode=mode) as ours, \
            SdkClient(emu.endpoint, emu.key) as sdk:
        mine = ours.create_database("ours").create_container("c", partition_key=PartitionKey(path="/pk"),
                                                             offer_throughput=400)
        theirs = sdk.create_database("sdk").create_container("c", partition_key=SdkPartitionKey(path="/pk"),
                                                            offer_throughput=400)
        got, expected = script(mine), script(theirs)
        direct = ours.direct_transport
        if mode == "direct":          # the point operations, batch and pk queries went to replicas
            assert direct.connection_count() > 0 and direct.fallbacks == 0
        else:
            assert direct is None
    assert len(got) == len(expected) == 36
    for i, (a, b) in enumerate(zip(got, expected)):
        assert a == b, f"operation {i}: ours {a} != sdk {b}"


@pytest.mark.parametrize("mode", ["gateway", "direct"])
def test_the_aio_face_matches_the_sdks_aio_client(regionlab, mode):
    emu = regionlab

    async def ops(client, PK):
        db = await client.create_database_if_not_exists("aio")
        c = await db.create_container_if_not_exists(f"c{PK.__module__.split('.')[0]}", partition_key=PK(path="/pk"))
        for i in range(5):
            await c.upsert_item({"id": str(i), "pk": "p", "n": i})
        item = await c.read_item("3", partition_key="p")
        rows = [r async for r in c.query_items("SELECT VALUE c.n FROM c WHERE c.n >= @k",
                                               parameters=[{"name": "@k", "value": 2}])]
        feed = [i["id"] async for i in c.query_items_change_feed(start_time="Beginning")] \
            if PK is PartitionKey else None
        return clean(item), sorted(rows), feed

    async def main():
        async with AioCosmosClient(emu.endpoint, credential=emu.key, connection_mode=mode) as ours, \
                SdkAioClient(emu.endpoint, emu.key) as sdk:
            mine = await ops(ours, PartitionKey)
            theirs = await ops(sdk, SdkPartitionKey)
            return mine, theirs
    mine, theirs = asyncio.run(main())
    assert mine[:2] == theirs[:2] == ({"id": "3", "pk": "p", "n": 3}, [2, 3, 4])
    assert mine[2] == ["0", "1", "2", "3", "4"]


@pytest.mark.parametrize("mode", ["gateway", "direct"])
def test_the_sync_client_is_shared_safely_by_threads(regionlab, mode):
    emu = regionlab
    with CosmosClient(emu.endpoint, credential=emu.key, connection_mode=mode) as client:
        c = client.create_database("db").create_container("c", partition_key=PartitionKey(path="/pk"))
        errors = []

        def work(t):
            try:
                for i in range(WRITES_PER_THREAD):
                    c.create_item({"id": f"{t}-{i}", "pk": f"p{t}"})
                    assert c.read_item(f"{t}-{i}", partition_key=f"p{t}")["id"] == f"{t}-{i}"
            except BaseException as e:        # reported below: a thread's failure fails the test
                errors.append(e)
        threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert errors == []
        assert len(list(c.read_all_items())) == THREADS * WRITES_PER_THREAD


def test_from_connection_string_as_the_sdk(regionlab):
    conn_str = f"AccountEndpoint={regionlab.endpoint};AccountKey={regionlab.key};"
    with CosmosClient.from_connection_string(conn_str, consistency_level="Session") as ours, \
            SdkClient.from_connection_string(conn_str, consistency_level="Session") as sdk:
        ours.create_database("from-ours")
        sdk.create_database("from-sdk")
        assert sorted(d["id"] for d in ours.list_databases()) == sorted(d["id"] for d in sdk.list_databases()) \
            == ["from-ours", "from-sdk"]

    async def aio():
        async with AioCosmosClient.from_connection_string(conn_str) as client:
            return sorted([d["id"] async for d in client.list_databases()])
    assert asyncio.run(aio()) == ["from-ours", "from-sdk"]
    with pytest.raises(ValueError, match="AccountKey"):
        CosmosClient.from_connection_string(f"AccountEndpoint={regionlab.endpoint};")


def test_get_database_account_as_the_sdk(regionlab):
    with CosmosClient(regionlab.endpoint, credential=regionlab.key) as ours, \
            SdkClient(regionlab.endpoint, regionlab.key) as sdk:
        mine, theirs = ours.get_database_account(), sdk.get_database_account()
    for name in ("WritableLocations", "ReadableLocations", "ConsistencyPolicy", "_EnableMultipleWritableLocations"):
        assert getattr(mine, name) == getattr(theirs, name), name
    assert [r.name for r in mine.read_regions] == regionlab.regions and mine.consistency == "Session"


def test_a_closed_sync_client_says_so(regionlab):
    client = CosmosClient(regionlab.endpoint, credential=regionlab.key)
    db = client.create_database("db")
    client.close()
    client.close()                                        # twice is fine
    with pytest.raises(RuntimeError, match="CosmosClient is closed"):
        db.read()
