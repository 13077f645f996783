"""Invariant: no request on any gateway route answers 5xx or logs an error (a traceback), and
the server keeps serving.

Hypothesis drives a real regionlab over real sockets with signed requests: every route (account,
databases, containers, items, queries, batch, patch, change feed, partition key ranges,
conflicts, delete by partition key, offers, users and permissions, requests signed with resource
tokens, and paths that are none of these), every method,
bodies from a JSON-ish grammar (deep nesting, numbers past a double, lone surrogates,
item/patch/batch/query/container/offer shapes, raw bytes), the headers the gateway reads
(partition key, continuation, consistency, session token, if-match, batch, query, change
feed, throughput) with good, odd and hostile values, and SQL from a grammar (every operator
and function, subqueries, deep nesting, long chains). 501 is allowed only for the resource
kinds regionlab documents as not implemented (stored procedures, UDFs, ...).

The suite runs a modest number of examples; for a long run set REGIONLAB_FUZZ_EXAMPLES, e.g.

    REGIONLAB_FUZZ_EXAMPLES=20000 python -m pytest tests/integration/test_gateway_fuzz.py -s

which prints how many requests got which status. (The bytes-level fuzz of the HTTP layer is
in test_http_layer.py.)
"""
import base64
import collections
import json
import logging
import os
import socket

from hypothesis import HealthCheck, given, settings, strategies as st

from sdk_harness import assert_serves, host_port, read_until_eof, signed_headers
from fuzz_json import IDS, JSON, JSONISH, NASTY_JSON_TEXT, NUMBERS, production_recursion_limit, texts
from tiers import examples

FUZZ_EXAMPLES = int(os.environ.get("REGIONLAB_FUZZ_EXAMPLES", examples(150)))
SOCKET_TIMEOUT_S = 60.0          # generous: a shared CI machine under load; a hang still fails
NOT_IMPLEMENTED_KINDS = ("attachments", "clientencryptionkeys", "schemas")     # emulator/service/paths.py: 501
DB, COLL = "db", "c"


# ---- SQL -----------------------------------------------------------------------------------------
FUNCTIONS = {"ABS": 1, "CEILING": 1, "ROUND": 1, "SQRT": 1, "POWER": 2, "LOG": 1, "EXP": 1, "SIN": 1, "ATN2": 2,
             "NUMBERBIN": 2, "CONCAT": 3, "CONTAINS": 2, "STARTSWITH": 3, "LOWER": 1, "SUBSTRING": 3,
             "LENGTH": 1, "REPLACE": 3, "REPLICATE": 2, "INDEX_OF": 2, "LEFT": 2, "REVERSE": 1, "TOSTRING": 1,
             "STRINGTOARRAY": 1, "STRINGTOOBJECT": 1, "STRINGTONUMBER": 1, "ARRAY_CONTAINS": 3,
             "ARRAY_LENGTH": 1, "ARRAY_SLICE": 3, "ARRAY_CONCAT": 2, "SETUNION": 2, "CHOOSE": 3,
             "IS_DEFINED": 1, "IS_NUMBER": 1, "IS_STRING": 1, "DATETIMEADD": 3, "DATETIMEDIFF": 3,
             "DATETIMEFROMPARTS": 3, "DATETIMEPART": 2, "TICKSTODATETIME": 1, "GETCURRENTDATETIME": 0,
             "COUNT": 1, "NOSUCH": 1, "udf.f": 1}     # name -> arguments it usually gets
BINARY = ["AND", "OR", "??", "=", "!=", "<>", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "||", "&", "|",
          "^", "<<", ">>", ">>>"]
_SQL_ATOMS = st.one_of(
    st.sampled_from(["c", "c.n", "c.s", "c.arr", "c.arr[0]", 'c["pk"]', "c.missing", "c.nested.a", "x", "@p",
                     "@missing", "true", "false", "null", "undefined", "1", "-1", "0.5", "1e308", str(2 ** 64),
                     str(2 ** 1100), "'s'", '"\\u00e9"', "'\\ud800'", "[]", "{}", "[1, 'a', null]", '{"k": c.n}']),
    st.builds(lambda s: "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'", texts(8)),
    NUMBERS.map(repr),
)


def _sql_combine(inner):
    return st.one_of(
        st.builds(lambda a, op, b: f"{a} {op} {b}", inner, st.sampled_from(BINARY), inner),
        st.builds(lambda op, a: f"{op}{a}", st.sampled_from(["NOT ", "-", "+", "~", "- "]), inner),
        st.builds(lambda f, args, n: f"{f}({', '.join(args[:FUNCTIONS[f] + n])})", st.sampled_from(sorted(FUNCTIONS)),
                  st.lists(inner, min_size=4, max_size=4), st.sampled_from([0, 0, 0, 0, -1, 1])),
        st.builds(lambda a, b, c: f"{a} BETWEEN {b} AND {c}", inner, inner, inner),
        st.builds(lambda a, items, neg: f"{a} {'NOT ' if neg else ''}IN ({', '.join(items)})", inner,
                  st.lists(inner, min_size=1, max_size=3), st.booleans()),
        st.builds(lambda a, p, e: f"{a} LIKE {p}" + (f" ESCAPE {e}" if e else ""), inner,
                  st.sampled_from(["'%a_'", "'[z-a]'", "'[^'", "'%%%%%%%%%%%%%%%%%%%%b'", "c.s", "'\\\\'"]),
                  st.sampled_from(["", "'!'", "'ab'", "1"])),
        st.builds(lambda a, b, c: f"{a} ? {b} : {c}", inner, inner, inner),
        st.builds(lambda a: f"({a})", inner),
        st.builds(lambda a: f"[{a}]", inner),
        st.builds(lambda k, a: f"{{{k}: {a}}}", st.sampled_from(["a", '"b c"', "select"]), inner),
        st.builds(lambda a, k: f"({a}){k}", inner, st.sampled_from([".a", "[0]", '["k"]', "[c.n]", ".value"])),
        st.builds(lambda kind, a, w: f"{kind}(SELECT VALUE {a} FROM x IN c.arr WHERE {w})",
                  st.sampled_from(["EXISTS", "ARRAY", ""]), inner, inner),
    )


_SQL_EXPR = st.recursive(_SQL_ATOMS, _sql_combine, max_leaves=10)


def _deepen(kind: str, n: int, e: str) -> str:
    return {"parens": "(" * n + e + ")" * n, "not": "NOT " * n + e, "plus": e + " + 1" * n,
            "and": e + " AND true" * n, "array": "[" * n + e + "]" * n, "object": '{"a":' * n + e + "}" * n,
            "call": "ABS(" * n + e + ")" * n, "ternary": "c.n = 1 ? 0 : " * n + e,
            "cmp": e + " = 1" * n, "minus": "- " * n + e, "exists": "EXISTS(SELECT VALUE " * n + e + ")" * n,
            "member": e + "[0]" * n}[kind]


_SQL_DEEP = st.builds(_deepen, st.sampled_from(["parens", "not", "plus", "and", "array", "object", "call",
                                                "ternary", "cmp", "minus", "exists", "member"]),
                      st.one_of(st.integers(0, 5), st.sampled_from([31, 32, 33, 56, 57, 63, 64, 65, 490, 491,
                                                                    1000, 5000])), _SQL_EXPR)


@st.composite
def sql_texts(draw):
    expr = st.one_of(_SQL_EXPR, _SQL_DEEP)
    select = draw(st.one_of(st.just("*"), expr.map(lambda e: "VALUE " + e),
                            st.lists(expr, min_size=1, max_size=3).map(", ".join),
                            expr.map(lambda e: e + " AS al")))
    parts = ["SELECT", draw(st.sampled_from(["", "", "", "DISTINCT", "TOP 3", "TOP @p", "TOP -1"])), select,
             draw(st.sampled_from(["FROM c", "FROM c", "FROM c", "FROM c JOIN x IN c.arr", "FROM x IN c.arr",
                                   "FROM c JOIN (SELECT VALUE y FROM y IN c.arr) z", "FROM root c", ""]))]
    if draw(st.booleans()):
        parts.append("WHERE " + draw(expr))
    parts.append(draw(st.sampled_from(["", "GROUP BY c.pk", "ORDER BY c.n", "ORDER BY c.n DESC, c.s",
                                       "ORDER BY " + draw(expr)])))
    parts.append(draw(st.sampled_from(["", "", "", "OFFSET 1 LIMIT 2", "OFFSET @p LIMIT 1", "OFFSET -1 LIMIT 99999999999"])))
    text = " ".join(p for p in parts if p)
    if draw(st.integers(0, 7)):
        return text
    return text[:draw(st.integers(0, len(text)))] + draw(texts(3))      # sometimes a truncated text


def _query_body(sql: str, params) -> bytes:
    return json.dumps({"query": sql, "parameters": params}).encode()


_GOOD_PARAMS = st.just([{"name": "@p", "value": 2}])
_PARAMS = st.one_of(_GOOD_PARAMS, _GOOD_PARAMS, _GOOD_PARAMS, st.none(), st.lists(st.fixed_dictionaries({"name": st.sampled_from(["@p", "@q", "p", 5]),
                                                              "value": JSON}), max_size=2),
                    st.just("not a list"), st.just([{"name": "@p"}]))


# ---- headers -------------------------------------------------------------------------------------
PK = "x-ms-documentdb-partitionkey"
# Continuations shaped like the ones the gateway issues (read feed: [partition, pk, id]; query:
# {"offset", "snap"}), with wrong types and values in them.
CONTINUATION_SHAPES = ['[0,"[\\"p\\"]","a"]', '[0,["p"],"a"]', '[99,"x","y"]', '[-1,"[\\"p\\"]","a"]', "[0,5,5]",
                       '{"offset":1,"snap":{"0":[0,5]}}', '{"offset":1e30}', '{"offset":1,"snap":[]}', '{"offset":2}',
                       '{"offset":1,"snap":{"0":[0,99999999999999999999]}}', '{"offset":true}', "[]", "{}"]


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode("utf-8", "surrogatepass")).decode()

_PK_VALUES = st.one_of(st.sampled_from(['["p"]', '["q"]', "[5]", "[null]", "[{}]", "[]", '["p","q"]', "[true]"]),
                       NASTY_JSON_TEXT, JSON.map(json.dumps), texts())
_HEADERS = {
    PK: _PK_VALUES,
    "x-ms-continuation": st.one_of(texts(40), st.sampled_from(["eyJvZmZzZXQiOjF9", "eyJvZmZzZXQiOi0xfQ==", "W10=",
                                                                '{"token":"x","range":{"min":"","max":"FF"}}', "0"]),
                                   st.one_of(NASTY_JSON_TEXT.filter(lambda t: len(t) < 40_000), JSON.map(json.dumps),
                                             st.sampled_from(CONTINUATION_SHAPES)).map(_b64)),
    "x-ms-consistency-level": st.sampled_from(["Session", "Eventual", "Strong", "BoundedStaleness",
                                               "ConsistentPrefix", "strong", "Nope", ""]),
    "x-ms-session-token": st.one_of(texts(30), st.sampled_from(["0:1#5", "0:-1#99999999999999999999", "1:0#1#3=9",
                                                                 "0:1#5,1:2#3", "#", ":", "0:abc"])),
    "if-match": st.one_of(texts(20), st.sampled_from(['"00000000-0000-0000-0000-000000000000"', "*", ""])),
    "if-none-match": st.one_of(texts(20), st.sampled_from(["*", '"1"', "0", "-1", "99999999999999999999"])),
    "x-ms-cosmos-is-batch-request": st.sampled_from(["True", "true", "False", "x"]),
    "x-ms-cosmos-batch-atomic": st.sampled_from(["True", "False"]),
    "x-ms-documentdb-isquery": st.sampled_from(["True", "False"]),
    "x-ms-documentdb-query-enablecrosspartition": st.sampled_from(["True", "False", "x"]),
    "x-ms-max-item-count": st.one_of(st.integers(-5, 10 ** 12).map(str), texts(5)),
    "x-ms-documentdb-partitionkeyrangeid": st.one_of(st.sampled_from(["0", "1", "99"]), texts(6)),
    "x-ms-documentdb-is-upsert": st.sampled_from(["True", "False"]),
    "a-im": st.sampled_from(["Incremental feed", "Full-Fidelity Feed", "x"]),
    "if-modified-since": st.one_of(texts(30), st.sampled_from(["Tue, 01 Jul 2025 12:00:00 GMT",
                                                                "Tue, 01 Jul 99999 12:00:00 GMT", "0"])),
    "x-ms-documentdb-query-iscontinuationexpected": st.sampled_from(["True", "False"]),
    "x-ms-read-key-type": st.sampled_from(["EffectivePartitionKeyRange", "x"]),
    "x-ms-start-epk": st.one_of(texts(8), st.just("00")),
    "x-ms-end-epk": st.one_of(texts(8), st.just("FF")),
    "x-ms-documentdb-expiry-seconds": st.one_of(st.integers(-5, 10 ** 12).map(str), texts(5)),
    "x-ms-offer-throughput": st.one_of(st.integers(-1, 10 ** 12).map(str), texts(5)),
    "x-ms-cosmos-offer-autopilot-settings": st.one_of(JSON.map(json.dumps), NASTY_JSON_TEXT),
    "x-ms-documentdb-populatequerymetrics": st.sampled_from(["True"]),
    "x-ms-cosmos-is-query-plan-request": st.sampled_from(["True"]),
    "prefer": st.sampled_from(["return=minimal", "x"]),
    "content-type": st.sampled_from(["application/json", "application/query+json", "text/plain"]),
    "x-ms-cosmos-intended-collection-rid": texts(10),
}


@st.composite
def header_sets(draw, likely=()):
    """A few of the gateway's headers, with good or hostile values; `likely` ones more often."""
    names = draw(st.lists(st.sampled_from(sorted(_HEADERS)), max_size=4, unique=True))
    names += [n for n in likely if draw(st.integers(0, 3)) > 0 and n not in names]
    return {n: draw(_HEADERS[n]) for n in names}


# ---- requests, one kind per route family -----------------------------------------------------------
DOCS = f"/dbs/{DB}/colls/{COLL}/docs"
_ITEM_PATH = st.one_of(st.sampled_from(IDS).map(lambda i: f"{DOCS}/{i}"),
                       texts(10).map(lambda s: DOCS + "/" + "".join(ch if ch not in "/?# " else "_" for ch in s) + "x"),
                       st.just(f"{DOCS}/%FF%00"), st.just(f"{DOCS}/a%2Fb"))
_RANDOM_PATH = st.one_of(
    st.lists(st.sampled_from(["dbs", DB, "colls", COLL, "docs", "a", "pkranges", "offers", "operations",
                              "partitionkeydelete", "conflicts", "sprocs", "udfs", "users", "permissions", "x", "", "%00",
                              "AAAAAA==", "..", "%2e%2e"]), max_size=8).map(lambda s: "/" + "/".join(s)),
    texts(20).map(lambda s: "/" + "".join(ch for ch in s if ch not in " ?#")),
)
_METHODS = st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"])


def _patch_ops():
    op = st.fixed_dictionaries({"op": st.sampled_from(["add", "set", "replace", "remove", "incr", "move", "x", 5]),
                                "path": st.one_of(st.sampled_from(["/n", "/x", "/arr/0", "/arr/-", "/id", "/pk",
                                                                   "/_ts", "/", "", "/a/b", "/nested/a"]), texts(8)),
                                "value": JSON},
                               optional={"from": st.sampled_from(["/n", "/arr", "/missing"])})
    return st.lists(op, max_size=4)


_BATCH_OP = st.fixed_dictionaries(
    {"operationType": st.sampled_from(["Create", "Upsert", "Read", "Replace", "Delete", "Patch", "x", 5])},
    optional={"id": st.one_of(st.sampled_from(IDS), JSON), "ifMatch": st.one_of(texts(5), JSON),
              "resourceBody": st.one_of(st.fixed_dictionaries({"id": st.sampled_from(IDS), "pk": st.just("p")},
                                                              optional={"n": JSON}),
                                        st.fixed_dictionaries({"operations": _patch_ops()}), JSON)})


def _b(value) -> bytes:
    return json.dumps(value).encode()


@st.composite
def requests(draw):
    """(method, path, headers, body bytes or None)."""
    kind = draw(st.sampled_from(["create", "read", "replace", "patch", "delete", "query", "batch", "feed",
                                 "changefeed", "pkdelete", "metadata", "offers", "users", "token", "random"]))
    pk = {PK: '["p"]'}
    if kind == "create":
        body = draw(st.one_of(st.builds(_b, st.fixed_dictionaries({"id": st.one_of(st.sampled_from(IDS), JSON),
                                                                   "pk": st.one_of(st.just("p"), JSON)},
                                                                  optional={"n": JSON})),
                              JSONISH.map(str.encode)))
        return "POST", DOCS, {**pk, **draw(header_sets([PK, "x-ms-documentdb-is-upsert", "if-match"]))}, body
    if kind == "read":
        return "GET", draw(_ITEM_PATH), {**pk, **draw(header_sets([PK, "if-none-match", "x-ms-session-token",
                                                                    "x-ms-consistency-level"]))}, None
    if kind == "replace":
        body = draw(st.one_of(st.builds(_b, st.fixed_dictionaries({"id": st.sampled_from(IDS), "pk": st.just("p"),
                                                                   "n": JSON})), JSONISH.map(str.encode)))
        return "PUT", draw(_ITEM_PATH), {**pk, **draw(header_sets([PK, "if-match"]))}, body
    if kind == "patch":
        cond = st.one_of(st.none(), sql_texts(), st.builds(lambda e: "FROM c WHERE " + e, _SQL_EXPR), JSON)
        body = draw(st.one_of(st.builds(lambda ops, c: _b({"operations": ops, "condition": c}), _patch_ops(), cond),
                              JSONISH.map(str.encode)))
        return "PATCH", draw(_ITEM_PATH), {**pk, **draw(header_sets([PK, "if-match"]))}, body
    if kind == "delete":
        return "DELETE", draw(_ITEM_PATH), {**pk, **draw(header_sets([PK, "if-match"]))}, None
    if kind == "query":
        body = draw(st.one_of(st.builds(_query_body, sql_texts(), _PARAMS), JSONISH.map(str.encode)))
        headers = {"x-ms-documentdb-isquery": "True", "content-type": "application/query+json"}
        headers.update(draw(header_sets(["x-ms-continuation", "x-ms-max-item-count", PK,
                                         "x-ms-documentdb-partitionkeyrangeid"])))
        path = draw(st.sampled_from([DOCS, f"/dbs/{DB}/colls", "/dbs", "/offers", f"/dbs/{DB}/colls/{COLL}/pkranges"]))
        return "POST", path, headers, body
    if kind == "batch":
        body = draw(st.one_of(st.lists(_BATCH_OP, max_size=5).map(_b), JSONISH.map(str.encode)))
        headers = {**pk, "x-ms-cosmos-is-batch-request": "True", "x-ms-cosmos-batch-atomic": "True"}
        headers.update(draw(header_sets([PK])))
        return "POST", DOCS, headers, body
    if kind == "feed":
        return "GET", DOCS, draw(header_sets(["x-ms-continuation", "x-ms-max-item-count", PK,
                                              "x-ms-documentdb-partitionkeyrangeid"])), None
    if kind == "changefeed":
        headers = {"a-im": "Incremental feed", "x-ms-documentdb-partitionkeyrangeid": "0"}
        headers.update(draw(header_sets(["if-none-match", "if-modified-since", "a-im", PK, "x-ms-start-epk"])))
        return "GET", DOCS, headers, None
    if kind == "pkdelete":
        return "POST", f"/dbs/{DB}/colls/{COLL}/operations/partitionkeydelete", draw(header_sets([PK])), None
    if kind == "metadata":
        path = draw(st.sampled_from(["/", "/dbs", f"/dbs/{DB}", f"/dbs/{DB}/colls", f"/dbs/{DB}/colls/other",
                                     f"/dbs/{DB}/colls/{COLL}/pkranges", f"/dbs/{DB}/colls/{COLL}/conflicts",
                                     "/dbs/other", "/dbs/AAAAAA==/colls/AAAAAAAAAAA="]))
        body = draw(st.one_of(st.none(), JSONISH.map(str.encode),
                              st.builds(_b, st.fixed_dictionaries({"id": st.one_of(st.sampled_from(["other", "o2"]), JSON)},
                                                                  optional={"partitionKey": JSON,
                                                                            "indexingPolicy": JSON,
                                                                            "defaultTtl": JSON}))))
        method = draw(st.sampled_from(["GET", "POST", "PUT", "DELETE"] if path not in (f"/dbs/{DB}", f"/dbs/{DB}/colls/{COLL}")
                                      else ["GET", "PUT"]))
        return method, path, draw(header_sets(["x-ms-offer-throughput", "x-ms-continuation"])), body
    if kind == "offers":
        path = draw(st.sampled_from(["/offers", "/offers/x", "/offers/AAAA"]))
        body = draw(st.one_of(st.none(), JSONISH.map(str.encode)))
        return draw(st.sampled_from(["GET", "POST", "PUT"])), path, draw(header_sets()), body
    if kind == "users":
        return _users_request(draw)
    if kind == "token":
        method, path, headers, body = draw(requests())
        return method, path, {**headers, "authorization": draw(_RESOURCE_TOKENS)}, body
    path = draw(_RANDOM_PATH)
    if path.rstrip("/") in (f"/dbs/{DB}", f"/dbs/{DB}/colls/{COLL}"):
        path += "/x"                     # keep the fixture's database and container
    body = draw(st.one_of(st.none(), JSONISH.map(str.encode), st.binary(max_size=40)))
    return draw(_METHODS), path, draw(header_sets()), body


_USERS = f"/dbs/{DB}/users"
_PERMISSION_BODY = st.fixed_dictionaries(
    {"id": st.one_of(st.sampled_from(["p", "q"]), JSON)},
    optional={"permissionMode": st.one_of(st.sampled_from(["All", "read", "x"]), JSON),
              "resource": st.one_of(st.sampled_from([f"dbs/{DB}/colls/{COLL}", f"dbs/{DB}/colls/{COLL}/docs/a",
                                                     f"dbs/{DB}/colls/x", f"dbs/{DB}", "dbs/AAAAAA==/colls/AAAAAAAAAAA=",
                                                     f"dbs/{DB}/colls/{COLL}/docs", "/", ""]), texts(20), JSON),
              "resourcePartitionKey": st.one_of(st.sampled_from([["p"], [], ["p", "q"], [{}], [[1]]]), JSON)})
# Resource tokens as a client might send them: garbage, or the shape with bad signatures and claims.
_RESOURCE_TOKENS = st.one_of(
    texts(30).map(lambda t: "type=resource&ver=1&sig=" + t),
    st.builds(lambda sig, claims: f"type%3Dresource%26ver%3D1%26sig%3D{sig}%3B{claims}%3B",
              texts(10), st.one_of(JSON.map(lambda v: base64.b64encode(json.dumps(v).encode()).decode()), texts(10))))


def _users_request(draw):
    path = draw(st.sampled_from([_USERS, f"{_USERS}/u", f"{_USERS}/nobody", f"{_USERS}/u/permissions",
                                 f"{_USERS}/u/permissions/p", f"{_USERS}/u/permissions/x", f"{_USERS}/u/x",
                                 f"{_USERS}/u/permissions/p/x", f"/dbs/other/users"]))
    body = draw(st.one_of(st.none(), JSONISH.map(str.encode), _PERMISSION_BODY.map(_b),
                          st.fixed_dictionaries({"id": st.one_of(st.sampled_from(["u", "v"]), JSON)}).map(_b)))
    headers = draw(header_sets(["x-ms-documentdb-expiry-seconds", "x-ms-documentdb-is-upsert",
                                "x-ms-documentdb-isquery"]))
    return draw(st.sampled_from(["GET", "POST", "PUT", "DELETE"])), path, headers, body


# ---- the wire ------------------------------------------------------------------------------------
def _send(emu, method: str, path: str, headers: dict, body: bytes | None) -> int:
    """One signed request on a fresh connection; the status of its reply."""
    signed = signed_headers(emu.key, method, path)
    signed.update(headers)
    signed["connection"] = "close"
    if body is not None:
        signed["content-length"] = str(len(body))
    lines = [f"{method} {path} HTTP/1.1", "Host: localhost", *(f"{k}: {v}" for k, v in signed.items())]
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogatepass") + (body or b"")
    with socket.create_connection(host_port(emu.endpoint), timeout=SOCKET_TIMEOUT_S) as sock:
        sock.sendall(raw)
        reply = read_until_eof(sock)
    assert reply.startswith(b"HTTP/1.1 "), (method, path, reply[:200])
    return int(reply.split(b" ", 2)[1])


def _allowed_5xx(status: int, path: str) -> bool:
    return status == 501 and any(f"/{kind}" in path for kind in NOT_IMPLEMENTED_KINDS)


def _seed(sdk_client):
    from azure.cosmos import PartitionKey
    c = sdk_client.create_database(DB).create_container(COLL, PartitionKey(path="/pk"))
    for i, item_id in enumerate(IDS):
        c.create_item({"id": item_id, "pk": "p", "n": i, "s": "s" * i, "arr": [1, [i]], "nested": {"a": i}})
    u = sdk_client.get_database_client(DB).create_user({"id": "u"})
    u.create_permission({"id": "p", "permissionMode": "all", "resource": c.container_link})
    return c


def _run_fuzz(regionlab, caplog, strategy, name: str):
    caplog.set_level(logging.WARNING)
    statuses: collections.Counter = collections.Counter()

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
    @given(req=strategy)
    def one(req):
        method, path, headers, body = req
        caplog.clear()
        with production_recursion_limit():
            status = _send(regionlab, method, path, headers, body)
        statuses[status] += 1
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert status < 500 or _allowed_5xx(status, path), (status, method, path, headers, (body or b"")[:2000])
        assert not errors, (method, path, headers, (body or b"")[:2000], [r.getMessage() for r in errors])

    one()
    print(f"\n{name}: {sum(statuses.values())} requests, statuses {dict(sorted(statuses.items()))}")


def test_no_request_on_any_gateway_route_answers_5xx_or_logs_an_error(regionlab, sdk_client, caplog):
    _seed(sdk_client)
    _run_fuzz(regionlab, caplog, requests(), "gateway routes")
    assert_serves(sdk_client)


def test_no_sql_text_answers_5xx_or_logs_an_error(regionlab, sdk_client, caplog):
    _seed(sdk_client)
    query_headers = {"x-ms-documentdb-isquery": "True", "content-type": "application/query+json"}
    scope = st.one_of(st.just({PK: '["p"]'}), st.just({}), header_sets())       # mostly a valid scope
    queries = st.builds(lambda sql, params, h: ("POST", DOCS, {**query_headers, **h}, _query_body(sql, params)),
                        sql_texts(), _PARAMS, scope)
    _run_fuzz(regionlab, caplog, queries, "SQL")
    assert_serves(sdk_client)
