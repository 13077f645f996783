"""Real emulators on loopback, driven by the official SDK and the control port: a bad
running_emulator() option fails before anything listens; bounded staleness K and T set as
fixture options show in GET /topology and in the account document exactly as azure-cosmos reads
it, and K really bounds how far a region may fall behind (the next write is 429/3200); GET /health
is "ok", "degraded" (200) or "down" (503) as regions go out and come back. No sleeps: every wait
is on a reply."""
import pytest
from azure.cosmos import PartitionKey, documents
from azure.cosmos.exceptions import CosmosHttpResponseError

from regionlab.emulator.config import ConfigError
from regionlab.emulator.testing import running_emulator
from sdk_harness import control, make_client

EAST, EAST2, WEST = "East US", "East US 2", "West US"
NEVER_MS = 3_600_000                 # a replication lag no test outlives
K, T = 3, 7


@pytest.mark.parametrize("options,message", [
    ({"consistency": "Strongg"}, "consistency='Strongg': must be one of Strong, BoundedStaleness"),
    ({"partitons": 4}, "unknown regionlab option 'partitons'"),
    ({"partitions": -1}, "partitions=-1: must be an integer from 1 to 256"),
])
def test_a_bad_option_fails_before_the_emulator_starts(options, message):
    with pytest.raises(ConfigError, match=message):
        with running_emulator(**options):
            pytest.fail("the emulator must not start")


@pytest.mark.regionlab_config(consistency="BoundedStaleness", max_staleness_prefix=K, max_interval_s=T)
def test_staleness_bounds_show_in_topology_and_in_the_account_document_the_sdk_reads(regionlab):
    status, topology = control(regionlab, "GET", "/topology")
    assert status == 200
    assert topology["bounded_staleness"] == {"max_staleness_prefix": K, "max_interval_s": T, "enforced": True}
    with make_client(regionlab) as client:
        policy = client.get_database_account().ConsistencyPolicy
    assert policy == {"defaultConsistencyLevel": "BoundedStaleness", "maxStalenessPrefix": K,
                      "maxIntervalInSeconds": T}


def test_a_session_account_reports_the_default_bounds_without_enforcing_them(regionlab):
    with make_client(regionlab) as client:
        policy = client.get_database_account().ConsistencyPolicy
    assert policy == {"defaultConsistencyLevel": "Session", "maxStalenessPrefix": 100_000, "maxIntervalInSeconds": 300}
    assert control(regionlab, "GET", "/topology")[1]["bounded_staleness"]["enforced"] is False


@pytest.mark.regionlab_config(consistency="BoundedStaleness", max_staleness_prefix=K,
                              lag_ms={(EAST, WEST): NEVER_MS, (EAST, EAST2): 0})
def test_k_bounds_the_writes_a_region_may_miss(regionlab):
    """West US never receives: K writes are accepted, the next one is throttled and not applied."""
    policy = documents.ConnectionPolicy()
    policy.RetryOptions = documents.RetryOptions(max_retry_attempt_count=0)
    with make_client(regionlab, retry_total=None, connection_policy=policy) as client:
        items = client.create_database("db").create_container("items", PartitionKey(path="/pk"))
        for i in range(K):
            items.create_item({"id": str(i), "pk": "p"})
        with pytest.raises(CosmosHttpResponseError) as e:
            items.create_item({"id": "over", "pk": "p"})
        assert (e.value.status_code, e.value.sub_status) == (429, 3200)
        assert sorted(d["id"] for d in items.read_all_items()) == [str(i) for i in range(K)]


@pytest.mark.regionlab_config(lag_ms={(a, b): 0 for a in (EAST, EAST2, WEST) for b in (EAST, EAST2, WEST) if a != b})
def test_health_reports_ok_degraded_and_down(regionlab):
    status, health = control(regionlab, "GET", "/health")
    assert (status, health["status"], health["down"], health["writable"]) == (200, "ok", [], True)

    ids = {}
    for region in (WEST, EAST):
        ids[region] = control(regionlab, "POST", "/faults", {"type": "region_outage", "region": region})[1]["id"]
        status, health = control(regionlab, "GET", "/health")
        assert status == 200 and health["status"] == "degraded", "some region still serves"
        assert health["regions"][region] == "down" and region in health["down"]
    assert health["writable"] is False, "the write region is out and no failover has happened yet"

    ids[EAST2] = control(regionlab, "POST", "/faults", {"type": "region_outage", "region": EAST2})[1]["id"]
    status, health = control(regionlab, "GET", "/health")
    assert (status, health["status"], sorted(health["down"])) == (503, "down", sorted([EAST, EAST2, WEST]))

    for region, fault_id in ids.items():
        assert control(regionlab, "DELETE", f"/faults/{fault_id}")[0] == 200
    status, health = control(regionlab, "GET", "/health")
    assert (status, health["status"], health["writable"]) == (200, "ok", True)
