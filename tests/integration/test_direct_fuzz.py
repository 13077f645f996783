"""Invariant: nothing a client sends to a direct-mode node — before, during or after the
handshake — gets a 5xx reply (no region is out, so the service would answer none), an unframed
drop with a traceback in the log, or stops the node from serving a normal client.

Hypothesis drives a real regionlab's nodes over real sockets. Each example opens a connection and
sends a sequence of frames: hellos and auths with fields of every msgpack type, request frames in
both protocol versions with every field mutated (op, replica, item, partition key, body,
options), values nested far past any limit, declared container lengths the frame does not hold,
length prefixes of 0, past the frame limit or longer than what follows, and plain garbage. It
then reads what the node answers until it closes the connection or answers a ping. A normal
direct client's read must succeed after every example.

For a long run: REGIONLAB_FUZZ_EXAMPLES=100000 python -m pytest tests/integration/test_direct_fuzz.py -s
"""
import asyncio
import collections
import logging
import os
import struct

import msgpack
import pytest
from azure.cosmos import PartitionKey
from hypothesis import HealthCheck, example, given, settings, strategies as st

from direct_client import Connection, feed, target
from fuzz_json import JSONISH, production_recursion_limit, texts
from regionlab.client.protocol import direct as D
from sdk_harness import make_client
from tiers import examples

FUZZ_EXAMPLES = int(os.environ.get("REGIONLAB_FUZZ_EXAMPLES", examples(150)))
READ_TIMEOUT_S = 20.0        # generous on a loaded machine; a node that never answers still fails
DEPTHS = st.sampled_from([1, 2, 31, 32, 33, 127, 128, 129, 900, 995, 1000, 1023, 1024, 3000])
IDS = ("a", "b")

_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 63, 2 ** 64 - 1), st.floats(), texts(12),
                    st.binary(max_size=40), st.sampled_from(["a", "p", "[\"p\"]", D.READ, D.CREATE, "Session"]))
_VALUE = st.recursive(_SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.dictionaries(st.one_of(texts(6), st.integers(-2, 9)),
                                                                     inner, max_size=4)),
                      max_leaves=10)


class Deep:
    """A value nested `depth` containers deep: msgpack's packer stops at 511 levels, so _packed
    splices the bytes in by hand."""

    def __init__(self, depth: int, kind: str):
        self.depth, self.kind = depth, kind
        self.token = f"\x00deep{id(self)}"

    def raw(self) -> bytes:
        return (b"\x91" if self.kind == "list" else b"\x81\xa1k") * self.depth + b"\xa1x"


def _nested(depth: int, kind: str):
    return Deep(depth, kind)


_HOSTILE = st.one_of(_VALUE, st.builds(_nested, DEPTHS, st.sampled_from(["list", "map"])))


# ---- frames --------------------------------------------------------------------------------------
def _framed(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def _packed(value) -> bytes:
    deep: list = []

    def splice(obj):
        deep.append(obj)
        return obj.token
    packed = msgpack.packb(value, use_bin_type=True, default=splice)
    for d in deep:
        packed = packed.replace(msgpack.packb(d.token), d.raw(), 1)
    return packed


@st.composite
def hellos(draw):
    frame = D.hello(draw(st.sampled_from([D.PROTOCOL_VERSIONS, (1,), (2,), (3,), ()])))
    for name in draw(st.lists(st.sampled_from(["versions", "agent", "instance", "extra", "versions", "t"]),
                              min_size=1, max_size=2)):
        frame[name] = draw(_HOSTILE)
    return frame


@st.composite
def requests(draw, version: int, replica: str):
    op = draw(st.one_of(st.sampled_from(D.OPERATION_CODES), _HOSTILE))
    if version >= D.COMPACT_VERSION and isinstance(op, str):
        op = D.OPERATION_CODE.get(op, op)
    fields = dict(rid=draw(st.one_of(st.integers(0, 2 ** 33), _HOSTILE)), op=op,
                  replica=draw(st.one_of(st.just(replica), st.just(replica + "x"), _HOSTILE)),
                  item=draw(st.one_of(st.sampled_from(IDS), st.none(), _HOSTILE)),
                  pk=draw(st.one_of(st.just('["p"]'), st.none(), _HOSTILE)),
                  body=draw(st.one_of(st.none(), JSONISH.map(lambda t: t.encode("utf-8", "surrogatepass")), _HOSTILE)))
    options = draw(st.dictionaries(st.sampled_from(sorted(set(D.REQUEST_OPTIONS) - {"pk"})), _HOSTILE, max_size=2))
    if version >= D.COMPACT_VERSION:        # by hand: D.request maps the op by its name
        frame = [D.REQUEST_CODE, fields["rid"], op, fields["replica"], fields["item"], fields["pk"],
                 fields["body"], options or None]
    else:
        frame = D.request(version, **fields, **options)
    if isinstance(frame, list) and draw(st.integers(0, 4)) == 0:        # a wrong shape of array
        frame = frame[:draw(st.integers(0, len(frame)))] + draw(st.lists(_HOSTILE, max_size=2))
    return frame


@st.composite
def raw_frames(draw) -> bytes:
    """Bytes that are not one well-formed frame."""
    kind = draw(st.integers(0, 5))
    if kind == 0:                                   # declared lengths the frame does not hold
        return _framed(draw(st.sampled_from([b"\xdd\xff\xff\xff\xff", b"\xdf\x7f\xff\xff\xff", b"\xc6\x7f\xff\xff\xff",
                                             b"\xdb\xff\xff\xff\xf0abc", b"\x91", b"\xc1", b"\x81\xa1t"])))
    if kind == 1:                                   # length prefixes: zero, past the limit, too long
        return draw(st.sampled_from([struct.pack(">I", 0), struct.pack(">I", D.FRAME_MAX_BYTES + 1),
                                     struct.pack(">I", 2 ** 32 - 1), struct.pack(">I", 50) + b"\x80"]))
    if kind == 2:
        return _framed(draw(st.binary(max_size=64)))
    if kind == 3:                                   # valid msgpack, not a frame of ours
        return _framed(_packed(draw(_HOSTILE)))
    if kind == 4:                                   # a frame whose type is right, the rest not
        return _framed(_packed({"t": draw(st.sampled_from([D.HELLO, D.AUTH, D.REQUEST, D.PING, D.BYE, "x"])),
                                **draw(st.dictionaries(texts(6), _HOSTILE, max_size=3))}))
    return draw(st.binary(min_size=1, max_size=32))


@st.composite
def sessions(draw, replica: str):
    """(handshake: "none" / "fuzzed" / "done", [bytes to send after it])."""
    stage = draw(st.sampled_from(["none", "fuzzed", "fuzzed", "done", "done"]))
    frames = []
    if stage == "fuzzed":
        frames.append(_framed(_packed(draw(hellos()))))
    for _ in range(draw(st.integers(1, 4))):
        choice = draw(st.integers(0, 3))
        if stage == "done" and choice <= 1:
            version = draw(st.sampled_from(D.PROTOCOL_VERSIONS))
            frames.append(_framed(_packed(draw(requests(version, replica)))))
        else:
            frames.append(draw(raw_frames()))
    return stage, frames


# ---- the wire ------------------------------------------------------------------------------------
async def _drain(conn: Connection) -> list:
    """Every frame the node sends until it closes the connection or answers our ping."""
    got = []
    try:
        conn.writer.write(D.encode({"t": D.PING}))
        while True:
            frame = await asyncio.wait_for(conn.next_frame(), READ_TIMEOUT_S)
            got.append(frame)
            if isinstance(frame, dict) and frame.get("t") in (D.PONG, D.ERROR, D.BYE):
                return got
    except (ConnectionError, OSError, D.ProtocolError):
        return got


async def _one(host: str, port: int, key: str, stage: str, frames: list) -> list:
    reader, writer = await asyncio.open_connection(host, port)
    conn = Connection(reader, writer)            # read by hand: its read loop is never started
    try:
        if stage == "done":
            writer.write(D.encode(D.hello()))
            challenge = await conn.next_frame()
            writer.write(D.encode({"t": D.AUTH, "mac": D.handshake_mac(key, challenge["nonce"])}))
            assert (await conn.next_frame())["t"] == D.READY
        for data in frames:
            conn.writer.write(data)
        return await _drain(conn)
    finally:
        conn.writer.close()


async def _normal_read(host: str, port: int, key: str, replica: str) -> dict:
    conn = await Connection.open(host, port, key)
    try:
        return await conn.request(D.READ, replica, item="a", pk='["p"]')
    finally:
        await conn.close()


def _status(frame):
    if isinstance(frame, dict) and frame.get("t") == D.ERROR:
        return frame.get("status")
    if D.frame_type(frame) == D.RESPONSE:
        return D.reply_fields(frame).get("status")
    return None


# A half-sent frame or handshake is closed by the node's deadline (10 s / 5 s by default): short
# ones here, so that each such case takes a fraction of a second, not the default's wait.
@pytest.mark.regionlab_config(direct_limits={"frame_timeout_s": 0.5, "handshake_timeout_s": 0.5})
def test_no_frame_on_a_direct_port_answers_5xx_or_logs_an_error(regionlab, caplog):
    with make_client(regionlab) as client:
        c = client.create_database("db").create_container("items", PartitionKey(path="/pk"))
        for item_id in IDS:
            c.create_item({"id": item_id, "pk": "p"})
    host, port, replica = target(feed(regionlab)["0"]["primary"])
    caplog.set_level(logging.WARNING)
    statuses: collections.Counter = collections.Counter()
    loop = asyncio.new_event_loop()

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(session=sessions(replica))
    @example(session=("fuzzed", [_framed(_packed({**D.hello(), "versions": Deep(995, "list")}))]))
    @example(session=("done", [_framed(_packed({"t": D.REQUEST, "id": 1, "op": Deep(1000, "list"), "replica": replica}))]))
    @example(session=("done", [_framed(_packed({"t": D.REQUEST, "id": 1, "op": D.READ, "replica": Deep(1000, "map")}))]))
    def one(session):
        stage, frames = session
        caplog.clear()
        with production_recursion_limit():
            got = loop.run_until_complete(_one(host, port, regionlab.key, stage, frames))
        for frame in got:
            statuses[_status(frame)] += 1
        fives = [f for f in got if (_status(f) or 0) >= 500]
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
        assert not fives, (stage, [f[:120] for f in frames], fives)
        assert not errors, (stage, [f[:120] for f in frames], [r.getMessage()[:2000] for r in errors])
        assert loop.run_until_complete(_normal_read(host, port, regionlab.key, replica))["status"] == 200

    try:
        one()
    finally:
        loop.close()
    print(f"\ndirect port: {FUZZ_EXAMPLES} examples, reply statuses {dict(statuses)}")
