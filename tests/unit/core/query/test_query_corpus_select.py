"""Proves projection, ORDER BY, paging, DISTINCT, aggregates, GROUP BY, JOIN
and subqueries over the 60 fixed documents of `query_corpus_data`.

Every expected result is computed right here from DOCS with ordinary Python
(comprehensions, sorted, sum, max) or written out by hand; the engine under
test never produces its own expectations.
"""

from __future__ import annotations

import pytest

from regionlab.emulator.core.query import compile_query
from query_corpus_data import DOCS, NOW_MS, ids, rank, where
from query_reference import MISSING, get, is_num, row




def added(values) -> float:
    """Left-to-right addition, as the engine's SUM and AVG (and the service) do it. Python's own
    sum() compensates float rounding since 3.12, so it is not the reference on every Python."""
    total = 0
    for v in values:
        total += v
    return total

def q(text, expected, params=None):
    return pytest.param(text, params, expected, id=text[:90])


def by(key, reverse=False, docs=DOCS):
    return sorted(docs, key=key, reverse=reverse)


def values(path_fn, docs=DOCS):
    return [v for v in (path_fn(d) for d in docs) if v is not MISSING]


def first_seen(seq):
    out = []
    for v in seq:
        if v not in out:
            out.append(v)
    return out


def groups(key_fn, docs=DOCS):
    out: dict = {}
    for d in docs:
        out.setdefault(repr(key_fn(d)), (key_fn(d), []))[1].append(d)
    return list(out.values())


NUMS = where(lambda d: is_num(get(d, "n")))
TAGGED = [(d, t) for d in DOCS for t in d.get("tags", [])]
ITEMS = [(d, i) for d in DOCS for i in d["items"]]
ZIPS = values(lambda d: get(d, "addr", "zip"))
SCALAR_N = where(lambda d: get(d, "n") is not MISSING and type(get(d, "n")) not in (list, dict))

PROJECTION = [
    q("SELECT * FROM c", DOCS),
    q('SELECT * FROM root r WHERE r.id = "d05"', [DOCS[5]]),
    q('SELECT * FROM Families f WHERE f.id = "d06"', [DOCS[6]]),
    q("SELECT c.id, c.name FROM c", [row(id=d["id"], name=get(d, "name")) for d in DOCS]),
    q("SELECT c.id AS key, c.addr.city FROM c", [row(key=d["id"], city=get(d, "addr", "city")) for d in DOCS]),
    q("SELECT c.id, c.n * 2 FROM c WHERE c.pk = 'a'",
      [row(id=d["id"], **{"$1": d["n"] * 2 if is_num(get(d, "n")) else MISSING}) for d in where(lambda d: d["pk"] == "a")]),
    q('SELECT c.id, 1, "x" FROM c WHERE c.id = "d03"', [{"id": "d03", "$1": 1, "$2": "x"}]),
    q('SELECT c FROM c WHERE c.id = "d01"', [{"c": DOCS[1]}]),
    q("SELECT c.missing FROM c", [{}] * len(DOCS)),
    q("SELECT VALUE c.missing FROM c", []),
    q("SELECT VALUE c.name FROM c", values(lambda d: get(d, "name"))),
    q('SELECT VALUE {"id": c.id, "city": c.addr.city} FROM c', [row(id=d["id"], city=get(d, "addr", "city")) for d in DOCS]),
    q('SELECT VALUE [c.id, c.n] FROM c WHERE c.id IN ("d01", "d04")', [["d01", 0.5], ["d04"]]),
    q('SELECT c["id"], c.tags[0] AS first FROM c', [row(id=d["id"], first=get(d, "tags", 0)) for d in DOCS]),
    q("SELECT VALUE 1 + 2", [3]),
    q('SELECT VALUE "a" || "b"', ["ab"]),
    q("SELECT 1 AS one", [{"one": 1}]),
    q("SELECT VALUE c.nested.a.b FROM c", values(lambda d: get(d, "nested", "a", "b"))),
    q('SELECT VALUE c.n / 8 FROM c WHERE c.id = "d20"', [2.5]),
    q("SELECT VALUE 1 / 0", []),
    q('SELECT VALUE c.name ?? "none" FROM c WHERE c.pk = "c"', [get(d, "name") if "name" in d else "none" for d in where(lambda d: d["pk"] == "c")]),
    q('SELECT VALUE {a: 1, "b": [1, {c: true}], d: undefined}', [{"a": 1, "b": [1, {"c": True}]}]),
    q("SELECT VALUE c.n[0] FROM c", values(lambda d: get(d, "n", 0))),
    q('SELECT VALUE c.n["v"] FROM c', values(lambda d: get(d, "n", "v"))),
    q("SELECT VALUE c.flag ? 'yes' : 'no' FROM c WHERE c.pk = 'b'", ["yes" if get(d, "flag") is True else "no" for d in where(lambda d: d["pk"] == "b")]),
]

ORDERING = [
    q("SELECT VALUE c.id FROM c ORDER BY c.n", ids(by(lambda d: rank(get(d, "n"))))),
    q("SELECT VALUE c.id FROM c ORDER BY c.n DESC", ids(by(lambda d: rank(get(d, "n")), reverse=True))),
    q("SELECT VALUE c.id FROM c ORDER BY c.name", ids(by(lambda d: rank(get(d, "name"))))),
    q("SELECT VALUE c.id FROM c ORDER BY c.name DESC", ids(by(lambda d: rank(get(d, "name")), reverse=True))),
    q("SELECT VALUE c.id FROM c ORDER BY c.pk, c.score DESC", ids(by(lambda d: (d["pk"], -d["score"])))),
    q("SELECT VALUE c.id FROM c ORDER BY c.pk DESC, c.id", ids(by(lambda d: d["pk"], reverse=True, docs=by(lambda d: d["id"])))),
    q("SELECT VALUE c.addr.zip FROM c ORDER BY c.addr.zip DESC", sorted(ZIPS, reverse=True)),
    q("SELECT VALUE c.id FROM c ORDER BY c.tags", ids(by(lambda d: rank(get(d, "tags"))))),
    q("SELECT TOP 5 VALUE c.id FROM c WHERE IS_NUMBER(c.n) ORDER BY c.n DESC", ids(by(lambda d: d["n"], reverse=True, docs=NUMS))[:5]),
    q("SELECT c.id, c.score FROM c ORDER BY c.score DESC OFFSET 5 LIMIT 3",
      [{"id": d["id"], "score": d["score"]} for d in by(lambda d: d["score"], reverse=True)][5:8]),
    q("SELECT VALUE c.id FROM c ORDER BY c.nested.a.b ASC, c.id DESC",
      ids(by(lambda d: rank(get(d, "nested", "a", "b")), docs=by(lambda d: d["id"], reverse=True)))),
]

PAGING = [
    q("SELECT TOP 3 VALUE c.id FROM c", ids(DOCS[:3])),
    q("SELECT TOP 0 VALUE c.id FROM c", []),
    q("SELECT VALUE c.id FROM c OFFSET 10 LIMIT 5", ids(DOCS[10:15])),
    q("SELECT VALUE c.id FROM c OFFSET 58 LIMIT 10", ids(DOCS[58:])),
    q("SELECT VALUE c.id FROM c OFFSET 0 LIMIT 0", []),
    q("SELECT TOP @n VALUE c.id FROM c", ids(DOCS[:4]), [{"name": "@n", "value": 4}]),
    q("SELECT VALUE c.id FROM c OFFSET @o LIMIT @l", ids(DOCS[7:9]), [{"name": "@o", "value": 7}, {"name": "@l", "value": 2}]),
    q("SELECT DISTINCT VALUE c.pk FROM c", ["a", "b", "c"]),
    q("SELECT DISTINCT c.pk, c.group FROM c", first_seen({"pk": d["pk"], "group": d["group"]} for d in DOCS)),
    q("SELECT DISTINCT VALUE c.addr.city FROM c", first_seen(values(lambda d: get(d, "addr", "city")))),
    q("SELECT DISTINCT VALUE c.nested FROM c", first_seen(d["nested"] for d in DOCS)),
    q("SELECT DISTINCT VALUE t FROM c JOIN t IN c.tags ORDER BY t", ["blue", "green", "red"]),
    q("SELECT DISTINCT TOP 2 VALUE c.group FROM c", ["g0", "g1"]),
    q("SELECT DISTINCT VALUE c.pk FROM c OFFSET 1 LIMIT 1", ["b"]),
]

AGGREGATES = [
    q("SELECT VALUE COUNT(1) FROM c", [60]),
    q("SELECT COUNT(1) FROM c", [{"$1": 60}]),
    q("SELECT VALUE COUNT(c.n) FROM c", [len(values(lambda d: get(d, "n")))]),
    q("SELECT VALUE COUNT(1) FROM c WHERE c.n > 1000", [0]),
    q("SELECT VALUE SUM(c.score) FROM c", [added(d["score"] for d in DOCS)]),
    q("SELECT VALUE SUM(c.n) FROM c WHERE IS_NUMBER(c.n)", [added(d["n"] for d in NUMS)]),
    q("SELECT VALUE SUM(c.n) FROM c", []),
    q("SELECT SUM(c.n) AS s FROM c", [{}]),
    q("SELECT VALUE SUM(c.n) FROM c WHERE c.n > 1000", [0]),
    q("SELECT VALUE AVG(c.addr.zip) FROM c", [added(ZIPS) / len(ZIPS)]),
    q("SELECT VALUE AVG(c.n) FROM c WHERE c.n > 1000", []),
    q("SELECT MIN(c.score) AS lo, MAX(c.score) AS hi FROM c",
      [{"lo": min(d["score"] for d in DOCS), "hi": max(d["score"] for d in DOCS)}]),
    q("SELECT VALUE MAX(c.name) FROM c", [max(values(lambda d: get(d, "name")))]),
    q("SELECT VALUE MAX(c.n) FROM c WHERE NOT IS_ARRAY(c.n) AND NOT IS_OBJECT(c.n)",
      [max(d["n"] for d in SCALAR_N if type(d["n"]) is str)]),
    q("SELECT VALUE MIN(c.n) FROM c WHERE NOT IS_ARRAY(c.n) AND NOT IS_OBJECT(c.n)", [None]),
    q("SELECT VALUE MIN(c.n) FROM c WHERE IS_BOOL(c.n) OR IS_NUMBER(c.n)", [False]),
    q("SELECT VALUE MAX(c.n) FROM c", []),
    q("SELECT VALUE MAX(c.n) FROM c WHERE c.n > 1000", []),
    q('SELECT COUNT(1) AS n, SUM(c.score) AS s FROM c WHERE c.pk = "a"',
      [{"n": 20, "s": added(d["score"] for d in DOCS if d["pk"] == "a")}]),
    q("SELECT VALUE COUNT(1) FROM c JOIN t IN c.tags", [len(TAGGED)]),
    q("SELECT VALUE COUNT(1) * 2 FROM c", [120]),
    q("SELECT COUNT(1), MAX(c.id) FROM c", [{"$1": 60, "$2": "d59"}]),
    q("SELECT VALUE SUM(i.qty) FROM c JOIN i IN c.items", [added(i["qty"] for _, i in ITEMS)]),
]

GROUPING = [
    q("SELECT c.pk, COUNT(1) AS n FROM c GROUP BY c.pk", [{"pk": k, "n": len(g)} for k, g in groups(lambda d: d["pk"])]),
    q("SELECT VALUE c.group FROM c GROUP BY c.group", [k for k, _ in groups(lambda d: d["group"])]),
    q("SELECT c.group, SUM(c.score) AS s, MAX(c.id) AS last FROM c GROUP BY c.group",
      [{"group": k, "s": added(d["score"] for d in g), "last": max(d["id"] for d in g)} for k, g in groups(lambda d: d["group"])]),
    q("SELECT c.addr.city AS city, COUNT(1) AS n FROM c GROUP BY c.addr.city",
      [row(city=k, n=len(g)) for k, g in groups(lambda d: get(d, "addr", "city"))]),
    q("SELECT c.pk, c.flag, COUNT(1) AS n FROM c GROUP BY c.pk, c.flag",
      [row(pk=k[0], flag=k[1], n=len(g)) for k, g in groups(lambda d: (d["pk"], get(d, "flag")))]),
    q("SELECT COUNT(1) AS n FROM c WHERE c.n > 1000 GROUP BY c.pk", []),
    q("SELECT t AS tag, COUNT(1) AS n FROM c JOIN t IN c.tags GROUP BY t",
      [{"tag": k, "n": len(g)} for k, g in groups(lambda dt: dt[1], docs=TAGGED)]),
]

JOINS = [
    q("SELECT c.id, t FROM c JOIN t IN c.tags", [{"id": d["id"], "t": t} for d, t in TAGGED]),
    q("SELECT VALUE t FROM t IN c.tags", [t for _, t in TAGGED]),
    q("SELECT VALUE i.sku FROM i IN c.items", [i["sku"] for _, i in ITEMS]),
    q("SELECT c.id, i.sku, t FROM c JOIN i IN c.items JOIN t IN c.tags WHERE i.qty > 2",
      [{"id": d["id"], "sku": i["sku"], "t": t} for d, i in ITEMS if i["qty"] > 2 for t in d.get("tags", [])]),
    q('SELECT VALUE i.qty FROM c JOIN i IN c.items WHERE c.pk = "a" AND i.qty >= 2', [i["qty"] for d, i in ITEMS if d["pk"] == "a" and i["qty"] >= 2]),
    q('SELECT * FROM t IN c.tags WHERE t = "green"', [t for _, t in TAGGED if t == "green"]),
    q("SELECT VALUE x.a FROM c.nested x", [d["nested"]["a"] for d in DOCS]),
    q("SELECT VALUE c.id FROM c JOIN t IN c.n", [d["id"] for d in DOCS if type(get(d, "n")) is list]),
]

SUBQUERIES = [
    q('SELECT VALUE c.id FROM c WHERE EXISTS(SELECT VALUE t FROM t IN c.tags WHERE t = "green")',
      ids(where(lambda d: "green" in d.get("tags", [])))),
    q('SELECT VALUE c.id FROM c WHERE NOT EXISTS(SELECT VALUE t FROM t IN c.tags WHERE t = "blue")',
      ids(where(lambda d: get(d, "tags") is MISSING or "blue" not in d["tags"]))),
    q('SELECT c.id, ARRAY(SELECT VALUE i.sku FROM i IN c.items WHERE i.qty > 1) AS skus FROM c WHERE c.pk = "b"',
      [{"id": d["id"], "skus": [i["sku"] for i in d["items"] if i["qty"] > 1]} for d in where(lambda d: d["pk"] == "b")]),
    q('SELECT c.id, (SELECT VALUE COUNT(1) FROM i IN c.items) AS k FROM c WHERE c.pk = "c"',
      [{"id": d["id"], "k": len(d["items"])} for d in where(lambda d: d["pk"] == "c")]),
    q("SELECT VALUE (SELECT VALUE MAX(i.qty) FROM i IN c.items) FROM c", [max(i["qty"] for i in d["items"]) for d in DOCS if d["items"]]),
    q("SELECT VALUE c.id FROM c WHERE (SELECT VALUE COUNT(1) FROM t IN c.tags) >= 2",
      ids(where(lambda d: get(d, "tags") is not MISSING and len(d["tags"]) >= 2))),
    q('SELECT c.id, x FROM c JOIN (SELECT VALUE t FROM t IN c.tags WHERE t != "blue") x',
      [{"id": d["id"], "x": t} for d, t in TAGGED if t != "blue"]),
    q("SELECT VALUE ARRAY(SELECT VALUE 1)", [[1]]),
    q("SELECT VALUE ARRAY(SELECT i.sku FROM i IN c.items WHERE i.qty = 3) FROM c WHERE c.id = 'd02'",
      [[{"sku": i["sku"]} for i in DOCS[2]["items"] if i["qty"] == 3]]),
    q("SELECT VALUE c.id FROM c WHERE ARRAY_LENGTH(ARRAY(SELECT VALUE i FROM i IN c.items WHERE i.qty > 3)) > 0",
      ids(where(lambda d: any(i["qty"] > 3 for i in d["items"])))),
]

CASES = PROJECTION + ORDERING + PAGING + AGGREGATES + GROUPING + JOINS + SUBQUERIES


@pytest.mark.parametrize("text,params,expected", CASES)
def test_select(text, params, expected):
    assert compile_query(text, params).execute(DOCS, NOW_MS) == expected


@pytest.mark.parametrize("text,expected_type", [
    ("SELECT VALUE SUM(c.addr.zip) FROM c", int),
    ("SELECT VALUE AVG(c.addr.zip) FROM c", float),
    ("SELECT VALUE COUNT(1) FROM c", int),
    ("SELECT VALUE 6 / 3", int),
    ("SELECT VALUE 7 / 2", float),
    ("SELECT VALUE 2 * 3", int),
    ("SELECT VALUE 2 * 1.5", float),
])
def test_number_types(text, expected_type):
    (result,) = compile_query(text).execute(DOCS, NOW_MS)
    assert type(result) is expected_type


def test_flags():
    assert compile_query("SELECT VALUE COUNT(1) FROM c").is_aggregate
    assert compile_query("SELECT c.pk FROM c GROUP BY c.pk").is_aggregate
    assert not compile_query("SELECT * FROM c ORDER BY c.n").is_aggregate
    assert compile_query("SELECT * FROM c ORDER BY c.n").has_order_by
    assert not compile_query("SELECT * FROM c").has_order_by


def test_compiled_query_is_reusable():
    query = compile_query("SELECT VALUE c.id FROM c WHERE c.n > @x", [{"name": "@x", "value": 50}])
    first = query.execute(DOCS, NOW_MS)
    assert query.execute(DOCS, NOW_MS) == first
    assert query.execute(DOCS[:10], NOW_MS) == []
