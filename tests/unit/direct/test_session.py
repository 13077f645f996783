"""Proves the direct session's state machine (emulator/direct/session.py) with bytes alone, no
sockets: every transition of its tables, the multiplexing rules (ids, the in-flight cap, the
request envelope), closing and the deadlines; and, as a fuzzer, its one invariant: any bytes in
any state are taken as frames or end the session with the protocol's error frame as the last
thing it says, never an exception, and fed whole or byte by byte they make it say the same."""
import struct

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regionlab.client.protocol import direct as D
from regionlab.emulator.direct import session as S

KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="
NONCE = bytes(range(D.NONCE_BYTES))
INSTANCE = "ci-1"
REPLICA = "colls/AAAAAYAAAAM=/pkranges/0/replicas/1"
LIMITS = dict(max_in_flight=2, handshake_timeout_s=5.0, idle_timeout_s=60.0, frame_timeout_s=10.0)


def session(key=KEY, now: float = 100.0) -> S.Session:
    return S.Session(S.Limits(3, "East US", INSTANCE, key, **LIMITS), NONCE, now)


def feed(s: S.Session, data: bytes) -> list:
    """What the caller gets from these bytes: the requests and refusals, in order."""
    got = []
    for f in s.receive(data):
        taken = s.frame(f)
        if taken is not None:
            got.append(taken)
    return got


def said(s: S.Session) -> list:
    """The frames the session said since last asked, decoded."""
    frames = D.FrameDecoder().feed(b"".join(s.out))
    s.out.clear()
    return frames


def ready(version: int = 2, key=KEY) -> S.Session:
    s = session(key)
    feed(s, D.encode(D.hello([version], instance=INSTANCE)))
    feed(s, D.encode(D.auth(D.handshake_mac(KEY, NONCE))))
    assert [f["t"] for f in said(s)] == [D.CHALLENGE, D.READY]
    return s


def error_of(frames: list) -> tuple:
    assert frames and frames[-1]["t"] == D.ERROR, frames
    return frames[-1]["status"], frames[-1]["sub"]


def request(version: int, rid, op=D.READ, **fields) -> bytes:
    return D.encode(D.request(version, rid, op, REPLICA, item="a", pk='["p"]', **fields))


# ---- the handshake --------------------------------------------------------------------------------
@pytest.mark.parametrize("version,state", [(1, S.READY_MAPS), (2, S.READY_ARRAYS)])
def test_hello_then_auth_make_the_session_ready_in_the_version_both_speak(version, state):
    s = session()
    assert s.state == S.HELLO
    assert feed(s, D.encode(D.hello([1, version], instance=INSTANCE))) == []
    (challenge,) = said(s)
    assert s.state == S.AUTH
    assert (challenge["t"], challenge["version"], challenge["nonce"], challenge["node"], challenge["region"],
            challenge["instance"], challenge["max_in_flight"]) == (D.CHALLENGE, version, NONCE, 3, "East US",
                                                                    INSTANCE, 2)
    assert feed(s, D.encode(D.auth(D.handshake_mac(KEY, NONCE)))) == []
    assert said(s) == [{"t": D.READY}] and s.state == state


def test_a_hello_without_an_instance_is_not_checked():
    s = session()
    feed(s, D.encode(D.hello()))
    assert said(s)[0]["t"] == D.CHALLENGE and s.state == S.AUTH


@pytest.mark.parametrize("hello,status,sub", [
    (D.hello(instance="another"), 410, D.SUB_INSTANCE_MISMATCH),
    (dict(D.hello(), instance=7), 400, D.SUB_HANDSHAKE),
    (D.hello([9, 10]), 400, D.SUB_VERSION),
    (dict(D.hello(), versions="2"), 400, D.SUB_VERSION),
])
def test_a_hello_the_node_cannot_take_ends_the_session(hello, status, sub):
    s = session()
    feed(s, D.encode(hello))
    assert error_of(said(s)) == (status, sub) and s.state == S.CLOSED


@pytest.mark.parametrize("frame", [D.auth(b"x"), {"t": "req", "id": 1, "op": "read"}, D.ping(), D.bye(),
                                   {"t": "nonsense"}, [D.REQUEST_CODE, 1, 0, REPLICA, "a", None, None, None],
                                   [7, 1]])
def test_anything_but_a_hello_first_is_a_handshake_error(frame):
    s = session()
    feed(s, D.encode(frame))
    (err,) = said(s)
    assert error_of([err]) == (400, D.SUB_HANDSHAKE) and s.state == S.CLOSED
    assert "Expected a 'hello'" in err["message"]


@pytest.mark.parametrize("frame", [D.hello(), D.ping(), {"t": "req", "id": 1, "op": "read"},
                                   [D.REQUEST_CODE, 1, 0, REPLICA, "a", None, None, None]])
def test_anything_but_an_auth_after_the_challenge_is_a_handshake_error(frame):
    s = session()
    feed(s, D.encode(D.hello()))
    said(s)
    feed(s, D.encode(frame))
    (err,) = said(s)
    assert error_of([err]) == (400, D.SUB_HANDSHAKE) and "Expected a 'auth'" in err["message"]


@pytest.mark.parametrize("mac", [b"\x00" * 32, "text", None])
def test_a_wrong_mac_is_401(mac):
    s = session()
    feed(s, D.encode(D.hello()))
    said(s)
    feed(s, D.encode({"t": D.AUTH, "mac": mac}))
    assert error_of(said(s)) == (401, 0) and s.state == S.CLOSED


def test_without_a_key_any_mac_is_taken():
    s = session(key=None)
    feed(s, D.encode(D.hello()))
    feed(s, D.encode(D.auth(b"anything")))
    assert [f["t"] for f in said(s)] == [D.CHALLENGE, D.READY]


# ---- ready ----------------------------------------------------------------------------------------
def test_a_version_2_request_is_handed_on_as_its_array_with_its_operation_named():
    s = ready(2)
    (req,) = feed(s, request(2, 7, D.CREATE, body=b"{}", session="0:0#1"))
    assert req == [D.REQUEST_CODE, 7, D.CREATE, REPLICA, "a", '["p"]', b"{}", {"session": "0:0#1"}]
    assert said(s) == []


def test_a_version_1_request_is_reshaped_as_version_2_with_its_map_as_its_options():
    s = ready(1)
    frame = D.request(1, 7, D.READ, REPLICA, item="a", pk='["p"]', session="0:0#1")
    (req,) = feed(s, D.encode(frame))
    assert req == [D.REQUEST_CODE, 7, D.READ, REPLICA, "a", '["p"]', None, frame]


def test_a_map_request_on_a_version_2_session_and_an_array_on_version_1_are_bad_frames():
    s = ready(2)
    feed(s, request(1, 1))
    err = said(s)[-1]
    assert error_of([err]) == (400, D.SUB_BAD_FRAME) and "as arrays" in err["message"]
    s = ready(1)
    feed(s, request(2, 1))
    assert error_of(said(s)) == (400, D.SUB_BAD_FRAME)


@pytest.mark.parametrize("version", [1, 2])
def test_an_array_of_another_code_is_a_bad_frame(version):
    s = ready(version)
    feed(s, D.encode([D.RESPONSE_CODE, 1]))
    err = said(s)[-1]
    assert error_of([err]) == (400, D.SUB_BAD_FRAME) and "not a request" in err["message"]


@pytest.mark.parametrize("version", [1, 2])
def test_pings_are_answered_and_pongs_taken(version):
    s = ready(version)
    assert feed(s, D.encode(D.ping()) + D.encode({"t": D.PONG}) + D.encode(D.ping())) == []
    assert said(s) == [{"t": D.PONG}, {"t": D.PONG}]


@pytest.mark.parametrize("t,sub", [(D.HELLO, D.SUB_HANDSHAKE), (D.AUTH, D.SUB_HANDSHAKE), ("nonsense", D.SUB_BAD_FRAME)])
def test_a_frame_a_ready_session_does_not_take_ends_it(t, sub):
    s = ready()
    feed(s, D.encode({"t": t}))
    err = said(s)[-1]
    assert error_of([err]) == (400, sub) and "not allowed on a ready connection" in err["message"]


# ---- multiplexing ---------------------------------------------------------------------------------
def test_an_id_in_flight_is_refused_and_the_cap_answers_busy():
    s = ready()
    (first,) = feed(s, request(2, 1))
    s.begin(1, "handle of 1")
    (dup,) = feed(s, request(2, 1))
    assert type(dup) is S.Refusal and (dup.rid, dup.error.status, dup.error.substatus) == (
        1, 400, D.SUB_BAD_REQUEST_FRAME) and not dup.fatal
    (second,) = feed(s, request(2, 2))
    s.begin(2, "handle of 2")
    (busy,) = feed(s, request(2, 3))
    assert (busy.rid, busy.error.status, busy.error.substatus, busy.error.retry_after_ms) == (
        3, 429, D.SUB_BUSY, D.BUSY_RETRY_AFTER_MS)
    s.end(1)
    assert feed(s, request(2, 3))[0][1] == 3      # room again
    assert s.state == S.READY_ARRAYS and said(s) == []


@pytest.mark.parametrize("frame", [[D.REQUEST_CODE, 1, 0], [D.REQUEST_CODE, 1, 0, REPLICA, "a", None, None, None, 9]])
def test_a_request_of_the_wrong_length_is_refused_by_its_id(frame):
    s = ready()
    (refusal,) = feed(s, D.encode(frame))
    assert (refusal.rid, refusal.error.status, refusal.error.substatus) == (1, 400, D.SUB_BAD_REQUEST_FRAME)
    assert s.state == S.READY_ARRAYS


@pytest.mark.parametrize("rid", [None, -1, 2 ** 32, "1", 1.5, True])
def test_a_request_whose_id_cannot_be_answered_ends_the_session(rid):
    s = ready()
    assert feed(s, D.encode([D.REQUEST_CODE, rid, 0, REPLICA, "a", None, None, None])) == []
    assert error_of(said(s)) == (400, D.SUB_BAD_REQUEST_FRAME) and s.state == S.CLOSED


def test_options_that_are_not_a_map_are_refused():
    s = ready()
    (refusal,) = feed(s, D.encode([D.REQUEST_CODE, 4, 0, REPLICA, "a", None, None, [1]]))
    assert (refusal.rid, refusal.op, refusal.error.status) == (4, D.READ, 400) and not refusal.fatal


@pytest.mark.parametrize("op", ["frobnicate", 99, -1, True, None, [0]])
def test_an_unknown_operation_is_refused_then_ends_the_session(op):
    s = ready()
    (refusal,) = feed(s, D.encode([D.REQUEST_CODE, 9, op, REPLICA, None, None, None, None]))
    assert refusal.fatal and (refusal.rid, refusal.error.substatus) == (9, D.SUB_BAD_REQUEST_FRAME)
    assert s.state == S.READY_ARRAYS             # the caller answers it first
    s.refused(refusal)
    err = said(s)[-1]
    assert error_of([err]) == (400, D.SUB_BAD_REQUEST_FRAME) and "Unknown operation" in err["message"]
    assert s.state == S.CLOSED and feed(s, request(2, 10)) == []


def test_a_name_is_taken_as_an_operation_in_version_2_too():
    s = ready()
    assert feed(s, D.encode([D.REQUEST_CODE, 1, D.QUERY, REPLICA, None, None, b"{}", None]))[0][2] == D.QUERY


# ---- replies and closing --------------------------------------------------------------------------
def reply(rid: int) -> list:
    return [D.RESPONSE_CODE, rid, 200, 0, b"{}", 1.0, None, 1, 1, 1, 1, None, "primary", "act", None]


@pytest.mark.parametrize("version", [1, 2])
def test_a_reply_goes_out_in_the_sessions_version(version):
    s = ready(version)
    s.send_reply(reply(5))
    (frame,) = said(s)
    assert D.reply_fields(frame)["id"] == 5 and (type(frame) is list) == (version == 2)


def test_a_reply_too_large_to_frame_goes_out_as_413():
    s = ready()
    res = reply(5)
    res[4] = b"x" * (D.FRAME_MAX_BYTES - 10)
    s.send_reply(res)
    fields = D.reply_fields(said(s)[0])
    assert (fields["id"], fields["status"], fields["sub"]) == (5, 413, D.SUB_REPLY_TOO_LARGE)


def test_bye_with_nothing_in_flight_is_answered_bye_at_once():
    s = ready()
    feed(s, D.encode(D.bye()) + request(2, 1))      # what follows a bye is not taken
    assert said(s) == [{"t": D.BYE}] and s.state == S.CLOSED


def test_bye_waits_for_the_requests_in_flight_then_says_bye():
    s = ready()
    feed(s, request(2, 1))
    s.begin(1, "handle")
    assert feed(s, D.encode(D.bye()) + request(2, 2) + D.encode(D.ping())) == []
    assert s.state == S.CLOSING and said(s) == []
    s.send_reply(reply(1))
    s.end(1)
    assert [D.frame_type(f) for f in said(s)] == [D.RESPONSE, D.BYE] and s.state == S.CLOSED
    s.send_reply(reply(2))                           # nothing more is said once closed
    assert said(s) == []


def test_the_bytes_before_a_protocol_error_are_taken_then_the_error_ends_the_session():
    s = ready()
    got = feed(s, request(2, 1) + request(2, 2) + struct.pack(">I", 0))
    assert [r[1] for r in got] == [1, 2]
    assert error_of(said(s)) == (400, D.SUB_BAD_FRAME) and s.state == S.CLOSED


# ---- deadlines ------------------------------------------------------------------------------------
def test_a_handshake_must_finish_in_time():
    s = session(now=100.0)
    assert not s.expire(104.9)
    feed(s, D.encode(D.hello()))
    assert s.expire(105.1) and error_of(said(s)) == (408, D.SUB_HANDSHAKE)


def test_a_begun_frame_must_be_complete_in_time_and_is_timed_from_the_sweep_that_saw_it():
    s = ready()
    s.tick(200.0)
    wire = D.encode(D.ping())
    feed(s, wire[:3])
    s.tick(201.0)                                   # the frame began before this sweep: timed from it
    assert not s.expire(211.0)
    feed(s, wire[3:4])                              # more of the same frame: the timer runs on
    s.tick(211.0)
    assert s.expire(211.1) and error_of(said(s)) == (408, D.SUB_IDLE)


def test_a_frame_completed_restarts_the_timer_for_the_next():
    s = ready()
    wire = D.encode(D.ping())
    feed(s, wire[:3])
    s.tick(200.0)
    feed(s, wire[3:] + wire[:2])                    # that frame completes, the next begins
    s.tick(209.0)
    assert not s.expire(215.0)
    assert s.expire(219.5)


def test_a_frame_that_began_and_completed_between_two_sweeps_is_not_timed():
    s = ready()
    wire = D.encode(D.ping())
    feed(s, wire[:3])
    feed(s, wire[3:])                               # complete before any sweep saw it begin
    s.tick(200.0)
    assert not s.expire(250.0) and said(s) == [{"t": D.PONG}]


def test_an_idle_session_is_closed_unless_a_request_is_in_flight():
    s = ready()
    s.tick(200.0)                                   # bytes came before this sweep
    assert not s.expire(259.0)
    feed(s, request(2, 1))
    s.begin(1, "handle")
    s.tick(210.0)
    assert not s.expire(400.0)                      # waiting for its own request is not idleness
    s.end(1)
    assert s.expire(400.0) and error_of(said(s)) == (408, D.SUB_IDLE)


def test_a_closed_session_has_no_deadlines():
    s = ready()
    feed(s, D.encode(D.bye()))
    assert not s.expire(10_000.0)


# ---- any bytes in any state -----------------------------------------------------------------------
def frames_for(version: int) -> st.SearchStrategy:
    """Frames a peer might send, valid and not, as bytes."""
    values = st.recursive(st.none() | st.booleans() | st.integers(-2 ** 40, 2 ** 40) | st.text(max_size=8)
                          | st.binary(max_size=8),
                          lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                                    max_size=4), max_leaves=8)
    good = st.sampled_from([D.encode(D.hello([version], instance=INSTANCE)),
                            D.encode(D.auth(D.handshake_mac(KEY, NONCE))), D.encode(D.ping()),
                            D.encode({"t": D.PONG}), D.encode(D.bye()), request(version, 1), request(version, 2),
                            request(3 - version, 3), request(version, 4, "frobnicate")])
    typed = st.builds(lambda t, v: D.encode({"t": t, "v": v}),
                      st.sampled_from([D.HELLO, D.AUTH, D.REQUEST, D.PING, "x"]), values)
    arrays = st.builds(lambda v: D.encode([D.REQUEST_CODE, *v]), st.lists(values, max_size=9))
    raw = st.builds(lambda v: struct.pack(">I", len(v)) + v, st.binary(max_size=12)) | st.binary(max_size=12)
    packed = st.builds(lambda v: struct.pack(">I", len(msgpack.packb(v))) + msgpack.packb(v), values)
    return good | typed | arrays | raw | packed


def run(data: bytes, chunks: list) -> tuple:
    """(what the session handed on, what it said, its state) after data fed in those chunks."""
    s = session()
    handed, out = [], []
    for chunk in chunks:
        for got in feed(s, chunk):
            handed.append(("refusal", got.rid, got.error.status, got.fatal) if type(got) is S.Refusal else got)
            if type(got) is S.Refusal:
                s.refused(got)
        out += said(s)
    return handed, out, s.state


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 2).flatmap(lambda v: st.lists(frames_for(v), max_size=8)))
def test_any_bytes_are_frames_or_the_protocol_error_last_the_same_whole_or_byte_by_byte(pieces):
    data = b"".join(pieces)
    whole = run(data, [data])
    assert whole == run(data, [data[i:i + 1] for i in range(len(data))])
    handed, out, state = whole
    errors = [i for i, f in enumerate(out) if type(f) is dict and f.get("t") == D.ERROR]
    if errors:                                      # an error is the last thing said, and ends it
        assert errors == [len(out) - 1] and state == S.CLOSED
        assert out[-1]["status"] in (400, 401, 410) and type(out[-1]["message"]) is str
