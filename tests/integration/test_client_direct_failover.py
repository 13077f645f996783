"""Proves the bundled client's failover and throttling policies in direct mode, against the real
emulator's nodes (the gateway-mode versions are test_client_failover.py): writes follow a
graceful failover through 403/3 from the old primary's replicas to the new write region's; after a
forced failover the lost session's reads get 404/1002 from the replicas, are retried in the write
region, and serve again once the tokens are dropped; a throttle storm's 429/3200s and a spent
credit window's 429/50009s from the replicas are waited out as in gateway mode. Judged by the
client's diagnostics, which name the replicas that answered. Real sockets; no sleeps."""
import urllib.parse

import pytest

from regionlab.client import CosmosResourceNotFoundError, PartitionKey
from sdk_harness import attempts, direct_client, no_lag

REGIONS = ("East US", "East US 2", "West US")
EAST, EAST2, WEST = REGIONS
NO_LAG = no_lag(REGIONS)
NEVER_MS = 3_600_000
CREATES_MAX = 2_000


def served_by_replicas(d) -> bool:
    """Every attempt that got a reply got it from a replica (no gateway fallback)."""
    return all(a.direct and a.direct["replicas"] and not a.direct.get("fallback")
               for a in d.attempts if a.status is not None)


@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_writes_follow_a_graceful_failover_through_403_3_in_direct_mode(regionlab):
    emu = regionlab
    with direct_client(emu) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "a0", "pk": "p"})
        assert emu.failover(EAST2)["state"] == "completed"
        item = c.create_item({"id": "b0", "pk": "p"})
        again = c.create_item({"id": "b1", "pk": "p"})
        ids = sorted(i["id"] for i in c.read_all_items())
    assert attempts(item.diagnostics) == [(EAST, 403, 3), (EAST2, 201, 0)]
    assert "403/3" in item.diagnostics.attempts[1].reason and served_by_replicas(item.diagnostics)
    assert attempts(again.diagnostics) == [(EAST2, 201, 0)] and served_by_replicas(again.diagnostics)
    assert ids == ["a0", "b0", "b1"] and emu.lost_writes() == []


@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_after_a_forced_failover_the_lost_session_gets_1002_then_serves_again_in_direct_mode(regionlab):
    emu = regionlab
    with direct_client(emu) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "a0", "pk": "p"})
        with emu.faults.link_lag(EAST, EAST2, lag_ms=NEVER_MS, one_way=True):
            c.create_item({"id": "b0", "pk": "p"})        # acknowledged, never reaches East US 2
            emu.failover(EAST2, forced=True)
        with pytest.raises(CosmosResourceNotFoundError) as e:
            c.read_item("a0", partition_key="p")
        served = c.read_item("a0", partition_key="p")
        with pytest.raises(CosmosResourceNotFoundError) as lost:
            c.read_item("b0", partition_key="p")
    assert (e.value.status_code, e.value.sub_status) == (404, 1002)
    d = e.value.diagnostics
    assert [(a.status, a.sub_status) for a in d.attempts] == [(404, 1002), (404, 1002)]
    assert d.attempts[1].reason == "404/1002 session not yet readable: retry in the write region"
    assert any(ev.kind == "session" and "dropped" in ev.detail for ev in d.events)
    assert served["id"] == "a0" and served_by_replicas(served.diagnostics)
    assert lost.value.sub_status == 0
    assert [w["id"] for w in emu.lost_writes()] == ["b0"]


def test_a_throttle_storm_is_waited_out_by_the_retry_after_in_direct_mode(regionlab):
    emu = regionlab
    with direct_client(emu) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "1", "pk": "p"})
        emu.control("PUT", f"/throttle/storms/{urllib.parse.quote(EAST)}", {"share": 0.5, "op": "read", "retry_after_ms": 20, "seed": 7})
        reads = [c.read_item("1", partition_key="p") for _ in range(20)]
        cleared = emu.control("DELETE", f"/throttle/storms/{urllib.parse.quote(EAST)}")
    throttled = [a for r in reads for a in r.diagnostics.attempts if a.status == 429]
    assert cleared["cleared"]["requests_throttled"] == len(throttled) > 0
    for r in reads:
        d = r.diagnostics
        assert d.status == 200 and served_by_replicas(d)
        for prev, nxt in zip(d.attempts, d.attempts[1:]):
            assert (prev.status, prev.sub_status) == (429, 3200)
            assert nxt.reason.startswith("429/3200 throttled: retry-after 20 ms")
            assert nxt.started_ms - prev.started_ms >= 20


@pytest.mark.slow
def test_a_spent_credit_window_is_backed_off_and_the_write_lands_in_direct_mode(regionlab):
    emu = regionlab
    with direct_client(emu) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.read()
        emu.control("PUT", "/throttle", {"credits_per_s": 50})
        for n in range(CREATES_MAX):
            item = c.create_item({"id": str(n), "pk": "p"})
            if any(a.status == 429 for a in item.diagnostics.attempts):
                break
        else:
            raise AssertionError("the credit window never filled")
        ids = sorted(int(i["id"]) for i in c.read_all_items())
    d = item.diagnostics
    assert {(a.status, a.sub_status) for a in d.attempts[:-1]} == {(429, 50009)}
    assert d.attempts[-1].status == 201 and served_by_replicas(d)
    assert d.attempts[1].reason.startswith("429/50009 credits spent: back off 2000 ms")
    assert d.attempts[1].started_ms - d.attempts[0].started_ms >= 2000
    assert ids == list(range(n + 1))
