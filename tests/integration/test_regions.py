"""Reads through SDK clients that prefer a lagging region (preferred_locations=["West US"]),
sync and aio, against a real three-region regionlab: with a 5 s East US -> West US lag a session
client still reads its own writes (West US answers 404/1002, the SDK retries at the hub), while
a client without the session token sees West US's stale state; once West US has caught up
(waited for on a server event) the same read is served by West US itself.
"""
import asyncio

import pytest
from azure.cosmos import PartitionKey, exceptions

from sdk_harness import WireLog, make_aio_client, make_client, wait_replicated

SLOW_WEST = {("East US", "West US"): 5000}


def _setup(emu) -> None:
    with make_client(emu) as admin:
        admin.create_database("db").create_container("c", PartitionKey(path="/pk"))


def _reads(log: WireLog) -> list:
    return [(e.endpoint, e.status, e.response_headers.get("x-ms-substatus"))
            for e in log.matching("GET", "/docs/x")]


@pytest.mark.regionlab_config(lag_ms=SLOW_WEST)
def test_session_reads_its_writes_through_lagging_preferred_region(regionlab):
    _setup(regionlab)
    west, east = regionlab.region_endpoints["West US"], regionlab.region_endpoints["East US"]
    log = WireLog()
    with make_client(regionlab, preferred_locations=["West US"], raw_response_hook=log) as client:
        c = client.get_database_client("db").get_container_client("c")
        c.create_item({"id": "x", "pk": "p", "n": 1})
        assert log.last.endpoint == east                       # single-master writes go to the hub
        assert c.read_item("x", partition_key="p")["n"] == 1
        assert _reads(log) == [(west, 404, "1002"), (east, 200, None)]
        c.replace_item("x", {"id": "x", "pk": "p", "n": 2})
        assert c.read_item("x", partition_key="p")["n"] == 2   # never the stale n=1

    with make_client(regionlab, preferred_locations=["West US"]) as stranger:
        c = stranger.get_database_client("db").get_container_client("c")
        with pytest.raises(exceptions.CosmosResourceNotFoundError) as e:
            c.read_item("x", partition_key="p")                # no session: West US's view
        assert e.value.sub_status == 0


def test_preferred_region_serves_reads_once_replicated(regionlab):
    _setup(regionlab)
    west = regionlab.region_endpoints["West US"]
    log = WireLog()
    with make_client(regionlab, preferred_locations=["West US"], raw_response_hook=log) as client:
        c = client.get_database_client("db").get_container_client("c")
        written = c.create_item({"id": "x", "pk": "p", "n": 1})
        wait_replicated(regionlab, "db", "c", "West US")
        log.entries.clear()
        assert c.read_item("x", partition_key="p") == written
        assert _reads(log) == [(west, 200, None)]
        assert list(c.read_all_items()) == [written]


@pytest.mark.regionlab_config(lag_ms=SLOW_WEST)
def test_aio_session_reads_its_writes_through_lagging_preferred_region(regionlab):
    _setup(regionlab)
    west, east = regionlab.region_endpoints["West US"], regionlab.region_endpoints["East US"]
    log = WireLog()

    async def main():
        async with make_aio_client(regionlab, preferred_locations=["West US"], raw_response_hook=log) as client:
            c = client.get_database_client("db").get_container_client("c")
            await c.create_item({"id": "x", "pk": "p", "n": 1})
            await c.upsert_item({"id": "x", "pk": "p", "n": 2})
            return await c.read_item("x", partition_key="p")
    assert asyncio.run(main())["n"] == 2
    assert _reads(log) == [(west, 404, "1002"), (east, 200, None)]


def test_client_built_on_a_read_region_url_still_writes_to_the_hub(regionlab):
    east = regionlab.region_endpoints["East US"]
    log = WireLog()
    with make_client(regionlab, raw_response_hook=log) as admin:
        admin.create_database("db").create_container("c", PartitionKey(path="/pk"))
    from azure.cosmos import CosmosClient
    with CosmosClient(regionlab.region_endpoints["West US"], regionlab.key, raw_response_hook=log) as client:
        c = client.get_database_client("db").get_container_client("c")
        c.create_item({"id": "x", "pk": "p"})
        assert log.last.endpoint == east and log.last.status == 201
        assert c.read_item("x", partition_key="p")["id"] == "x"
