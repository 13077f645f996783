"""No client can starve the others of connections or of the event loop, on a real emulator
(a small cap is configured): at the cap, a new client sheds the oldest silent socket (an idle
client keeps its place) and is served; only when every connection has a request in progress is
a new client turned away, with a readable 503 that says why, while the other endpoints are
untouched and service resumes as the requests complete; the control port keeps its connections
by the same policy; a socket that never sends is closed after the header timeout, and a client
trickling a chunked body leaves point reads on other connections completing meanwhile.

Waits are on events: replies read off sockets, the server's EOFs, a 100 Continue that shows a
head was parsed, and, for what only the server sees (a socket accepted, a close acted on), a
bounded number of round trips on the emulator's loop. The header timeout is driven by explicit
`HttpServer.sweep(now)` calls; nothing is judged by timing.
"""
import contextlib
import json
import socket

import pytest
from azure.cosmos import CosmosClient, PartitionKey

from regionlab.emulator.defaults import REGIONS

from sdk_harness import client_kwargs, host_port, make_client, read_until_eof, signed_headers

CAP = 4
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
LOOP_ROUND_TRIPS_MAX = 200        # a server-side state that is coming arrives within these
DOCS = "/dbs/db/colls/items/docs"
PK_P = {"x-ms-documentdb-partitionkey": '["p"]'}
BODY_B = b'{"id": "b", "pk": "p"}'


def _request(emu, method: str, path: str, body: bytes | None = None, extra: dict | None = None) -> bytes:
    headers = signed_headers(emu.key, method, path, extra)
    if body is not None:
        headers["content-length"] = str(len(body))
    lines = [f"{method} {path} HTTP/1.1", "Host: localhost", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


def _reply(sock) -> tuple[int, dict, bytes]:
    """One reply framed by Content-Length: (status, headers, body)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a reply; got {buf!r}"
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    while len(body) < int(headers.get("content-length", "0")):
        body += sock.recv(65536)
    return int(lines[0].split(" ")[1]), headers, body


def _connect(url: str) -> socket.socket:
    return socket.create_connection(host_port(url), timeout=5.0)


def _turned_away(url: str, request: bytes = b"") -> tuple[int, str]:
    """A new connection past the cap: the status and message it reads, then the server's EOF."""
    with contextlib.closing(_connect(url)) as sock:
        if request:
            sock.sendall(request)
        status, headers, body = _reply(sock)
        assert headers.get("connection") == "close"
        assert read_until_eof(sock) == b""
        return status, json.loads(body)["message"]


def _until(emu, predicate) -> None:
    """Until predicate() holds on the emulator's loop (each try is one round trip through it)."""
    for _ in range(LOOP_ROUND_TRIPS_MAX):
        if emu.call(lambda _a: predicate()):
            return
    raise AssertionError("the server did not get there")


def _gateway(emu, region=None):
    return emu.emulator._listeners[region][0]


def _close_and_wait(emu, socks: list, http, left: int) -> None:
    """Half-close each socket, read the server's EOF (it closed its side), and wait until the
    listener has `left` connections."""
    for sock in socks:
        sock.shutdown(socket.SHUT_WR)
        assert read_until_eof(sock) == b""
        sock.close()
    _until(emu, lambda: len(http.connections) == left)


def _in_progress(emu, url: str, count: int, slots) -> list:
    """count connections, each with a request in progress: a whole head, a body still to come."""
    socks = []
    for _ in range(count):
        sock = _connect(url)
        sock.sendall(_request(emu, "POST", DOCS, None, dict(PK_P, **{"content-length": str(len(BODY_B))})) + BODY_B[:10])
        socks.append(sock)
    _until(emu, lambda: slots.counts()["busy"] == count)
    return socks


@pytest.mark.regionlab_config(connections_max=CAP)
def test_silent_sockets_past_the_cap_are_shed_oldest_first_and_new_clients_get_in(regionlab):
    with make_client(regionlab) as client:
        client.create_database("db").create_container("items", PartitionKey(path="/pk"))
    url = regionlab.endpoint
    http = _gateway(regionlab)
    served = _connect(url)                                  # a client already connected, now idle
    served.sendall(_request(regionlab, "POST", DOCS, b'{"id": "a", "pk": "p"}', PK_P))
    assert _reply(served)[0] == 201
    silent = [_connect(url) for _ in range(CAP - 1)]        # they fill the listener ...
    _until(regionlab, lambda: len(http.slots) == CAP)
    extra = [_connect(url) for _ in range(3)]               # ... and each of these sheds the oldest silent one
    for sock in silent:
        assert read_until_eof(sock) == b""                  # closed, and nothing was sent to it
    served.sendall(_request(regionlab, "GET", f"{DOCS}/a", extra=PK_P))     # the idle client kept its place
    assert _reply(served)[0] == 200
    with contextlib.closing(_connect(url)) as sock:         # a new client gets in (and is served)
        sock.sendall(_request(regionlab, "GET", f"{DOCS}/a", extra=PK_P))
        assert _reply(sock)[0] == 200
    assert regionlab.call(lambda _a: (http.slots.shed, http.refusals.turned_away)) == (4, 0)
    for sock in extra + silent + [served]:
        sock.close()


# No replication lag: the read in East US 2 below finds the item written through the global endpoint.
@pytest.mark.regionlab_config(connections_max=CAP, lag_ms={(a, b): 0 for a in REGIONS for b in REGIONS if a != b})
def test_when_every_slot_has_a_request_in_progress_new_clients_are_turned_away_and_others_served(regionlab):
    with make_client(regionlab) as client:
        client.create_database("db").create_container("items", PartitionKey(path="/pk")).upsert_item(
            {"id": "a", "pk": "p"})
    url = regionlab.endpoint
    http = _gateway(regionlab)
    busy = _in_progress(regionlab, url, CAP, http.slots)    # every slot has a request in progress
    for _ in range(3):
        status, message = _turned_away(url)
        assert status == 503 and "at most 4 at once" in message and "every one has a request in progress" in message
    status, message = _turned_away(url, _request(regionlab, "GET", f"{DOCS}/a", extra=PK_P))
    assert status == 503 and "Too many connections" in message
    region_url = regionlab.region_endpoints["East US 2"]       # other listeners: untouched
    with contextlib.closing(_connect(region_url)) as sock:
        sock.sendall(_request(regionlab, "GET", f"{DOCS}/a", extra=PK_P))
        assert _reply(sock)[0] == 200
    with CosmosClient(region_url, regionlab.key, **client_kwargs(preferred_locations=["East US 2"])) as other:
        assert other.get_database_client("db").get_container_client("items").read_item("a", "p")["id"] == "a"
    assert regionlab.call(lambda _a: (http.refusals.turned_away, http.slots.shed)) == (4, 0)
    for sock in busy:                                       # the requests in progress complete
        sock.sendall(BODY_B[10:])
        assert _reply(sock)[0] in (201, 409)                # the first creates b, the others find it
    with contextlib.closing(_connect(url)) as sock:         # and new clients are served again
        sock.sendall(_request(regionlab, "GET", f"{DOCS}/a", extra=PK_P))
        assert _reply(sock)[0] == 200
    for sock in busy:
        sock.close()


@pytest.mark.regionlab_config(connections_max=CAP)
def test_the_control_port_sheds_silent_sockets_and_refuses_only_when_every_slot_is_busy(regionlab):
    url = regionlab.control_endpoint
    control = regionlab.emulator.control_connections
    host = "%s:%d" % host_port(url)            # the control port serves only names it answers to
    health = f"GET /health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
    silent = [_connect(url) for _ in range(CAP)]
    _until(regionlab, lambda: len(control.slots) == CAP)
    with contextlib.closing(_connect(url)) as sock:         # sheds the oldest silent socket: /health answers
        sock.sendall(health)
        status, _h, body = _reply(sock)
        assert status == 200 and json.loads(body)["status"] == "ok"
    assert read_until_eof(silent[0]) == b""
    for sock in silent:
        sock.close()
    _until(regionlab, lambda: len(control.slots) == 0)
    post = (f"POST /faults HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            "Content-Length: 40\r\nConnection: close\r\n\r\n{").encode()
    busy = [_connect(url) for _ in range(CAP)]
    for sock in busy:
        sock.sendall(post)                                  # a request whose body is still to come
    _until(regionlab, lambda: control.slots.counts()["busy"] == CAP)
    status, message = _turned_away(url, health)
    assert status == 503 and "at most 4 at once" in message
    with make_client(regionlab) as client:                  # the gateway is not affected
        assert client.get_database_account() is not None
    for sock in busy:
        sock.sendall(b" " * 38 + b"}")                      # an empty fault: refused with 400, nothing injected
        assert _reply(sock)[0] == 400
        sock.close()
    _until(regionlab, lambda: len(control.slots) == 0)
    with contextlib.closing(_connect(url)) as sock:
        sock.sendall(health)
        assert _reply(sock)[0] == 200


def test_a_socket_that_never_sends_is_closed_after_the_header_timeout(regionlab):
    http = _gateway(regionlab)
    regionlab.call(lambda _a: regionlab.emulator._sweeper.cancel())     # only our sweeps move time
    with contextlib.closing(_connect(regionlab.endpoint)) as sock:
        _until(regionlab, lambda: len(http.connections) == 1)
        since = regionlab.call(lambda _a: next(iter(http.connections)).since)
        assert regionlab.call(lambda _a: http.sweep(since + http.header_timeout_s - 1)) == 0
        assert regionlab.call(lambda _a: http.sweep(since + http.header_timeout_s + 1)) == 1
        assert read_until_eof(sock) == b""                  # closed, and nothing was sent to it


def _chunks(data: bytes, size: int) -> list:
    return [b"%x\r\n%s\r\n" % (len(data[i:i + size]), data[i:i + size]) for i in range(0, len(data), size)]


def test_a_client_trickling_a_chunked_body_leaves_point_reads_completing(regionlab):
    with make_client(regionlab) as client:
        c = client.create_database("db").create_container("items", PartitionKey(path="/pk"))
        c.upsert_item({"id": "a", "pk": "p"})
        doc = json.dumps({"id": "slow", "pk": "p", "text": "t" * 20_000}).encode()
        pieces = _chunks(doc, 3)                            # ~6,700 tiny chunks
        head = _request(regionlab, "POST", DOCS, None, dict(PK_P, **{"transfer-encoding": "chunked",
                                                                      "expect": "100-continue"}))
        http = _gateway(regionlab)
        with contextlib.closing(_connect(regionlab.endpoint)) as slow:
            slow.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            slow.sendall(head)
            interim = b""
            while len(interim) < len(CONTINUE) and (chunk := slow.recv(len(CONTINUE) - len(interim))):
                interim += chunk
            assert interim == CONTINUE                      # the head is parsed
            half = len(pieces) // 2
            for i, piece in enumerate(pieces[:half]):
                slow.sendall(piece)
                if i % 500 == 0:                            # point reads complete mid-trickle
                    assert c.read_item("a", "p")["id"] == "a"
            sent = len(b"".join(pieces[:half]))
            state = regionlab.call(lambda _a: [(len(conn.buf), conn.chunks.scanned)
                                               for conn in http.connections if conn.chunks is not None])
            assert len(state) == 1
            held, scanned = state[0]
            assert held == 0 and scanned <= 2 * sent        # nothing piles up to be re-parsed
            for piece in pieces[half:]:
                slow.sendall(piece)
            slow.sendall(b"0\r\n\r\n")
            assert _reply(slow)[0] == 201
        assert c.read_item("slow", "p")["text"] == "t" * 20_000
