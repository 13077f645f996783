"""Item operations through the official sync SDK (`azure.cosmos.CosmosClient`) against a real
regionlab server: CRUD, upsert, patch, preconditions, 304, minimal replies, 404s, rid paths,
read-feed paging, delete by partition key, session/charge headers and non-string keys. Each
test checks both what the SDK returns and, through a raw_response_hook, what went over the wire.
"""
import json

import pytest
from azure.core import MatchConditions
from azure.cosmos import PartitionKey, exceptions

from regionlab.client.protocol.session_token import parse_session_header

from sdk_harness import WireLog, item_count, make_client


@pytest.fixture
def wired(regionlab):
    """(container, wire log) on a client that records every exchange."""
    log = WireLog()
    with make_client(regionlab, raw_response_hook=log) as client:
        db = client.create_database("db")
        yield db.create_container("items", PartitionKey(path="/pk")), log


def test_create_read_replace_delete_round_trip(wired):
    c, log = wired
    created = c.create_item({"id": "a", "pk": "p", "n": 1})
    assert log.last.status == 201
    assert created["id"] == "a" and created["n"] == 1
    for prop in ("_rid", "_self", "_etag", "_ts", "_attachments"):
        assert prop in created
    assert c.read_item("a", partition_key="p") == created

    replaced = c.replace_item("a", {"id": "a", "pk": "p", "n": 2})
    assert log.last.status == 200
    assert replaced["n"] == 2 and replaced["_etag"] != created["_etag"]
    assert replaced["_rid"] == created["_rid"]
    assert c.read_item("a", partition_key="p")["n"] == 2

    c.delete_item("a", partition_key="p")
    assert log.last.status == 204
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        c.read_item("a", partition_key="p")


def test_create_duplicate_is_409(wired):
    c, _ = wired
    c.create_item({"id": "a", "pk": "p"})
    with pytest.raises(exceptions.CosmosResourceExistsError) as e:
        c.create_item({"id": "a", "pk": "p", "other": 1})
    assert e.value.status_code == 409
    assert "other" not in c.read_item("a", partition_key="p")


def test_upsert_is_201_then_200(wired):
    c, log = wired
    first = c.upsert_item({"id": "u", "pk": "p", "v": 1})
    assert log.last.status == 201
    second = c.upsert_item({"id": "u", "pk": "p", "v": 2})
    assert log.last.status == 200
    assert second["v"] == 2 and second["_rid"] == first["_rid"]
    assert c.read_item("u", partition_key="p")["v"] == 2


def test_patch_every_operation(wired):
    c, log = wired
    c.create_item({"id": "x", "pk": "p", "n": 1, "gone": True, "old": "o", "obj": {"a": 1}, "arr": [1, 2]})
    ops = [
        {"op": "add", "path": "/added", "value": "new"},
        {"op": "add", "path": "/arr/1", "value": 9},
        {"op": "set", "path": "/obj/b", "value": 2},
        {"op": "replace", "path": "/n", "value": 10},
        {"op": "incr", "path": "/n", "value": 5},
        {"op": "remove", "path": "/gone"},
        {"op": "move", "from": "/old", "path": "/moved"},
    ]
    patched = c.patch_item("x", partition_key="p", patch_operations=ops)
    assert log.last.status == 200
    body = {k: v for k, v in patched.items() if not k.startswith("_")}
    assert body == {"id": "x", "pk": "p", "n": 15, "added": "new", "arr": [1, 9, 2],
                    "obj": {"a": 1, "b": 2}, "moved": "o"}
    assert c.read_item("x", partition_key="p") == patched


def test_patch_with_false_condition_is_412_and_changes_nothing(wired):
    c, _ = wired
    before = c.create_item({"id": "x", "pk": "p", "n": 3})
    with pytest.raises(exceptions.CosmosAccessConditionFailedError) as e:
        c.patch_item("x", partition_key="p", patch_operations=[{"op": "set", "path": "/n", "value": 100}],
                     filter_predicate="FROM c WHERE c.n > 5")
    assert e.value.status_code == 412
    assert c.read_item("x", partition_key="p") == before
    c.replace_item("x", {"id": "x", "pk": "p", "n": 6})
    ok = c.patch_item("x", partition_key="p", patch_operations=[{"op": "set", "path": "/n", "value": 100}],
                      filter_predicate="FROM c WHERE c.n > 5")
    assert ok["n"] == 100


def test_stale_if_match_is_412_on_replace_and_delete(wired):
    c, _ = wired
    v1 = c.create_item({"id": "e", "pk": "p", "n": 1})
    v2 = c.replace_item("e", {"id": "e", "pk": "p", "n": 2}, etag=v1["_etag"],
                        match_condition=MatchConditions.IfNotModified)
    with pytest.raises(exceptions.CosmosAccessConditionFailedError) as e:
        c.replace_item("e", {"id": "e", "pk": "p", "n": 3}, etag=v1["_etag"],
                       match_condition=MatchConditions.IfNotModified)
    assert e.value.status_code == 412
    with pytest.raises(exceptions.CosmosAccessConditionFailedError):
        c.delete_item("e", partition_key="p", etag=v1["_etag"], match_condition=MatchConditions.IfNotModified)
    with pytest.raises(exceptions.CosmosAccessConditionFailedError):
        c.patch_item("e", partition_key="p", patch_operations=[{"op": "set", "path": "/n", "value": 9}],
                     etag=v1["_etag"], match_condition=MatchConditions.IfNotModified)
    with pytest.raises(exceptions.CosmosAccessConditionFailedError):
        c.upsert_item({"id": "e", "pk": "p", "n": 9}, etag=v1["_etag"], match_condition=MatchConditions.IfNotModified)
    assert c.read_item("e", partition_key="p")["n"] == 2
    c.delete_item("e", partition_key="p", etag=v2["_etag"], match_condition=MatchConditions.IfNotModified)
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        c.read_item("e", partition_key="p")


def test_if_none_match_read_is_304_and_sdk_returns_empty(wired):
    c, log = wired
    v1 = c.create_item({"id": "m", "pk": "p", "n": 1})
    unchanged = c.read_item("m", partition_key="p", etag=v1["_etag"], match_condition=MatchConditions.IfModified)
    assert log.last.status == 304
    assert log.last.request_headers["if-none-match"] == v1["_etag"]
    assert not unchanged                       # the SDK hands back an empty result, no exception
    c.replace_item("m", {"id": "m", "pk": "p", "n": 2})
    changed = c.read_item("m", partition_key="p", etag=v1["_etag"], match_condition=MatchConditions.IfModified)
    assert log.last.status == 200
    assert changed["n"] == 2


def test_no_response_on_write_sends_prefer_minimal(regionlab):
    log = WireLog()
    with make_client(regionlab, raw_response_hook=log, no_response_on_write=True) as client:
        c = client.create_database("db").create_container("items", PartitionKey(path="/pk"))
        result = c.create_item({"id": "a", "pk": "p", "n": 1})
        assert log.last.status == 201
        assert log.last.request_headers.get("prefer") == "return=minimal"
        assert not result
        assert c.upsert_item({"id": "a", "pk": "p", "n": 2}) in ({}, None)
        assert c.read_item("a", partition_key="p")["n"] == 2
        full = c.upsert_item({"id": "a", "pk": "p", "n": 3}, no_response=False)
        assert full["n"] == 3


def test_missing_item_is_404_substatus_0(wired):
    c, log = wired
    with pytest.raises(exceptions.CosmosResourceNotFoundError) as e:
        c.read_item("nope", partition_key="p")
    assert e.value.status_code == 404 and e.value.sub_status == 0
    assert log.last.response_headers["x-ms-substatus"] == "0"
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        c.replace_item("nope", {"id": "nope", "pk": "p"})
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        c.delete_item("nope", partition_key="p")
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        c.patch_item("nope", partition_key="p", patch_operations=[{"op": "set", "path": "/a", "value": 1}])


def test_rid_based_paths(wired):
    c, log = wired
    item = c.create_item({"id": "r", "pk": "p", "n": 1})
    rid_path = "/" + item["_self"].rstrip("/")
    got = c.read_item(item, partition_key="p")
    assert log.last.path.rstrip("/") == rid_path and got["n"] == 1
    replaced = c.replace_item(item=item, body={"id": "r", "pk": "p", "n": 2})
    assert log.last.path.rstrip("/") == rid_path and log.last.status == 200
    assert replaced["n"] == 2
    assert c.read_item("r", partition_key="p")["n"] == 2
    c.delete_item(replaced, partition_key="p")
    assert log.last.path.rstrip("/") == rid_path and log.last.status == 204
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        c.read_item(item, partition_key="p")


def test_read_all_items_pages_every_item_once(wired):
    c, log = wired
    ids = {f"i{n:02d}" for n in range(25)}
    for i, id in enumerate(sorted(ids)):
        c.create_item({"id": id, "pk": f"p{i % 3}"})
    pages = [list(p) for p in c.read_all_items(max_item_count=2).by_page()]
    assert all(len(p) <= 2 for p in pages)
    assert len(pages) >= 13
    seen = [d["id"] for p in pages for d in p]
    assert sorted(seen) == sorted(ids)
    feed_calls = log.matching("GET", "/docs")
    assert feed_calls[0].request_headers.get("x-ms-max-item-count") == "2"
    assert "x-ms-continuation" not in feed_calls[-1].response_headers


def test_delete_all_items_by_partition_key(regionlab, wired):
    c, _ = wired
    for i in range(5):
        c.create_item({"id": f"a{i}", "pk": "gone"})
        c.create_item({"id": f"b{i}", "pk": "kept"})
    c.delete_all_items_by_partition_key("gone")
    remaining = sorted(d["id"] for d in c.read_all_items())
    assert remaining == [f"b{i}" for i in range(5)]
    assert sum(item_count(regionlab, "db", "items")) == 5
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        c.read_item("a0", partition_key="gone")


def test_session_token_and_charge_headers_on_item_ops(wired):
    c, _ = wired
    headers = c.client_connection
    ops = [
        lambda: c.create_item({"id": "s", "pk": "p", "n": 1}),
        lambda: c.read_item("s", partition_key="p"),
        lambda: c.upsert_item({"id": "s", "pk": "p", "n": 2}),
        lambda: c.replace_item("s", {"id": "s", "pk": "p", "n": 3}),
        lambda: c.patch_item("s", partition_key="p", patch_operations=[{"op": "incr", "path": "/n", "value": 1}]),
        lambda: c.delete_item("s", partition_key="p"),
    ]
    lsns = []
    for op in ops:
        op()
        h = headers.last_response_headers
        assert h["x-ms-alt-content-path"] == "dbs/db/colls/items"
        token = parse_session_header(h["x-ms-session-token"])
        assert list(token) == [h["x-ms-documentdb-partitionkeyrangeid"]]
        lsns.append(token[h["x-ms-documentdb-partitionkeyrangeid"]].global_lsn)
        assert float(h["x-ms-request-charge"]) > 0
    assert lsns == sorted(lsns) and lsns[-1] > lsns[0]


@pytest.mark.parametrize("pk", [5, 5.5, -3, 0, True, False, None, "5", ""])
def test_non_string_partition_key_values(wired, pk):
    c, log = wired
    c.create_item({"id": "k", "pk": pk, "v": 1})
    assert log.last.request_headers["x-ms-documentdb-partitionkey"] == json.dumps([pk])
    assert c.read_item("k", partition_key=pk)["v"] == 1
    c.replace_item("k", {"id": "k", "pk": pk, "v": 2})
    c.patch_item("k", partition_key=pk, patch_operations=[{"op": "incr", "path": "/v", "value": 1}])
    assert c.read_item("k", partition_key=pk)["v"] == 3
    other = "x" if pk != "x" else "y"
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        c.read_item("k", partition_key=other)
    c.delete_item("k", partition_key=pk)
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        c.read_item("k", partition_key=pk)


def test_number_and_string_keys_are_distinct_partitions(wired):
    c, _ = wired
    c.create_item({"id": "same", "pk": 1, "t": "number"})
    c.create_item({"id": "same", "pk": "1", "t": "string"})
    c.create_item({"id": "same", "pk": True, "t": "bool"})
    c.create_item({"id": "same", "pk": None, "t": "null"})
    assert c.read_item("same", partition_key=1)["t"] == "number"
    assert c.read_item("same", partition_key="1")["t"] == "string"
    assert c.read_item("same", partition_key=True)["t"] == "bool"
    assert c.read_item("same", partition_key=None)["t"] == "null"


SPECIAL_IDS = ["a b", "ü-ñ-日本", "emoji😀", "50%", "%2F", "a+b", "it's", "x=y&z", "semi;colon",
               "a..b", " leading", 'quote"d', "<tag>", "a@b", "colon:x", "~tilde", "comma,x"]


@pytest.mark.parametrize("id", SPECIAL_IDS)
def test_ids_that_need_percent_encoding_round_trip(wired, id):
    c, _ = wired
    c.create_item({"id": id, "pk": "p", "n": 1})
    assert c.read_item(id, partition_key="p")["id"] == id
    c.replace_item(id, {"id": id, "pk": "p", "n": 2})
    c.patch_item(id, partition_key="p", patch_operations=[{"op": "incr", "path": "/n", "value": 1}])
    assert c.read_item(id, partition_key="p")["n"] == 3
    c.delete_item(id, partition_key="p")
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        c.read_item(id, partition_key="p")


def test_database_and_container_names_that_need_encoding(regionlab):
    log = WireLog()
    with make_client(regionlab, raw_response_hook=log) as client:
        c = client.create_database("db ü 1").create_container("c 日本", PartitionKey(path="/pk"))
        c.create_item({"id": "x y", "pk": "p"})
        assert c.read_item("x y", partition_key="p")["id"] == "x y"
        # The SDK tracked the session of a non-ASCII-named container: the read carries the token.
        assert log.last.request_headers.get("x-ms-session-token")
        assert sorted(d["id"] for d in client.list_databases()) == ["db ü 1"]


@pytest.mark.parametrize("id", [".", ".."])
def test_dot_segment_ids_are_refused_because_no_url_can_reach_them(wired, id):
    # HTTP clients remove "." and ".." path segments, so .../docs/../ would address the
    # container: such an item could be created but never read, replaced or deleted.
    c, _ = wired
    with pytest.raises(exceptions.CosmosHttpResponseError) as e:
        c.create_item({"id": id, "pk": "p"})
    assert e.value.status_code == 400
    with pytest.raises(exceptions.CosmosHttpResponseError) as e:
        c.upsert_item({"id": id, "pk": "p"})
    assert e.value.status_code == 400
    assert list(c.read_all_items()) == []


def test_undefined_nested_and_id_partition_keys(regionlab, sdk_client):
    from azure.cosmos.partition_key import NonePartitionKeyValue
    log = WireLog()
    with make_client(regionlab, raw_response_hook=log) as client:
        db = client.create_database("db")
        nested = db.create_container("nested", PartitionKey(path="/a/b"))
        nested.create_item({"id": "1", "a": {"b": "x"}})
        assert nested.read_item("1", partition_key="x")["a"] == {"b": "x"}
        nested.create_item({"id": "2", "other": True})                  # no /a/b: undefined key
        assert log.last.request_headers["x-ms-documentdb-partitionkey"] == "[{}]"
        assert nested.read_item("2", partition_key=NonePartitionKeyValue)["other"] is True
        with pytest.raises(exceptions.CosmosResourceNotFoundError):
            nested.read_item("2", partition_key=None)                     # null is not undefined
        nested.delete_item("2", partition_key=NonePartitionKeyValue)
        with pytest.raises(exceptions.CosmosResourceNotFoundError):
            nested.read_item("2", partition_key=NonePartitionKeyValue)
        by_id = db.create_container("byid", PartitionKey(path="/id"))
        by_id.create_item({"id": "q", "n": 1})
        assert by_id.read_item("q", partition_key="q")["n"] == 1


@pytest.mark.parametrize("ops, substatus", [
    ([{"op": "set", "path": f"/f{i}", "value": i} for i in range(11)], 0),    # more than 10
    ([{"op": "remove", "path": "/missing"}], 0),
    ([{"op": "incr", "path": "/obj", "value": 1}], 0),
    ([{"op": "set", "path": "/id", "value": "other"}], 0),
    ([{"op": "set", "path": "/pk", "value": "moved"}], 1001),
    ([{"op": "set", "path": "/n", "value": 2}, {"op": "remove", "path": "/missing"}], 0),
])
def test_invalid_patches_are_400_and_change_nothing(wired, ops, substatus):
    c, _ = wired
    before = c.create_item({"id": "x", "pk": "p", "n": 1, "obj": {}})
    with pytest.raises(exceptions.CosmosHttpResponseError) as e:
        c.patch_item("x", partition_key="p", patch_operations=ops)
    assert e.value.status_code == 400 and e.value.sub_status == substatus
    assert c.read_item("x", partition_key="p") == before


def test_old_rid_does_not_address_a_recreated_item(wired):
    c, _ = wired
    old = c.create_item({"id": "x", "pk": "p", "v": 1})
    c.delete_item("x", partition_key="p")
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        c.read_item(old, partition_key="p")
    new = c.create_item({"id": "x", "pk": "p", "v": 2})
    assert new["_rid"] != old["_rid"]
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        c.read_item(old, partition_key="p")
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        c.replace_item(old, {"id": "x", "pk": "p", "v": 3})
    assert c.read_item("x", partition_key="p")["v"] == 2
