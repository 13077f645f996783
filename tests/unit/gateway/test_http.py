"""The gateway's HTTP connection (emulator/gateway/http.py) frames requests in work linear in
the bytes received, however a client splits them: a chunked body trickled byte by byte is handed
to the decoder as it comes (nothing piles up to be re-parsed, and each byte is scanned a bounded
number of times), and a trickled head is searched only where it grew. A new connection that
never sends a byte is closed by the sweep after the header timeout (under pressure, after the
short deadline); a listener at its cap sheds the oldest silent connection, else the one idle
longest, for a new one, and turns it away with a 503 that says why only when every slot is busy.

Deterministic: the Connection is driven by direct data_received calls on a recording transport,
and the sweep by explicit `now` values; the loop only exists because protocols want one.
"""
import asyncio
import json

from regionlab.emulator.service import responses
from regionlab.emulator.gateway.http import HttpServer
from regionlab.emulator.gateway.refusal import TurnedAway
from recording_transport import RecordingTransport

SCANS_PER_BYTE_MAX = 2
HEADER_TIMEOUT_S = 10.0


def _server(**kwargs) -> tuple[HttpServer, list]:
    seen = []

    async def handler(req):
        seen.append(req)
        return responses.Reply(200, {}, b"%d" % len(req.body))
    return HttpServer(handler, header_timeout_s=HEADER_TIMEOUT_S, **kwargs), seen


def _connect(server):
    conn = server()
    transport = RecordingTransport()
    conn.connection_made(transport)
    return conn, transport


def _run(fn):
    async def main():
        return fn()
    return asyncio.run(main())


def _chunked_request(pieces) -> tuple[bytes, bytes]:
    head = b"POST /dbs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
    return head, body


def test_a_chunked_body_trickled_byte_by_byte_is_framed_in_linear_work():
    pieces = [b"ab"] * 3000

    def run():
        server, seen = _server()
        conn, transport = _connect(server)
        head, body = _chunked_request(pieces)
        conn.data_received(head)
        held_max, scanned = 0, 0
        for i in range(len(body)):
            conn.data_received(body[i:i + 1])
            held_max = max(held_max, len(conn.buf))       # bytes waiting to be re-parsed
            chunks = getattr(conn, "chunks", None)
            if chunks is not None:
                scanned = chunks.scanned
        return seen, transport, held_max, scanned, len(body)
    seen, transport, held_max, scanned, fed = _run(run)
    assert [len(r.body) for r in seen] == [6000] and seen[0].body == b"ab" * 3000
    assert held_max == 0
    assert 0 < scanned <= SCANS_PER_BYTE_MAX * fed
    assert transport.written.startswith(b"HTTP/1.1 200 ") and transport.written.endswith(b"6000")


def test_a_head_trickled_byte_by_byte_is_searched_only_where_it_grew():
    head = b"GET /dbs HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 40) for i in range(200)) + b"\r\n"

    def run():
        server, seen = _server()
        conn, transport = _connect(server)
        resumes = []
        for i in range(len(head) - 1):
            conn.data_received(head[i:i + 1])
            resumes.append(getattr(conn, "head_scanned", -1) == len(conn.buf) and isinstance(conn.buf, bytearray))
        conn.data_received(head[-1:])
        return seen, transport, resumes
    seen, transport, resumes = _run(run)
    assert all(resumes[1:])            # every later search starts where the last one stopped
    assert len(seen) == 1 and seen[0].headers["x-h199"] == "v" * 40
    assert transport.written.startswith(b"HTTP/1.1 200 ")


def test_a_bad_request_line_trickled_is_refused_when_its_line_ends():
    def run():
        server, seen = _server()
        conn, transport = _connect(server)
        for b in b"GET /x HTTP/9.9\r":
            conn.data_received(bytes([b]))
        before = transport.written
        conn.data_received(b"\n")
        return seen, before, transport
    seen, before, transport = _run(run)
    assert seen == [] and before == b""
    assert transport.written.startswith(b"HTTP/1.1 400 ") and b"Unsupported HTTP version" in transport.written


def test_a_connection_that_never_sends_is_closed_silently_after_the_header_timeout():
    def run():
        server, _seen = _server()
        conn, transport = _connect(server)
        t0 = conn.since
        early = server.sweep(t0 + HEADER_TIMEOUT_S - 1), transport.closed
        late = server.sweep(t0 + HEADER_TIMEOUT_S + 1), transport.closed
        return t0, early, late, transport.written
    t0, early, late, written = _run(run)
    assert t0 > 0
    assert early == (0, False)
    assert late == (1, True)
    assert written == b""


def _busy(conn) -> None:
    """Give conn a request in progress: a complete head whose body has not arrived."""
    conn.data_received(b"POST /dbs HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")


def test_a_listener_whose_every_slot_is_busy_turns_the_next_connection_away_with_a_503_until_one_closes():
    def run():
        server, _seen = _server(connections_max=2)
        (a, _), (b, _) = _connect(server), _connect(server)
        _busy(a)
        _busy(b)
        refused = server()
        refused_transport = RecordingTransport()
        refused.connection_made(refused_transport)
        a.connection_lost(None)
        after = server()
        refused.connection_lost(None)
        return refused, refused_transport, after, server.refusals
    refused, transport, after, refusals = _run(run)
    assert isinstance(refused, TurnedAway)
    head, _, body = transport.written.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 ") and b"Connection: close" in head
    message = json.loads(body)["message"]
    assert "at most 2 at once" in message and "every one has a request in progress" in message
    assert transport.eof and not transport.closed           # lingering: reads and drops the request
    assert not isinstance(after, TurnedAway)
    assert refusals.turned_away == 1 and not refusals.lingering


def test_at_the_cap_a_new_connection_sheds_the_oldest_silent_one_then_the_longest_idle():
    get = b"GET /dbs HTTP/1.1\r\nHost: x\r\n\r\n"

    def run():
        server, seen = _server(connections_max=3)
        (idle_old, t_idle_old), (idle_new, t_idle_new), (_silent, t_silent) = (_connect(server) for _ in range(3))
        idle_old.data_received(get)                # answered: idle, the longest
        idle_new.data_received(get)
        partial, t_partial = _connect(server)      # sheds the silent one, not an idle one
        steps = [(t_silent.closed, t_idle_old.closed, t_idle_new.closed)]
        partial.data_received(get[:20])            # part of a head: still silent
        _fresh, t_fresh = _connect(server)         # sheds it
        steps.append((t_partial.closed, t_idle_old.closed, t_idle_new.closed))
        _connect(server)                           # sheds the silent 'fresh', not an idle one
        steps.append((t_fresh.closed, t_idle_old.closed, t_idle_new.closed))
        return steps, len(seen), server.slots.shed, server.slots.counts(), server.refusals.turned_away
    steps, served, shed, counts, turned_away = _run(run)
    assert served == 2
    assert steps == [(True, False, False)] * 3
    assert (shed, turned_away) == (3, 0)
    assert counts == {"silent": 1, "idle": 2, "busy": 0}


def test_with_only_idle_and_busy_connections_the_longest_idle_is_shed():
    def run():
        server, _seen = _server(connections_max=3)
        (a, ta), (b, tb), (c, tc) = (_connect(server) for _ in range(3))
        for conn in (b, a):                         # b is answered first: idle longest
            conn.data_received(b"GET /dbs HTTP/1.1\r\nHost: x\r\n\r\n")
        _busy(c)
        new = server()
        new.connection_made(RecordingTransport())
        return ta.closed, tb.closed, tc.closed, isinstance(new, TurnedAway), server.slots.counts()
    a_closed, b_closed, c_closed, refused, counts = _run(run)
    assert (a_closed, b_closed, c_closed, refused) == (False, True, False, False)
    assert counts == {"silent": 1, "idle": 1, "busy": 1}


def test_under_pressure_the_sweep_sheds_connections_silent_past_the_short_deadline():
    from regionlab.emulator.core.limits import SILENT_DEADLINE_UNDER_PRESSURE_S

    def run():
        calm, _ = _server(connections_max=8)
        quiet, quiet_t = _connect(calm)             # 1 of 8: no pressure, the header timeout holds
        calm_early = calm.sweep(quiet.since + SILENT_DEADLINE_UNDER_PRESSURE_S + 1), quiet_t.closed
        pressed, _ = _server(connections_max=4)
        conns = [_connect(pressed) for _ in range(3)]       # 3 of 4: under pressure
        conns[2][0].data_received(b"GET /dbs HTTP/1.1\r\nHost: x\r\n\r\n")   # served: idle, not silent
        t0 = max(conn.since for conn, _ in conns)
        early = pressed.sweep(t0 + SILENT_DEADLINE_UNDER_PRESSURE_S - 0.5)
        late = pressed.sweep(t0 + SILENT_DEADLINE_UNDER_PRESSURE_S + 0.5)
        return calm_early, early, late, [t.closed for _, t in conns], [t.written for _, t in conns[:2]]
    calm_early, early, late, closed, written = _run(run)
    assert calm_early == (0, False)
    assert (early, late) == (0, 2)
    assert closed == [True, True, False]
    assert written == [b"", b""]                    # nothing was asked, so nothing is answered
