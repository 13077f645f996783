"""Proves the bundled client's direct mode against the real emulator's nodes: a replica move is
followed through 410 -> address refresh -> success, a write after a primary crash lands on the
elected primary, reads survive a node crash on another replica, blocked direct ports fall back
to the gateway, Strong reads decide a two-replica quorum by LSN, and warm-up opens connections
to the replicas of the first two preferred regions only (judged by the emulator's topology and
the client's diagnostics), and a region outage moves reads to the next region's replicas. Real
sockets, the real emulator, no mocks."""
import asyncio

import pytest

from regionlab.client import CosmosClient, PartitionKey
from regionlab.client.protocol import direct as D
from direct_client import feed, target
from sdk_harness import control, direct_client, inject, no_lag

EAST, WEST, NORTH = "East US", "West US", "North Europe"


def items(client, n=3):
    c = client.create_database_if_not_exists("db").create_container_if_not_exists(
        "items", partition_key=PartitionKey(path="/pk"))
    for i in range(n):
        c.upsert_item({"id": f"i{i}", "pk": "p", "n": i})
    return c


def served(diag) -> list:
    """The replicas that answered (status set), as (replica index, address, status, sub)."""
    return [(r["replica"], r["address"], r.get("status"), r.get("sub")) for r in diag.to_dict()["replicas_contacted"]]


@pytest.mark.regionlab_config(nodes_per_region=5)
def test_a_replica_move_answers_410_and_the_client_refreshes_and_succeeds(regionlab):
    with direct_client(regionlab) as client:
        c = items(client)
        primary = feed(regionlab)["0"]["primary"]
        old_address = "%s:%d" % target(primary)[:2]
        inject(regionlab, type="replica_move", region=EAST, replica=int(primary["replica"].rsplit("/", 1)[1]))
        r = c.upsert_item({"id": "moved", "pk": "p"})
        d = r.diagnostics.to_dict()
        attempt = d["attempts"][-1]["direct"]
        hops = served(r.diagnostics)
        assert hops[0][1:] == (old_address, 410, D.SUB_REPLICA_NOT_HERE)
        assert attempt["refreshes"] == [f"410/{D.SUB_REPLICA_NOT_HERE}"]
        assert hops[-1][0] == hops[0][0] and hops[-1][1] != old_address and hops[-1][2] == 201
        assert attempt["fallback"] is None and d["retries"] == 0      # solved inside the direct layer
        assert c.read_item("moved", partition_key="p")["id"] == "moved"


@pytest.mark.regionlab_config(election_ms=200)
def test_a_write_after_a_primary_crash_goes_to_the_elected_primary(regionlab):
    with direct_client(regionlab) as client:
        c = items(client)
        old = feed(regionlab)["0"]["primary"]
        inject(regionlab, type="primary_crash", region=EAST)
        r = c.upsert_item({"id": "after", "pk": "p"})
        info = r.diagnostics.to_dict()["attempts"][-1]["direct"]
        hops = r.diagnostics.to_dict()["replicas_contacted"]
        assert info["fallback"] is None and info["refreshes"]         # 410 / no primary -> refresh
        new = feed(regionlab)["0"]["primary"]
        assert new["replica"] != old["replica"]
        assert hops[-1]["status"] == 201 and hops[-1]["served_by"] == "primary"
        assert hops[-1]["address"] == "%s:%d" % target(new)[:2]
        assert c.read_item("after", partition_key="p")["id"] == "after"


def test_reads_survive_a_node_crash_on_another_replica(regionlab):
    with direct_client(regionlab) as client:
        c = items(client)
        client.open_connections_and_init_caches([c], regions=1)
        f = feed(regionlab)["0"]
        secondary = next(e for e in f["all"] if not e["isPrimary"])
        crashed = "%s:%d" % target(secondary)[:2]
        inject(regionlab, type="node_crash", region=EAST, node=secondary["node"])
        hops = []
        for _ in range(4):                # round-robin over the secondaries reaches the crashed one
            r = c.read_item("i1", partition_key="p")
            assert r["n"] == 1
            hops += served(r.diagnostics)
        to_crashed = [h for h in hops if h[1] == crashed]
        assert to_crashed and all(h[2] is None for h in to_crashed)   # refused, never answered
        assert all(h[2] == 200 for h in hops if h[1] != crashed)
        assert client.direct_transport.fallbacks == 0


def test_blocked_direct_ports_fall_back_to_the_gateway(regionlab):
    with direct_client(regionlab) as client:
        c = items(client)
        inject(regionlab, type="direct_ports_blocked")
        r = c.read_item("i0", partition_key="p")
        info = r.diagnostics.to_dict()["attempts"][-1]["direct"]
        assert r["id"] == "i0" and info["fallback"].startswith("gateway:")
        assert all(h[2] is None for h in served(r.diagnostics))       # every replica refused
        fetched = client.direct_transport.addresses.refreshes
        w = c.upsert_item({"id": "blocked", "pk": "p"})
        assert w.diagnostics.to_dict()["attempts"][-1]["direct"]["fallback"].startswith("gateway:")
        assert served(w.diagnostics) == []          # the refused primary is marked: no connect tried
        assert client.direct_transport.addresses.refreshes == fetched     # nor a feed refetched
        assert client.direct_transport.fallbacks == 2
    with CosmosClient(regionlab.endpoint, credential=regionlab.key) as gw:
        got = gw.get_database_client("db").get_container_client("items").read_item("blocked", "p")
        assert got["id"] == "blocked"


@pytest.mark.regionlab_config(consistency="Strong")
def test_strong_reads_decide_a_two_replica_quorum_by_lsn(regionlab):
    with direct_client(regionlab) as client:
        c = items(client)
        r = c.read_item("i2", partition_key="p")
        info = r.diagnostics.to_dict()["attempts"][-1]["direct"]
        answered = [h for h in info["replicas"] if h.get("status") == 200]
        assert r["n"] == 2 and len(answered) >= 2
        assert "quorum lsn" in info["quorum"]


@pytest.mark.regionlab_config(regions=[EAST, WEST, NORTH])
def test_warm_up_opens_connections_in_the_first_two_preferred_regions(regionlab):
    with direct_client(regionlab, preferred_locations=[WEST, EAST, NORTH]) as client:
        c = items(client)
        summary = client.open_connections_and_init_caches([c], regions=2, aggressive_warmup_s=5)
        assert summary["regions"] == [WEST, EAST]
        nodes = {region: {e["node"] for e in feed(regionlab, regionlab.region_endpoints[region])["0"]["all"]}
                 for region in (WEST, EAST, NORTH)}
        assert summary["connections"] == len(nodes[WEST]) + len(nodes[EAST]) == 8
        topo = control(regionlab, "GET", "/topology")[1]["direct"]["regions"]
        for region in (WEST, EAST, NORTH):
            open_on = {n["node"] for n in topo[region]["nodes"] if n["connections"]}
            assert open_on == (nodes[region] if region != NORTH else set()), region
        # the warmed caches answer the first read without a feed fetch
        before = client.direct_transport.addresses.refreshes
        r = c.read_item("i0", partition_key="p")
        assert client.direct_transport.addresses.refreshes == before
        assert r.diagnostics.to_dict()["replicas_contacted"][0]["region"] == WEST


def slow_secondary(emu) -> tuple[int, str]:
    lagging = next(e for e in feed(emu)["0"]["all"] if not e["isPrimary"])
    index = int(lagging["replica"].rsplit("/", 1)[1])
    inject(emu, type="replica_slow", region=EAST, replica=index, delay_ms=60_000)
    return index, "%s:%d" % target(lagging)[:2]


@pytest.mark.regionlab_config(intra_region_delay_ms=0)
def test_a_session_read_on_a_lagging_replica_tries_another_replica(regionlab):
    with direct_client(regionlab) as client:
        c = items(client)
        index, lagging = slow_secondary(regionlab)
        c.upsert_item({"id": "fresh", "pk": "p", "v": 1})
        hops = []
        for _ in range(3):                # round-robin over the three secondaries meets the lagging one
            r = c.read_item("fresh", partition_key="p")
            assert r["v"] == 1 and r.diagnostics.to_dict()["retries"] == 0
            hops.append(served(r.diagnostics))
        met = [h for h in hops if h[0][1] == lagging]
        assert len(met) == 1
        assert met[0][0][2:] == (404, D.SUB_READ_SESSION_NOT_AVAILABLE) and met[0][1][2] == 200


@pytest.mark.regionlab_config(consistency="Strong", intra_region_delay_ms=0)
def test_a_strong_quorum_read_takes_the_replica_with_the_higher_lsn(regionlab):
    with direct_client(regionlab) as client:
        c = items(client)
        index, lagging = slow_secondary(regionlab)
        c.upsert_item({"id": "i0", "pk": "p", "n": 100})
        decisions = []
        for _ in range(3):                # every pair of secondaries: two of three include the lagging one
            r = c.read_item("i0", partition_key="p")
            assert r["n"] == 100           # never the lagging replica's older version
            decisions.append(r.diagnostics.to_dict()["attempts"][-1]["direct"]["quorum"])
        with_lagging = [d for d in decisions if f"replica {index} lsn" in d]
        assert with_lagging and all(f": replica {index} answers" not in d for d in with_lagging)


@pytest.mark.regionlab_config(direct_limits={"idle_timeout_s": 0.6})
def test_heartbeats_keep_idle_connections_open_past_the_nodes_idle_timeout(regionlab):
    from regionlab.client.aio import CosmosClient as AioClient

    async def main():
        async with AioClient(regionlab.endpoint, credential=regionlab.key, connection_mode="direct") as client:
            db = await client.create_database_if_not_exists("db")
            c = await db.create_container_if_not_exists("items", partition_key=PartitionKey(path="/pk"))
            await c.upsert_item({"id": "k", "pk": "p"})
            await client.open_connections_and_init_caches([c], regions=1)
            direct = client.direct_transport
            conns = [conn for ep in direct.endpoints.values() for conn in ep.connections]
            opened = sum(ep.opened for ep in direct.endpoints.values())
            assert len(conns) == 4 and all(conn.heartbeat_s == 0.3 for conn in conns)

            # 3 pings at 0.3 s: 0.9 s idle > 0.6 s; each connection says when it has sent them
            # (a connection the node closed first raises instead).
            await asyncio.wait_for(asyncio.gather(*(conn.pinged(3) for conn in conns)), 10)
            assert not any(conn.closed for conn in conns)
            assert (await c.read_item("k", partition_key="p"))["id"] == "k"
            assert sum(ep.opened for ep in direct.endpoints.values()) == opened   # no reconnect
    asyncio.run(main())


REGIONS3 = ("East US", "East US 2", "West US")
NO_LAG = no_lag(REGIONS3)


@pytest.mark.parametrize("mode", ["unavailable", "refuse"])
@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_a_region_outage_moves_direct_reads_to_the_next_preferred_regions_replicas(regionlab, mode):
    east2 = "East US 2"
    with direct_client(regionlab, preferred_locations=[east2, WEST]) as client:
        c = items(client)
        first = c.read_item("i1", partition_key="p")
        assert first.diagnostics.to_dict()["replicas_contacted"][0]["region"] == east2
        inject(regionlab, type="region_outage", region=east2, mode=mode)
        r = c.read_item("i1", partition_key="p")
        d = r.diagnostics.to_dict()
        assert r["n"] == 1 and d["regions_contacted"] == [east2, WEST]
        last = d["attempts"][-1]
        assert last["region"] == WEST and last["status"] == 200 and last["direct"]["fallback"] is None
        assert {h["region"] for h in last["direct"]["replicas"]} == {WEST}
