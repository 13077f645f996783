"""What an application using the Python SDK (azure-cosmos, sync, default retry policy) sees
under each region_outage mode, against a real emulator: with a read region out, reads and writes
go on from the next region without an error in every mode; with the write region out (before
any failover), reads go on and a write fails with the error each mode makes. The table in
docs/control-api.md says the same; test_js_sdk.py measures the JS SDK."""
import pytest
from azure.core.exceptions import ServiceRequestError, ServiceResponseError, ServiceResponseTimeoutError
from azure.cosmos import CosmosClient, PartitionKey, exceptions

from sdk_harness import doc_hits, heal_fault, inject_fault, no_lag, served

EAST, EAST2, WEST = "East US", "East US 2", "West US"
REGIONS = (EAST, EAST2, WEST)
NO_LAG = no_lag(REGIONS)
MODES = ("refuse", "reset", "unavailable", "blackhole")
TIMEOUT_S = 1          # the SDK's read timeout is 65 s by default; a blackhole costs one per try


@pytest.fixture
def outage_client(regionlab):
    with CosmosClient(regionlab.endpoint, regionlab.key) as admin:
        c = admin.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.upsert_item({"id": "o1", "pk": "o", "v": 1})
    with CosmosClient(regionlab.endpoint, regionlab.key, preferred_locations=[WEST, EAST],
                      read_timeout=TIMEOUT_S, connection_timeout=TIMEOUT_S) as client:
        items = client.get_database_client("db").get_container_client("c")
        items.read_item("o1", partition_key="o")            # the client knows every region now
        yield items


@pytest.mark.slow
@pytest.mark.regionlab_config(lag_ms=NO_LAG, detection_delay_ms=600_000)
@pytest.mark.parametrize("mode", MODES)
def test_python_rides_through_a_read_region_outage_in_every_mode(regionlab, outage_client, mode):
    inject_fault(regionlab, type="region_outage", region=WEST, mode=mode)
    before = served(regionlab)
    assert outage_client.read_item("o1", partition_key="o")["v"] == 1
    outage_client.upsert_item({"id": "o2", "pk": "o"})
    hits = doc_hits(regionlab, before)
    assert hits[EAST] == {"GET 200": 1, "POST 201": 1}
    assert hits.get(WEST, {}) == ({"GET 503": 1} if mode == "unavailable" else {})


WRITE_ERRORS = {"refuse": ServiceRequestError, "reset": ServiceResponseError,
                "unavailable": exceptions.CosmosHttpResponseError, "blackhole": ServiceResponseTimeoutError}


@pytest.mark.slow
@pytest.mark.regionlab_config(lag_ms=NO_LAG, detection_delay_ms=600_000)
@pytest.mark.parametrize("mode", MODES)
def test_with_the_write_region_out_python_reads_on_and_a_write_fails_as_the_mode_makes_it(
        regionlab, outage_client, mode):
    fault = inject_fault(regionlab, type="region_outage", region=EAST, mode=mode)
    before = served(regionlab)
    assert outage_client.read_item("o1", partition_key="o")["v"] == 1
    assert doc_hits(regionlab, before) == {WEST: {"GET 200": 1}}
    with pytest.raises(WRITE_ERRORS[mode]) as raised:
        outage_client.upsert_item({"id": "o3", "pk": "o"})
    if mode == "unavailable":
        assert raised.value.status_code == 503
    if mode == "reset":
        assert not isinstance(raised.value, ServiceResponseTimeoutError)
    # a client created during the outage discovers the account from the global endpoint
    with CosmosClient(regionlab.endpoint, regionlab.key, preferred_locations=[WEST, EAST]) as fresh:
        before = served(regionlab)
        assert fresh.get_database_client("db").get_container_client("c").read_item("o1", partition_key="o")
        assert doc_hits(regionlab, before) == {WEST: {"GET 200": 1}}
    heal_fault(regionlab, fault["id"])
    outage_client.upsert_item({"id": "o3", "pk": "o"})      # healed: the same client writes again
