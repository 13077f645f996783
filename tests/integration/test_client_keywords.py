"""Proves that code written for azure-cosmos behaves the same on the bundled client or fails
loudly, against a real emulator: an unknown keyword raises TypeError (on the constructor and on
every operation, before anything is sent) where the SDK's transport raises TypeError too; a
keyword the SDK documents and this client does not implement raises NotImplementedError naming
it; enable_endpoint_discovery=False keeps every request on the given endpoint (no failover,
403/3 raised at once, as the SDK); partition_key= on point writes is what is sent, and a body
that disagrees is refused 400/1001 by the service with nothing written; and the request options
(session_token, initial_headers, retry_write, return_properties, no_response_on_write, etag
conditions, the SDK's names for timeouts) do what the SDK's do. Judged by the emulator's
per-region reply counters, the operations' diagnostics, and the data the emulator holds."""
import asyncio

import pytest
from azure.core import MatchConditions
from azure.cosmos import CosmosClient as SdkClient
from azure.cosmos.aio import CosmosClient as SdkAioClient

from regionlab.client import (CosmosAccessConditionFailedError, CosmosClient, CosmosHttpResponseError,
                              CosmosResourceExistsError, CosmosResourceNotFoundError, PartitionKey)
from regionlab.client.aio import CosmosClient as AioClient
from sdk_harness import doc_hits, no_lag

REGIONS = ("East US", "East US 2", "West US")
EAST, EAST2, WEST = REGIONS
NO_LAG = no_lag(REGIONS)


@pytest.fixture
def client(regionlab):
    with CosmosClient(regionlab.endpoint, credential=regionlab.key) as c:
        yield c


@pytest.fixture
def items(client):
    return client.create_database("db").create_container("c", PartitionKey(path="/pk"))


def _reads(hits) -> dict:
    return {region: sum(n for k, n in counts.items() if k.startswith("GET 200")) for region, counts in hits.items()}


# ---- the constructor -----------------------------------------------------------------------------
def test_an_unknown_client_keyword_raises_type_error_as_the_sdk_does(regionlab):
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'prefered_locations' "
                                        r"\(did you mean 'preferred_locations'\?\)"):
        CosmosClient(regionlab.endpoint, credential=regionlab.key, prefered_locations=[EAST2])
    with pytest.raises(TypeError, match="unexpected keyword argument 'enable_endpoint_discovry'"):
        AioClient(regionlab.endpoint, credential=regionlab.key, enable_endpoint_discovry=False)
    # The SDK raises TypeError for the same mistakes, from its transport at the first request.
    with pytest.raises(TypeError, match="unexpected keyword argument 'prefered_locations'"):
        SdkClient(regionlab.endpoint, regionlab.key, prefered_locations=[EAST2])

    async def sdk_aio():
        client = SdkAioClient(regionlab.endpoint, regionlab.key, enable_endpoint_discovry=False)
        try:
            async with client:
                pass
        finally:              # __aenter__ raised, so `async with` closes nothing: its aiohttp session
            await client.close()     # would be collected unclosed and logged at ERROR in a later test
    with pytest.raises(TypeError, match="unexpected keyword argument 'enable_endpoint_discovry'"):
        asyncio.run(sdk_aio())


@pytest.mark.parametrize("name, value, says", [
    ("proxy_config", object(), "HTTP proxies"),
    ("retry_fixed_interval", 50, "x-ms-retry-after-ms"),
    ("logger", None, "diagnostics"),
    ("ssl_config", object(), "ssl_context="),
])
def test_a_documented_client_keyword_this_client_lacks_is_refused_by_name(regionlab, name, value, says):
    with pytest.raises(NotImplementedError, match=f"{name}= is not supported.*{says}"):
        CosmosClient(regionlab.endpoint, credential=regionlab.key, **{name: value})


# ---- per request ---------------------------------------------------------------------------------
def test_an_unknown_request_keyword_raises_before_anything_is_sent(regionlab, items):
    c = items
    c.create_item({"id": "a", "pk": "p"})
    before = regionlab.topology()["requests"]
    calls = {
        "create_item": lambda: c.create_item({"id": "b", "pk": "p"}, patition_key="p"),
        "upsert_item": lambda: c.upsert_item({"id": "b", "pk": "p"}, no_respons=True),
        "replace_item": lambda: c.replace_item("a", {"id": "a", "pk": "p", "v": 2}, etag_="x"),
        "read_item": lambda: c.read_item("a", "p", session_tokn="0:-1#1"),
        "delete_item": lambda: c.delete_item("a", "p", foo=1),
        "patch_item": lambda: c.patch_item("a", "p", [{"op": "add", "path": "/v", "value": 1}], foo=1),
        "query_items": lambda: list(c.query_items("SELECT * FROM c", max_items=1)),
        "read_all_items": lambda: list(c.read_all_items(foo=1)),
        "query_items_change_feed": lambda: list(c.query_items_change_feed(foo=1)),
        "execute_item_batch": lambda: c.execute_item_batch([("create", ({"id": "z", "pk": "p"},))], "p", foo=1),
        "read_items": lambda: c.read_items([("a", "p")], foo=1),
        "delete_all_items_by_partition_key": lambda: c.delete_all_items_by_partition_key("p", foo=1),
        "get_throughput": lambda: c.get_throughput(foo=1),
    }
    for name, call in calls.items():
        with pytest.raises(TypeError, match=f"{name}.. got an unexpected keyword argument"):
            call()
    assert doc_hits(regionlab, before) == {}            # nothing went out
    assert [i["id"] for i in c.read_all_items()] == ["a"]
    with pytest.raises(NotImplementedError, match="pre_trigger_include= is not supported.*triggers"):
        c.create_item({"id": "t", "pk": "p"}, pre_trigger_include="t")
    with pytest.raises(NotImplementedError, match="response_hook= is not supported.*get_response_headers"):
        c.read_item("a", "p", response_hook=lambda h, b: None)


def test_the_sdk_raises_type_error_for_an_unknown_request_keyword_too(regionlab, container):
    with pytest.raises(TypeError, match="unexpected keyword argument 'patition_key'"):
        container.create_item({"id": "b", "pk": "p"}, patition_key="p")


# ---- enable_endpoint_discovery=False -------------------------------------------------------------
@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_without_endpoint_discovery_every_request_stays_on_the_given_endpoint(regionlab):
    emu = regionlab
    east2 = emu.region_endpoints[EAST2]
    with CosmosClient(emu.endpoint, credential=emu.key) as writer:
        c = writer.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "1", "pk": "p"})
    with CosmosClient(east2, credential=emu.key, enable_endpoint_discovery=False,
                      preferred_locations=[WEST, EAST]) as pinned:
        pc = pinned.get_database_client("db").get_container_client("c")
        before = emu.topology()["requests"]
        assert pc.read_item("1", partition_key="p")["id"] == "1"
        assert {r: n for r, n in _reads(doc_hits(emu, before)).items() if n} == {EAST2: 1}
        with emu.faults.region_outage(EAST2, mode="unavailable"):
            with pytest.raises(CosmosHttpResponseError) as outage:
                pc.read_item("1", partition_key="p")
        with pytest.raises(CosmosHttpResponseError) as forbidden:      # East US 2 takes no writes
            pc.upsert_item({"id": "2", "pk": "p"})
    assert outage.value.status_code == 503
    assert {a.endpoint for a in outage.value.diagnostics.attempts} == {east2}
    assert (forbidden.value.status_code, forbidden.value.sub_status) == (403, 3)
    assert len(forbidden.value.diagnostics.attempts) == 1                # raised at once, as the SDK
    # With discovery (the default) the same client reads from its preferred region.
    with CosmosClient(east2, credential=emu.key, preferred_locations=[WEST, EAST]) as discovering:
        before = emu.topology()["requests"]
        discovering.get_database_client("db").get_container_client("c").read_item("1", partition_key="p")
        assert {r: n for r, n in _reads(doc_hits(emu, before)).items() if n} == {WEST: 1}


# ---- partition_key= on point writes --------------------------------------------------------------
def test_partition_key_on_point_writes_is_sent_and_a_disagreeing_body_is_refused(regionlab, client, items):
    c = client.get_database_client("db").get_container_client("c")        # never read: no properties
    created = c.create_item({"id": "1", "pk": "p"}, partition_key="p")
    c.upsert_item({"id": "1", "pk": "p", "v": 2}, partition_key="p")
    c.replace_item("1", {"id": "1", "pk": "p", "v": 3}, partition_key="p")
    assert created["pk"] == "p" and c.read_item("1", partition_key="p")["v"] == 3
    assert c._props is None                       # the key came from the caller, not the container's paths
    for write in (lambda: c.create_item({"id": "2", "pk": "p"}, partition_key="q"),
                  lambda: c.upsert_item({"id": "2", "pk": "p"}, partition_key="q"),
                  lambda: c.replace_item("1", {"id": "1", "pk": "p", "v": 4}, partition_key="q"),
                  lambda: c.create_item({"id": "3"}, partition_key="p")):
        with pytest.raises(CosmosHttpResponseError) as e:
            write()
        assert (e.value.status_code, e.value.sub_status) == (400, 1001)
        assert "PartitionKey extracted from document doesn't match" in e.value.message
    assert sorted((i["id"], i.get("v")) for i in c.read_all_items()) == [("1", 3)]


def test_multi_hash_partition_key_on_a_write(client):
    c = client.create_database("db").create_container("h", PartitionKey(path=["/t", "/u"]))
    c.create_item({"id": "1", "t": "a", "u": "b"}, partition_key=["a", "b"])
    assert c.read_item("1", partition_key=["a", "b"])["u"] == "b"
    with pytest.raises(CosmosHttpResponseError) as e:
        c.create_item({"id": "2", "t": "a", "u": "b"}, partition_key=["a", "c"])
    assert (e.value.status_code, e.value.sub_status) == (400, 1001)


# ---- request options -------------------------------------------------------------------------------
def test_a_session_token_given_is_the_one_sent(items):
    c = items
    c.create_item({"id": "1", "pk": "p"})
    with pytest.raises(CosmosResourceNotFoundError) as e:      # a session no replica has reached
        c.read_item("1", partition_key="p", session_token="0:-1#999999")
    assert (e.value.status_code, e.value.sub_status) == (404, 1002)
    assert c.read_item("1", partition_key="p")["id"] == "1"


def test_initial_headers_and_no_response(regionlab, items):
    c = items
    quiet = c.create_item({"id": "1", "pk": "p"}, initial_headers={"Prefer": "return=minimal"})
    assert quiet == {} and quiet.get_response_headers()["etag"]
    assert c.upsert_item({"id": "1", "pk": "p", "v": 1}, no_response=True) == {}
    with CosmosClient(regionlab.endpoint, credential=regionlab.key, no_response_on_write=True) as client:
        q = client.get_database_client("db").get_container_client("c")
        assert q.upsert_item({"id": "1", "pk": "p", "v": 2}) == {}
        assert q.upsert_item({"id": "1", "pk": "p", "v": 3}, no_response=False)["v"] == 3


def test_etag_conditions_as_the_sdk_sends_them(items):
    c = items
    first = c.create_item({"id": "1", "pk": "p"})
    c.replace_item("1", {"id": "1", "pk": "p", "v": 1}, etag=first["_etag"],
                   match_condition=MatchConditions.IfNotModified)
    with pytest.raises(CosmosAccessConditionFailedError):
        c.replace_item("1", {"id": "1", "pk": "p", "v": 2}, etag=first["_etag"],
                       match_condition=MatchConditions.IfNotModified)
    with pytest.raises(ValueError, match="'etag' specified without 'match_condition'"):
        c.replace_item("1", {"id": "1", "pk": "p"}, etag=first["_etag"])
    assert c.read_item("1", partition_key="p")["v"] == 1


def test_return_properties_gives_the_proxy_and_its_properties(client):
    db, props = client.create_database("db2", return_properties=True)
    assert props["id"] == "db2" and db.id == "db2"
    c, cprops = db.create_container("c", PartitionKey(path="/pk"), return_properties=True)
    assert cprops["partitionKey"]["paths"] == ["/pk"] and c.create_item({"id": "1", "pk": "p"})["id"] == "1"
    again, again_props = db.create_container_if_not_exists("c", PartitionKey(path="/pk"), return_properties=True)
    assert again_props["_rid"] == cprops["_rid"]
    same, same_props = client.create_database_if_not_exists("db2", return_properties=True)
    assert same_props["_rid"] == props["_rid"]


@pytest.mark.regionlab_config(multi_write=True, lag_ms=NO_LAG)
def test_retry_write_on_one_request_retries_it_as_the_client_wide_opt_in_does(regionlab):
    emu = regionlab
    with CosmosClient(emu.endpoint, credential=emu.key, preferred_locations=[EAST, EAST2]) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.read()
        with emu.faults.timeout_after_apply(EAST, op="write"):
            with pytest.raises(CosmosResourceExistsError) as e:      # retried in East US 2: it met itself
                c.create_item({"id": "1", "pk": "p"}, retry_write=True)
            # Without it: not retried. A fresh client, as this one now sends writes to East US 2
            # first (East US did not answer it twice: client/policies/retry.py).
            with CosmosClient(emu.endpoint, credential=emu.key, preferred_locations=[EAST, EAST2]) as fresh:
                plain_c = fresh.get_database_client("db").get_container_client("c")
                plain_c.read()
                with pytest.raises(CosmosHttpResponseError) as plain:
                    plain_c.create_item({"id": "2", "pk": "p"})
    assert e.value.diagnostics.attempts[0].outcome_unknown and e.value.diagnostics.attempts[-1].status == 409
    assert len(plain.value.diagnostics.attempts) == 1 and "outcome unknown" in str(plain.value)


def test_the_sdk_names_for_timeouts_and_connection_mode(regionlab):
    with CosmosClient(regionlab.endpoint, credential=regionlab.key, connection_timeout=2, read_timeout=7,
                      connection_mode=0, retry_write=True) as client:
        transport = client._inner._pipeline.transport
        assert (transport.connect_timeout_s, transport.request_timeout_s) == (2, 7)
        assert client._inner.connection_mode == "gateway"
        assert client._inner._pipeline.retry_options.non_idempotent_write_retry is True
        assert client.create_database("db").id == "db"
