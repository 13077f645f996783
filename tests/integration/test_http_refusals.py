"""Requests whose head the service refuses get 400 with a message that says what to send
instead, on a real socket against a real regionlab: a control character in a header value or
in the path, a method that is not a token, two Host headers, HTTP/1.1 without Host. Nothing
of them is stored, the log holds no error and no traceback, and every other client keeps being
served: a keep-alive connection opened before is served before and after on the same socket, a
read held by a latency fault while the bad requests arrive is answered, and the official SDK
works afterwards.

Requests are written by hand to bare sockets (signed where they would otherwise be served, so
that only the flaw stands between them and a 200); replies are read until the server closes.
"""
import json
import logging
import socket

import pytest

from sdk_harness import assert_serves, item_count, raw_socket, read_until_eof, signed_headers

DOCS = "/dbs/db/colls/items/docs"
PK_P = {"x-ms-documentdb-partitionkey": '["p"]'}


def _head(request_line: str, headers: dict, host_lines: tuple = ("Host: localhost",)) -> bytes:
    lines = [request_line, *host_lines, *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _create(emu, item_id: str, path: str = DOCS, method: str = "POST", host_lines=("Host: localhost",),
            extra: dict | None = None) -> bytes:
    body = json.dumps({"id": item_id, "pk": "p"}).encode()
    headers = signed_headers(emu.key, "POST", DOCS, dict(PK_P, **(extra or {})))
    headers.update({"content-type": "application/json", "content-length": str(len(body))})
    return _head(f"{method} {path} HTTP/1.1", headers, host_lines) + body


BAD = {
    "a control character in a header value": (
        lambda emu: _create(emu, "v", extra={"x-ms-consistency-level": "Session\x01"}),
        "free of control characters"),
    "a control character in the path": (
        lambda emu: _create(emu, "p", path=DOCS + "\x7f"),
        "percent-encode"),
    "a method that is not a token": (
        lambda emu: _create(emu, "m", method="PO(ST)"),
        "should start with a method such as GET"),
    "two Host headers": (
        lambda emu: _create(emu, "h", host_lines=("Host: localhost", "Host: elsewhere")),
        "2 Host headers; send exactly one"),
    "HTTP/1.1 without Host": (
        lambda emu: _create(emu, "n", host_lines=()),
        "must carry a Host header"),
}


def _reply(data: bytes) -> tuple[int, dict, dict]:
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return int(status_line.split(" ")[1]), headers, json.loads(body)


def _signed_get(emu, path: str, extra: dict | None = None) -> bytes:
    return _head(f"GET {path} HTTP/1.1", signed_headers(emu.key, "GET", path, extra))


def _next_reply(sock) -> int:
    """The status of one reply on a keep-alive connection (framed by Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = int(next(line.split(b":")[1] for line in lines if line.lower().startswith(b"content-length:")))
    while len(rest) < length:
        rest += sock.recv(65536)
    return int(head.split(b" ")[1])


@pytest.mark.parametrize("case", BAD.keys())
def test_a_refused_head_is_400_saying_what_to_send_and_everyone_else_is_served(
        regionlab, container, sdk_client, case, caplog):
    caplog.set_level(logging.DEBUG, logger="regionlab")
    build, needle = BAD[case]
    region = regionlab.regions[0]
    container.create_item({"id": "held", "pk": "p"})
    with raw_socket(regionlab) as keep_alive, \
            raw_socket(regionlab, regionlab.region_endpoints[region]) as held:
        keep_alive.sendall(_signed_get(regionlab, "/"))
        assert _next_reply(keep_alive) == 200
        with regionlab.faults.latency(region, delay_ms=500, op="read"):
            held.sendall(_signed_get(regionlab, f"{DOCS}/held", PK_P))     # its reply is held
            with raw_socket(regionlab) as bad:
                bad.sendall(build(regionlab))
                status, headers, body = _reply(read_until_eof(bad))     # answered, then closed
            assert status == 400, body
            assert needle in body["message"], body["message"]
            assert headers.get("connection") == "close"
            assert _next_reply(held) == 200
        keep_alive.sendall(_signed_get(regionlab, "/"))                    # the same connection
        assert _next_reply(keep_alive) == 200
    assert sum(item_count(regionlab, "db", "items")) == 1                  # only "held"
    assert_serves(sdk_client)
    troubles = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not troubles, [r.getMessage() for r in troubles]


def test_the_same_request_without_the_flaw_is_served(regionlab, container):
    """The control: what the refused requests would have been, sent well formed, creates the item."""
    with raw_socket(regionlab) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(_create(regionlab, "fine", extra={"x-ms-consistency-level": "Session", "connection": "close"}))
        status, _, body = _reply(read_until_eof(sock))
    assert status == 201, body
    assert container.read_item("fine", partition_key="p")["pk"] == "p"
