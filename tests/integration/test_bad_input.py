"""Bad input on the wire against a real regionlab server: malformed JSON, missing or wrong
authorization, oversized items and ids, forbidden id characters, a partition key header that
disagrees with the body, over-deep nesting, unknown paths and methods, bytes that are not HTTP,
a client that vanishes mid-body and one that never finishes its headers. Requests are signed by
hand (client.protocol.auth) over http.client or a bare socket; each case checks the status and
message, that nothing was stored, and that the server then still serves a normal SDK round trip.
"""
import base64
import json
import logging
import socket

import pytest
from azure.cosmos import PartitionKey, exceptions

from sdk_harness import (assert_serves, item_count, raw_request, raw_socket, read_until_eof,
                         signed_headers)

DOCS = "/dbs/db/colls/c/docs"
PK_P = {"x-ms-documentdb-partitionkey": '["p"]'}
OTHER_KEY = base64.b64encode(b"some other account key, not ours" * 2).decode()


@pytest.fixture
def coll(sdk_client):
    return sdk_client.create_database("db").create_container("c", PartitionKey(path="/pk"))


def _stored(emu) -> int:
    return sum(item_count(emu, "db", "c"))


def _create(emu, body, headers=PK_P):
    return raw_request(emu, "POST", DOCS, body, headers)


def test_control_a_well_formed_raw_create_succeeds(regionlab, coll):
    reply = _create(regionlab, {"id": "ok", "pk": "p"})
    assert reply.status == 201, reply
    assert coll.read_item("ok", partition_key="p")["pk"] == "p"


def test_malformed_json_is_400_naming_the_position(regionlab, coll, sdk_client):
    reply = _create(regionlab, b'{"id": "a", "pk": }')
    assert reply.status == 400, reply
    assert reply.headers["x-ms-substatus"] == "0"
    assert "line 1 column 19" in reply.message or "char 18" in reply.message, reply.message
    assert _stored(regionlab) == 0
    for body in (b'{"id": "a", "pk": "p"', b"\xff\xfe not utf-8", b'{"id":"a","pk":"p","n":NaN}',
                 b'{"id":"a","pk":"p","pk":"q"}'):
        assert _create(regionlab, body).status == 400, body
    assert _stored(regionlab) == 0
    assert_serves(sdk_client)


def test_missing_authorization_is_401(regionlab, coll, sdk_client):
    reply = raw_request(regionlab, "POST", DOCS, {"id": "a", "pk": "p"}, dict(PK_P, **{"x-ms-date": "Tue, 01 Jul 2025 12:00:00 GMT"}), sign=False)
    assert reply.status == 401, reply
    assert "authorization" in reply.message
    assert raw_request(regionlab, "GET", "/dbs", sign=False).status == 401
    assert _stored(regionlab) == 0
    assert_serves(sdk_client)


def test_bad_signature_is_401(regionlab, coll, sdk_client):
    wrong_key = signed_headers(OTHER_KEY, "POST", DOCS)
    assert _create(regionlab, {"id": "a", "pk": "p"}, dict(PK_P, **wrong_key)).status == 401
    other_path = signed_headers(regionlab.key, "POST", "/dbs/db/colls/other/docs")
    assert _create(regionlab, {"id": "a", "pk": "p"}, dict(PK_P, **other_path)).status == 401
    other_verb = signed_headers(regionlab.key, "GET", DOCS)
    assert _create(regionlab, {"id": "a", "pk": "p"}, dict(PK_P, **other_verb)).status == 401
    garbage = _create(regionlab, {"id": "a", "pk": "p"}, dict(PK_P, authorization="not-a-token"))
    assert garbage.status == 401 and "malformed" in garbage.message
    assert _stored(regionlab) == 0
    assert_serves(sdk_client)


def test_unparseable_date_is_401(regionlab, coll, sdk_client):
    for date in ("yesterday", "Tue, 99 Foo 2025 99:99:99 GMT", ""):
        headers = signed_headers(regionlab.key, "GET", "/dbs")
        headers["x-ms-date"] = date
        reply = raw_request(regionlab, "GET", "/dbs", headers=headers, sign=False)
        assert reply.status == 401, (date, reply)
    assert_serves(sdk_client)


def test_item_over_2_mb_is_413_and_not_stored(regionlab, coll, sdk_client):
    just_over = {"id": "big", "pk": "p", "x": "a" * (2 * 1024 * 1024)}
    reply = _create(regionlab, just_over)
    assert reply.status == 413, reply
    far_over = {"id": "big", "pk": "p", "x": "a" * (3 * 1024 * 1024)}
    assert _create(regionlab, far_over).status == 413
    with pytest.raises(exceptions.CosmosHttpResponseError) as e:
        coll.create_item(just_over)
    assert e.value.status_code == 413
    coll.create_item({"id": "small", "pk": "p"})
    with pytest.raises(exceptions.CosmosHttpResponseError) as e:
        coll.replace_item("small", {"id": "small", "pk": "p", "x": "a" * (2 * 1024 * 1024)})
    assert e.value.status_code == 413
    assert "x" not in coll.read_item("small", partition_key="p")
    assert _stored(regionlab) == 1
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        coll.read_item("big", partition_key="p")
    assert_serves(sdk_client)


def test_id_over_1023_bytes_is_400(regionlab, coll, sdk_client):
    assert _create(regionlab, {"id": "a" * 1024, "pk": "p"}).status == 400
    assert _create(regionlab, {"id": "é" * 512, "pk": "p"}).status == 400     # 1024 bytes in UTF-8
    with pytest.raises(exceptions.CosmosHttpResponseError) as e:
        coll.create_item({"id": "b" * 1024, "pk": "p"})
    assert e.value.status_code == 400
    assert _stored(regionlab) == 0
    assert _create(regionlab, {"id": "a" * 1023, "pk": "p"}).status == 201
    assert coll.read_item("a" * 1023, partition_key="p")["pk"] == "p"
    assert_serves(sdk_client)


@pytest.mark.parametrize("ch", ["/", "\\", "?", "#"])
def test_id_with_forbidden_character_is_400(regionlab, coll, sdk_client, ch):
    reply = _create(regionlab, {"id": f"a{ch}b", "pk": "p"})
    assert reply.status == 400, reply
    assert repr(ch) in reply.message
    upsert = raw_request(regionlab, "POST", DOCS, {"id": f"{ch}", "pk": "p"},
                         dict(PK_P, **{"x-ms-documentdb-is-upsert": "True"}))
    assert upsert.status == 400
    assert _stored(regionlab) == 0
    assert_serves(sdk_client)


def test_partition_key_header_not_matching_body_is_400_1001(regionlab, coll, sdk_client):
    reply = _create(regionlab, {"id": "a", "pk": "q"})
    assert reply.status == 400, reply
    assert reply.headers["x-ms-substatus"] == "1001"
    missing = _create(regionlab, {"id": "a"})                 # the body has no /pk at all
    assert missing.status == 400 and missing.headers["x-ms-substatus"] == "1001"
    assert _create(regionlab, {"id": "a", "pk": "p"}, {}).status == 400      # no header at all
    coll.create_item({"id": "a", "pk": "p"})
    moved = raw_request(regionlab, "PUT", f"{DOCS}/a", {"id": "a", "pk": "q"}, PK_P)
    assert moved.status == 400 and moved.headers["x-ms-substatus"] == "1001"
    assert coll.read_item("a", partition_key="p")["pk"] == "p"
    assert _stored(regionlab) == 1
    assert_serves(sdk_client)


def _nested(depth: int) -> dict:
    doc = {"id": f"d{depth}", "pk": "p"}
    inner = doc
    for _ in range(depth - 1):
        inner["a"] = {}
        inner = inner["a"]
    return doc


def test_nesting_deeper_than_128_is_400(regionlab, coll, sdk_client):
    reply = _create(regionlab, _nested(200))
    assert reply.status == 400, reply
    assert "128" in reply.message
    arrays = b'{"id":"arr","pk":"p","a":' + b"[" * 300 + b"]" * 300 + b"}"
    assert _create(regionlab, arrays).status == 400
    assert _stored(regionlab) == 0
    assert _create(regionlab, _nested(100)).status == 201
    assert coll.read_item("d100", partition_key="p")["a"]["a"] == _nested(100)["a"]["a"]
    assert_serves(sdk_client)


def test_unknown_path_is_404_with_a_helpful_message(regionlab, coll, sdk_client):
    for path in ("/foo", "/dbs/db/colls/c/whatever", "/dbs/db/colls/c/docs/a/extra", "/dbs/db/things"):
        reply = raw_request(regionlab, "GET", path)
        assert reply.status == 404, (path, reply)
        assert reply.headers["x-ms-substatus"] == "0"
        assert "Unknown resource path" in reply.message and "/dbs" in reply.message
    missing_db = raw_request(regionlab, "GET", "/dbs/nodb/colls/c/docs/a", headers=PK_P)
    assert missing_db.status == 404 and "nodb" in missing_db.message
    assert_serves(sdk_client)


def test_unsupported_method_is_405(regionlab, coll, sdk_client):
    reply = raw_request(regionlab, "PATCH", "/dbs")
    assert reply.status == 405, reply
    assert "PATCH" in reply.message
    assert raw_request(regionlab, "DELETE", DOCS, headers=PK_P).status == 405
    assert raw_request(regionlab, "POST", f"{DOCS}/x", {"id": "x", "pk": "p"}, PK_P).status == 405
    assert raw_request(regionlab, "PUT", "/dbs/db", {"id": "db"}).status == 405
    assert _stored(regionlab) == 0
    assert_serves(sdk_client)


@pytest.mark.parametrize("garbage", [b"\x00\xff\x13garbage that is not HTTP\r\n\r\n",
                                     b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
                                     b"GET / HTTP/9.9 extra words\r\n\r\n"])
def test_garbage_bytes_are_400_and_the_server_keeps_serving(regionlab, sdk_client, garbage, caplog):
    caplog.set_level(logging.DEBUG, logger="aiohttp")
    with raw_socket(regionlab) as sock:
        sock.sendall(garbage)
        reply = read_until_eof(sock)             # answered, then closed
    assert reply.startswith((b"HTTP/1.0 400", b"HTTP/1.1 400")), reply[:200]
    assert_serves(sdk_client)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]     # a client's garbage is not a server error


def test_client_disconnecting_mid_body_applies_nothing(regionlab, coll, sdk_client, caplog):
    caplog.set_level(logging.DEBUG, logger="regionlab")
    head = signed_headers(regionlab.key, "POST", DOCS,
                          dict(PK_P, **{"content-type": "application/json", "content-length": "1000"}))
    request = (f"POST {DOCS} HTTP/1.1\r\nHost: localhost\r\n"
               + "".join(f"{k}: {v}\r\n" for k, v in head.items()) + "\r\n").encode()
    with raw_socket(regionlab) as sock:
        sock.sendall(request + b'{"id":"a",')
        sock.shutdown(socket.SHUT_WR)
        assert read_until_eof(sock) == b""       # no reply: the server just drops the connection
    assert_serves(sdk_client)
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        coll.read_item("a", partition_key="p")
    assert _stored(regionlab) == 0
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]


@pytest.mark.regionlab_config(header_timeout_s=0.5)
def test_client_that_never_finishes_its_headers_gets_408(regionlab, sdk_client):
    with raw_socket(regionlab) as sock:
        sock.sendall(b"GET /dbs HTTP/1.1\r\nHost: localhost\r\nx-ms-da")
        reply = read_until_eof(sock)             # the server answers, then closes
    assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
    body = json.loads(reply.split(b"\r\n\r\n", 1)[1])
    assert body["code"] == "RequestTimeout"
    assert_serves(sdk_client)
