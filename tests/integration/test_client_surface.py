"""Proves the bundled client's surface against the real emulator where the conformance script
does not reach: change feed from now, from a time and from a continuation, per partition key and
per feed range on a four-partition container, all versions and deletes; query paging resumed
from a continuation token; per-request excluded locations on a query, and a request's list
replacing the client's (as in azure-cosmos), judged by the emulator's reply counters; every
response and error carrying diagnostics with its charge, as JSON (deletes of containers and
databases too); the latency-threshold log; connection pools kept per endpoint and reused; a
client that cannot discover its account raises 503, with diagnostics, and leaves no thread
behind."""
import base64
import json
import logging
import socket
import threading
from datetime import datetime, timedelta, timezone

import pytest

from regionlab.client import (CosmosBatchOperationError, CosmosClient, CosmosHttpResponseError, CosmosResourceNotFoundError,
                    PartitionKey)
from sdk_harness import doc_totals, no_lag, served

REGIONS = ("East US", "East US 2", "West US")
NO_LAG = no_lag(REGIONS)


@pytest.fixture
def items(regionlab):
    with CosmosClient(regionlab.endpoint, credential=regionlab.key) as client:
        yield client.create_database("db").create_container("c", partition_key=PartitionKey(path="/pk"))


@pytest.mark.regionlab_config(partitions=4)
def test_change_feed_starts_and_continues_per_key_and_feed_range(items):
    c = items
    for i in range(12):
        c.create_item({"id": str(i), "pk": f"k{i % 4}"})
    now_feed = c.query_items_change_feed(start_time="Now")
    assert list(now_feed) == []
    everything = c.query_items_change_feed(start_time="Beginning")
    assert sorted(int(i["id"]) for i in everything) == list(range(12))
    ranges = c.read_feed_ranges()
    assert len(ranges) == 4 and ranges.diagnostics.status == 200 and ranges.request_charge > 0
    per_range = [sorted(int(i["id"]) for i in c.query_items_change_feed(feed_range=r, start_time="Beginning"))
                 for r in ranges]
    assert sorted(x for ids in per_range for x in ids) == list(range(12))
    assert sorted(int(i["id"]) for i in c.query_items_change_feed(partition_key="k1", start_time="Beginning")) \
        == [1, 5, 9]
    c.upsert_item({"id": "1", "pk": "k1", "v": 2})
    c.create_item({"id": "12", "pk": "k0"})
    assert sorted(i["id"] for i in c.query_items_change_feed(continuation=everything.continuation_token)) \
        == ["1", "12"]
    assert [i["id"] for i in c.query_items_change_feed(continuation=now_feed.continuation_token)] != []
    later = datetime.now(timezone.utc) + timedelta(seconds=5)
    assert list(c.query_items_change_feed(start_time=later)) == []


def test_change_feed_all_versions_and_deletes(items):
    c = items
    start = c.query_items_change_feed(start_time="Now", mode="AllVersionsAndDeletes")
    assert list(start) == []
    c.create_item({"id": "a", "pk": "p", "v": 1})
    c.replace_item("a", {"id": "a", "pk": "p", "v": 2})
    c.delete_item("a", partition_key="p")
    feed = c.query_items_change_feed(continuation=start.continuation_token, mode="AllVersionsAndDeletes")
    assert [e["metadata"]["operationType"] for e in feed] == ["create", "replace", "delete"]


def test_query_paging_resumes_from_a_continuation_token(items):
    c = items
    for i in range(7):
        c.create_item({"id": str(i), "pk": "p", "n": i})
    pages = c.query_items("SELECT VALUE c.n FROM c ORDER BY c.n", partition_key="p", max_item_count=3).by_page()
    first = list(next(pages))
    token = pages.continuation_token
    rest = [n for page in c.query_items("SELECT VALUE c.n FROM c ORDER BY c.n", partition_key="p",
                                        max_item_count=3).by_page(token) for n in page]
    assert first == [0, 1, 2] and rest == [3, 4, 5, 6]
    assert first and token


@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_queries_honour_per_request_excluded_locations(regionlab):
    emu = regionlab
    with CosmosClient(emu.endpoint, credential=emu.key, preferred_locations=["East US 2", "West US"]) as client:
        c = client.create_database("db").create_container("c", partition_key=PartitionKey(path="/pk"))
        c.create_item({"id": "1", "pk": "p"})
        before = served(emu)
        page = next(c.query_items("SELECT * FROM c", excluded_locations=["East US 2"]).by_page())
        assert [i["id"] for i in page] == ["1"]
        assert page.diagnostics.regions_contacted == ["West US"]
        assert doc_totals(emu, before) == {"West US": 1}
        client.excluded_locations = lambda: ["West US", "East US 2"]     # all preferred excluded
        before = served(emu)
        assert c.read_item("1", partition_key="p").diagnostics.regions_contacted == ["East US"]
        assert doc_totals(emu, before) == {"East US": 1}


def test_responses_and_errors_carry_diagnostics_and_charge(items, caplog):
    c = items
    created = c.create_item({"id": "1", "pk": "p"})
    d = created.diagnostics.to_dict()
    assert created.request_charge == d["request_charge"] > 0
    headers = created.get_response_headers()                # names match in any case, as azure-core's
    assert float(headers["X-MS-Request-Charge"]) == float(headers["x-ms-request-charge"]) == created.request_charge
    assert "ETag" in headers and headers.get("etag") == created["_etag"]
    assert d["status"] == 201 and d["regions_contacted"] == ["East US"]
    assert json.loads(created.diagnostics.to_json())["attempts"][0]["status"] == 201
    with pytest.raises(CosmosResourceNotFoundError) as e:
        c.read_item("nope", partition_key="p")
    assert e.value.diagnostics.to_dict()["status"] == 404
    assert e.value.headers["X-Ms-Substatus"] == "0" and "x-ms-activity-id" in e.value.headers
    with pytest.raises(CosmosBatchOperationError) as batch:
        c.execute_item_batch([("read", ("nope",))], partition_key="p")
    assert (batch.value.error_index, batch.value.status_code) == (0, 404)
    assert batch.value.headers["Content-Type"].startswith("application/json")
    assert batch.value.diagnostics.status == 207 and batch.value.request_charge > 0
    assert e.value.request_charge == e.value.diagnostics.request_charge
    with caplog.at_level(logging.WARNING, logger="regionlab.client.diagnostics"):
        c.client._pipeline.latency_threshold_ms = 0
        c.read_item("1", partition_key="p")
    assert any('"operation":"read"' in r.getMessage() for r in caplog.records)


def test_one_connection_pool_per_endpoint_reused(items):
    c = items
    for i in range(5):
        c.upsert_item({"id": str(i), "pk": "p"})
    pools = c.client._pipeline.transport.pools
    for endpoint, pool in pools.items():
        assert pool.connections_max == c.client._pipeline.transport.pool_connections_max
    east = next(p for e, p in pools.items() if e != c.client.url)
    assert east.size == 1 and east.idle_count == 1                      # one kept-alive connection


def test_a_client_that_cannot_discover_the_account_raises_and_leaves_no_thread():
    with socket.socket() as s:                    # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    threads = set(threading.enumerate())
    with pytest.raises(CosmosHttpResponseError) as e:
        CosmosClient(f"http://127.0.0.1:{port}/", credential=base64.b64encode(b"k" * 32).decode())
    assert e.value.status_code == 503 and "account discovery" in e.value.message
    d = e.value.diagnostics.to_dict()                       # errors before any attempt carry them too
    assert d["status"] == 503 and d["attempts"] == []
    assert [ev["kind"] for ev in d["events"]] == ["account"] and "discovery failed" in d["events"][0]["detail"]
    assert set(threading.enumerate()) == threads


@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_a_requests_excluded_locations_replace_the_clients(regionlab):
    emu = regionlab
    with CosmosClient(emu.endpoint, credential=emu.key, preferred_locations=["East US 2", "West US"],
                      excluded_locations=["East US 2"]) as client:
        c = client.create_database("db").create_container("c", partition_key=PartitionKey(path="/pk"),
                                                          offer_throughput=400)
        c.create_item({"id": "1", "pk": "p"})
        routes = {}
        for name, kw in (("client's", {}), ("none", {"excluded_locations": []}),
                         ("own", {"excluded_locations": ["West US"]})):
            before = served(emu)
            routes[name] = (c.read_item("1", partition_key="p", **kw).diagnostics.regions_contacted,
                            doc_totals(emu, before))
        metadata = [client.get_database_client("db").read(excluded_locations=["West US"]),
                    c.read(excluded_locations=["West US"]), c.get_throughput(excluded_locations=["West US"])]
        default = client.get_database_client("db").read()
    assert routes == {"client's": (["West US"], {"West US": 1}), "none": (["East US 2"], {"East US 2": 1}),
                      "own": (["East US 2"], {"East US 2": 1})}
    assert [m.diagnostics.regions_contacted for m in metadata] == [["East US 2"]] * 3   # metadata too
    assert default.diagnostics.regions_contacted == ["West US"]


def test_deletes_of_containers_and_databases_carry_diagnostics(regionlab):
    with CosmosClient(regionlab.endpoint, credential=regionlab.key) as client:
        db = client.create_database("db")
        c = db.create_container("c", partition_key=PartitionKey(path="/pk"))
        gone = db.delete_container(c)
        assert not gone and gone.diagnostics.to_dict()["status"] == 204
        gone = client.delete_database(db)
        assert not gone and gone.diagnostics.status == 204 and gone.request_charge == gone.diagnostics.request_charge
        with pytest.raises(CosmosResourceNotFoundError) as e:
            client.delete_database("db")
        assert e.value.diagnostics.status == 404


def test_read_items_answers_the_found_ones_with_every_reads_diagnostics(items):
    c = items
    for i in range(2):
        c.create_item({"id": str(i), "pk": "p"})
    got = c.read_items([("0", "p"), ("nope", "p"), ("1", "p")])
    assert [i["id"] for i in got] == ["0", "1"]
    d = got.diagnostics
    assert sorted(a.status for a in d.attempts) == [200, 200, 404]
    assert got.request_charge == sum(a.request_charge for a in d.attempts) > 0


def test_database_and_container_proxies_carry_the_diagnostics_of_their_request(regionlab):
    with CosmosClient(regionlab.endpoint, credential=regionlab.key) as client:
        db = client.create_database("db")
        c = db.create_container("c", partition_key=PartitionKey(path="/pk"))
        again = db.create_container_if_not_exists("c", partition_key=PartitionKey(path="/pk"))
        fresh = db.get_container_client("c")
        assert (db.diagnostics.operation, db.diagnostics.status) == ("create_database", 201) and db.request_charge > 0
        assert (c.diagnostics.operation, c.diagnostics.status) == ("create_container", 201)
        assert (again.diagnostics.operation, again.diagnostics.status) == ("read_container", 200)
        assert fresh.diagnostics is None and fresh.request_charge == 0.0
