"""Bad input on the wire against a real regionlab server: malformed JSON, missing or wrong
authorization, a signed request dated too far from the server's clock, oversized items and ids,
forbidden id characters, a partition key header that disagrees with the body or is no array of
scalars, over-deep nesting (bodies, patches, SQL), batch and patch fields of the wrong type,
unknown paths and methods, bytes that are not HTTP, a client that vanishes mid-body and one
that never finishes its headers. Requests are signed by
hand (client.protocol.auth) over http.client or a bare socket; each case checks the status and
message, that nothing was stored, and that the server then still serves a normal SDK round trip.
"""
import base64
import email.utils
import json
import logging
import socket
import time

import pytest
from azure.cosmos import exceptions

from regionlab.client.protocol import auth
from sdk_harness import (assert_serves, item_count, raw_request, raw_socket, read_until_eof,
                         signed_headers)

DOCS = "/dbs/db/colls/c/docs"
PK_P = {"x-ms-documentdb-partitionkey": '["p"]'}
OTHER_KEY = base64.b64encode(b"some other account key, not ours" * 2).decode()


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


# ---- the date of a signed request ----------------------------------------------------------
CLOCK_SKEW_S_MAX = 15 * 60            # the service's window; restated: the test states the contract


def _dated(emu, verb: str, path: str, offset_s: float) -> dict:
    """Headers of a request correctly signed, but dated offset_s from now."""
    date = email.utils.formatdate(time.time() + offset_s, usegmt=True)
    rtype, link = auth.resource_type_and_link(path)
    return {"x-ms-date": date, "x-ms-version": "2020-07-15",
            "authorization": auth.authorization_header(emu.key, verb, rtype, link, date)}


def test_a_signed_request_dated_more_than_15_minutes_away_is_401_naming_the_skew(regionlab, coll, sdk_client):
    for offset_s in (-CLOCK_SKEW_S_MAX - 60, CLOCK_SKEW_S_MAX + 60, -365 * 86400):
        reply = _create(regionlab, {"id": "old", "pk": "p"}, dict(PK_P, **_dated(regionlab, "POST", DOCS, offset_s)))
        assert reply.status == 401, (offset_s, reply)
        assert "x-ms-date" in reply.message and f"{CLOCK_SKEW_S_MAX} s" in reply.message, reply.message
        assert ("behind" if offset_s < 0 else "ahead of") in reply.message, reply.message
        read = raw_request(regionlab, "GET", "/dbs", headers=_dated(regionlab, "GET", "/dbs", offset_s), sign=False)
        assert read.status == 401, read
    assert _stored(regionlab) == 0
    for offset_s in (-CLOCK_SKEW_S_MAX + 60, CLOCK_SKEW_S_MAX - 60):       # within the window: served
        headers = dict(PK_P, **_dated(regionlab, "POST", DOCS, offset_s))
        assert _create(regionlab, {"id": f"ok{offset_s}", "pk": "p"}, headers).status == 201
    assert _stored(regionlab) == 2
    assert_serves(sdk_client)


def test_a_replayed_request_is_refused_once_its_date_is_too_old(regionlab, coll):
    """The same signed bytes: accepted while fresh (the verifier caches the signature), refused
    when the server's clock has moved past the window (driven through the account clock)."""
    headers = _dated(regionlab, "GET", "/dbs", 0)
    assert raw_request(regionlab, "GET", "/dbs", headers=headers, sign=False).status == 200
    def shift_clock(_account, ms: int) -> None:
        regionlab.account.clock._origin_ms += ms         # the runtime clock's wall-clock origin
    regionlab.call(shift_clock, (CLOCK_SKEW_S_MAX + 1) * 1000)
    try:
        replay = raw_request(regionlab, "GET", "/dbs", headers=headers, sign=False)
    finally:
        regionlab.call(shift_clock, -(CLOCK_SKEW_S_MAX + 1) * 1000)
    assert replay.status == 401 and "x-ms-date" in replay.message, replay
    assert raw_request(regionlab, "GET", "/dbs", headers=headers, sign=False).status == 200


@pytest.mark.regionlab_config(max_clock_skew_s=0)
def test_max_clock_skew_0_accepts_any_date_for_hosts_with_a_broken_clock(regionlab, coll, sdk_client):
    for offset_s in (-365 * 86400, 365 * 86400):
        reply = _create(regionlab, {"id": f"d{offset_s}", "pk": "p"}, dict(PK_P, **_dated(regionlab, "POST", DOCS, offset_s)))
        assert reply.status == 201, reply
    wrong_key = dict(PK_P, **signed_headers(OTHER_KEY, "POST", DOCS))
    assert _create(regionlab, {"id": "x", "pk": "p"}, wrong_key).status == 401     # signatures still count
    assert _stored(regionlab) == 2
    assert_serves(sdk_client)


# ---- the partition key header ----------------------------------------------------------------
NOT_A_PARTITION_KEY = {
    "nested 1000 deep": "[" * 1000 + "]" * 1000,
    "objects nested 1000 deep": "[" + '{"a":' * 1000 + "1" + "}" * 1000 + "]",
    "an integer beyond a double": "[" + str(2 ** 1024) + "]",
    "a float beyond a double": "[1e400]",
    "a lone surrogate": '["\\ud800"]',
    "an array component": "[[1]]",
    "an object component": '[{"a":1}]',
    "not an array": '"p"',
    "not JSON": "p",
    "NaN": "[NaN]",
}


@pytest.mark.parametrize("header", NOT_A_PARTITION_KEY.values(), ids=NOT_A_PARTITION_KEY.keys())
def test_a_partition_key_header_that_is_no_array_of_scalars_is_400(regionlab, coll, sdk_client, header, caplog):
    caplog.set_level(logging.WARNING)
    pk = {"x-ms-documentdb-partitionkey": header}
    coll.create_item({"id": "a", "pk": "p"})
    for method, path, body in (("POST", DOCS, {"id": "b", "pk": "p"}), ("GET", f"{DOCS}/a", None),
                               ("PUT", f"{DOCS}/a", {"id": "a", "pk": "p", "n": 1}), ("DELETE", f"{DOCS}/a", None)):
        reply = raw_request(regionlab, method, path, body, pk)
        assert reply.status == 400, (method, reply)
        assert "partition key must be a JSON array of one or more scalar values" in reply.message, reply.message
    assert coll.read_item("a", partition_key="p") == {**coll.read_item("a", partition_key="p"), "id": "a"}
    assert "n" not in coll.read_item("a", partition_key="p")
    assert _stored(regionlab) == 1
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text[:2000]
    assert_serves(sdk_client)


# ---- batch and patch fields of the wrong type --------------------------------------------------
BATCH = dict(PK_P, **{"x-ms-cosmos-is-batch-request": "True", "x-ms-cosmos-batch-atomic": "True"})


@pytest.mark.parametrize("kind", ["Read", "Delete", "Replace", "Patch"])
@pytest.mark.parametrize("bad_id", [5, ["a"], {"a": 1}, None])
def test_a_batch_operation_with_a_non_string_id_is_400_and_nothing_is_applied(regionlab, coll, kind, bad_id):
    coll.create_item({"id": "a", "pk": "p", "n": 1})
    op = {"operationType": kind, "id": bad_id, "resourceBody": {"id": "a", "pk": "p", "n": 2}}
    if kind == "Patch":
        op["resourceBody"] = {"operations": [{"op": "set", "path": "/n", "value": 2}]}
    reply = raw_request(regionlab, "POST", DOCS, [{"operationType": "Create", "resourceBody": {"id": "b", "pk": "p"}}, op], BATCH)
    assert reply.status == 207, reply
    results = reply.json()
    assert [r["statusCode"] for r in results] == [424, 400], results
    assert "'id'" in results[1]["message"] and "string" in results[1]["message"], results[1]
    assert _stored(regionlab) == 1
    assert coll.read_item("a", partition_key="p")["n"] == 1


def test_a_batch_item_over_2_mb_is_413_and_nothing_is_applied(regionlab, coll, sdk_client):
    """A batch body big enough to hold an item over the limit still measures every item (one
    small enough cannot hold one: gateway/batch.py REENCODED_GROWTH_MAX)."""
    big = {"id": "big", "pk": "p", "x": "a" * (2 * 1024 * 1024)}
    ops = [{"operationType": "Create", "resourceBody": {"id": "b", "pk": "p"}},
           {"operationType": "Upsert", "resourceBody": big}]
    reply = raw_request(regionlab, "POST", DOCS, ops, BATCH)
    assert reply.status == 207, reply
    results = reply.json()
    assert [r["statusCode"] for r in results] == [424, 413], results
    assert "2097152 bytes" in results[1]["message"], results[1]
    assert _stored(regionlab) == 0
    assert_serves(sdk_client)


@pytest.mark.parametrize("condition", [5, ["FROM c"], {"q": "FROM c"}, True])
def test_a_patch_with_a_non_string_condition_is_400_and_nothing_is_applied(regionlab, coll, sdk_client, condition):
    coll.create_item({"id": "a", "pk": "p", "n": 1})
    body = {"operations": [{"op": "set", "path": "/n", "value": 2}], "condition": condition}
    reply = raw_request(regionlab, "PATCH", f"{DOCS}/a", body, PK_P)
    assert reply.status == 400, reply
    assert "condition must be a string" in reply.message, reply.message
    in_batch = raw_request(regionlab, "POST", DOCS, [{"operationType": "Patch", "id": "a", "resourceBody": body}], BATCH)
    assert in_batch.status == 207 and in_batch.json()[0]["statusCode"] == 400, in_batch
    assert coll.read_item("a", partition_key="p")["n"] == 1
    assert_serves(sdk_client)


def test_a_patch_that_would_nest_past_128_is_400_and_nothing_is_applied(regionlab, coll, sdk_client):
    coll.create_item(_nested(100))
    deep_path = "/a" * 99
    too_deep = {"operations": [{"op": "add", "path": deep_path + "/b", "value": _nested(60)["a"]}]}
    reply = raw_request(regionlab, "PATCH", f"{DOCS}/d100", too_deep, PK_P)
    assert reply.status == 400, reply
    assert "128" in reply.message, reply.message
    assert "b" not in coll.read_item("d100", partition_key="p")["a"]
    fits = {"operations": [{"op": "add", "path": deep_path + "/b", "value": _nested(20)["a"]}]}
    assert raw_request(regionlab, "PATCH", f"{DOCS}/d100", fits, PK_P).status == 200
    assert_serves(sdk_client)


# ---- SQL: nesting and long chains ----------------------------------------------------------------
QUERY = {"x-ms-documentdb-isquery": "True", "content-type": "application/query+json"}
QUERY_NESTING_MAX_LEVELS = 64          # emulator/core/limits.py; restated as the contract


def _query(emu, sql: str) -> "RawReply":
    return raw_request(emu, "POST", DOCS, {"query": sql, "parameters": []}, QUERY)


def _nested_sql(depth: int) -> dict:
    half = depth // 2                  # a subquery counts two levels: its own and its SELECT's
    return {
        "parentheses": ("SELECT VALUE " + "(" * depth + "c.n" + ")" * depth + " FROM c", [7]),
        "arrays": ("SELECT VALUE " + "[" * depth + "c.n" + "]" * depth + " FROM c", None),
        "objects": ("SELECT VALUE " + '{"a":' * depth + "c.n" + "}" * depth + " FROM c", None),
        "function calls": ("SELECT VALUE " + "ABS(" * depth + "c.n" + ")" * depth + " FROM c", [7]),
        "member keys": ("SELECT VALUE c" + "[" * depth + '"n"' + "]" * depth + " FROM c", None),
        "NOT and parentheses": ("SELECT VALUE " + "NOT (" * depth + "c.t" + ")" * depth + " FROM c", [depth % 2 == 0]),
        "subqueries": ("SELECT VALUE " + "(SELECT VALUE " * half + "c.n" + ")" * half + " FROM c", [7]),
        "EXISTS": ("SELECT VALUE " + "EXISTS(SELECT VALUE " * half + "c.n" + ")" * half + " FROM c", [True]),
        "comparison chain": ("SELECT VALUE 1 " + "= 1 " * depth + "FROM c", None),
    }


@pytest.mark.parametrize("form", _nested_sql(2).keys())
def test_sql_nested_to_the_limit_works_and_past_it_is_400_naming_the_limit(regionlab, coll, sdk_client, form, caplog):
    caplog.set_level(logging.WARNING)
    coll.create_item({"id": "a", "pk": "p", "n": 7, "t": True})
    for depth in (57, QUERY_NESTING_MAX_LEVELS):
        sql, expected = _nested_sql(depth)[form]
        reply = _query(regionlab, sql)
        assert reply.status == 200, (depth, reply)
        if expected is not None:
            assert reply.json()["Documents"] == expected, reply
    sql, _ = _nested_sql(QUERY_NESTING_MAX_LEVELS + 2)[form]
    reply = _query(regionlab, sql)
    assert reply.status == 400, reply
    assert f"more than {QUERY_NESTING_MAX_LEVELS} levels deep" in reply.message, reply.message
    far = _query(regionlab, "SELECT VALUE " + "(" * 20_000 + "1" + ")" * 20_000 + " FROM c")
    assert far.status == 400, far
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text[:2000]
    assert_serves(sdk_client)


LONG_CHAINS = {
    "NOT x491": ("SELECT VALUE " + "NOT " * 491 + "(c.n = 7) FROM c", [False]),
    "NOT x490": ("SELECT VALUE " + "NOT " * 490 + "(c.n = 7) FROM c", [True]),
    "1+1+... x490": ("SELECT VALUE " + "1+" * 490 + "1 FROM c", [491]),
    "c.n-1-... x5000": ("SELECT VALUE c.n" + "-1" * 5000 + " FROM c", [7 - 5000]),
    "AND x3000": ("SELECT VALUE " + "c.n = 7 AND " * 3000 + "true FROM c", [True]),
    "OR x3000": ("SELECT VALUE " + "c.n = 8 OR " * 3000 + "c.n = 7 FROM c", [True]),
    "?? x3000": ("SELECT VALUE " + "c.missing ?? " * 3000 + "c.n FROM c", [7]),
    "|| x3000": ("SELECT VALUE " + "'a' || " * 3000 + "'b' FROM c", ["a" * 3000 + "b"]),
    "- x3000": ("SELECT VALUE " + "- " * 3000 + "c.n FROM c", [7]),
    "ternary else x3000": ("SELECT VALUE " + "c.n = 8 ? 0 : " * 3000 + "c.n FROM c", [7]),
    "member x3000": ("SELECT VALUE ARRAY_SLICE(c.chain, 0)" + "[0]" * 3000 + " FROM c", []),
}


@pytest.mark.parametrize("chain", LONG_CHAINS.keys())
def test_long_operator_chains_in_sql_work(regionlab, coll, chain):
    coll.create_item({"id": "a", "pk": "p", "n": 7, "chain": [[1]]})
    sql, expected = LONG_CHAINS[chain]
    reply = _query(regionlab, sql)
    assert reply.status == 200, reply
    assert reply.json()["Documents"] == expected, reply.body[:300]


# ---- continuations and other JSON in headers ----------------------------------------------------
def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


BAD_CONTINUATIONS = {"nested 5000 deep": "[" * 5000 + "]" * 5000, "a list key": '[0,["p"],"a"]',
                     "numbers for the key": "[0,5,5]", "offset not a number": '{"offset":"1"}',
                     "offset a float": '{"offset":1e30}', "not JSON": "{"}


@pytest.mark.parametrize("token", BAD_CONTINUATIONS.values(), ids=BAD_CONTINUATIONS.keys())
def test_a_continuation_that_is_not_one_we_issued_is_400(regionlab, coll, sdk_client, token, caplog):
    caplog.set_level(logging.WARNING)
    for i in range(3):
        coll.create_item({"id": f"i{i}", "pk": "p"})
    continuation = {"x-ms-continuation": _b64(token), "x-ms-max-item-count": "1"}
    feed = raw_request(regionlab, "GET", DOCS, headers=continuation)
    assert feed.status == 400 and "continuation" in feed.message, feed
    query = raw_request(regionlab, "POST", DOCS, {"query": "SELECT * FROM c"}, dict(QUERY, **continuation))
    assert query.status == 400 and "continuation" in query.message, query
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text[:2000]
    assert_serves(sdk_client)


def test_autoscale_settings_nested_deep_are_400(regionlab, sdk_client):
    auto = {"x-ms-cosmos-offer-autopilot-settings": '{"maxThroughput":' + "[" * 5000 + "]" * 5000 + "}"}
    reply = raw_request(regionlab, "POST", "/dbs", {"id": "autodb"}, auto)
    assert reply.status == 400 and "maxThroughput" in reply.message, reply
    assert raw_request(regionlab, "GET", "/dbs/autodb").status == 404
    assert_serves(sdk_client)


@pytest.mark.parametrize("throughput", ["1" + "0" * 400, "99999999999999999999", "1000001", "0", "-5"])
def test_throughput_outside_400_to_1_000_000_is_400_and_nothing_is_created(regionlab, sdk_client, throughput, caplog):
    caplog.set_level(logging.WARNING)
    sdk_client.create_database("tp")
    container = {"id": "big", "partitionKey": {"paths": ["/pk"], "kind": "Hash"}}
    reply = raw_request(regionlab, "POST", "/dbs/tp/colls", container, {"x-ms-offer-throughput": throughput})
    assert reply.status == 400 and "1000000 RU/s" in reply.message, reply
    assert raw_request(regionlab, "GET", "/dbs/tp/colls/big").status == 404
    assert raw_request(regionlab, "POST", "/dbs", {"id": "tp2"}, {"x-ms-offer-throughput": throughput}).status == 400
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text[:2000]
    assert_serves(sdk_client)
