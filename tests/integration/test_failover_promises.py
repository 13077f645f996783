"""Proves the failover promises through the control port and the official azure-cosmos SDK on a
real three-region emulator: after a forced failover to a region that lagged past the retained
log, GET /lost-writes lists exactly the acknowledged writes the SDK can no longer read (each once,
under the region that accepted it, with the LSN the SDK was told); and under Strong a forced
failover that would lose acknowledged writes is refused with the reason, and goes ahead without
losing one once a region holding them can reach the target. Waits are on server events, never
sleeps; the retained log is made short so a test outruns it with few writes."""
import pytest
from azure.cosmos import PartitionKey

from sdk_harness import control, make_client, no_lag, wait_replicated

REGIONS = ("East US", "East US 2", "West US")
EAST, EAST2, WEST = REGIONS
NO_LAG = no_lag(REGIONS)
RETAINED = 20                          # commits each replica set's log keeps in these tests


def cut(emu, src: str, dst: str) -> int:
    status, fault = control(emu, "POST", "/faults", {"type": "link_cut", "from": src, "to": dst, "one_way": True})
    assert status == 201, fault
    return fault["id"]


def create(c, id: str) -> tuple:
    """Create an item; (id, LSN the reply named): the acknowledged write."""
    headers = []
    c.create_item({"id": id, "pk": "p"}, response_hook=lambda h, _: headers.append(dict(h)))
    return id, int(headers[0]["lsn"])


def ids_read_in(emu, region: str) -> set:
    with make_client(emu, preferred_locations=[region]) as reader:
        return {d["id"] for d in container(reader).read_all_items()}


def container(client):
    return client.get_database_client("db").get_container_client("c")


@pytest.mark.regionlab_config(lag_ms=NO_LAG, log_retained_commits=RETAINED)
def test_lost_writes_lists_exactly_what_a_forced_failover_past_the_retained_log_discarded(regionlab):
    emu = regionlab
    with make_client(emu) as client:
        client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c = container(client)
        kept = {create(c, f"kept{i}") for i in range(5)}
        wait_replicated(emu, "db", "c", EAST2)
        cut(emu, EAST, EAST2)
        lost = {create(c, f"lost{i}") for i in range(RETAINED * 3)}

        status, failover = control(emu, "POST", "/failover", {"region": EAST2, "kind": "forced"})
        assert status == 200 and failover["lost_writes"] == len(lost)
        status, listing = control(emu, "GET", "/lost-writes")
        listed = {(w["id"], w["lsn"]) for w in listing["writes"]}
        assert listing["count"] == len(listing["writes"]) == len(lost)
        assert listed == lost
        assert {w["region"] for w in listing["writes"]} == {EAST}

    readable = ids_read_in(emu, EAST2)
    acknowledged = {id for id, _ in kept | lost}
    assert acknowledged - readable - {id for id, _ in listed} == set()
    assert {id for id, _ in listed} & readable == set()
    assert readable == {id for id, _ in kept}


@pytest.mark.regionlab_config(lag_ms=NO_LAG, consistency="Strong")
def test_strong_refuses_a_forced_failover_that_would_lose_acknowledged_writes(regionlab):
    emu = regionlab
    with make_client(emu) as client:
        client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c = container(client)
        cut(emu, EAST, EAST2)              # acknowledged by East US + West US: East US 2 never hears
        west_cut = cut(emu, WEST, EAST2)
        acked = {create(c, f"s{i}") for i in range(5)}

        status, reply = control(emu, "POST", "/failover", {"region": EAST2, "kind": "forced"})
        assert status == 400
        assert "without losing acknowledged writes" in reply["error"]
        assert "East US (its link to East US 2 is cut)" in reply["error"]
        assert control(emu, "GET", "/failovers")[1]["failovers"] == []
        assert control(emu, "GET", "/topology")[1]["write_regions"] == [EAST]

        assert control(emu, "DELETE", f"/faults/{west_cut}")[0] == 200   # West US can reach it again
        status, failover = control(emu, "POST", "/failover", {"region": EAST2, "kind": "forced"})
        assert status == 200 and (failover["to"], failover["lost_writes"]) == (EAST2, 0)
        assert control(emu, "GET", "/lost-writes")[1] == {"count": 0, "writes": []}

    assert ids_read_in(emu, EAST2) == {id for id, _ in acked}
