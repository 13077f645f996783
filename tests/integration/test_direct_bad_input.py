"""The direct server under bad input and at its limits: garbage, a 4 GB length prefix, bad
msgpack, truncated and trickled frames, a handshake that never finishes, unknown operations,
ten thousand request ids at once, too many connections (at the cap a new connection sheds a
silent or idle one, and is refused only when every connection has requests in flight). Each gets an error frame (where one
can be sent) and a close within a bounded time; the node keeps serving and no task is left
behind. Real emulator and sockets, with the direct limits shortened so the timeouts are quick."""
import asyncio
import random
import struct
import time

import pytest
from azure.cosmos import PartitionKey

from regionlab.client.protocol import direct as D
from direct_client import Connection, addresses, by_range, target
from sdk_harness import inject, make_client

LIMITS = {"handshake_timeout_s": 0.3, "idle_timeout_s": 0.6, "frame_timeout_s": 0.3, "max_in_flight": 8,
          "max_connections": 6}
CLOSE_BOUND_S = 3.0                      # a bad peer is closed well within this
ROUND_TRIPS_MAX = 200                    # a server-side state that is coming arrives within these

pytestmark = pytest.mark.regionlab_config(direct_limits=LIMITS)


def primary(emu):
    with make_client(emu) as client:
        c = client.create_database("db").create_container("items", PartitionKey(path="/pk"))
        c.create_item({"id": "a", "pk": "p"})
    status, feed = addresses(emu.endpoint, emu.key, "db", "items")
    assert status == 200
    return target(by_range(feed)["0"]["primary"])


async def raw(host, port):
    return await asyncio.open_connection(host, port)


async def until_closed(reader) -> list:
    """Every frame the node sends until it closes; fails if it does not close in time."""
    decoder = D.FrameDecoder()
    frames = []
    deadline = time.monotonic() + CLOSE_BOUND_S
    while True:
        data = await asyncio.wait_for(reader.read(65536), max(0.01, deadline - time.monotonic()))
        if not data:
            return frames
        frames += decoder.feed(data)


def slow_secondaries(emu, primary_key: str, delay_ms: int) -> None:
    """Two secondaries apply late: a write then waits delay_ms for its quorum (3 of 4)."""
    index = int(primary_key.rsplit("/", 1)[1])
    for i in [i for i in range(4) if i != index][:2]:
        inject(emu, type="replica_slow", region="East US", replica=i, delay_ms=delay_ms)


def tasks(emu) -> int:
    return emu.call(lambda account: len(asyncio.all_tasks()))


async def handshaken(host, port, key, versions=D.PROTOCOL_VERSIONS):
    reader, writer = await raw(host, port)
    writer.write(D.encode(D.hello(versions)))
    dec = D.FrameDecoder()
    frames = []
    while not frames:
        frames = dec.feed(await reader.read(65536))
    writer.write(D.encode({"t": "auth", "mac": D.handshake_mac(key, frames[0]["nonce"])}))
    got = []
    while not got:
        got = dec.feed(await reader.read(65536))
    assert got[0]["t"] == "ready"
    return reader, writer


@pytest.mark.parametrize("payload,status,sub", [
    (b"GET / HTTP/1.1\r\n\r\n", 400, D.SUB_FRAME_TOO_LARGE),       # garbage reads as a huge length
    (b"\xff\xff\xff\xff", 400, D.SUB_FRAME_TOO_LARGE),              # a 4 GB length prefix
    (b"\x00\x00\x00\x00", 400, D.SUB_BAD_FRAME),
    (struct.pack(">I", 1) + b"\xc1", 400, D.SUB_BAD_FRAME),        # not msgpack
    (D.encode({"t": "req", "id": 1, "op": "read"}), 400, D.SUB_HANDSHAKE),   # before the handshake
])
def test_bad_bytes_get_an_error_frame_and_a_close(regionlab, payload, status, sub):
    host, port, _ = primary(regionlab)

    async def main():
        reader, writer = await raw(host, port)
        writer.write(payload)
        frames = await until_closed(reader)
        assert frames[-1]["t"] == "error" and (frames[-1]["status"], frames[-1]["sub"]) == (status, sub)
        writer.close()
    asyncio.run(main())


def test_a_handshake_that_never_finishes_and_a_trickled_frame_are_closed_in_bounded_time(regionlab):
    host, port, _ = primary(regionlab)

    async def main():
        reader, writer = await raw(host, port)          # says nothing at all
        frames = await until_closed(reader)
        assert (frames[-1]["status"], frames[-1]["sub"]) == (408, D.SUB_HANDSHAKE)
        reader, writer = await raw(host, port)
        writer.write(D.encode(D.hello())[:-2])          # a truncated frame, then silence
        frames = await until_closed(reader)
        assert frames[-1]["t"] == "error" and frames[-1]["status"] == 408
        reader, writer = await handshaken(host, port, regionlab.key)
        frame = D.encode({"t": "ping", "pad": b"x" * 200})
        started = time.monotonic()
        closing = asyncio.get_running_loop().create_task(until_closed(reader))
        for byte in frame:                              # the adversary: a byte every 50 ms
            if closing.done():
                break
            writer.write(bytes([byte]))
            await asyncio.sleep(0.05)
        frames = await closing
        assert (frames[-1]["status"], frames[-1]["sub"]) == (408, D.SUB_IDLE)
        assert time.monotonic() - started < CLOSE_BOUND_S
    asyncio.run(main())


@pytest.mark.slow
def test_an_idle_connection_is_closed_and_pings_keep_one_open(regionlab):
    host, port, _ = primary(regionlab)

    async def main():
        conn = await Connection.open(host, port, regionlab.key)
        assert conn.challenge["idle_timeout_ms"] == 600
        await asyncio.wait_for(conn._reader_task, CLOSE_BOUND_S)
        assert conn.closed_with["t"] == "error" and conn.closed_with["sub"] == D.SUB_IDLE
        conn = await Connection.open(host, port, regionlab.key)
        for _ in range(6):                              # 1.2 s of pings every 0.2 s: twice the timeout
            conn.writer.write(D.encode({"t": "ping"}))
            await asyncio.sleep(0.2)
        assert conn.closed_with is None and conn.frames.count({"t": "pong"}) == 6
        await conn.close()
    asyncio.run(main())


def test_an_unknown_operation_is_a_400_reply_then_an_error_frame_and_a_close(regionlab):
    host, port, key = primary(regionlab)

    async def main():
        for version, op in ((2, "frobnicate"), (2, 99), (1, "frobnicate")):
            reader, writer = await handshaken(host, port, regionlab.key, versions=[version])
            writer.write(D.encode(D.request(version, 9, op, key)))
            frames = await until_closed(reader)
            reply = D.reply_fields(frames[0]) if type(frames[0]) is list else frames[0]
            assert (reply["id"], reply["status"], reply["sub"]) == (9, 400, D.SUB_BAD_REQUEST_FRAME), frames
            assert (frames[-1]["t"], frames[-1]["status"]) == (D.ERROR, 400), frames
            assert "Unknown operation" in frames[-1]["message"]
        # the node goes on serving everyone else
        conn = await Connection.open(host, port, regionlab.key)
        assert (await conn.request("read", key, item="a", pk='["p"]'))["status"] == 200
        await conn.close()
    asyncio.run(main())


def test_bad_fields_are_400_replies_and_the_connection_lives_on(regionlab):
    host, port, key = primary(regionlab)

    async def main():
        conn = await Connection.open(host, port, regionlab.key)
        for op, fields in [("read", {"item": 5, "pk": '["p"]'}), ("read", {"pk": 7, "item": "a"}),
                           ("create", {"pk": '["p"]', "body": "not bytes"}), ("read", {"pk": "nope", "item": "a"})]:
            r = await conn.request(op, key, **fields)
            assert r["status"] == 400, (op, fields, r)
        r = await conn.request("read", "not/a/replica", item="a", pk='["p"]')
        assert r["status"] == 400
        assert (await conn.request("read", key, item="a", pk='["p"]'))["status"] == 200
        await conn.close()
        # a request without a usable id cannot be answered: error frame and close
        reader, writer = await handshaken(host, port, regionlab.key)
        writer.write(D.encode(D.request(2, "x", "read", key)))
        frames = await until_closed(reader)
        assert (frames[-1]["status"], frames[-1]["sub"]) == (400, D.SUB_BAD_REQUEST_FRAME)
        # version 2 arrays of the wrong length, or with options that are not a map: 400 replies by id
        reader, writer = await handshaken(host, port, regionlab.key)
        writer.write(D.encode([D.REQUEST_CODE, 5, 0, key]) + D.encode([D.REQUEST_CODE, 6, 0, key, "a", '["p"]', None, 7])
                     + D.encode(D.request(2, 7, "read", key, item="a", pk='["p"]')))
        dec, got = D.FrameDecoder(), []
        while len(got) < 3:
            got += dec.feed(await asyncio.wait_for(reader.read(65536), CLOSE_BOUND_S))
        replies = {r["id"]: r for r in map(D.reply_fields, got)}
        assert (replies[5]["status"], replies[5]["sub"]) == (400, D.SUB_BAD_REQUEST_FRAME)
        assert replies[6]["status"] == 400 and replies[7]["status"] == 200
        writer.close()
        # an array whose code is not a request's ends the connection
        reader, writer = await handshaken(host, port, regionlab.key)
        writer.write(D.encode([D.RESPONSE_CODE, 1]))
        frames = await until_closed(reader)
        assert (frames[-1]["status"], frames[-1]["sub"]) == (400, D.SUB_BAD_FRAME)
        # and version 1 sends maps: an array request there is one too
        reader, writer = await handshaken(host, port, regionlab.key, versions=[1])
        writer.write(D.encode(D.request(2, 1, "read", key, item="a", pk='["p"]')))
        frames = await until_closed(reader)
        assert (frames[-1]["status"], frames[-1]["sub"]) == (400, D.SUB_BAD_FRAME)
        # version 2 sends requests as arrays: a map request is a protocol error
        reader, writer = await handshaken(host, port, regionlab.key)
        writer.write(D.encode({"t": "req", "id": 1, "op": "read", "replica": key}))
        frames = await until_closed(reader)
        assert (frames[-1]["status"], frames[-1]["sub"]) == (400, D.SUB_BAD_FRAME)
    asyncio.run(main())


def test_ten_thousand_request_ids_at_once_past_the_in_flight_cap_are_busy_and_nothing_leaks(regionlab):
    host, port, key = primary(regionlab)
    baseline = tasks(regionlab)
    slow_secondaries(regionlab, key, 60_000)        # the first writes stay in flight (no quorum yet)
    cap = LIMITS["max_in_flight"]

    async def main():
        conn = await Connection.open(host, port, regionlab.key)
        futs = [conn.send_request("upsert", key, pk='["p"]', body=b'{"id":"w%d","pk":"p"}' % n)
                for n in range(10_000)]
        busy = await asyncio.wait_for(asyncio.gather(*futs[cap:]), 30)
        assert {(r["status"], r["sub"]) for r in busy} == {(429, D.SUB_BUSY)}
        assert all(r["retry_after_ms"] > 0 for r in busy)
        assert sorted(r["id"] for r in busy) == list(range(cap + 1, 10_001))
        assert not any(f.done() for f in futs[:cap])   # the first `cap` are still waiting for a quorum
        conn.writer.transport.abort()                   # the client goes away mid-flight
    asyncio.run(main())
    deadline = time.monotonic() + CLOSE_BOUND_S
    while tasks(regionlab) > baseline and time.monotonic() < deadline:
        pass                                            # each poll is a round trip to the loop
    assert tasks(regionlab) <= baseline                 # the in-flight requests' tasks were cancelled


def test_a_write_waiting_for_its_quorum_does_not_hold_back_a_read_behind_it(regionlab):
    host, port, key = primary(regionlab)
    slow_secondaries(regionlab, key, 400)

    async def main():
        conn = await Connection.open(host, port, regionlab.key)
        order = []
        write = conn.send_request("upsert", key, pk='["p"]', body=b'{"id":"slow","pk":"p"}')
        read = conn.send_request("read", key, item="a", pk='["p"]')
        write.add_done_callback(lambda f: order.append("write"))
        read.add_done_callback(lambda f: order.append("read"))
        w, r = await asyncio.wait_for(asyncio.gather(write, read), 10)
        assert order == ["read", "write"] and r["status"] == 200 and w["status"] == 201
        await conn.close()
    asyncio.run(main())


def _node(emu, port: int):
    return next(n for n in emu.emulator.direct.nodes.values() if n.port == port)


def test_at_the_connection_cap_a_new_connection_sheds_the_longest_idle_one_with_a_bye(regionlab):
    host, port, key = primary(regionlab)
    node = _node(regionlab, port)

    async def main():
        conns = [await Connection.open(host, port, regionlab.key) for _ in range(LIMITS["max_connections"])]
        for c in reversed(conns):               # conns[-1] is used first: it is idle longest
            assert (await c.request("read", key, item="a", pk='["p"]'))["status"] == 200
        newcomer = await Connection.open(host, port, regionlab.key)      # admitted: a slot was freed
        await asyncio.wait_for(conns[-1]._reader_task, CLOSE_BOUND_S)     # the node said bye, then closed
        assert conns[-1].closed_with == {"t": D.BYE}
        assert (await newcomer.request("read", key, item="a", pk='["p"]'))["status"] == 200
        for c in conns[:-1]:                    # the others keep being served
            assert (await c.request("read", key, item="a", pk='["p"]'))["status"] == 200
        for c in conns[:-1] + [newcomer]:
            await c.close()
    asyncio.run(main())
    assert regionlab.call(lambda _a: node.slots.shed) == 1


def test_at_the_connection_cap_a_handshake_that_never_finishes_is_shed_first(regionlab):
    host, port, key = primary(regionlab)

    async def main():
        stalled_reader, _w = await raw(host, port)          # connected, never says hello
        conns = [await Connection.open(host, port, regionlab.key) for _ in range(LIMITS["max_connections"])]
        assert await until_closed(stalled_reader) == []     # shed for the last one: closed, nothing said
        for c in conns:                                     # every handshaken connection kept its place
            assert (await c.request("read", key, item="a", pk='["p"]'))["status"] == 200
            await c.close()
    asyncio.run(main())


def test_the_connection_cap_refuses_one_more_with_busy_only_when_every_connection_has_requests_in_flight(
        regionlab):
    host, port, key = primary(regionlab)
    node = _node(regionlab, port)
    slow_secondaries(regionlab, key, 2000)          # a write waits 2 s for its quorum: in flight meanwhile

    async def main():
        conns = [await Connection.open(host, port, regionlab.key) for _ in range(LIMITS["max_connections"])]
        writes = [c.send_request("upsert", key, pk='["p"]', body=b'{"id":"w%d","pk":"p"}' % i)
                  for i, c in enumerate(conns)]
        for _ in range(ROUND_TRIPS_MAX):             # until the node holds every write in flight
            if regionlab.call(lambda _a: node.slots.counts()["busy"]) == len(conns):
                break
            await asyncio.sleep(0)
        else:
            raise AssertionError("the writes did not all get in flight")
        reader, writer = await raw(host, port)
        frames = await until_closed(reader)
        assert (frames[-1]["status"], frames[-1]["sub"]) == (503, D.SUB_BUSY)
        assert "every one has requests in flight" in frames[-1]["message"]
        assert [w["status"] for w in await asyncio.wait_for(asyncio.gather(*writes), 10)] == [201] * len(conns)
        for c in conns:
            await c.close()
    asyncio.run(main())


def test_random_bytes_after_the_handshake_never_crash_the_node(regionlab):
    host, port, key = primary(regionlab)
    rng = random.Random(12)
    baseline = tasks(regionlab)

    async def main():
        for n in range(40):
            reader, writer = await handshaken(host, port, regionlab.key)
            blob = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
            if n % 2:                                   # a well-framed body of random bytes
                blob = struct.pack(">I", len(blob)) + blob
            writer.write(blob + D.encode({"t": "ping"}))
            frames = []
            dec = D.FrameDecoder()
            try:
                while {"t": "pong"} not in frames and not (frames and D.frame_type(frames[-1]) == "error"):
                    data = await asyncio.wait_for(reader.read(65536), CLOSE_BOUND_S)
                    if not data:
                        break
                    frames += dec.feed(data)
            except asyncio.TimeoutError:
                pass                                    # an incomplete frame: the frame timer closes it
            writer.close()
            assert all(D.frame_type(f) in ("pong", "error", "res") for f in frames), frames
        conn = await Connection.open(host, port, regionlab.key)
        assert (await conn.request("read", key, item="a", pk='["p"]'))["status"] == 200
        await conn.close()
    asyncio.run(main())
    deadline = time.monotonic() + CLOSE_BOUND_S
    while tasks(regionlab) > baseline and time.monotonic() < deadline:
        pass
    assert tasks(regionlab) <= baseline
