"""Proves the bundled client's policies against the real emulator under the faults that trigger
them, judged by the client's diagnostics and the emulator's own reply counters together: writes
follow a graceful failover through 403/3 (refresh, new write region) and then go there directly;
after a forced failover the writer's lost session gets 404/1002 retried in the write region, then
its tokens are dropped and reads serve again; reads leave a region in outage (connection refused)
for the next preferred region; a throttle storm's 429/3200s are waited out by their retry-after,
one attempt per throttled request the storm counted; a spent credit window's 429/50009 is backed
off 2 s and the write lands in the next window; a 503 burst on a multi-write account opens the
partition's circuit breaker; a read in a lagging region is hedged to the next one. Real sockets,
sync and aio faces; no sleeps."""
import asyncio
import socket
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from regionlab.client import CosmosClient, CosmosResourceNotFoundError, PartitionKey
from regionlab.client.aio import CosmosClient as AioCosmosClient
from sdk_harness import attempts, control, doc_hits, no_lag, served

REGIONS = ("East US", "East US 2", "West US")
EAST, EAST2, WEST = REGIONS
NO_LAG = no_lag(REGIONS)
NEVER_MS = 3_600_000
POLL_DEADLINE_S = 10.0
CREATES_MAX = 2_000


def wait_refused(emu, region) -> None:
    """Until a connection to the region is refused (its listener closed by the outage)."""
    host, port = urllib.parse.urlsplit(emu.region_endpoints[region]).netloc.split(":")
    deadline = time.monotonic() + POLL_DEADLINE_S
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, int(port)), timeout=POLL_DEADLINE_S).close()
        except ConnectionRefusedError:
            return
        except ConnectionResetError:
            continue
    raise AssertionError(f"{region} still accepts connections")


def client_for(emu, **kwargs) -> CosmosClient:
    return CosmosClient(emu.endpoint, credential=emu.key, **kwargs)


@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_writes_follow_a_graceful_failover_through_403_3(regionlab):
    emu = regionlab
    with client_for(emu) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        for i in range(3):
            c.create_item({"id": f"a{i}", "pk": "p"})
        status, failover = control(emu, "POST", "/failover", {"region": EAST2})
        assert status == 200 and failover["state"] == "completed"
        before = served(emu)
        item = c.create_item({"id": "b0", "pk": "p"})
        assert attempts(item.diagnostics) == [(EAST, 403, 3), (EAST2, 201, 0)]
        assert "403/3" in item.diagnostics.attempts[1].reason
        assert any(e.kind == "account" for e in item.diagnostics.events)
        assert doc_hits(emu, before) == {EAST: {"POST 403/3": 1}, EAST2: {"POST 201": 1}}
        before = served(emu)
        again = c.create_item({"id": "b1", "pk": "p"})
        assert attempts(again.diagnostics) == [(EAST2, 201, 0)]
        assert doc_hits(emu, before) == {EAST2: {"POST 201": 1}}
        assert sorted(i["id"] for i in c.read_all_items()) == ["a0", "a1", "a2", "b0", "b1"]
    assert control(emu, "GET", "/lost-writes")[1]["count"] == 0


@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_after_a_forced_failover_the_lost_session_gets_1002_then_serves_again(regionlab):
    emu = regionlab
    with client_for(emu) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "a0", "pk": "p"})
        status, _ = control(emu, "POST", "/faults", {"type": "link_lag", "from": EAST, "to": EAST2,
                                                     "lag_ms": NEVER_MS, "one_way": True})
        assert status == 201
        c.create_item({"id": "b0", "pk": "p"})            # acknowledged, never reaches East US 2
        status, failover = control(emu, "POST", "/failover", {"region": EAST2, "kind": "forced"})
        assert status == 200 and failover["lost_writes"] >= 1
        before = served(emu)
        with pytest.raises(CosmosResourceNotFoundError) as e:
            c.read_item("a0", partition_key="p")
        assert (e.value.status_code, e.value.sub_status) == (404, 1002)
        d = e.value.diagnostics
        # Nothing told the client the write region moved (no 403/3 yet), so both attempts go to
        # the write region it knows; each region the diagnostics name counted exactly those 1002s.
        assert [(a.status, a.sub_status) for a in d.attempts] == [(404, 1002), (404, 1002)]
        assert d.attempts[1].reason == "404/1002 session not yet readable: retry in the write region"
        assert any(ev.kind == "session" and "dropped" in ev.detail for ev in d.events)
        expected = {}
        for a in d.attempts:
            expected.setdefault(a.region, {"GET 404/1002": 0})["GET 404/1002"] += 1
        assert doc_hits(emu, before) == expected
        assert c.read_item("a0", partition_key="p")["id"] == "a0"
        with pytest.raises(CosmosResourceNotFoundError) as e:
            c.read_item("b0", partition_key="p")           # lost, and never served as older data
        assert e.value.sub_status == 0


@pytest.mark.parametrize("mode", ["unavailable", "refuse"])
@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_aio_reads_leave_a_region_in_outage_for_the_next_preferred_one(regionlab, mode):
    """unavailable (the default) answers 503; refuse closes the port: either way the read moves on."""
    emu = regionlab

    async def main():
        async with AioCosmosClient(emu.endpoint, credential=emu.key,
                                   preferred_locations=[EAST2, WEST]) as client:
            db = await client.create_database("db")
            c = await db.create_container("c", partition_key=PartitionKey(path="/pk"))
            await c.create_item({"id": "1", "pk": "p"})
            first = await c.read_item("1", partition_key="p")
            status, fault = control(emu, "POST", "/faults", {"type": "region_outage", "region": EAST2, "mode": mode})
            assert status == 201
            if mode == "refuse":
                wait_refused(emu, EAST2)
            before = served(emu)
            during = await c.read_item("1", partition_key="p")
            return first, during, doc_hits(emu, before)
    first, during, hits = asyncio.run(main())
    assert attempts(first.diagnostics) == [(EAST2, 200, 0)]
    d = during.diagnostics
    assert [a.region for a in d.attempts][-1] == WEST and d.attempts[-1].status == 200
    if mode == "refuse":
        assert all(a.region == EAST2 and a.status is None and a.error for a in d.attempts[:-1])
    else:
        assert [(a.region, a.status) for a in d.attempts[:-1]] == [(EAST2, 503)]   # no local retry
    assert d.regions_contacted == [EAST2, WEST]
    assert hits.get(WEST) == {"GET 200": 1}


def test_a_throttle_storm_is_waited_out_by_the_retry_after(regionlab):
    emu = regionlab
    with client_for(emu) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "1", "pk": "p"})
        status, _ = control(emu, "PUT", f"/throttle/storms/{EAST}",
                            {"share": 0.5, "op": "read", "retry_after_ms": 20, "seed": 7})
        assert status == 200
        reads = [c.read_item("1", partition_key="p") for _ in range(20)]
        status, cleared = control(emu, "DELETE", f"/throttle/storms/{EAST}")
    throttled = [a for r in reads for a in r.diagnostics.attempts if a.status == 429]
    assert cleared["cleared"]["requests_throttled"] == len(throttled) > 0
    assert cleared["cleared"]["requests_seen"] == sum(len(r.diagnostics.attempts) for r in reads)
    for r in reads:
        d = r.diagnostics
        assert d.attempts[-1].status == 200 and d.status == 200
        for prev, nxt in zip(d.attempts, d.attempts[1:]):
            assert (prev.status, prev.sub_status) == (429, 3200)
            assert nxt.reason.startswith("429/3200 throttled: retry-after 20 ms")
            assert nxt.started_ms - prev.started_ms >= 20


@pytest.mark.slow
def test_a_spent_credit_window_is_backed_off_and_the_write_lands(regionlab):
    emu = regionlab
    with client_for(emu) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.read()
        status, _ = control(emu, "PUT", "/throttle", {"credits_per_s": 50})
        assert status == 200
        for n in range(CREATES_MAX):
            item = c.create_item({"id": str(n), "pk": "p"})
            refused = [a for a in item.diagnostics.attempts if a.status == 429]
            if refused:
                break
        else:
            raise AssertionError("the credit window never filled")
        credits = control(emu, "GET", "/throttle")[1]["credits"]
        assert {(a.status, a.sub_status) for a in refused} == {(429, 50009)}
        d = item.diagnostics
        assert d.attempts[-1].status == 201
        assert d.attempts[1].reason.startswith("429/50009 credits spent: back off 2000 ms")
        assert d.attempts[1].started_ms - d.attempts[0].started_ms >= 2000
        windows = [credits] + credits["recent_windows"]
        assert sum(w["throttled"] for w in windows) == len(refused)
        assert sorted(int(i["id"]) for i in c.read_all_items()) == list(range(n + 1))


@pytest.mark.regionlab_config(multi_write=True, lag_ms=NO_LAG, election_ms=600_000)
def test_a_burst_of_503s_opens_the_circuit_breaker_for_the_partition(regionlab):
    """Multi-write: East US's primary is down (no election within the test), so its writes get
    503. Each upsert fails once there (a 503 moves on at once) and lands in West US; the 5th
    failure opens the breaker, and from then on the partition's writes go to West US first."""
    emu = regionlab
    with client_for(emu, preferred_locations=[EAST, WEST]) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.upsert_item({"id": "warm", "pk": "p"})
        status, _ = control(emu, "POST", "/faults", {"type": "primary_crash", "region": EAST})
        assert status == 201
        before = served(emu)
        ops = [c.upsert_item({"id": str(i), "pk": "p"}) for i in range(6)]
        hits = doc_hits(emu, before)
    assert [[(a.region, a.status) for a in op.diagnostics.attempts] for op in ops] == [
        [(EAST, 503), (WEST, 201)]] * 5 + [
        [(WEST, 201)]]                         # the 5th failure opened it: straight to West US
    assert any(e.kind == "breaker" and "Unavailable" in e.detail for e in ops[4].diagnostics.events)
    assert hits == {EAST: {"POST 503": 5}, WEST: {"POST 201": 6}}


@pytest.mark.regionlab_config(lag_ms={**NO_LAG, (EAST, WEST): NEVER_MS})
def test_a_lagging_region_is_hedged_and_the_next_region_answers(regionlab):
    """West US never receives East US's writes, so a session read there waits for it (the
    gateway's 200 ms) and then answers 404/1002. Hedged at 100 ms, the copy in East US 2 (no lag)
    answers first and the West US attempt is cancelled; without hedging the read pays West US's
    wait and its 1002 before the write region serves it."""
    emu = regionlab
    hedged = {"threshold_ms": 100, "threshold_steps_ms": 50}
    with client_for(emu, preferred_locations=[WEST, EAST2], availability_strategy=hedged) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "1", "pk": "p"})
        before = served(emu)
        item = c.read_item("1", partition_key="p")
        hits = doc_hits(emu, before)
        plain = c.read_item("1", partition_key="p", availability_strategy=False)
    d = item.diagnostics
    assert [(a.region, a.hedge) for a in d.attempts] == [(WEST, False), (EAST2, True)]
    # West US is cancelled when the copy wins first; on a loaded machine its 1002 may come back
    # before East US 2 answers, which is transient and so still not the answer.
    assert d.attempts[0].error == "cancelled" or (d.attempts[0].status, d.attempts[0].sub_status) == (404, 1002)
    assert d.attempts[1].status == 200 and d.status == 200
    assert d.attempts[1].started_ms >= 100 and d.attempts[1].reason == "hedge after 100 ms"
    assert hits[EAST2] == {"GET 200": 1}
    assert [(a.region, a.status, a.sub_status) for a in plain.diagnostics.attempts] == \
        [(WEST, 404, 1002), (EAST, 200, 0)]
