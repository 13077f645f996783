"""Proves direct mode's connection pool (docs/client.md "Direct mode", Pool) against the real
emulator's nodes, judged by the client's own counts and each node's view of its connections
(GET /topology `direct.regions.<region>.nodes[].connections`): concurrent writes held by a
`latency` fault open connections to the primary's node by `max_requests_per_connection` (10
writes at 2 per connection: exactly 5, on that node only); an idle connection is closed after
`idle_connection_timeout_s` and an endpoint unused for `idle_endpoint_timeout_s` loses its
connections (both on the client's injected clock, moved on by the test), and the next request
opens one again. One emulator for the module (its nodes' idle timeout 0.6 s, so the client
pings every 0.3 s and its housekeeping runs every 0.1 s); each test its own database and client.
Real sockets; no sleeps: the tests await the closed connections' reader tasks."""
import asyncio
import time

import pytest

from regionlab.client import PartitionKey
from regionlab.client.aio import CosmosClient
from regionlab.emulator.testing import running_emulator
from test_client_faults import MovableClock

EAST = "East US"
HELD_MS = 300                   # writes held in flight while the pool opens connections
NODE_VIEW_DEADLINE_S = 10.0     # a node drops a closed connection within ms; generous for a loaded machine


@pytest.fixture(scope="module")
def emu():
    with running_emulator(direct_limits={"idle_timeout_s": 0.6}) as emu:
        yield emu


def node_connections(emu, region: str = EAST) -> dict[int, int]:
    """{node index: connections} as the region's nodes see them."""
    return {n["node"]: n["connections"] for n in emu.topology()["direct"]["regions"][region]["nodes"]}


def node_view_once(emu, done) -> dict[int, int]:
    """node_connections once `done(view)` holds (a node counts a closed connection off when its
    read loop ends, just after the client's close), within NODE_VIEW_DEADLINE_S."""
    end = time.monotonic() + NODE_VIEW_DEADLINE_S
    view = node_connections(emu)
    while not done(view) and time.monotonic() < end:
        view = node_connections(emu)
    return view


async def _container(client, db: str):
    d = await client.create_database(db)
    return await d.create_container("c", partition_key=PartitionKey(path="/pk"))


def primary_node(diagnostics) -> int:
    [replica] = [r for r in diagnostics.to_dict()["replicas_contacted"] if r.get("status")]
    assert replica["role"] == "primary"
    return replica["node"]


def test_concurrent_writes_open_connections_by_max_requests_per_connection(emu):
    async def main():
        async with CosmosClient(emu.endpoint, credential=emu.key, connection_mode="direct",
                                max_requests_per_connection=2) as client:
            c = await _container(client, "pool_open")
            with emu.faults.latency(EAST, delay_ms=HELD_MS, op="write", database="pool_open"):
                writes = await asyncio.gather(*(c.upsert_item({"id": str(i), "pk": "p"}) for i in range(10)))
            direct = client.direct_transport
            opened = {ep.address[1]: ep.opened for ep in direct.endpoints.values()}
            return writes, opened, direct.connection_count(), node_connections(emu)
    writes, opened, open_now, view = asyncio.run(main())
    [node] = {primary_node(w.diagnostics) for w in writes}
    assert list(opened.values()) == [5] and open_now == 5        # 10 held writes / 2 per connection
    assert view[node] == 5 and sum(view.values()) == 5            # the node sees the same, no other does


IDLE_S = 1.0


async def _closed(connections) -> None:
    await asyncio.wait_for(asyncio.gather(*(c.reader_task for c in connections), return_exceptions=True),
                           NODE_VIEW_DEADLINE_S)


@pytest.mark.parametrize("what", ["connection", "endpoint"])
def test_idle_connections_and_unused_endpoints_are_closed_and_reopened_on_use(emu, what):
    """idle_connection_timeout_s closes a connection with nothing in flight after that long;
    idle_endpoint_timeout_s drops the endpoint (and its connections) after that long unused."""
    clock = MovableClock()
    option = {"idle_connection_timeout_s": IDLE_S} if what == "connection" else {"idle_endpoint_timeout_s": IDLE_S}
    db = f"pool_idle_{what}"

    async def main():
        async with CosmosClient(emu.endpoint, credential=emu.key, connection_mode="direct", clock=clock,
                                **option) as client:
            c = await _container(client, db)
            await c.upsert_item({"id": "1", "pk": "p"})
            direct = client.direct_transport
            [ep] = direct.endpoints.values()
            conns = list(ep.connections)
            kept = direct.connection_count()
            clock.advance(IDLE_S / 2)
            await c.upsert_item({"id": "1", "pk": "p"})            # used: the timers start again
            clock.advance(IDLE_S / 2 + 0.1)
            # A heartbeat is due on the moved clock too: once it went out, a housekeeping pass
            # ran after the move, and left the connection open.
            await asyncio.wait_for(conns[0].pinged(conns[0].pings + 1), NODE_VIEW_DEADLINE_S)
            still = direct.connection_count()
            clock.advance(IDLE_S)
            await _closed(conns)
            after = (direct.connection_count(), len(direct.endpoints))
            view = node_view_once(emu, lambda v: sum(v.values()) == 0)
            again = await c.upsert_item({"id": "1", "pk": "p"})
            reopened = sum(e.opened for e in direct.endpoints.values())
            return kept, still, after, view, again, reopened, node_connections(emu)
    kept, still, after, view, again, reopened, view_again = asyncio.run(main())
    assert kept == 1 and still == 1                  # 0.6 s since last used: under the 1 s
    assert after == ((0, 1) if what == "connection" else (0, 0))
    assert sum(view.values()) == 0                   # the node saw it close
    assert reopened == (2 if what == "connection" else 1) and sum(view_again.values()) == 1
    assert again.diagnostics.status == 200


WARMUP_S = 1.0                  # open_connections_and_init_caches' aggressive_warmup_s default
FEED_HELD_MS = 3000             # East US 2's address feed: far past the warm-up's wait


def test_warm_up_returns_within_aggressive_warmup_s_with_what_it_opened(emu):
    """East US 2's gateway holds every reply 3 s, so its routing map and address feed cannot
    arrive within the warm-up's 1 s: the call returns at 1 s with East US's connections (one per
    node of its replicas) and leaves East US 2's to the background."""
    async def main():
        async with CosmosClient(emu.endpoint, credential=emu.key, connection_mode="direct",
                                preferred_locations=[EAST, "East US 2"]) as client:
            c = await _container(client, "pool_warm")
            with emu.faults.latency("East US 2", delay_ms=FEED_HELD_MS):
                started = time.perf_counter()
                summary = await client.open_connections_and_init_caches([c])
                took_s = time.perf_counter() - started
                view = node_connections(emu)
            return summary, took_s, view
    summary, took_s, view = asyncio.run(main())
    assert summary["regions"] == [EAST, "East US 2"]
    # at the bound, not before; the upper bound is generous for a loaded 2-core machine
    assert WARMUP_S <= took_s < WARMUP_S + 0.9
    assert summary["connections"] == 4 and sorted(view.values()) == [0] * (len(view) - 4) + [1] * 4
