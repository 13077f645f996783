"""Request faults act on direct mode: on a real emulator, a test client speaking only
client/protocol/direct.py sees an `error` answered instead of running (nothing applied, read back
through the gateway with the official SDK), a `latency` that holds one reply while another
request on the same connection is answered first (judged by arrival order), a
`timeout_after_apply` that applies the write and closes the connection without its reply, a
`tcp_reset` that resets the connection, a `clock_skew` in the `_ts` a direct write stamps, and
normal replies again once each fault is healed; and the bundled client in direct mode rides a
503 error fault to the next region's replicas."""
import asyncio
import json
import time

import pytest
from azure.cosmos import exceptions

from regionlab.client import CosmosClient
from regionlab.client import PartitionKey as BundledPK

from direct_client import Connection, feed, item_body, target
from sdk_harness import control, heal_fault, inject, make_client
from test_direct import EAST, setup

SKEW_MS = -3600 * 1000                  # an hour behind: far beyond any test's own duration


def sync(fn, *args, **kwargs):
    """A blocking call (control port, the sync SDK) off the test's event loop."""
    return asyncio.to_thread(fn, *args, **kwargs)


async def primary(emu) -> tuple:
    """(connection, replica key, range id) of the primary of db/items' only range in East US."""
    (range_id, replicas), = feed(emu).items()
    host, port, key = target(replicas["primary"])
    return await Connection.open(host, port, emu.key), key, range_id


def gateway_item(emu, id: str):
    """The item as the gateway reads it (the official SDK), or None when it does not exist."""
    with make_client(emu) as client:
        c = client.get_database_client("db").get_container_client("items")
        try:
            return c.read_item(id, partition_key="p")
        except exceptions.CosmosResourceNotFoundError:
            return None


def doc(id: str) -> bytes:
    return json.dumps({"id": id, "pk": "p"}).encode()


def direct_requests(emu) -> dict:
    status, topo = control(emu, "GET", "/topology")
    assert status == 200, topo
    return topo["direct_requests"].get(EAST, {})


READ = "read"
PK = '["p"]'


async def create(conn, key, id: str):
    """The create's reply, or the ConnectionError that ended it unanswered."""
    try:
        return await conn.request("create", key, pk=PK, body=doc(id))
    except ConnectionError as e:
        return e


async def read(conn, key, id: str = "a"):
    try:
        return await conn.request(READ, key, item=id, pk=PK)
    except ConnectionError as e:
        return e


async def closed(conn) -> None:
    try:
        await conn.close()
    except (ConnectionError, OSError, asyncio.TimeoutError):
        pass                                 # a closed or reset one: nothing to say goodbye to


def east_replicas(emu) -> list:
    status, topo = control(emu, "GET", "/topology")
    assert status == 200, topo
    return topo["databases"][0]["containers"][0]["partitions"][0]["regions"][EAST]["replicas"]


def test_error_on_reads_of_a_partition_answers_that_status_and_spares_writes(regionlab):
    setup(regionlab)

    async def run(emu):
        conn, key, range_id = await primary(emu)
        fid = await sync(inject, emu, type="error", region=EAST, status=503, op="read", database="db",
                         container="items", partition=range_id)
        refused, write = await read(conn, key), await create(conn, key, "w1")
        assert refused["status"] == 503 and refused["sub"] == 0
        assert "not applied" in item_body(refused)["message"]
        assert write["status"] == 201                # op: read leaves writes alone
        await sync(heal_fault, emu, fid)
        healed = await read(conn, key)
        assert healed["status"] == 200 and item_body(healed)["id"] == "a"
        await closed(conn)
    asyncio.run(run(regionlab))
    assert gateway_item(regionlab, "w1") is not None


def test_error_on_writes_applies_nothing_and_healing_restores_them(regionlab):
    setup(regionlab)

    async def run(emu):
        conn, key, _ = await primary(emu)
        fid = await sync(inject, emu, type="error", region=EAST, status=503, substatus=0, op="write")
        refused = await create(conn, key, "e1")
        assert refused["status"] == 503
        assert await sync(gateway_item, emu, "e1") is None      # a definite failure: not applied
        assert (await read(conn, key))["status"] == 200          # op: write leaves reads alone
        await sync(heal_fault, emu, fid)
        assert (await create(conn, key, "e1"))["status"] == 201
        await closed(conn)
    asyncio.run(run(regionlab))
    assert gateway_item(regionlab, "e1") is not None


def test_latency_holds_only_its_reply_on_a_multiplexed_connection(regionlab):
    setup(regionlab)

    async def both(conn, key):
        held = asyncio.ensure_future(read(conn, key))     # tasks start in order: the read is sent first
        quick = asyncio.ensure_future(create(conn, key, "l1"))
        return await asyncio.wait_for(asyncio.gather(held, quick), 10)

    async def run(emu):
        conn, key, _ = await primary(emu)
        fid = await sync(inject, emu, type="latency", region=EAST, delay_ms=300, op="read")
        got, write = await both(conn, key)
        assert got["status"] == 200 and item_body(got)["id"] == "a"
        assert write["status"] == 201
        # The read was sent first and ran first, but its reply was held: the write's came first.
        assert conn.arrivals == [write["id"], got["id"]]
        replicas = await sync(east_replicas, emu)
        assert all(r["in_flight"] == 0 for r in replicas)    # released once the replies went out
        assert max(r["in_flight_peak"] for r in replicas) >= 1   # the held read was in flight
        await sync(heal_fault, emu, fid)
        got, write = await both(conn, key)
        assert write["status"] == 409                # l1 exists: the write ran under the fault
        assert conn.arrivals[2:] == [got["id"], write["id"]]   # healed: answered in order again
        await closed(conn)
    asyncio.run(run(regionlab))


def test_timeout_after_apply_applies_the_write_and_closes_without_a_reply(regionlab):
    setup(regionlab)

    async def run(emu):
        conn, key, _ = await primary(emu)
        fid = await sync(inject, emu, type="timeout_after_apply", region=EAST, op="write")
        lost = await create(conn, key, "t1")
        assert isinstance(lost, ConnectionError), f"the write was answered: {lost}"
        assert conn.closed_with is None                      # no error frame, no bye: just closed
        assert not isinstance(conn.ended, ConnectionResetError), conn.ended
        assert await sync(gateway_item, emu, "t1") is not None   # applied, though never answered
        assert (await sync(direct_requests, emu)).get("create 201/drop_after_apply") == 1
        await sync(heal_fault, emu, fid)
        conn, key, _ = await primary(emu)
        assert (await create(conn, key, "t2"))["status"] == 201
        await closed(conn)
    asyncio.run(run(regionlab))


def test_tcp_reset_resets_the_connection_and_healing_restores_replies(regionlab):
    setup(regionlab)

    async def run(emu):
        conn, key, _ = await primary(emu)
        fid = await sync(inject, emu, type="tcp_reset", region=EAST)
        lost = await read(conn, key)
        assert isinstance(lost, ConnectionError), f"the read was answered: {lost}"
        assert isinstance(conn.ended, ConnectionResetError), conn.ended
        assert (await sync(direct_requests, emu)).get("read 200/reset") == 1
        await sync(heal_fault, emu, fid)
        conn, key, _ = await primary(emu)
        reply = await read(conn, key)
        assert reply["status"] == 200 and item_body(reply)["id"] == "a"
        await closed(conn)
    asyncio.run(run(regionlab))


def test_a_direct_write_stamps_ts_by_the_regions_skewed_clock(regionlab):
    setup(regionlab)

    async def run(emu):
        conn, key, _ = await primary(emu)
        fid = await sync(inject, emu, type="clock_skew", region=EAST, offset_ms=SKEW_MS)
        reply = await create(conn, key, "s1")
        assert reply["status"] == 201
        skewed_s = time.time() + SKEW_MS / 1000
        assert abs(item_body(reply)["_ts"] - skewed_s) < 60     # the region's clock, not the host's
        await sync(heal_fault, emu, fid)
        await closed(conn)
    asyncio.run(run(regionlab))


@pytest.mark.regionlab_config(lag_ms={(a, b): 0 for a in ("East US", "East US 2", "West US")
                                      for b in ("East US", "East US 2", "West US") if a != b})
def test_the_bundled_clients_direct_reads_ride_a_503_error_fault_to_the_next_region(regionlab):
    """The bundled client in direct mode: the 503s from East's replicas are retried at once in the
    next preferred region's replicas (client/policies/retry.py), so the read succeeds; both
    regions' direct counters show it. No replication lag: West US has the write the session
    names (with lag its replicas answer 404/1002 and the read goes back to the write region)."""
    west = "West US"
    with CosmosClient(regionlab.endpoint, credential=regionlab.key, connection_mode="direct",
                      preferred_locations=[EAST, west]) as client:
        c = client.create_database_if_not_exists("db").create_container_if_not_exists(
            "items", partition_key=BundledPK(path="/pk"))
        c.upsert_item({"id": "b1", "pk": "p"})
        fid = inject(regionlab, type="error", region=EAST, status=503, op="read")
        assert c.read_item("b1", partition_key="p")["id"] == "b1"
        status, topo = control(regionlab, "GET", "/topology")
        assert status == 200, topo
        assert topo["direct_requests"][EAST].get("read 503", 0) >= 1
        assert topo["direct_requests"][west].get("read 200", 0) >= 1
        heal_fault(regionlab, fid)
        before = topo["direct_requests"][EAST].get("read 200", 0)
        assert c.read_item("b1", partition_key="p")["id"] == "b1"
        _, topo = control(regionlab, "GET", "/topology")
        assert topo["direct_requests"][EAST].get("read 200", 0) == before + 1   # East serves again
