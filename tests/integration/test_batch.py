"""Transactional batch through the official SDK, sync and aio, against a real regionlab server:
a batch of every operation type commits as one LSN with the right per-operation codes; a batch
with a failing operation raises CosmosBatchOperationError (failing index, its own code, 424 for
the rest) and leaves the store, the LSN and every item exactly as they were. State is checked
both through the SDK and inside the server (`regionlab.call`).
"""
import asyncio

import pytest
from azure.cosmos import PartitionKey, exceptions

from sdk_harness import make_aio_client, make_client

SEED = [{"id": "ups", "pk": "p", "v": 0}, {"id": "rep", "pk": "p", "v": 0},
        {"id": "pat", "pk": "p", "v": 0}, {"id": "del", "pk": "p", "v": 0},
        {"id": "rd", "pk": "p", "v": 0}]


def _all_ops(**patch_kwargs) -> list:
    return [
        ("create", ({"id": "new", "pk": "p", "v": 1},)),
        ("upsert", ({"id": "ups", "pk": "p", "v": 1},)),
        ("replace", ("rep", {"id": "rep", "pk": "p", "v": 1})),
        ("read", ("rd",)),
        ("patch", ("pat", [{"op": "incr", "path": "/v", "value": 5}]), patch_kwargs),
        ("delete", ("del",)),
    ]


def _partition_state(emu, db="db", coll="items", region="East US") -> tuple:
    """(LSN, live item count, {id: user body}) of every partition of the container, in one region."""
    def state(account):
        c = account.databases[db].containers[coll]
        out = []
        for p in c.partitions:
            rs = p.replica_sets[region]
            docs = {v.key[1]: {k: x for k, x in v.doc.items() if not k.startswith("_")}
                    for v in rs.store.scan(rs.committed_lsn)}
            out.append((rs.lsn, rs.store.count_live, docs))
        return out
    return emu.call(state)


def _user(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if not k.startswith("_")}


def _check_success(results: list, before, after) -> None:
    assert [r["statusCode"] for r in results] == [201, 200, 200, 200, 200, 204]
    assert _user(results[0]["resourceBody"]) == {"id": "new", "pk": "p", "v": 1}
    assert _user(results[3]["resourceBody"]) == {"id": "rd", "pk": "p", "v": 0}
    assert results[4]["resourceBody"]["v"] == 5
    assert all(float(r["requestCharge"]) > 0 for r in results)
    (lsn0, _, _), = before
    (lsn1, live1, docs1), = after
    assert lsn1 == lsn0 + 1                        # the whole batch is one commit
    assert live1 == 5
    assert docs1 == {"new": {"id": "new", "pk": "p", "v": 1}, "ups": {"id": "ups", "pk": "p", "v": 1},
                     "rep": {"id": "rep", "pk": "p", "v": 1}, "pat": {"id": "pat", "pk": "p", "v": 5},
                     "rd": {"id": "rd", "pk": "p", "v": 0}}


def _check_failure(err, failing_index: int, code: int, count: int, before, after) -> None:
    assert err.error_index == failing_index
    codes = [r["statusCode"] for r in err.operation_responses]
    assert codes == [code if i == failing_index else 424 for i in range(count)]
    assert err.status_code == code
    assert after == before                          # same LSN, same count, same documents


@pytest.fixture
def seeded(regionlab):
    with make_client(regionlab) as client:
        c = client.create_database("db").create_container("items", PartitionKey(path="/pk"))
        for doc in SEED:
            c.create_item(doc)
        yield c


def test_batch_of_every_operation_commits_once(regionlab, seeded):
    before = _partition_state(regionlab)
    results = seeded.execute_item_batch(_all_ops(), partition_key="p")
    _check_success(list(results), before, _partition_state(regionlab))
    assert seeded.read_item("pat", partition_key="p")["v"] == 5
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        seeded.read_item("del", partition_key="p")
    h = seeded.client_connection.last_response_headers
    assert h["x-ms-session-token"] and h["x-ms-alt-content-path"] == "dbs/db/colls/items"


@pytest.mark.parametrize("failing", ["conflict", "missing", "stale_etag", "patch_condition"])
def test_failed_batch_applies_nothing(regionlab, seeded, failing):
    etag = seeded.read_item("rep", partition_key="p")["_etag"]
    seeded.upsert_item({"id": "rep", "pk": "p", "v": 0})       # makes `etag` stale
    ops = _all_ops()
    index, code = {"conflict": (5, 409), "missing": (5, 404), "stale_etag": (5, 412),
                   "patch_condition": (4, 412)}[failing]
    if failing == "conflict":
        ops[5] = ("create", ({"id": "rd", "pk": "p"},))
    elif failing == "missing":
        ops[5] = ("delete", ("never-was",))
    elif failing == "stale_etag":
        ops[5] = ("replace", ("rep", {"id": "rep", "pk": "p", "v": 9}), {"if_match_etag": etag})
    else:
        ops = _all_ops(filter_predicate="FROM c WHERE c.v > 5")
    before = _partition_state(regionlab)
    with pytest.raises(exceptions.CosmosBatchOperationError) as e:
        seeded.execute_item_batch(ops, partition_key="p")
    _check_failure(e.value, index, code, len(ops), before, _partition_state(regionlab))
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        seeded.read_item("new", partition_key="p")
    assert seeded.read_item("del", partition_key="p")["v"] == 0


def test_batch_rejects_item_of_another_partition_and_applies_nothing(regionlab, seeded):
    before = _partition_state(regionlab)
    ops = [("create", ({"id": "a", "pk": "p"},)), ("create", ({"id": "b", "pk": "other"},))]
    with pytest.raises((exceptions.CosmosBatchOperationError, exceptions.CosmosHttpResponseError)) as e:
        seeded.execute_item_batch(ops, partition_key="p")
    assert e.value.status_code == 400
    assert _partition_state(regionlab) == before


def test_aio_batch_success_and_failure(regionlab):
    async def main():
        async with make_aio_client(regionlab) as client:
            db = await client.create_database("db")
            c = await db.create_container("items", PartitionKey(path="/pk"))
            for doc in SEED:
                await c.create_item(doc)
            before = _partition_state(regionlab)
            bad = _all_ops()
            bad[2] = ("replace", ("nope", {"id": "nope", "pk": "p"}))
            with pytest.raises(exceptions.CosmosBatchOperationError) as e:
                await c.execute_item_batch(bad, partition_key="p")
            _check_failure(e.value, 2, 404, len(bad), before, _partition_state(regionlab))
            results = await c.execute_item_batch(_all_ops(), partition_key="p")
            _check_success(list(results), before, _partition_state(regionlab))
            assert (await c.read_item("ups", partition_key="p"))["v"] == 1
    asyncio.run(main())


def test_hierarchical_key_batch(regionlab):
    key = PartitionKey(path=["/tenant", "/user"], kind="MultiHash")
    with make_client(regionlab) as client:
        c = client.create_database("db").create_container("items", key)
        c.create_item({"id": "x", "tenant": "t1", "user": "u1", "v": 0})
        results = c.execute_item_batch([
            ("create", ({"id": "y", "tenant": "t1", "user": "u1", "v": 1},)),
            ("patch", ("x", [{"op": "set", "path": "/v", "value": 2}])),
            ("read", ("x",)),
        ], partition_key=["t1", "u1"])
        assert [r["statusCode"] for r in results] == [201, 200, 200]
        assert results[2]["resourceBody"]["v"] == 2
        before = _partition_state(regionlab)
        with pytest.raises(exceptions.CosmosBatchOperationError) as e:
            c.execute_item_batch([("upsert", ({"id": "z", "tenant": "t1", "user": "u1"},)),
                                  ("create", ({"id": "x", "tenant": "t1", "user": "u1"},))],
                                 partition_key=["t1", "u1"])
        _check_failure(e.value, 1, 409, 2, before, _partition_state(regionlab))
        assert sorted(d["id"] for d in c.read_all_items()) == ["x", "y"]
