"""The direct protocol's contract (client/protocol/direct.py): frames round-trip, bad length
prefixes and bad msgpack are ProtocolErrors, the handshake MAC is HMAC-SHA256 of the nonce, and a
fuzzer holds the decoder's one invariant: any bytes, fed whole or byte by byte, give the same
frames or a ProtocolError, and nothing else; addresses name their emulator instance and the
hello states it only when given."""
import hashlib
import hmac
import base64
import struct

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regionlab.client.protocol import direct as D
from tiers import examples

KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="


def test_frames_round_trip_whole_and_split():
    frames = [{"t": "req", "id": i, "op": "read", "body": b"{}" * i} for i in range(5)]
    wire = b"".join(D.encode(f) for f in frames)
    assert D.FrameDecoder().feed(wire) == frames
    dec = D.FrameDecoder()
    out = []
    ends = set()
    pos = 0
    for f in frames:
        pos += len(D.encode(f))
        ends.add(pos)
    for i in range(len(wire)):
        out += dec.feed(wire[i:i + 1])
        assert dec.pending == (i + 1 not in ends)     # pending exactly while a frame is incomplete
    assert out == frames and not dec.pending


@pytest.mark.parametrize("prefix,sub", [(0, D.SUB_BAD_FRAME), (D.FRAME_MAX_BYTES + 1, D.SUB_FRAME_TOO_LARGE),
                                        (2 ** 32 - 1, D.SUB_FRAME_TOO_LARGE)])
def test_bad_length_prefix_is_refused_before_any_body_arrives(prefix, sub):
    dec = D.FrameDecoder()
    with pytest.raises(D.ProtocolError) as e:
        dec.feed(struct.pack(">I", prefix))
    assert (e.value.status, e.value.substatus) == (400, sub)
    with pytest.raises(D.ProtocolError):
        dec.feed(b"\x00")                  # a failed decoder stays failed


@pytest.mark.parametrize("body", [b"\xc1", b"\x90", msgpack.packb(["req", 1]), msgpack.packb({"x": 1}),
                                  msgpack.packb({"t": 5}), msgpack.packb({"t": "a"}) + b"\x00",
                                  msgpack.packb({1: "a", "t": "x"}), b"\xdf\xff\xff\xff\xff"])
def test_bodies_that_are_not_one_typed_map_or_coded_array_are_refused(body):
    with pytest.raises(D.ProtocolError) as e:
        D.FrameDecoder().feed(struct.pack(">I", len(body)) + body)
    assert e.value.status == 400


def test_truncated_frame_waits_and_is_pending():
    wire = D.encode({"t": "ping"})
    dec = D.FrameDecoder()
    assert dec.feed(wire[:-1]) == [] and dec.pending
    assert dec.feed(wire[-1:]) == [{"t": "ping"}]


def test_handshake_mac_is_hmac_sha256_of_the_nonce_with_the_decoded_key():
    nonce = bytes(range(32))
    want = hmac.new(base64.b64decode(KEY), nonce, hashlib.sha256).digest()
    assert D.handshake_mac(KEY, nonce) == want
    assert D.mac_matches(KEY, nonce, want)
    assert not D.mac_matches(KEY, nonce, want[:-1] + bytes([want[-1] ^ 1]))
    assert not D.mac_matches(KEY, nonce, "not bytes")


def test_version_negotiation_picks_the_highest_common_version():
    assert D.choose_version([1]) == 1
    assert D.choose_version([1, 7, 99]) == 1
    assert D.choose_version([1, 2, 99]) == 2
    assert D.choose_version([3, 4]) is None
    assert D.choose_version("1") is None
    assert D.choose_version([True]) is None


def test_version_2_requests_and_replies_are_arrays_that_name_their_fields_by_position():
    req = D.request(2, 7, "read", "colls/x/pkranges/0/replicas/1", item="a", pk='["p"]', session="0:0#5")
    assert req == [D.REQUEST_CODE, 7, D.OPERATION_CODE["read"], "colls/x/pkranges/0/replicas/1", "a", '["p"]', None,
                   {"session": "0:0#5"}]
    assert len(req) == D.REQUEST_LENGTH and D.frame_type(req) == D.REQUEST
    assert D.FrameDecoder().feed(D.encode(req)) == [req]
    v1 = D.request(1, 7, "read", "r", item="a", session="s")
    assert v1 == {"t": "req", "id": 7, "op": "read", "replica": "r", "item": "a", "session": "s"}
    values = dict(zip(D.REPLY_FIELDS, range(len(D.REPLY_FIELDS))), etag=None)
    reply = [D.RESPONSE_CODE, *values.values(), {"continuation": "c"}]
    assert len(reply) == D.REPLY_LENGTH and D.frame_type(reply) == D.RESPONSE
    named = D.reply_fields(reply)
    assert named["t"] == "res" and named["status"] == 1 and named["continuation"] == "c" and "etag" not in named
    assert D.reply_fields({"t": "res", "id": 1}) == {"t": "res", "id": 1}


def test_protocol_name_and_addresses():
    assert D.PROTOCOL != "rntbd"
    key = D.replica_key("abc=", "3", 2)
    uri = D.replica_uri("example.test", 10004, key, primary=True)
    assert uri == f"rlmp://example.test:10004/{key}p/"
    assert D.parse_uri(uri) == ("example.test", 10004, key)
    assert D.parse_uri(D.replica_uri("h", 1, key, primary=False)) == ("h", 1, key)


def test_an_address_names_its_emulator_instance_and_one_that_names_none_still_parses():
    key = D.replica_key("abc=", "0", 1)
    uri = D.replica_uri("h", 10001, key, primary=True, instance="9f2c01ab77e4d3c5")
    assert uri == f"rlmp://h:10001/apps/9f2c01ab77e4d3c5/{key}p/"
    assert D.parse_address(uri) == ("h", 10001, key, "9f2c01ab77e4d3c5")
    assert D.parse_uri(uri) == ("h", 10001, key)         # the replica key a request names: no instance
    assert D.parse_address(D.replica_uri("h", 1, key, primary=False)) == ("h", 1, key, None)
    for bad in ("rlmp://h:1/apps//" + key + "/", "rlmp://h:1/apps/a%2Fb/" + key + "/",
                "rlmp://h:1/apps/" + "x" * (D.INSTANCE_MAX_CHARS + 1) + "/" + key + "/"):
        with pytest.raises(ValueError, match="instance"):
            D.parse_address(bad)


def test_the_hello_names_the_instance_only_when_given_and_the_refusal_is_recognised():
    assert "instance" not in D.hello()                    # an older client's hello, byte for byte
    assert D.hello(instance="i-1")["instance"] == "i-1"
    refusal = {"t": D.ERROR, "status": 410, "sub": D.SUB_INSTANCE_MISMATCH, "message": "stale"}
    assert D.instance_refused(refusal)
    assert not D.instance_refused(dict(refusal, sub=D.SUB_REPLICA_NOT_HERE))
    assert not D.instance_refused({"t": D.CHALLENGE, "status": 410, "sub": D.SUB_INSTANCE_MISMATCH})
    assert D.challenge_fields({"t": D.CHALLENGE, "instance": "i-1"})["instance"] == "i-1"


def test_encode_refuses_oversized_frames():
    with pytest.raises(ValueError):
        D.encode({"t": "req", "body": b"x" * (D.FRAME_MAX_BYTES + 1)})


def _decode_all(chunks):
    dec = D.FrameDecoder(max_frame_bytes=4096)
    out = []
    try:
        for c in chunks:
            out += dec.feed(c)
    except D.ProtocolError as e:
        return out + e.frames, (e.status, e.substatus)
    return out, None


_frames = st.dictionaries(st.text(max_size=5), st.one_of(st.integers(-2 ** 63, 2 ** 64 - 1), st.binary(max_size=20), st.text(max_size=8)),
                          max_size=4).map(lambda d: dict(d, t="x"))


_arrays = st.lists(st.one_of(st.integers(0, 9), st.binary(max_size=8), st.none()), min_size=1, max_size=9)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.one_of(_frames.map(D.encode), _arrays.map(D.encode), st.binary(max_size=40)), max_size=6))
def test_fuzz_whole_and_byte_by_byte_agree_and_only_raise_protocol_error(parts):
    # The one invariant: any bytes give the same frames (then the same ProtocolError, if any)
    # whether fed whole or a byte at a time; nothing but ProtocolError is ever raised.
    wire = b"".join(parts)
    whole = _decode_all([wire])
    bytewise = _decode_all([wire[i:i + 1] for i in range(len(wire))])
    assert whole == bytewise
    for frame in whole[0]:
        assert (isinstance(frame, dict) and isinstance(frame["t"], str)) or \
            (isinstance(frame, list) and type(frame[0]) is int)
