"""Item operations through the official aio SDK (`azure.cosmos.aio.CosmosClient`) against a real
regionlab server: the same surface as test_sdk_sync_items.py (CRUD, upsert, patch, preconditions,
304, minimal replies, 404s, rid paths, paging, delete by partition key, session/charge headers,
non-string keys), each test run with asyncio.run() and checked on the wire with a hook.
"""
import asyncio
import json

import pytest
from azure.core import MatchConditions
from azure.cosmos import PartitionKey, exceptions

from regionlab.client.protocol.session_token import parse_session_header

from sdk_harness import WireLog, item_count, make_aio_client


def run_with_container(emu, scenario, **client_kwargs):
    """asyncio.run(scenario(container, wire_log)) on a fresh db/items container (key /pk)."""
    async def main():
        log = WireLog()
        async with make_aio_client(emu, raw_response_hook=log, **client_kwargs) as client:
            db = await client.create_database("db")
            c = await db.create_container("items", PartitionKey(path="/pk"))
            await scenario(c, log)
    asyncio.run(main())


def test_create_read_replace_delete_round_trip(regionlab):
    async def scenario(c, log):
        created = await c.create_item({"id": "a", "pk": "p", "n": 1})
        assert log.last.status == 201 and created["n"] == 1
        assert await c.read_item("a", partition_key="p") == created
        replaced = await c.replace_item("a", {"id": "a", "pk": "p", "n": 2})
        assert log.last.status == 200
        assert replaced["_etag"] != created["_etag"] and replaced["_rid"] == created["_rid"]
        assert (await c.read_item("a", partition_key="p"))["n"] == 2
        await c.delete_item("a", partition_key="p")
        assert log.last.status == 204
        with pytest.raises(exceptions.CosmosResourceNotFoundError):
            await c.read_item("a", partition_key="p")
        await c.create_item({"id": "dup", "pk": "p"})
        with pytest.raises(exceptions.CosmosResourceExistsError):
            await c.create_item({"id": "dup", "pk": "p"})
    run_with_container(regionlab, scenario)


def test_upsert_is_201_then_200(regionlab):
    async def scenario(c, log):
        first = await c.upsert_item({"id": "u", "pk": "p", "v": 1})
        assert log.last.status == 201
        second = await c.upsert_item({"id": "u", "pk": "p", "v": 2})
        assert log.last.status == 200
        assert second["v"] == 2 and second["_rid"] == first["_rid"]
    run_with_container(regionlab, scenario)


def test_patch_every_operation_and_condition(regionlab):
    async def scenario(c, log):
        await c.create_item({"id": "x", "pk": "p", "n": 1, "gone": 1, "old": "o", "obj": {}})
        ops = [{"op": "add", "path": "/added", "value": [1]},
               {"op": "set", "path": "/obj/b", "value": 2},
               {"op": "replace", "path": "/n", "value": 4},
               {"op": "incr", "path": "/n", "value": 1},
               {"op": "remove", "path": "/gone"},
               {"op": "move", "from": "/old", "path": "/moved"}]
        patched = await c.patch_item("x", partition_key="p", patch_operations=ops)
        assert {k: v for k, v in patched.items() if not k.startswith("_")} == {
            "id": "x", "pk": "p", "n": 5, "added": [1], "obj": {"b": 2}, "moved": "o"}
        with pytest.raises(exceptions.CosmosAccessConditionFailedError) as e:
            await c.patch_item("x", partition_key="p", filter_predicate="FROM c WHERE c.n > 5",
                               patch_operations=[{"op": "set", "path": "/n", "value": 0}])
        assert e.value.status_code == 412
        assert await c.read_item("x", partition_key="p") == patched
    run_with_container(regionlab, scenario)


def test_stale_if_match_is_412_on_replace_and_delete(regionlab):
    async def scenario(c, log):
        v1 = await c.create_item({"id": "e", "pk": "p", "n": 1})
        await c.replace_item("e", {"id": "e", "pk": "p", "n": 2})
        stale = dict(etag=v1["_etag"], match_condition=MatchConditions.IfNotModified)
        with pytest.raises(exceptions.CosmosAccessConditionFailedError):
            await c.replace_item("e", {"id": "e", "pk": "p", "n": 3}, **stale)
        with pytest.raises(exceptions.CosmosAccessConditionFailedError):
            await c.delete_item("e", partition_key="p", **stale)
        assert log.last.status == 412
        assert (await c.read_item("e", partition_key="p"))["n"] == 2
    run_with_container(regionlab, scenario)


def test_if_none_match_read_is_304(regionlab):
    async def scenario(c, log):
        v1 = await c.create_item({"id": "m", "pk": "p", "n": 1})
        got = await c.read_item("m", partition_key="p", etag=v1["_etag"],
                                match_condition=MatchConditions.IfModified)
        assert log.last.status == 304 and not got
        await c.upsert_item({"id": "m", "pk": "p", "n": 2})
        got = await c.read_item("m", partition_key="p", etag=v1["_etag"],
                                match_condition=MatchConditions.IfModified)
        assert log.last.status == 200 and got["n"] == 2
    run_with_container(regionlab, scenario)


def test_no_response_on_write(regionlab):
    async def scenario(c, log):
        result = await c.create_item({"id": "a", "pk": "p", "n": 1})
        assert log.last.status == 201 and not result
        assert log.last.request_headers.get("prefer") == "return=minimal"
        assert (await c.read_item("a", partition_key="p"))["n"] == 1
    run_with_container(regionlab, scenario, no_response_on_write=True)


def test_missing_item_is_404_substatus_0(regionlab):
    async def scenario(c, log):
        with pytest.raises(exceptions.CosmosResourceNotFoundError) as e:
            await c.read_item("nope", partition_key="p")
        assert e.value.status_code == 404 and e.value.sub_status == 0
        with pytest.raises(exceptions.CosmosResourceNotFoundError):
            await c.delete_item("nope", partition_key="p")
    run_with_container(regionlab, scenario)


def test_rid_based_paths(regionlab):
    async def scenario(c, log):
        item = await c.create_item({"id": "r", "pk": "p", "n": 1})
        rid_path = "/" + item["_self"].rstrip("/")
        assert (await c.read_item(item, partition_key="p"))["n"] == 1
        assert log.last.path.rstrip("/") == rid_path
        replaced = await c.replace_item(item=item, body={"id": "r", "pk": "p", "n": 2})
        assert log.last.path.rstrip("/") == rid_path and replaced["n"] == 2
        await c.delete_item(replaced, partition_key="p")
        assert log.last.path.rstrip("/") == rid_path and log.last.status == 204
        with pytest.raises(exceptions.CosmosResourceNotFoundError):
            await c.read_item("r", partition_key="p")
    run_with_container(regionlab, scenario)


def test_read_all_items_pages_every_item_once(regionlab):
    async def scenario(c, log):
        ids = [f"i{n:02d}" for n in range(25)]
        for i, id in enumerate(ids):
            await c.create_item({"id": id, "pk": f"p{i % 4}"})
        pages = []
        async for page in c.read_all_items(max_item_count=2).by_page():
            pages.append([d async for d in page])
        assert all(len(p) <= 2 for p in pages) and len(pages) >= 13
        assert sorted(d["id"] for p in pages for d in p) == ids
    run_with_container(regionlab, scenario)


def test_delete_all_items_by_partition_key(regionlab):
    async def scenario(c, log):
        for i in range(4):
            await c.create_item({"id": f"a{i}", "pk": "gone"})
            await c.create_item({"id": f"b{i}", "pk": "kept"})
        await c.delete_all_items_by_partition_key("gone")
        assert sorted([d["id"] async for d in c.read_all_items()]) == [f"b{i}" for i in range(4)]
    run_with_container(regionlab, scenario)
    assert sum(item_count(regionlab, "db", "items")) == 4


def test_session_token_and_charge_headers(regionlab):
    async def scenario(c, log):
        await c.create_item({"id": "s", "pk": "p"})
        for op in (lambda: c.read_item("s", partition_key="p"),
                   lambda: c.upsert_item({"id": "s", "pk": "p", "n": 1}),
                   lambda: c.patch_item("s", partition_key="p",
                                        patch_operations=[{"op": "incr", "path": "/n", "value": 1}]),
                   lambda: c.delete_item("s", partition_key="p")):
            await op()
            h = c.client_connection.last_response_headers
            assert h["x-ms-alt-content-path"] == "dbs/db/colls/items"
            assert parse_session_header(h["x-ms-session-token"])
            assert float(h["x-ms-request-charge"]) > 0
    run_with_container(regionlab, scenario)


@pytest.mark.parametrize("pk", [7, 2.5, True, False, None])
def test_non_string_partition_key_values(regionlab, pk):
    async def scenario(c, log):
        await c.create_item({"id": "k", "pk": pk, "v": 1})
        assert log.last.request_headers["x-ms-documentdb-partitionkey"] == json.dumps([pk])
        await c.patch_item("k", partition_key=pk, patch_operations=[{"op": "incr", "path": "/v", "value": 1}])
        assert (await c.read_item("k", partition_key=pk))["v"] == 2
        with pytest.raises(exceptions.CosmosResourceNotFoundError):
            await c.read_item("k", partition_key="other")
        await c.delete_item("k", partition_key=pk)
        with pytest.raises(exceptions.CosmosResourceNotFoundError):
            await c.read_item("k", partition_key=pk)
    run_with_container(regionlab, scenario)


def test_concurrent_replaces_with_one_etag_have_exactly_one_winner(regionlab):
    async def scenario(c, log):
        base = await c.create_item({"id": "x", "pk": "p", "w": None})

        async def replace(i):
            try:
                await c.replace_item("x", {"id": "x", "pk": "p", "w": i}, etag=base["_etag"],
                                     match_condition=MatchConditions.IfNotModified)
                return i
            except exceptions.CosmosAccessConditionFailedError:
                return None
        winners = [w for w in await asyncio.gather(*(replace(i) for i in range(20))) if w is not None]
        assert len(winners) == 1
        assert (await c.read_item("x", partition_key="p"))["w"] == winners[0]
    run_with_container(regionlab, scenario)


def test_concurrent_creates_all_land_once(regionlab):
    async def scenario(c, log):
        created = await asyncio.gather(*(c.create_item({"id": f"i{i}", "pk": f"p{i % 3}"}) for i in range(30)))
        assert len({d["_rid"] for d in created}) == 30
        dup = await asyncio.gather(*(c.create_item({"id": "same", "pk": "p"}) for _ in range(10)),
                                   return_exceptions=True)
        assert sum(isinstance(r, dict) for r in dup) == 1
        assert all(isinstance(r, exceptions.CosmosResourceExistsError) for r in dup if not isinstance(r, dict))
        assert len([d async for d in c.read_all_items()]) == 31
    run_with_container(regionlab, scenario)
