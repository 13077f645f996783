"""The request and reply forms the JavaScript SDK relies on (cosmos-wire §10.2), checked from
Python against a real emulator: the container's `_rid` in `x-ms-content-path` (seen through the
Python SDK), and — with signed raw requests, since the Python SDK never sends these forms — a
patch whose body is a bare array, bulk (a non-atomic batch: each operation on its own), and a
change feed scoped by the partition key header alone."""
import json

import pytest
from azure.cosmos import PartitionKey

from sdk_harness import control, raw_request

DOCS = "/dbs/db/colls/items/docs"
BULK_HEADERS = {"x-ms-cosmos-is-batch-request": "True", "x-ms-cosmos-batch-atomic": "False",
                "x-ms-cosmos-batch-continue-on-error": "True", "x-ms-documentdb-partitionkeyrangeid": "0"}
FEED_HEADERS = {"a-im": "Incremental Feed"}


def _pk(value) -> str:
    return json.dumps([value])


def _create(pk) -> dict:
    return {"x-ms-documentdb-partitionkey": _pk(pk)}


# ---- x-ms-content-path ----------------------------------------------------------------------------
def test_item_query_and_batch_replies_name_the_container_by_its_rid(container):
    rid = container.read()["_rid"]
    headers = container.client_connection.last_response_headers
    container.create_item({"id": "a", "pk": "p"})
    assert headers is not container.client_connection.last_response_headers
    for call in (lambda: container.create_item({"id": "b", "pk": "p"}),
                 lambda: container.read_item("a", partition_key="p"),
                 lambda: container.upsert_item({"id": "a", "pk": "p", "v": 1}),
                 lambda: list(container.query_items("SELECT * FROM c", partition_key="p")),
                 lambda: container.execute_item_batch([("create", ({"id": "c", "pk": "p"},))], partition_key="p")):
        call()
        reply = container.client_connection.last_response_headers
        assert reply["x-ms-content-path"] == rid
        assert reply["x-ms-alt-content-path"] == "dbs/db/colls/items"


# ---- patch: a bare array of operations --------------------------------------------------------------
def test_a_patch_body_may_be_a_bare_array_of_operations(regionlab, container):
    container.create_item({"id": "a", "pk": "p", "n": 1})
    path = f"{DOCS}/a"
    reply = raw_request(regionlab, "PATCH", path, [{"op": "incr", "path": "/n", "value": 2},
                                                   {"op": "set", "path": "/s", "value": "x"}], _create("p"))
    assert reply.status == 200 and (reply.json()["n"], reply.json()["s"]) == (3, "x")
    reply = raw_request(regionlab, "PATCH", path, {"operations": [{"op": "incr", "path": "/n", "value": 1}]},
                        _create("p"))
    assert reply.status == 200 and reply.json()["n"] == 4
    assert container.read_item("a", partition_key="p")["n"] == 4


@pytest.mark.parametrize("body", [{"ops": []}, "incr", 5, [{"op": "incr", "path": "/s", "value": 1}]])
def test_a_bad_patch_body_is_400_and_changes_nothing(regionlab, container, body):
    container.create_item({"id": "a", "pk": "p", "n": 1, "s": "x"})
    etag = container.read_item("a", partition_key="p")["_etag"]
    reply = raw_request(regionlab, "PATCH", f"{DOCS}/a", body, _create("p"))
    assert reply.status == 400 and reply.message
    if not isinstance(body, list):
        assert "bare JSON array of operations" in reply.message
    assert container.read_item("a", partition_key="p")["_etag"] == etag


# ---- bulk: a non-atomic batch --------------------------------------------------------------------
def _bulk(emu, ops: list, **headers):
    hdrs = dict(BULK_HEADERS)
    hdrs.update({k.replace("_", "-"): v for k, v in headers.items()})
    return raw_request(emu, "POST", DOCS, ops, {k: v for k, v in hdrs.items() if v is not None})


def _op(kind: str, pk, **fields) -> dict:
    return {"operationType": kind, "partitionKey": _pk(pk), **fields}


@pytest.mark.regionlab_config(partitions=4)
def test_bulk_applies_each_operation_on_its_own_and_answers_207_with_one_result_each(regionlab, container):
    container.create_item({"id": "old", "pk": "k0", "v": 0})
    ranges = [r["id"] for r in container.client_connection._ReadPartitionKeyRanges(container.container_link)]
    ops = [_op("Create", f"k{i}", resourceBody={"id": f"n{i}", "pk": f"k{i}", "v": i}) for i in range(8)]
    ops += [_op("Create", "k0", resourceBody={"id": "old", "pk": "k0"}),              # 409, on its own
            _op("Read", "k0", id="old"),
            _op("Replace", "k1", id="n1", resourceBody={"id": "n1", "pk": "k1", "v": 10}),
            _op("Patch", "k2", id="n2", resourceBody=[{"op": "incr", "path": "/v", "value": 40}]),
            _op("Delete", "k3", id="n3"),
            {"operationType": "Create", "resourceBody": {"id": "nokey", "pk": "k4"}}]     # no partitionKey: 400
    reply = _bulk(regionlab, ops, **{"x-ms-documentdb-partitionkeyrangeid": ranges[0]})
    assert reply.status == 207
    results = reply.json()
    assert [r["statusCode"] for r in results] == [201] * 8 + [409, 200, 200, 200, 204, 400]
    assert results[8]["subStatusCode"] == 0 and "eTag" not in results[8]
    assert results[9]["resourceBody"]["v"] == 0 and results[11]["resourceBody"]["v"] == 42
    assert all(r["requestCharge"] > 0 and r["eTag"] for r in results[:8] + results[9:12])
    assert float(reply.headers["x-ms-request-charge"]) == pytest.approx(sum(r["requestCharge"] for r in results), abs=0.01)
    written = {token.split(":")[0] for token in reply.headers["x-ms-session-token"].split(",")}
    assert len(written) > 1 and written <= set(ranges)          # one token per partition written
    assert reply.headers["x-ms-content-path"] == container.read()["_rid"]
    ids = {d["id"]: d.get("v") for d in container.read_all_items()}
    assert ids == {"old": 0, "n0": 0, "n1": 10, "n2": 42, "n4": 4, "n5": 5, "n6": 6, "n7": 7}


def test_bulk_that_all_succeeds_is_200(regionlab, container):
    reply = _bulk(regionlab, [_op("Create", "p", resourceBody={"id": "a", "pk": "p"}),
                              _op("Upsert", "q", resourceBody={"id": "b", "pk": "q"})])
    assert reply.status == 200 and [r["statusCode"] for r in reply.json()] == [201, 201]
    assert {d["id"] for d in container.read_all_items()} == {"a", "b"}


def test_bulk_without_continue_on_error_stops_at_the_first_failure(regionlab, container):
    container.create_item({"id": "dup", "pk": "p"})
    reply = _bulk(regionlab, [_op("Create", "p", resourceBody={"id": "x", "pk": "p"}),
                              _op("Create", "p", resourceBody={"id": "dup", "pk": "p"}),
                              _op("Create", "p", resourceBody={"id": "y", "pk": "p"})],
                  **{"x-ms-cosmos-batch-continue-on-error": "False"})
    assert reply.status == 207 and [r["statusCode"] for r in reply.json()] == [201, 409, 424]
    assert {d["id"] for d in container.read_all_items()} == {"dup", "x"}


def test_bulk_naming_an_unknown_range_is_410_1002_and_applies_nothing(regionlab, container):
    reply = _bulk(regionlab, [_op("Create", "p", resourceBody={"id": "x", "pk": "p"})],
                  **{"x-ms-documentdb-partitionkeyrangeid": "99"})
    assert (reply.status, reply.headers["x-ms-substatus"]) == (410, "1002")
    assert list(container.read_all_items()) == []


def test_a_batch_without_the_atomic_header_is_400_naming_both_forms(regionlab, container):
    reply = raw_request(regionlab, "POST", DOCS, [_op("Create", "p", resourceBody={"id": "x", "pk": "p"})],
                        {"x-ms-cosmos-is-batch-request": "True", **_create("p")})
    assert reply.status == 400 and "x-ms-cosmos-batch-atomic: true" in reply.message
    assert list(container.read_all_items()) == []


# ---- change feed for one partition key (no range headers) ------------------------------------------
@pytest.mark.parametrize("partitions", [pytest.param(n, marks=pytest.mark.regionlab_config(partitions=n))
                                        for n in (1, 4)])
def test_the_change_feed_for_a_partition_key_header_alone_is_that_keys_feed(regionlab, container, partitions):
    assert len(list(container.client_connection._ReadPartitionKeyRanges(container.container_link))) == partitions
    for i in range(12):
        container.create_item({"id": f"d{i}", "pk": f"k{i % 4}"})
    first = raw_request(regionlab, "GET", DOCS, headers={**FEED_HEADERS, **_create("k1")})
    assert first.status == 200
    assert [d["id"] for d in first.json()["Documents"]] == ["d1", "d5", "d9"]
    etag = first.headers["etag"]
    again = raw_request(regionlab, "GET", DOCS, headers={**FEED_HEADERS, **_create("k1"), "if-none-match": etag})
    assert again.status == 304 and again.headers["etag"] == etag
    container.create_item({"id": "new1", "pk": "k1"})
    container.create_item({"id": "new2", "pk": "k2"})
    later = raw_request(regionlab, "GET", DOCS, headers={**FEED_HEADERS, **_create("k1"), "if-none-match": etag})
    assert later.status == 200 and [d["id"] for d in later.json()["Documents"]] == ["new1"]


@pytest.mark.regionlab_config(partitions=4)
def test_the_change_feed_without_a_key_or_range_on_several_ranges_is_still_400(regionlab, container):
    reply = raw_request(regionlab, "GET", DOCS, headers=FEED_HEADERS)
    assert reply.status == 400 and "partitionkeyrangeid" in reply.message


def test_a_hierarchical_key_prefix_scopes_the_feed_to_every_key_under_it(regionlab, sdk_client):
    c = sdk_client.create_database("db").create_container("items", PartitionKey(path=["/t", "/u"], kind="MultiHash"))
    for t, u in (("a", "x"), ("a", "y"), ("b", "x")):
        c.create_item({"id": f"{t}{u}", "t": t, "u": u})
    reply = raw_request(regionlab, "GET", DOCS, headers={**FEED_HEADERS, "x-ms-documentdb-partitionkey": '["a"]'})
    assert reply.status == 200 and sorted(d["id"] for d in reply.json()["Documents"]) == ["ax", "ay"]
    full = raw_request(regionlab, "GET", DOCS, headers={**FEED_HEADERS, "x-ms-documentdb-partitionkey": '["a","y"]'})
    assert [d["id"] for d in full.json()["Documents"]] == ["ay"]


def _storm(emu, op: str) -> None:
    status, reply = control(emu, "PUT", "/throttle/storms/East%20US", {"share": 1, "op": op, "retry_after_ms": 250})
    assert status == 200, reply


def test_bulk_keeps_order_under_throttling_the_first_throttled_operation_and_all_after_it_are_429(
        regionlab, container):
    _storm(regionlab, "upsert")                 # every upsert in the write region is throttled
    reply = _bulk(regionlab, [_op("Create", "p", resourceBody={"id": "a", "pk": "p"}),
                              _op("Upsert", "p", resourceBody={"id": "b", "pk": "p"}),
                              _op("Create", "p", resourceBody={"id": "c", "pk": "p"})])
    assert reply.status == 207
    results = reply.json()
    assert [(r["statusCode"], r.get("subStatusCode")) for r in results] == [(201, None), (429, 3200), (429, 3200)]
    assert [r.get("retryAfterMilliseconds") for r in results[1:]] == [250, 250]
    assert {d["id"] for d in container.read_all_items()} == {"a"}       # c did not run after b


def test_bulk_whose_first_operation_is_throttled_is_a_whole_429_and_applies_nothing(regionlab, container):
    _storm(regionlab, "create")
    reply = _bulk(regionlab, [_op("Create", "p", resourceBody={"id": "a", "pk": "p"}),
                              _op("Read", "p", id="a")])
    assert (reply.status, reply.headers["x-ms-substatus"], reply.headers["x-ms-retry-after-ms"]) == (429, "3200", "250")
    assert list(container.read_all_items()) == []
