"""One direct-mode client cannot freeze or bloat a node for the others: a giant frame before the
handshake is refused from its length prefix, never read or decoded; values nested past Python's
recursion limit get an error frame or a 400, never a traceback; a peer that does not read its
replies holds about one write-buffer mark of them, not all it asked for. Real emulator, real
sockets; the node's own transports are inspected on its loop (`emu.call`)."""
import asyncio
import logging
import struct
import threading

import msgpack
import pytest
from azure.cosmos import PartitionKey

from regionlab.client.protocol import direct as D
from direct_client import Connection, addresses, by_range, target
from sdk_harness import make_client

REPLY_TIMEOUT_S = 10.0
GIANT_HELLO_BYTES = 6_900_000            # the size the issue measured: 1.6 s of the loop to decode


def primary(emu, item: dict | None = None):
    with make_client(emu) as client:
        c = client.create_database("db").create_container("items", PartitionKey(path="/pk"))
        c.create_item(item or {"id": "a", "pk": "p"})
    status, feed = addresses(emu.endpoint, emu.key, "db", "items")
    assert status == 200
    return target(by_range(feed)["0"]["primary"])


def giant_hello() -> bytes:
    """A well-formed hello frame of ~6.9 MB: a map of a million tiny entries besides its own."""
    n = (GIANT_HELLO_BYTES - 64) // 8
    body = msgpack.packb({"t": "hello", "versions": [1, 2], **{f"k{i:05x}": 0 for i in range(n)}})
    assert PRE_READY_LIMIT < len(body) <= D.FRAME_MAX_BYTES
    return struct.pack(">I", len(body)) + body


PRE_READY_LIMIT = D.PRE_READY_FRAME_MAX_BYTES


async def frames_until_closed(reader, timeout_s: float = REPLY_TIMEOUT_S) -> list:
    """Every frame the node sends until it closes (a reset ends it too, and so does a broken pipe:
    the node closed while our giant frame was still being written)."""
    decoder = D.FrameDecoder()
    frames = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        try:
            data = await asyncio.wait_for(reader.read(65536), max(0.01, deadline - loop.time()))
        except (ConnectionResetError, BrokenPipeError):
            return frames
        if not data:
            return frames
        frames += decoder.feed(data)


def test_a_frame_over_the_pre_ready_limit_is_refused_from_its_length_prefix(regionlab):
    host, port, _ = primary(regionlab)
    frame = giant_hello()

    async def main():
        for before_auth in (False, True):
            reader, writer = await asyncio.open_connection(host, port)
            if before_auth:                             # in the AUTH state: after a hello
                writer.write(D.encode(D.hello()))
            writer.write(frame[:D.LENGTH_PREFIX_BYTES + 1024])     # the prefix and 1 KB: no more
            frames = await frames_until_closed(reader)
            assert frames and frames[-1]["t"] == D.ERROR, frames
            assert (frames[-1]["status"], frames[-1]["sub"]) == (400, D.SUB_FRAME_TOO_LARGE), frames[-1]
            assert str(PRE_READY_LIMIT) in frames[-1]["message"]
            writer.close()
    asyncio.run(main())


def test_giant_hellos_are_never_decoded_and_a_normal_client_reads_meanwhile(regionlab):
    """Four attackers send 6.9 MB hellos, three rounds each, while a normal client reads: no
    attacker is answered a challenge (the node never decoded its frame), the reads go on."""
    host, port, key = primary(regionlab)
    frame = giant_hello()

    async def attacker(answers: list) -> None:
        for _ in range(3):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(frame)
            answers.append([D.frame_type(f) for f in await frames_until_closed(reader)])
            writer.close()

    async def main():
        conn = await Connection.open(host, port, regionlab.key)
        answers: list = []
        attack = asyncio.gather(*(attacker(answers) for _ in range(4)))
        reads = []
        while not attack.done() or not reads:
            reads.append((await conn.request("read", key, item="a", pk='["p"]'))["status"])
        await attack
        assert len(answers) == 12
        assert all(D.CHALLENGE not in a for a in answers), answers      # none was decoded
        assert set(reads) == {200}
        await conn.close()
    asyncio.run(main())


def nested(depth: int) -> bytes:
    """msgpack of a value nested `depth` arrays deep (msgpack's own packer stops short of it)."""
    return b"\x91" * depth + b"\x00"


def framed(*parts: bytes) -> bytes:
    body = b"".join(parts)
    return struct.pack(">I", len(body)) + body


def request_with(rid: int, *, op: bytes = msgpack.packb(0), replica: bytes) -> bytes:
    """A version 2 read request whose op or replica is given as msgpack bytes."""
    p = msgpack.packb
    return framed(b"\x98", p(D.REQUEST_CODE), p(rid), op, replica, p("a"), p('["p"]'), p(None), p(None))


@pytest.mark.parametrize("depth", [995, 1000, 1023])      # with its frame: up to msgpack's 1024
def test_values_nested_past_the_recursion_limit_get_an_error_frame_or_a_400_and_no_traceback(
        regionlab, caplog, depth):
    caplog.set_level(logging.WARNING)
    host, port, key = primary(regionlab)
    deep = nested(depth)
    p = msgpack.packb

    async def main():
        # versions in the hello: no version in common
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(framed(b"\x82", p("t"), p(D.HELLO), p("versions"), deep))
        frames = await frames_until_closed(reader)
        assert (frames[-1]["t"], frames[-1]["status"], frames[-1]["sub"]) == (D.ERROR, 400, D.SUB_VERSION), frames
        writer.close()
        # op: an unknown operation, answered 400 by id, then an error frame and a close
        conn = await Connection.open(host, port, regionlab.key)
        conn.writer.write(request_with(7, op=deep, replica=p(key)))
        await asyncio.wait_for(conn._reader_task, REPLY_TIMEOUT_S)
        assert conn.arrivals == [7]
        assert (conn.closed_with["t"], conn.closed_with["status"]) == (D.ERROR, 400), conn.closed_with
        assert "an array of 1 element" in conn.closed_with["message"]
        # replica: a 400 reply, and the connection lives on
        conn = await Connection.open(host, port, regionlab.key)
        reply = conn._waiting[7] = asyncio.get_running_loop().create_future()
        conn.writer.write(request_with(7, replica=deep))
        r = await asyncio.wait_for(reply, REPLY_TIMEOUT_S)
        assert r["status"] == 400 and b"replica" in r["body"], r
        assert (await conn.request("read", key, item="a", pk='["p"]'))["status"] == 200
        await conn.close()
    asyncio.run(main())
    node_thread = regionlab.call(lambda account: threading.get_ident())     # not another test's leftovers
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR and r.thread == node_thread], \
        caplog.text[:3000]


def node_transports(emu, port: int) -> list:
    """(write buffer bytes, reading?) of each connection of the node on `port`, on its loop."""
    def look(account):
        nodes = [n for n in emu.emulator.direct.nodes.values() if n.port == port]
        return [(c.transport.get_write_buffer_size(), c.transport.is_reading()) for c in nodes[0].connections]
    return emu.call(look)


def test_a_peer_that_does_not_read_holds_about_one_mark_of_replies_and_gets_them_all_later(regionlab):
    """2,000 pipelined reads of a 64 KB item ask for 128 MB of replies; a client that reads none
    leaves the node holding about the write buffer mark (1 MiB) and one reply besides, not all
    of them; once it reads, every reply comes, in order."""
    host, port, key = primary(regionlab, {"id": "big", "pk": "p", "pad": "x" * 64_000})
    count = 2000

    async def main():
        conn = await Connection.open(host, port, regionlab.key)
        conn._reader_task.cancel()                      # the client reads nothing for now
        try:
            await conn._reader_task
        except asyncio.CancelledError:
            pass
        ids = range(1, count + 1)
        conn.writer.write(b"".join(D.encode(D.request(conn.version, rid, "read", key, item="big", pk='["p"]'))
                                   for rid in ids))
        while True:                                     # until the node stopped reading it
            (buffered, reading), = await asyncio.to_thread(node_transports, regionlab, port)
            if not reading:
                break
        assert buffered <= 3 * 1024 * 1024, f"{buffered / 1e6:.1f} MB buffered for one peer"
        got = []
        while len(got) < count:                         # now it reads: everything comes
            got += [D.reply_fields(f) for f in conn.decoder.feed(
                await asyncio.wait_for(conn.reader.read(1 << 20), REPLY_TIMEOUT_S))]
        assert [r["id"] for r in got] == list(ids) and {r["status"] for r in got} == {200}
        conn.writer.close()
    asyncio.run(main())


def test_a_string_field_past_the_limit_is_an_error_frame(regionlab):
    host, port, key = primary(regionlab)

    async def main():
        conn = await Connection.open(host, port, regionlab.key)
        assert (await conn.request("read", key, item="a", pk='["p"]'))["status"] == 200
        conn.send_request("read", key, item="a", pk='["' + "x" * D.STRING_MAX_BYTES + '"]')
        await asyncio.wait_for(conn._reader_task, REPLY_TIMEOUT_S)
        assert (conn.closed_with["t"], conn.closed_with["status"], conn.closed_with["sub"]) == \
            (D.ERROR, 400, D.SUB_BAD_FRAME), conn.closed_with
        assert f"strings at most {D.STRING_MAX_BYTES} bytes" in conn.closed_with["message"]
    asyncio.run(main())


def test_huge_keys_leave_the_caches_bounded_after_the_client_left(regionlab):
    """300 reads naming 60 KB partition keys, session tokens and spellings of a replica key: what
    the node keeps of them once the client is gone is bounded by the caches' byte budgets
    (core/cache.py; 14 MiB at most for these), not 300 times 60 KB per cache."""
    host, port, key = primary(regionlab)
    n, size = 300, 60_000
    coll_rid, range_id, index = key.split("/")[1::2]

    async def main():
        conn = await Connection.open(host, port, regionlab.key)
        futs = []
        for i in range(n):
            pad = f"{i:05d}" + "x" * size
            futs.append(conn.send_request("read", key, item="a", pk=f'["{pad}"]', session=f"{pad}:-1#1"))
            # Python reads at most 4,300 digits as an int: more were a traceback, not a 400
            zeros = "0" * (3_900 + i if i < n - 1 else size)
            futs.append(conn.send_request("read", f"colls/{coll_rid}/pkranges/{range_id}/replicas/{zeros}{index}",
                                          item="a", pk='["p"]'))
        replies = await asyncio.wait_for(asyncio.gather(*futs), 60)
        assert {r["status"] for r in replies[0::2]} == {404}          # no such item under those keys
        assert {r["status"] for r in replies[1::2]} == {400}          # one spelling of an index: "0" to "3"
        await conn.close()

    import gc
    import tracemalloc
    emu_gc = lambda account: gc.collect()              # noqa: E731 (collected on the node's loop)
    tracemalloc.start()
    try:
        regionlab.call(emu_gc)
        before = tracemalloc.get_traced_memory()[0]
        asyncio.run(main())
        regionlab.call(emu_gc)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept <= 20 * 1024 * 1024, f"{kept / 1e6:.0f} MB kept after the client left"
