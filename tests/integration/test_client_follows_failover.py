"""Proves the bundled client follows the account when its write region stops answering, against
the real emulator (real sockets, the service-managed failover the emulator itself runs):

* per outage mode of the write region (`unavailable` answers 503, `reset`, `blackhole`,
  `refuse`), in gateway and direct mode, writes made back to back resume in the new write region
  within the emulator's detection delay + the client's failover refresh interval (+ the request
  timeout a blackholed write in flight waits out), with the client preferring East US then West
  US as the docs' checkout-failover drill does;
* a read whose session a lagging read region cannot serve (404/1002) while the write region is
  out is served by the region that has the session, even one outside the preferred list;
* after a forced failover that lost the session's writes, hedged reads fail once and then serve
  (the tokens are dropped, as the SDKs do), instead of failing with the down region's 503 for ever.

Judged by the client's diagnostics and the emulator's failover record. No sleeps: the writes
themselves are the workload, and the time is the client's first success after the fault."""
import time

import pytest

from regionlab.client import CosmosClient, CosmosHttpResponseError, PartitionKey
from regionlab.client.policies.regions import FAILOVER_REFRESH_MS
from sdk_harness import attempts, no_lag, wait_replicated

REGIONS = ("East US", "East US 2", "West US")
EAST, EAST2, WEST = REGIONS
NO_LAG = no_lag(REGIONS)
NEVER_MS = 3_600_000
MODES = ("unavailable", "reset", "blackhole", "refuse")
DETECTION_MS = 1_000             # the emulator's service-managed failover, after the outage began
REQUEST_TIMEOUT_S = 0.5          # a blackholed request ends then (the gateway's default is 65 s)
# Generous on purpose: the bound must hold on a loaded 2-core machine running other suites.
SLACK_MS = 2_500
RESUME_BOUND_MS = DETECTION_MS + FAILOVER_REFRESH_MS + REQUEST_TIMEOUT_S * 1000 + SLACK_MS


def client_for(emu, connection_mode, **kwargs) -> CosmosClient:
    return CosmosClient(emu.endpoint, credential=emu.key, preferred_locations=[EAST, WEST],
                        connection_mode=connection_mode, request_timeout_s=REQUEST_TIMEOUT_S,
                        connect_timeout_s=REQUEST_TIMEOUT_S, **kwargs)


def first_write_after(c, started_s: float, give_up_ms: float):
    """Create items back to back until one succeeds: (its reply, ms from `started_s`, failures)."""
    failures = 0
    while (time.perf_counter() - started_s) * 1000 < give_up_ms:
        try:
            item = c.create_item({"id": f"w{failures}", "pk": "p"})
        except CosmosHttpResponseError:
            failures += 1
            continue
        return item, (time.perf_counter() - started_s) * 1000, failures
    return None, None, failures


@pytest.mark.parametrize("connection_mode", ["gateway", "direct"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.regionlab_config(lag_ms=NO_LAG, detection_delay_ms=DETECTION_MS)
def test_writes_resume_in_the_new_write_region_after_the_service_managed_failover(
        regionlab, mode, connection_mode):
    emu = regionlab
    with client_for(emu, connection_mode) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "before", "pk": "p"})
        emu.faults.region_outage(EAST, mode)
        started = time.perf_counter()
        item, took_ms, failures = first_write_after(c, started, RESUME_BOUND_MS + 2_000)
        account = client.get_database_account()
    failover = emu.failovers()
    assert [(f["from"], f["to"], f["kind"]) for f in failover] == [(EAST, EAST2, "forced")]
    assert item is not None, f"no write succeeded within {RESUME_BOUND_MS + 2_000} ms ({failures} failed)"
    assert took_ms <= RESUME_BOUND_MS
    assert took_ms >= DETECTION_MS * 0.9 and failures > 0        # nothing took writes before the failover
    assert attempts(item.diagnostics)[-1] == (EAST2, 201, 0)
    assert [r["name"] for r in account.WritableLocations] == [EAST2]


@pytest.mark.parametrize("connection_mode", ["gateway", "direct"])
@pytest.mark.parametrize("hedged", [False, True], ids=["plain", "hedged"])
@pytest.mark.regionlab_config(lag_ms=NO_LAG, detection_delay_ms=NEVER_MS)
def test_a_session_the_read_region_lacks_is_served_where_it_can_be_while_the_write_region_is_out(
        regionlab, connection_mode, hedged):
    emu = regionlab
    with client_for(emu, connection_mode, availability_strategy=hedged) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "a", "pk": "p"})
        emu.faults.link_lag(EAST, WEST, lag_ms=NEVER_MS, one_way=True)
        c.create_item({"id": "b", "pk": "p"})           # the session now needs b: West US never gets it
        wait_replicated(emu, "db", "c", EAST2)          # East US 2 has it
        emu.faults.region_outage(EAST, "unavailable")
        read = c.read_item("a", partition_key="p")
        again = c.read_item("b", partition_key="p")
    tried = attempts(read.diagnostics)
    assert tried[-1] == (EAST2, 200, 0)
    assert (WEST, 404, 1002) in tried and (EAST, 503, 0) in tried
    assert attempts(again.diagnostics)[-1] == (EAST2, 200, 0)


@pytest.mark.parametrize("connection_mode", ["gateway", "direct"])
@pytest.mark.regionlab_config(lag_ms=NO_LAG, detection_delay_ms=NEVER_MS)
def test_hedged_reads_of_a_session_a_forced_failover_lost_fail_once_then_serve(regionlab, connection_mode):
    emu = regionlab
    with client_for(emu, connection_mode, availability_strategy=True) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "a", "pk": "p"})
        emu.faults.link_lag(EAST, WEST, lag_ms=NEVER_MS, one_way=True)
        emu.faults.link_lag(EAST, EAST2, lag_ms=NEVER_MS, one_way=True)
        c.create_item({"id": "lost", "pk": "p"})        # acknowledged; no other region ever gets it
        emu.faults.region_outage(EAST, "unavailable")
        emu.failover(EAST2, forced=True)
        with pytest.raises(CosmosHttpResponseError) as first:
            c.read_item("a", partition_key="p")
        reads = [c.read_item("a", partition_key="p") for _ in range(3)]
    assert [w["id"] for w in emu.lost_writes()] == ["lost"]
    assert (WEST, 404, 1002) in attempts(first.value.diagnostics)
    assert any(ev.kind == "session" and "dropped" in ev.detail for ev in first.value.diagnostics.events)
    for r in reads:
        assert r["id"] == "a" and r.diagnostics.attempts[-1].status == 200
