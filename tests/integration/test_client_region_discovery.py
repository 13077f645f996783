"""Proves the bundled client's region policies against the real emulator, judged by its
diagnostics and the emulator's per-region reply counters together: a preferred region the account
lacks is ignored, and once it joins (`POST /regions`) the client uses it after its periodic
account refresh (5 minutes on the client's injected clock, moved on by the test: no test waits)
and not before; a 403/1008 (the region no longer serves the account, an `error` fault) moves the
read to the next region at once, refreshes the account and drops the region to the end of the
order for 5 minutes, in both connection modes. Real sockets; no sleeps."""
import pytest

from regionlab.client import CosmosClient, PartitionKey
from regionlab.client.policies.regions import ACCOUNT_REFRESH_MS, UNAVAILABLE_MS
from sdk_harness import doc_hits, no_lag
from test_client_faults import MovableClock, path

REGIONS = ("East US", "East US 2", "West US")
EAST, EAST2, WEST = REGIONS
NORTH = "North Europe"
NO_LAG = no_lag(REGIONS)
READS_MAX = 200                     # reads while the background refresh lands


@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_a_preferred_region_the_account_gains_is_used_after_the_periodic_refresh(regionlab):
    emu = regionlab
    clock = MovableClock()
    with CosmosClient(emu.endpoint, credential=emu.key, preferred_locations=[NORTH, WEST], clock=clock) as client:
        c = client.create_database("db").create_container("c", partition_key=PartitionKey(path="/pk"))
        c.create_item({"id": "1", "pk": "p"})
        assert path(c.read_item("1", partition_key="p").diagnostics) == [(WEST, 200)]   # North Europe ignored
        emu.control("POST", "/regions", {"name": NORTH, "port": 0})
        clock.advance(ACCOUNT_REFRESH_MS / 1000.0 - 5)
        before_due = c.read_item("1", partition_key="p")                 # the known account still holds
        clock.advance(10)
        reads = []
        for _ in range(READS_MAX):           # the due refresh runs in the background: no read waits
            reads.append(c.read_item("1", partition_key="p"))
            if reads[-1].diagnostics.regions_contacted == [NORTH]:
                break
        before = emu.topology()["requests"]
        after = c.read_item("1", partition_key="p")
        hits = doc_hits(emu, before)
    assert path(before_due.diagnostics) == [(WEST, 200)]
    assert path(reads[0].diagnostics) == [(WEST, 200)]                 # served while the refresh ran
    assert path(reads[-1].diagnostics) == [(NORTH, 200)]
    assert path(after.diagnostics) == [(NORTH, 200)] and hits == {NORTH: {"GET 200": 1}}


@pytest.mark.parametrize("mode", ["gateway", "direct"])
@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_403_1008_drops_the_region_to_the_end_for_five_minutes(regionlab, mode):
    emu = regionlab
    clock = MovableClock()
    with CosmosClient(emu.endpoint, credential=emu.key, preferred_locations=[WEST, EAST2],
                      connection_mode=mode, clock=clock) as client:
        c = client.create_database("db").create_container("c", partition_key=PartitionKey(path="/pk"))
        c.create_item({"id": "1", "pk": "p"})
        before = emu.topology()["requests"]
        with emu.faults.error(WEST, status=403, substatus=1008, op="read"):
            refused = c.read_item("1", partition_key="p")
        hits = doc_hits(emu, before) if mode == "gateway" else None
        healed = c.read_item("1", partition_key="p")
        clock.advance(UNAVAILABLE_MS / 1000.0 + 1)
        expired = c.read_item("1", partition_key="p")
    d = refused.diagnostics
    assert path(d) == [(WEST, 403), (EAST2, 200)]
    assert d.attempts[0].sub_status == 1008 and "403/1008" in d.attempts[1].reason
    assert any(e.kind == "account" and "403/1008" in e.detail for e in d.events)
    if hits is not None:
        assert hits == {WEST: {"GET 403/1008": 1}, EAST2: {"GET 200": 1}}
    assert path(healed.diagnostics) == [(EAST2, 200)]                  # West US is last now
    assert path(expired.diagnostics) == [(WEST, 200)]                  # back after 5 minutes
