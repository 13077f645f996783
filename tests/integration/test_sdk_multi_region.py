"""Proves that the official azure-cosmos SDK's multi-region logic really runs against a three-region
regionlab (global endpoint, preferred_locations; sync, and aio where marked), judged by the regions
whose gateways actually served each request (their own reply counts in GET /topology): reads leave
a region in outage and come back after recovery; writes follow a graceful failover through 403/3
with nothing lost; a forced failover loses exactly the writes it lists and old session tokens then
get 404/1002, never older data; a lagging region's 404/1002 is retried in the write region; a
session token carries read-your-writes to another client and region; Strong writes need a
majority of regions and strong reads never go stale; a primary crash costs a brief 503 and no
acknowledged write; a write-region outage fails over by itself after the detection delay; on a
multi-write account concurrent writes conflict and resolve to the same winner in every region.
Waits are on server events or bounded polls of the control port, never sleeps; lags are 0 or
longer than any test.
"""
import asyncio
import json
import socket
import time
import urllib.request

import pytest
from azure.core.exceptions import ServiceRequestError
from azure.cosmos import PartitionKey, exceptions

from sdk_harness import control, doc_hits, heal_fault, host_port, inject, make_aio_client, make_client, served, wait_replicated
from sdk_harness import no_lag

REGIONS = ("East US", "East US 2", "West US")
EAST, EAST2, WEST = REGIONS
NO_LAG = no_lag(REGIONS)
NEVER_MS = 3_600_000                 # a replication lag no test outlives
POLL_DEADLINE_S = 10.0
REFRESH_TIMEOUT_S = 10.0


# ---- the control port --------------------------------------------------------------------------
def outage(emu, region: str) -> int:
    """A region outage that closes the region's port (mode refuse: what these tests were written
    for; test_sdk_outage_modes.py covers every mode)."""
    fault_id = inject(emu, type="region_outage", region=region, mode="refuse")
    wait_listening(emu, region, False)
    return fault_id


def recover(emu, region: str, fault_id: int) -> None:
    heal_fault(emu, fault_id)
    wait_listening(emu, region, True)


def wait_listening(emu, region: str, listening: bool) -> None:
    """The control port answers as soon as a region's state changed; the runtime closes (or
    re-opens) its listener on the loop right after. Wait until a connection to the region is
    refused (or accepted): from then on the SDK meets the outage on every connection, old or new."""
    address = host_port(emu.region_endpoints[region])
    deadline = time.monotonic() + POLL_DEADLINE_S
    while True:
        assert time.monotonic() < deadline, f"{region} still {'down' if listening else 'up'}"
        try:
            socket.create_connection(address, timeout=POLL_DEADLINE_S).close()
            up = True
        except ConnectionRefusedError:
            up = False
        except ConnectionResetError:        # accepted into the backlog of a closing listener
            continue
        if up == listening:
            return


def lost_writes(emu) -> dict:
    return control(emu, "GET", "/lost-writes")[1]


def wait_failover(emu, count: int = 1) -> dict:
    """The count-th failover once it has finished (bounded poll; each poll is a blocking read)."""
    deadline = time.monotonic() + POLL_DEADLINE_S
    while time.monotonic() < deadline:
        failovers = control(emu, "GET", "/failovers")[1]["failovers"]
        if len(failovers) >= count and failovers[count - 1]["state"] != "draining":
            return failovers[count - 1]
    raise AssertionError(f"failover #{count} did not finish within {POLL_DEADLINE_S} s")


# ---- SDK side ------------------------------------------------------------------------------------
def setup_container(emu) -> None:
    with make_client(emu) as admin:
        admin.create_database("db").create_container("c", PartitionKey(path="/pk"))


def items(client):
    return client.get_database_client("db").get_container_client("c")


def refresh_account(client) -> None:
    """Do now what the sync SDK does every 5 minutes (DefaultEndpointsRefreshTime): re-read the
    account and health-check every endpoint in its background thread, then wait for that thread.
    This is how a client learns that a region recovered or that the write region moved."""
    gem = client.client_connection._global_endpoint_manager
    if gem._refresh_thread is not None:
        gem._refresh_thread.join(REFRESH_TIMEOUT_S)
    gem.refresh_needed = True
    gem.refresh_endpoint_list(None)
    gem._refresh_thread.join(REFRESH_TIMEOUT_S)
    assert not gem._refresh_thread.is_alive()


async def refresh_account_async(client) -> None:
    """The aio client's periodic account refresh and health check, now (see refresh_account)."""
    gem = client.client_connection._global_endpoint_manager
    if gem.refresh_task is not None:
        await gem.refresh_task
        gem.refresh_task = None
    gem.refresh_needed = True
    await gem.refresh_endpoint_list(None)
    await gem.refresh_task


def ids_in(emu, region: str) -> set:
    """The ids a client preferring `region` reads there (checked to be served by that region)."""
    before = served(emu)
    with make_client(emu, preferred_locations=[region]) as reader:
        ids = {d["id"] for d in items(reader).read_all_items()}
    assert set(doc_hits(emu, before)) == {region}
    return ids


def headers_into(sink: list):
    """A response_hook that keeps each reply's headers."""
    return lambda headers, _body: sink.append(dict(headers))


# ---- 1. region outage: reads move to the next preferred region and come back ----------------------
@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_reads_leave_a_region_in_outage_and_come_back_after_recovery(regionlab):
    emu = regionlab
    setup_container(emu)
    with make_client(emu, preferred_locations=[EAST2, WEST]) as client:
        c = items(client)
        c.create_item({"id": "x", "pk": "p"})
        before = served(emu)
        assert c.read_item("x", partition_key="p")["id"] == "x"
        assert doc_hits(emu, before) == {EAST2: {"GET 200": 1}}

        fault = outage(emu, EAST2)
        assert control(emu, "GET", "/health")[1]["regions"][EAST2] == "down"
        before = served(emu)
        for _ in range(3):
            assert c.read_item("x", partition_key="p")["id"] == "x"
        # East US 2 refused the first connection: the SDK marked it unavailable and moved on
        assert doc_hits(emu, before) == {WEST: {"GET 200": 3}}

        recover(emu, EAST2, fault)
        before = served(emu)
        c.read_item("x", partition_key="p")
        assert doc_hits(emu, before) == {WEST: {"GET 200": 1}}      # still marked unavailable
        refresh_account(client)                                     # its health check sees East US 2 again
        before = served(emu)
        c.read_item("x", partition_key="p")
        assert doc_hits(emu, before) == {EAST2: {"GET 200": 1}}

    with make_client(emu, preferred_locations=[EAST2, WEST]) as fresh:
        before = served(emu)
        items(fresh).read_item("x", partition_key="p")
        assert doc_hits(emu, before) == {EAST2: {"GET 200": 1}}


@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_aio_reads_leave_a_region_in_outage_and_come_back_after_recovery(regionlab):
    emu = regionlab
    setup_container(emu)

    async def main():
        async with make_aio_client(emu, preferred_locations=[EAST2, WEST]) as client:
            c = items(client)
            await c.create_item({"id": "x", "pk": "p"})
            fault = outage(emu, EAST2)
            before = served(emu)
            for _ in range(2):
                assert (await c.read_item("x", partition_key="p"))["id"] == "x"
            assert doc_hits(emu, before) == {WEST: {"GET 200": 2}}
            recover(emu, EAST2, fault)
            await refresh_account_async(client)
            before = served(emu)
            await c.read_item("x", partition_key="p")
            assert doc_hits(emu, before) == {EAST2: {"GET 200": 1}}
    asyncio.run(main())


# ---- 2. graceful failover: 403/3, the SDK refreshes and writes in the new region ----------------
@pytest.mark.slow
@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_writes_follow_a_graceful_failover_through_403_3_and_nothing_is_lost(regionlab):
    emu = regionlab
    setup_container(emu)
    with make_client(emu) as client:
        c = items(client)
        acked = [c.create_item({"id": f"a{i}", "pk": f"p{i % 3}"})["id"] for i in range(4)]
        # writes East US 2 has not received yet: the failover must wait for them (the drain)
        cut = inject(emu, type="link_cut", one_way=True, **{"from": EAST, "to": EAST2})
        acked += [c.create_item({"id": f"b{i}", "pk": f"p{i % 3}"})["id"] for i in range(3)]
        status, failover = control(emu, "POST", "/failover", {"region": EAST2, "wait": False})
        assert status == 202 and failover["state"] == "draining"
        heal_fault(emu, cut)
        failover = wait_failover(emu)
        assert (failover["state"], failover["from"], failover["to"], failover["lost_writes"]) == \
            ("completed", EAST, EAST2, 0)

        before = served(emu)
        acked.append(c.create_item({"id": "c0", "pk": "p0"})["id"])
        hits = doc_hits(emu, before)
        assert set(hits) == {EAST, EAST2}
        assert set(hits[EAST]) == {"POST 403/3"}                    # the old write region refuses
        assert hits[EAST2] == {"POST 201": 1}                       # the SDK retried in the new one
        before = served(emu)
        acked.append(c.create_item({"id": "c1", "pk": "p1"})["id"])
        assert doc_hits(emu, before) == {EAST2: {"POST 201": 1}}    # and now goes there directly

    assert lost_writes(emu)["count"] == 0
    for region in REGIONS:
        wait_replicated(emu, "db", "c", region)
        assert ids_in(emu, region) == set(acked)


@pytest.mark.slow
@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_aio_writes_follow_a_graceful_failover_through_403_3(regionlab):
    emu = regionlab
    setup_container(emu)

    async def main():
        async with make_aio_client(emu) as client:
            c = items(client)
            for i in range(3):
                await c.create_item({"id": f"a{i}", "pk": "p"})
            status, failover = control(emu, "POST", "/failover", {"region": EAST2})
            assert status == 200 and failover["state"] == "completed"
            before = served(emu)
            await c.create_item({"id": "b0", "pk": "p"})
            hits = doc_hits(emu, before)
            assert set(hits) == {EAST, EAST2} and set(hits[EAST]) == {"POST 403/3"}
            assert hits[EAST2] == {"POST 201": 1}
            return {d["id"] async for d in c.read_all_items()}
    assert asyncio.run(main()) == {"a0", "a1", "a2", "b0"}
    assert lost_writes(emu)["count"] == 0


def write_some_not_replicated_to_east2(emu, c):
    """Three writes that reach every region, then three acknowledged writes that never reach
    East US 2 (its link lags forever): (ids kept, replies of the latter, their (id, LSN))."""
    kept = {c.create_item({"id": f"a{i}", "pk": "p"})["id"] for i in range(3)}
    wait_replicated(emu, "db", "c", EAST2)
    inject(emu, type="link_lag", lag_ms=NEVER_MS, one_way=True, **{"from": EAST, "to": EAST2})
    replies = []
    for i in range(3):
        c.create_item({"id": f"b{i}", "pk": "p"}, response_hook=headers_into(replies))
    return kept, replies, {(f"b{i}", int(h["lsn"])) for i, h in enumerate(replies)}


# ---- 3. forced failover: exactly the unreplicated writes are lost, and say so -----------------------
@pytest.mark.slow
@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_a_forced_failover_loses_exactly_the_unreplicated_writes_and_old_tokens_get_1002(regionlab):
    emu = regionlab
    setup_container(emu)
    with make_client(emu) as client:
        c = items(client)
        kept, replies, acked_lsns = write_some_not_replicated_to_east2(emu, c)
        stale_token = replies[-1]["x-ms-session-token"]

        status, failover = control(emu, "POST", "/failover", {"region": EAST2, "kind": "forced"})
        assert status == 200 and (failover["state"], failover["lost_writes"]) == ("completed", 3)
        lost = lost_writes(emu)
        assert lost["count"] == 3
        assert {(w["id"], w["lsn"]) for w in lost["writes"]} == acked_lsns

        with make_client(emu, preferred_locations=[EAST2]) as other:
            oc = items(other)
            for id in ("a0", "b0"):             # a survivor and a lost write: neither is "older data"
                with pytest.raises(exceptions.CosmosResourceNotFoundError) as e:
                    oc.read_item(id, partition_key="p", session_token=stale_token)
                assert e.value.sub_status == 1002
            assert oc.read_item("a0", partition_key="p")["id"] == "a0"     # without the old token
            with pytest.raises(exceptions.CosmosResourceNotFoundError) as e:
                oc.read_item("b0", partition_key="p")
            assert e.value.sub_status == 0

        # the writer's own session names the lost LSNs too: 404/1002, after which the SDK drops it
        with pytest.raises(exceptions.CosmosResourceNotFoundError) as e:
            c.read_item("a1", partition_key="p")
        assert e.value.sub_status == 1002
        assert c.read_item("a1", partition_key="p")["id"] == "a1"
        before = served(emu)
        c.create_item({"id": "c0", "pk": "p"})
        hits = doc_hits(emu, before)
        assert set(hits[EAST]) == {"POST 403/3"} and hits[EAST2] == {"POST 201": 1}

    for region in REGIONS:
        wait_replicated(emu, "db", "c", region)
        assert ids_in(emu, region) == kept | {"c0"}


# ---- 4. 404/1002 in a lagging region is retried in the write region ------------------------------
@pytest.mark.regionlab_config(lag_ms={**NO_LAG, (EAST, WEST): NEVER_MS})
def test_read_session_not_available_is_retried_in_the_write_region(regionlab):
    emu = regionlab
    setup_container(emu)
    with make_client(emu, preferred_locations=[WEST]) as client:
        c = items(client)
        before = served(emu)
        c.create_item({"id": "x", "pk": "p", "n": 1})
        assert doc_hits(emu, before) == {EAST: {"POST 201": 1}}     # single-master: the hub
        for n in (1, 2):
            if n == 2:
                c.replace_item("x", {"id": "x", "pk": "p", "n": 2})
            before = served(emu)
            assert c.read_item("x", partition_key="p")["n"] == n    # never the stale state
            assert doc_hits(emu, before) == {WEST: {"GET 404/1002": 1}, EAST: {"GET 200": 1}}
    with make_client(emu, preferred_locations=[WEST]) as stranger:  # no session: West US's view
        with pytest.raises(exceptions.CosmosResourceNotFoundError) as e:
            items(stranger).read_item("x", partition_key="p")
        assert e.value.sub_status == 0


# ---- 5. session read-your-writes across clients and regions ----------------------------------------
@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_a_session_token_carries_read_your_writes_to_another_client_and_region(regionlab):
    emu = regionlab
    setup_container(emu)
    lag = inject(emu, type="link_lag", lag_ms=NEVER_MS, one_way=True, **{"from": EAST, "to": WEST})
    with make_client(emu) as writer, make_client(emu, preferred_locations=[WEST]) as reader:
        replies = []
        items(writer).upsert_item({"id": "x", "pk": "p", "n": 1}, response_hook=headers_into(replies))
        token = replies[-1]["x-ms-session-token"]
        r = items(reader)
        before = served(emu)
        assert r.read_item("x", partition_key="p", session_token=token)["n"] == 1
        assert doc_hits(emu, before) == {WEST: {"GET 404/1002": 1}, EAST: {"GET 200": 1}}

        heal_fault(emu, lag)                      # the backlog drains; West US catches up
        wait_replicated(emu, "db", "c", WEST)
        before = served(emu)
        assert r.read_item("x", partition_key="p", session_token=token)["n"] == 1
        assert doc_hits(emu, before) == {WEST: {"GET 200": 1}}


# ---- 6. Strong: a majority of regions, and no stale read anywhere -------------------------------
@pytest.mark.slow
@pytest.mark.regionlab_config(consistency="Strong", lag_ms=NO_LAG, write_ack_timeout_s=1.0)
def test_strong_writes_need_a_majority_of_regions_and_strong_reads_never_go_stale(regionlab):
    emu = regionlab
    setup_container(emu)
    with make_client(emu) as client, make_client(emu, preferred_locations=[WEST, EAST2]) as west_first, \
            make_client(emu, preferred_locations=[EAST2]) as east2_first:
        c, w, e2 = items(client), items(west_first), items(east2_first)
        c.create_item({"id": "x", "pk": "p", "v": 1})
        before = served(emu)
        assert w.read_item("x", partition_key="p")["v"] == 1
        assert doc_hits(emu, before) == {WEST: {"GET 200": 1}}

        # West US cut off: East US + East US 2 are still a majority, so writes go on
        cut_west = inject(emu, type="link_cut", **{"from": EAST, "to": WEST})
        before = served(emu)
        c.upsert_item({"id": "x", "pk": "p", "v": 2})
        assert doc_hits(emu, before) == {EAST: {"POST 200": 1}}
        before = served(emu)
        assert w.read_item("x", partition_key="p")["v"] == 2        # never v1
        assert doc_hits(emu, before) == {WEST: {"GET 503": 1}, EAST2: {"GET 200": 1}}

        # East US alone: no majority, so the write is not acknowledged (408: it may apply later)
        cut_east2 = inject(emu, type="link_cut", **{"from": EAST, "to": EAST2})
        before = served(emu)
        with pytest.raises(exceptions.CosmosHttpResponseError) as e:
            c.upsert_item({"id": "x", "pk": "p", "v": 3})
        assert e.value.status_code == 408
        assert doc_hits(emu, before) == {EAST: {"POST 408": 1}}
        before = served(emu)
        assert c.read_item("x", partition_key="p")["v"] == 2        # East US does not show v3
        assert e2.read_item("x", partition_key="p")["v"] == 2
        assert doc_hits(emu, before) == {EAST: {"GET 200": 1}, EAST2: {"GET 200": 1}}

        heal_fault(emu, cut_west)
        heal_fault(emu, cut_east2)
        for region in (EAST2, WEST):
            wait_replicated(emu, "db", "c", region)
        before = served(emu)
        assert c.read_item("x", partition_key="p")["v"] == 3        # the 408 write did apply
        assert w.read_item("x", partition_key="p")["v"] == 3
        assert doc_hits(emu, before) == {EAST: {"GET 200": 1}, WEST: {"GET 200": 1}}


# ---- 7. primary crash: a brief 503, an election, nothing lost --------------------------------------
@pytest.mark.regionlab_config(lag_ms=NO_LAG, election_ms=200)
def test_a_primary_crash_costs_a_brief_503_and_no_acknowledged_write(regionlab):
    emu = regionlab
    setup_container(emu)
    with make_client(emu) as client:
        c = items(client)
        acked = [c.create_item({"id": f"a{i}", "pk": f"p{i % 3}"})["id"] for i in range(6)]
        crash = inject(emu, type="primary_crash", region=EAST)
        before = served(emu)
        acked.append(c.create_item({"id": "b0", "pk": "p0"})["id"])
        # the write met the election (503, nothing applied); the SDK retried in the same region
        assert doc_hits(emu, before) == {EAST: {"POST 503": 1, "POST 201": 1}}
        partition = control(emu, "GET", "/topology")[1]["databases"][0]["containers"][0]["partitions"][0]
        roles = [r["role"] for r in partition["regions"][EAST]["replicas"]]
        assert roles.count("primary") == 1 and roles[0] != "primary"
        before = served(emu)
        acked += [c.create_item({"id": f"b{i}", "pk": f"p{i % 3}"})["id"] for i in range(1, 4)]
        assert doc_hits(emu, before) == {EAST: {"POST 201": 3}}
        heal_fault(emu, crash)                    # the old primary returns as a secondary

    assert lost_writes(emu)["count"] == 0
    for region in REGIONS:
        wait_replicated(emu, "db", "c", region)
        assert ids_in(emu, region) == set(acked)


# ---- 8. write-region outage: service-managed failover after the detection delay ----------------
# The delay must outlast the two refused writes below even on a loaded CI machine (the SDK's own
# retries of a refused connection take time); the test waits for the failover, so it costs no more.
@pytest.mark.slow
@pytest.mark.regionlab_config(lag_ms=NO_LAG, detection_delay_ms=4000)
def test_a_write_region_outage_fails_over_by_itself_after_the_detection_delay(regionlab):
    emu = regionlab
    setup_container(emu)
    with make_client(emu) as client:
        c = items(client)
        kept, replies, acked_lsns = write_some_not_replicated_to_east2(emu, c)

        fault = outage(emu, EAST)
        with pytest.raises(ServiceRequestError):   # the SDK knows no other write region yet
            c.create_item({"id": "never", "pk": "p"})
        # a client pinned to the global endpoint (no discovery) is refused, not written to a dead hub
        pinned = make_client(emu, enable_endpoint_discovery=False)
        with pytest.raises(exceptions.CosmosHttpResponseError) as e:
            items(pinned).create_item({"id": "never", "pk": "p"})
        assert e.value.status_code == 503
        failover = wait_failover(emu)
        assert (failover["kind"], failover["from"], failover["to"]) == ("forced", EAST, EAST2)
        assert failover["reason"].startswith("service-managed") and failover["lost_writes"] == 3
        lost = lost_writes(emu)
        assert {(w["id"], w["lsn"]) for w in lost["writes"]} == acked_lsns

        with make_client(emu) as fresh:     # a client that reads the account now
            before = served(emu)
            items(fresh).create_item({"id": "c0", "pk": "p"})
            assert doc_hits(emu, before) == {EAST2: {"POST 201": 1}}
        with pinned:                        # the global endpoint now serves from East US 2
            before = served(emu)
            items(pinned).create_item({"id": "g0", "pk": "p"})
            assert doc_hits(emu, before) == {"global": {"POST 201": 1}}

        recover(emu, EAST, fault)           # East US returns as a read region, without the lost writes
        refresh_account(client)
        before = served(emu)
        c.create_item({"id": "c1", "pk": "p"})
        assert doc_hits(emu, before) == {EAST2: {"POST 201": 1}}

    for region in REGIONS:
        wait_replicated(emu, "db", "c", region)
        assert ids_in(emu, region) == kept | {"c0", "g0", "c1"}


# ---- 9. multi-write: concurrent writes conflict and resolve the same way in every region ---------
def wait_converged(emu, coll: str) -> None:
    """Multi-write: until every region has merged every write the others originated (a bounded
    poll of the core's per-origin progress, each poll a blocking call on the emulator loop)."""
    def behind(account):
        return sum(1 for p in account.databases["db"].containers[coll].partitions
                   for rs in p.replica_sets.values() for origin, other in p.replica_sets.items()
                   if origin != rs.region and rs.progress.get(origin, 0) < other.own_seq)
    deadline = time.monotonic() + POLL_DEADLINE_S
    while emu.call(behind):
        assert time.monotonic() < deadline, f"regions did not converge within {POLL_DEADLINE_S} s"


@pytest.mark.regionlab_config(multi_write=True, lag_ms=NO_LAG)
def test_multi_write_conflicts_resolve_the_same_way_in_every_region(regionlab):
    emu = regionlab
    with make_client(emu) as admin:
        db = admin.create_database("db")
        db.create_container("by_order", PartitionKey(path="/pk"), conflict_resolution_policy={
            "mode": "LastWriterWins", "conflictResolutionPath": "/order"})
        db.create_container("by_ts", PartitionKey(path="/pk"))      # the default: LWW on _ts
    cuts = [inject(emu, type="link_cut", **{"from": a, "to": b})
            for a, b in ((EAST, EAST2), (EAST, WEST), (EAST2, WEST))]
    order = {EAST: 1, EAST2: 3, WEST: 2}
    clients = {r: make_client(emu, multiple_write_locations=True, preferred_locations=[r]) for r in REGIONS}
    try:
        def coll(region, name):
            return clients[region].get_database_client("db").get_container_client(name)

        before = served(emu)
        for region in REGIONS:              # the same item, written in every region, each unaware
            for name in ("by_order", "by_ts"):
                coll(region, name).upsert_item({"id": "x", "pk": "p", "order": order[region], "by": region})
        assert doc_hits(emu, before) == {r: {"POST 201": 2} for r in REGIONS}
        for region in REGIONS:
            assert coll(region, "by_order").read_item("x", partition_key="p")["by"] == region

        for cut in cuts:
            heal_fault(emu, cut)
        for name in ("by_order", "by_ts"):
            wait_converged(emu, name)
        before = served(emu)
        for region in REGIONS:
            assert coll(region, "by_order").read_item("x", partition_key="p")["by"] == EAST2   # highest /order
            assert coll(region, "by_ts").read_item("x", partition_key="p")["by"] == WEST       # written last
        assert doc_hits(emu, before) == {r: {"GET 200": 2} for r in REGIONS}

        for name, losers in (("by_order", {EAST, WEST}), ("by_ts", {EAST, EAST2})):
            conflicts = list(coll(EAST, name).list_conflicts())
            assert sorted(json.loads(c["content"])["by"] for c in conflicts) == sorted(losers)
    finally:
        for client in clients.values():
            client.close()
