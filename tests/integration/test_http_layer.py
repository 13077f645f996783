"""The gateway's own HTTP/1.1 layer (emulator/gateway/http.py) keeps its promises on real sockets:
pipelined requests are answered in order on one connection (after a request without a body
too), chunked bodies are framed and bad framing is refused with nothing stored,
`Expect: 100-continue` is honoured, HEAD sends no body, `Connection` semantics of HTTP/1.1 and 1.0
hold (a client that half-closes while its reply is held is answered, then closed), an oversized head is 431, TLS on the plain port is 400 with a hint, an oversized body is 413
that the client can read while still sending, the sweep closes idle keep-alives and answers 408
to a stalled body, and a region outage closes the region's open connections before the control
call returns.

Requests are signed by hand and written to a bare socket; replies are read off it one at a time,
framed by Content-Length. Timeouts are driven by calling the endpoint's `HttpServer.sweep(now)`
on the emulator's loop with explicit `now` values; the only waits are blocking socket reads.
(Garbage bytes, a client vanishing mid-body, the real header timeout and 413 for an item over
2 MB are in test_bad_input.py.)
"""
import json
import logging
import socket
import ssl
import urllib.request

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sdk_harness import (RawReply, assert_serves, host_port, item_count, raw_socket, read_until_eof,
                         signed_headers)
from tiers import examples

DOCS = "/dbs/db/colls/items/docs"
PK_P = {"x-ms-documentdb-partitionkey": '["p"]'}
PIPELINE_READ_TIMEOUT_S = 2.0        # a pipelined reply that is coming at all comes within this
REQUEST_HEAD_MAX_BYTES = 64 * 1024   # emulator/core/limits.py; restated: the test states the contract


# ---- raw HTTP on a bare socket -------------------------------------------------------------------
def _head(method: str, path: str, headers: dict, version: str = "HTTP/1.1") -> bytes:
    lines = [f"{method} {path} {version}", "Host: localhost", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _signed(emu, method: str, path: str, body: bytes | None = None, extra: dict | None = None,
            version: str = "HTTP/1.1") -> bytes:
    """A whole signed request: head and, if any, a Content-Length body."""
    headers = signed_headers(emu.key, method, path, extra)
    if body is not None:
        headers.update({"content-type": "application/json", "content-length": str(len(body))})
    return _head(method, path, headers, version) + (body or b"")


def _doc(item_id: str) -> bytes:
    return json.dumps({"id": item_id, "pk": "p"}).encode()


def _chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%X;ext=1\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


class _Replies:
    """The replies on one connection, read one at a time (framed by Content-Length), so that a
    test sees exactly which reply came when and whether anything followed it."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError(f"the server closed the connection; unread: {self.buf[:200]!r}")
        self.buf += chunk

    def next(self, head_only: bool = False) -> RawReply:
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        status_line, *lines = head.decode("latin-1").split("\r\n")
        version, status, _reason = status_line.split(" ", 2)
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = 0 if head_only else int(headers.get("content-length", "0"))
        while len(self.buf) < length:
            self._fill()
        body, self.buf = self.buf[:length], self.buf[length:]
        reply = RawReply(int(status), headers, body)
        reply.version = version
        return reply

    def closed(self) -> bool:
        """Nothing more was sent and the server closed the connection (a reset counts)."""
        assert self.buf == b"", f"unexpected bytes after the last reply: {self.buf[:200]!r}"
        try:
            return self.sock.recv(65536) == b""
        except ConnectionResetError:
            return True


# ---- the endpoint's HttpServer, on the emulator's loop -------------------------------------------
def _http_server(emu, region=None):
    return emu.emulator._listeners[region][0]


def _connection(server, client_sock):
    """The server's Connection for a client socket. Call on the emulator's loop."""
    me = client_sock.getsockname()
    found = [c for c in server.connections
             if c.transport is not None and c.transport.get_extra_info("peername") == me]
    assert len(found) == 1, f"no server connection for {me}"
    return found[0]


def _own_the_sweep(emu) -> None:
    """Stop the runtime's once-a-second sweep, so that only the test's explicit sweep(now) calls
    move a connection's timers."""
    emu.call(lambda _account: emu.emulator._sweeper.cancel())


def _refused_then_closed(replies: "_Replies", status: int, needle: str) -> None:
    """The next reply refuses the request with `status`, says `needle`, and the server closes."""
    reply = replies.next()
    assert reply.status == status, reply
    assert needle in reply.message, reply.message
    assert reply.headers.get("connection") == "close"
    assert replies.closed()


def _stored(emu) -> int:
    return sum(item_count(emu, "db", "items"))


def _read_item(emu, item_id: str) -> RawReply:
    with raw_socket(emu) as sock:
        sock.sendall(_signed(emu, "GET", f"{DOCS}/{item_id}", extra=dict(PK_P, connection="close")))
        return _Replies(sock).next()


# ---- 1. pipelining -------------------------------------------------------------------------------
def test_pipelined_create_read_and_missing_read_are_answered_in_order(regionlab, container):
    requests = (_signed(regionlab, "POST", DOCS, _doc("a"), PK_P)
                + _signed(regionlab, "GET", f"{DOCS}/a", extra=PK_P)
                + _signed(regionlab, "GET", f"{DOCS}/missing", extra=PK_P))
    with raw_socket(regionlab) as sock:
        sock.settimeout(PIPELINE_READ_TIMEOUT_S)
        sock.sendall(requests)                   # all three in one write
        replies = _Replies(sock)
        created = replies.next()
        assert created.status == 201, created
        read = replies.next()
        assert read.status == 200 and read.json()["id"] == "a", read
        missing = replies.next()
        assert missing.status == 404, missing


def test_pipelined_requests_with_bodies_are_answered_in_order(regionlab, container, sdk_client):
    requests = (_signed(regionlab, "POST", DOCS, _doc("a"), PK_P)
                + _signed(regionlab, "POST", DOCS, _doc("b"), PK_P)
                + _signed(regionlab, "POST", DOCS, _doc("a"), PK_P))        # a conflict: 409
    with raw_socket(regionlab) as sock:
        sock.sendall(requests)
        replies = _Replies(sock)
        assert [replies.next().status for _ in range(3)] == [201, 201, 409]
        sock.sendall(_signed(regionlab, "GET", f"{DOCS}/b", extra=PK_P))   # still the same connection
        assert replies.next().json()["id"] == "b"
    assert _stored(regionlab) == 2
    assert_serves(sdk_client)


# ---- 2. chunked request bodies ---------------------------------------------------------------------
def test_a_chunked_body_sent_in_pieces_creates_the_item(regionlab, container):
    doc = json.dumps({"id": "chunky", "pk": "p", "text": "x" * 5000}).encode()
    body = _chunked(doc[:7], doc[7:3000], doc[3000:])
    head = _head("POST", DOCS, signed_headers(regionlab.key, "POST", DOCS, dict(
        PK_P, **{"content-type": "application/json", "transfer-encoding": "chunked"})))
    then_read = _signed(regionlab, "GET", f"{DOCS}/chunky", extra=PK_P)
    with raw_socket(regionlab) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(head + body[:5])            # split inside the first chunk's size line
        sock.sendall(body[5:2000])               # ... and inside the second chunk's data
        sock.sendall(body[2000:] + then_read)    # the rest, and a request pipelined after it
        replies = _Replies(sock)
        created = replies.next()
        assert created.status == 201, created
        read = replies.next()
        assert read.status == 200, read
    assert read.json()["text"] == "x" * 5000
    assert _stored(regionlab) == 1


@pytest.mark.parametrize("bad_size", [b"zz", b"", b"1 2", b"0x1a", b"+5", b"1_0"])
def test_a_malformed_chunk_size_is_400_and_nothing_is_stored(regionlab, container, sdk_client, bad_size):
    head = _head("POST", DOCS, signed_headers(regionlab.key, "POST", DOCS, dict(
        PK_P, **{"content-type": "application/json", "transfer-encoding": "chunked"})))
    with raw_socket(regionlab) as sock:
        sock.sendall(head + bad_size + b"\r\n" + _doc("a") + b"\r\n0\r\n\r\n")
        replies = _Replies(sock)
        _refused_then_closed(replies, 400, "chunk size")
    assert _stored(regionlab) == 0
    assert _read_item(regionlab, "a").status == 404
    assert_serves(sdk_client)


def test_content_length_with_transfer_encoding_is_400_and_nothing_is_stored(regionlab, container, sdk_client):
    body = _chunked(_doc("a"))
    head = _head("POST", DOCS, signed_headers(regionlab.key, "POST", DOCS, dict(
        PK_P, **{"content-type": "application/json", "transfer-encoding": "chunked",
                 "content-length": str(len(body))})))
    with raw_socket(regionlab) as sock:
        sock.sendall(head + body)
        replies = _Replies(sock)
        reply = replies.next()
        assert reply.status == 400, reply
        assert "Content-Length and Transfer-Encoding" in reply.message, reply.message
        assert replies.closed()
    assert _stored(regionlab) == 0
    assert_serves(sdk_client)


# ---- 3. Expect: 100-continue ---------------------------------------------------------------------
def test_expect_100_continue_is_answered_before_the_body_is_sent(regionlab, container):
    body = _doc("e")
    head = _head("POST", DOCS, signed_headers(regionlab.key, "POST", DOCS, dict(
        PK_P, **{"content-type": "application/json", "content-length": str(len(body)),
                 "expect": "100-continue"})))
    with raw_socket(regionlab) as sock:
        sock.sendall(head)
        replies = _Replies(sock)
        interim = replies.next()                 # the body has not been sent yet
        assert (interim.version, interim.status, interim.body) == ("HTTP/1.1", 100, b""), interim
        sock.sendall(body)
        created = replies.next()
        assert created.status == 201, created
        assert created.json()["id"] == "e"
    assert _read_item(regionlab, "e").status == 200


# ---- 4. HEAD ---------------------------------------------------------------------------------------
def test_head_answers_headers_without_a_body(regionlab, container, sdk_client):
    container.create_item({"id": "h", "pk": "p", "n": 1})
    with raw_socket(regionlab) as sock:
        replies = _Replies(sock)
        sock.sendall(_signed(regionlab, "HEAD", "/"))
        head = replies.next(head_only=True)
        assert head.status == 200, head
        assert int(head.headers["content-length"]) > 0
        assert replies.buf == b""
        # A body after the HEAD reply would arrive before the next reply and break its framing.
        sock.sendall(_signed(regionlab, "GET", "/"))
        get = replies.next()
        assert get.status == 200, get
        assert int(head.headers["content-length"]) == len(get.body)

        sock.sendall(_signed(regionlab, "HEAD", f"{DOCS}/h", extra=PK_P))
        head = replies.next(head_only=True)
        assert int(head.headers["content-length"]) > 0, head.headers
        assert replies.buf == b""
        sock.sendall(_signed(regionlab, "GET", f"{DOCS}/h", extra=PK_P))
        item = replies.next()
        assert item.status == 200 and item.json()["n"] == 1, item
    assert_serves(sdk_client)


# ---- 5. Connection: close / keep-alive --------------------------------------------------------------
@pytest.mark.parametrize("version, extra", [("HTTP/1.1", {"connection": "close"}), ("HTTP/1.0", {})],
                         ids=["http-1.1-connection-close", "http-1.0-default"])
def test_a_connection_that_asks_to_close_is_answered_then_closed(regionlab, version, extra):
    with raw_socket(regionlab) as sock:
        sock.sendall(_signed(regionlab, "GET", "/", extra=extra, version=version))
        replies = _Replies(sock)
        reply = replies.next()
        assert reply.status == 200, reply
        assert reply.headers.get("connection") == "close"
        assert replies.closed()


def test_a_client_that_half_closes_while_its_reply_is_held_gets_the_reply_then_the_close(regionlab, container):
    """A client that gives up on a request (a cancelled hedge, an end-to-end timeout) closes its
    side while the reply is still held: it is answered, then the server closes the connection
    too, instead of keeping it until the per-endpoint connection cap turns every client away."""
    region = regionlab.regions[0]
    container.create_item({"id": "held", "pk": "p"})
    with regionlab.faults.latency(region, delay_ms=200, op="read"):
        with raw_socket(regionlab, regionlab.region_endpoints[region]) as sock:
            sock.sendall(_signed(regionlab, "GET", f"{DOCS}/held", extra=PK_P))
            sock.shutdown(socket.SHUT_WR)           # EOF arrives while the handler holds the reply
            replies = _Replies(sock)
            assert replies.next().status == 200
            assert replies.closed()


def test_http_1_1_without_connection_header_stays_open(regionlab):
    with raw_socket(regionlab) as sock:
        replies = _Replies(sock)
        for _ in range(3):
            sock.sendall(_signed(regionlab, "GET", "/"))
            reply = replies.next()
            assert reply.status == 200 and "connection" not in reply.headers, reply.headers


def test_http_1_0_with_keep_alive_stays_open_for_a_second_request(regionlab):
    keep_alive = {"connection": "keep-alive"}
    with raw_socket(regionlab) as sock:
        replies = _Replies(sock)
        sock.sendall(_signed(regionlab, "GET", "/", extra=keep_alive, version="HTTP/1.0"))
        first = replies.next()
        assert first.status == 200 and first.headers.get("connection") != "close", first.headers
        sock.sendall(_signed(regionlab, "GET", "/", version="HTTP/1.0"))        # now without keep-alive
        second = replies.next()
        assert second.status == 200, second
        assert replies.closed()


def test_http_1_0_keep_alive_is_announced_in_the_reply(regionlab):
    with raw_socket(regionlab) as sock:
        sock.sendall(_signed(regionlab, "GET", "/", extra={"connection": "keep-alive"}, version="HTTP/1.0"))
        reply = _Replies(sock).next()
    assert reply.headers.get("connection", "").lower() == "keep-alive", reply.headers


# ---- 6. oversized head -----------------------------------------------------------------------------
def test_a_head_over_64_kb_is_431_then_closed_and_the_server_keeps_serving(regionlab, sdk_client):
    with raw_socket(regionlab) as sock:
        near = signed_headers(regionlab.key, "GET", "/", {"x-padding": "a" * (REQUEST_HEAD_MAX_BYTES - 2048)})
        sock.sendall(_head("GET", "/", near))
        replies = _Replies(sock)
        assert replies.next().status == 200          # just under the limit: served
        over = signed_headers(regionlab.key, "GET", "/", {"x-padding": "a" * (REQUEST_HEAD_MAX_BYTES + 4096)})
        sock.sendall(_head("GET", "/", over))
        _refused_then_closed(replies, 431, str(REQUEST_HEAD_MAX_BYTES))
    assert_serves(sdk_client)


def test_a_client_that_writes_a_huge_head_before_reading_still_reads_its_431(regionlab):
    """Like http.client: the whole request goes out first. The server reads and drops the rest
    after answering (a lingering close), so the client's writes succeed and it gets the 431."""
    huge = signed_headers(regionlab.key, "GET", "/", {"x-padding": "a" * (8 * 1024 * 1024)})
    with raw_socket(regionlab) as sock:
        sock.sendall(_head("GET", "/", huge))
        reply = _Replies(sock).next()
    assert reply.status == 431, reply


# ---- 7. TLS on the plain port ------------------------------------------------------------------------
def _client_hello() -> bytes:
    """The first flight of a real TLS client, as Python's ssl module writes it."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def test_a_tls_client_hello_is_400_naming_plain_http(regionlab, sdk_client):
    hello = _client_hello()
    assert hello[:1] == b"\x16"
    with raw_socket(regionlab) as sock:
        sock.sendall(hello)
        replies = _Replies(sock)
        reply = replies.next()
        assert reply.status == 400, reply
        assert "plain HTTP" in reply.message and "TLS" in reply.message, reply.message
        assert replies.closed()
    assert_serves(sdk_client)


# ---- 8. oversized body ---------------------------------------------------------------------------------
def test_an_oversized_content_length_is_413_readable_while_the_body_is_still_sent(regionlab, container, sdk_client):
    body = b'{"id":"big","pk":"p","x":"' + b"a" * (3 * 1024 * 1024) + b'"}'
    head = _head("POST", DOCS, signed_headers(regionlab.key, "POST", DOCS, dict(
        PK_P, **{"content-type": "application/json", "content-length": str(len(body))})))
    with raw_socket(regionlab) as sock:
        sock.sendall(head)
        replies = _Replies(sock)
        reply = replies.next()                   # answered before any of the body was sent
        assert reply.status == 413, reply
        assert "too large" in reply.message, reply.message
        assert reply.headers.get("connection") == "close"
        sock.sendall(body)                       # the server reads and drops it: no reset
        assert sock.recv(65536) == b""           # then closes cleanly
    assert _stored(regionlab) == 0
    assert _read_item(regionlab, "big").status == 404
    assert_serves(sdk_client)


# ---- 9. the sweep: idle keep-alive close, stalled body 408 ------------------------------------------
def test_the_sweep_closes_a_keep_alive_connection_idle_longer_than_the_timeout(regionlab):
    server = _http_server(regionlab)
    timeout_s = server.keepalive_timeout_s
    _own_the_sweep(regionlab)
    with raw_socket(regionlab) as sock:
        sock.sendall(_signed(regionlab, "GET", "/"))
        replies = _Replies(sock)
        assert replies.next().status == 200

        def sweep(now=None):
            """(connections closed, our connection's idle_since, whether it is open) after sweep(now)."""
            def run(_account):
                conn = _connection(server, sock)
                closed = server.sweep(regionlab.loop.time() if now is None else now)
                return closed, conn.idle_since, conn.transport is not None
            return regionlab.call(run)
        closed, t0, still_open = sweep()             # the first sweep that sees it idle marks it
        assert (closed, still_open) == (0, True) and t0 > 0
        assert sweep(t0 + timeout_s - 1) == (0, t0, True)                  # not yet
        sock.sendall(_signed(regionlab, "GET", "/"))                        # a request ends idleness
        assert replies.next().status == 200
        t1 = t0 + timeout_s + 1
        assert sweep(t1) == (0, t1, True)                                   # idle anew from t1
        assert sweep(t1 + timeout_s + 1)[0] == 1
        assert replies.closed()


def test_the_sweep_answers_408_to_a_body_that_stalls(regionlab, container, sdk_client):
    server = _http_server(regionlab)
    timeout_s = server.body_timeout_s
    _own_the_sweep(regionlab)
    head = _head("POST", DOCS, signed_headers(regionlab.key, "POST", DOCS, dict(
        PK_P, **{"content-type": "application/json", "content-length": "100", "expect": "100-continue"})))
    with raw_socket(regionlab) as sock:
        sock.sendall(head + b'{"id":"s",')       # 10 of the 100 body bytes
        replies = _Replies(sock)
        assert replies.next().status == 100      # the head is parsed: the request is waiting for its body

        def stalled_since(_account):
            conn = _connection(server, sock)
            return conn.since, conn.body_have
        since, body_have = regionlab.call(stalled_since)
        assert since > 0 and body_have == 10
        assert regionlab.call(lambda _: server.sweep(since + timeout_s - 1)) == 0
        assert regionlab.call(lambda _: server.sweep(since + timeout_s + 1)) == 1
        _refused_then_closed(replies, 408, "body did not arrive")
    assert _stored(regionlab) == 0
    assert_serves(sdk_client)


# ---- 10. a region outage closes the region's open connections --------------------------------------
def _inject_fault(emu, **spec) -> dict:
    req = urllib.request.Request(emu.control_endpoint + "faults", data=json.dumps(spec).encode(),
                                 method="POST", headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as reply:
        assert reply.status == 201
        return json.loads(reply.read())


def test_a_region_outage_closes_open_keep_alive_connections_before_the_control_call_returns(regionlab):
    region = regionlab.regions[1]
    url = regionlab.region_endpoints[region]
    with raw_socket(regionlab, url) as sock:
        sock.sendall(_signed(regionlab, "GET", "/"))
        assert _Replies(sock).next().status == 200         # the connection is open and served
        _inject_fault(regionlab, type="region_outage", region=region, mode="refuse")
        sock.setblocking(False)                            # no waiting: it must be closed already
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            pytest.fail(f"the connection to {region} is still open after the outage was injected")
        except ConnectionResetError:
            data = b""
        assert data == b""
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(host_port(url), timeout=5).close()


# ---- 11. arbitrary bytes -----------------------------------------------------------------------------
_HEAD_PIECES = [b"GET ", b"POST ", b"/dbs", b"/", b" HTTP/1.1", b" HTTP/1.0", b"\r\n", b"\r\n\r\n", b":",
                b": ", b"content-length: ", b"transfer-encoding: chunked", b"expect: 100-continue",
                b"connection: close", b"0", b"5", b"ff", b"\n", b" ", b"\t", b"\x00", b"\xff", b"\x16\x03"]


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.one_of(st.sampled_from(_HEAD_PIECES), st.binary(max_size=12)), max_size=24))
def test_arbitrary_bytes_get_a_4xx_or_nothing_never_a_server_error(regionlab, pieces, caplog):
    """Whatever a client sends and then half-closes, the server answers with a 4xx (or an
    ordinary reply, when the bytes happen to be a valid request) or just closes, never with a
    5xx, logs no error, and goes on serving."""
    caplog.set_level(logging.WARNING)
    with raw_socket(regionlab) as sock:
        sock.sendall(b"".join(pieces))
        sock.shutdown(socket.SHUT_WR)
        reply = read_until_eof(sock)
    for status_line in (line for line in reply.split(b"\r\n") if line.startswith(b"HTTP/1.")):
        code = int(status_line.split(b" ")[1])
        assert code < 500, reply[:300]
    assert _signed_get_root_status(regionlab) == 200
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, errors


def _signed_get_root_status(emu) -> int:
    with raw_socket(emu) as sock:
        sock.sendall(_signed(emu, "GET", "/", extra={"connection": "close"}))
        return _Replies(sock).next().status


# ---- 12. header values beyond ASCII ----------------------------------------------------------------
def test_a_partition_key_header_in_raw_utf8_means_what_it_says(regionlab, container):
    """Clients that do not escape JSON put UTF-8 straight into the header: ["é"] must be the
    key é, not its bytes read one by one."""
    body = json.dumps({"id": "u", "pk": "é"}, ensure_ascii=False).encode()
    headers = signed_headers(regionlab.key, "POST", DOCS, {"x-ms-documentdb-partitionkey": '["é"]',
                                                           "content-type": "application/json",
                                                           "content-length": str(len(body))})
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    with raw_socket(regionlab) as sock:
        sock.sendall(f"POST {DOCS} HTTP/1.1\r\nHost: localhost\r\n{head}\r\n".encode() + body)
        reply = _Replies(sock).next()
    assert reply.status == 201, reply
    assert container.read_item("u", partition_key="é")["pk"] == "é"
