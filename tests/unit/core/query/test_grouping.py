"""Proves the engine applies the service's GROUP BY rules to the SELECT list and the keys: the
grouped queries the service runs (group keys, expressions over them, aggregates, literals,
aliases, SELECT VALUE) compile and give their groups; the ones it refuses (a property that is
neither grouped nor aggregated, SELECT *, subqueries and constants as keys, aggregates over
aggregates or subqueries) raise QueryError with the service's message at the offending place.
Runs compile_query on literal texts and a small document list, no I/O."""

from __future__ import annotations

import pytest

from regionlab.emulator.core.query import QueryError, compile_query

DOCS = [
    {"id": "a", "kind": "x", "n": 1, "addr": {"city": "Oslo"}},
    {"id": "b", "kind": "x", "n": 2, "addr": {"city": "Rome"}},
    {"id": "c", "kind": "y", "n": 5, "addr": {"city": "Oslo"}},
]

ACCEPTED = [
    ("SELECT c.kind, COUNT(1) AS n FROM c GROUP BY c.kind", [{"kind": "x", "n": 2}, {"kind": "y", "n": 1}]),
    ("SELECT VALUE c.kind FROM c GROUP BY c.kind", ["x", "y"]),
    ("SELECT VALUE COUNT(1) FROM c GROUP BY c.kind", [2, 1]),
    ("SELECT c.kind AS k, MAX(c.n) AS hi FROM c GROUP BY c.kind", [{"k": "x", "hi": 2}, {"k": "y", "hi": 5}]),
    ("SELECT UPPER(c.kind) AS k FROM c GROUP BY c.kind", [{"k": "X"}, {"k": "Y"}]),
    ("SELECT c.kind, upper(c.kind) AS k FROM c GROUP BY c.kind", [{"kind": "x", "k": "X"}, {"kind": "y", "k": "Y"}]),
    ("SELECT UPPER(c.kind) AS k FROM c GROUP BY upper(c.kind)", [{"k": "X"}, {"k": "Y"}]),
    ("SELECT VALUE {'k': c.kind, 'city': c.addr.city} FROM c GROUP BY c.kind, c.addr.city",
     [{"k": "x", "city": "Oslo"}, {"k": "x", "city": "Rome"}, {"k": "y", "city": "Oslo"}]),
    ("SELECT VALUE {'k': c.kind} FROM c GROUP BY {'k': c.kind}", [{"k": "x"}, {"k": "y"}]),
    ("SELECT c.addr.city AS city, COUNT(1) AS n FROM c GROUP BY c['addr'].city",
     [{"city": "Oslo", "n": 2}, {"city": "Rome", "n": 1}]),
    ("SELECT c.n % 2 AS odd, SUM(c.n) AS s FROM c GROUP BY c.n % 2", [{"odd": 1, "s": 6}, {"odd": 0, "s": 2}]),
    ("SELECT 'const' AS tag, @p AS p, AVG(c.n) AS mean FROM c GROUP BY c.kind",
     [{"tag": "const", "p": 7, "mean": 1.5}, {"tag": "const", "p": 7, "mean": 5.0}]),
    ("SELECT c.kind, COUNT(c.id) AS ids FROM c GROUP BY c.kind", [{"kind": "x", "ids": 2}, {"kind": "y", "ids": 1}]),
    ("SELECT t AS tag, COUNT(1) AS n FROM c JOIN t IN c.tags GROUP BY t", []),
]


@pytest.mark.parametrize("text,expected", ACCEPTED)
def test_grouped_queries_the_service_runs_compile_and_group(text, expected):
    q = compile_query(text, [{"name": "@p", "value": 7}])
    assert q.execute(DOCS, 0) == expected


NOT_GROUPED = "is invalid in the select list because it is not contained in either an aggregate function or the GROUP BY clause"

REFUSED = [
    # (query, offset of the offence, text the message must hold)
    ("SELECT c.id, COUNT(1) FROM c GROUP BY c.kind", 7, f"Property reference 'c.id' {NOT_GROUPED}"),
    ("SELECT c.kind, c.n FROM c GROUP BY c.kind", 15, f"Property reference 'c.n' {NOT_GROUPED}"),
    ("SELECT VALUE c.id FROM c GROUP BY c.kind", 13, f"Property reference 'c.id' {NOT_GROUPED}"),
    ("SELECT UPPER(c.id) AS u FROM c GROUP BY c.kind", 13, f"Property reference 'c.id' {NOT_GROUPED}"),
    ("SELECT VALUE {'k': c.kind, 'n': c.n} FROM c GROUP BY c.kind", 32, f"Property reference 'c.n' {NOT_GROUPED}"),
    ("SELECT c, COUNT(1) AS n FROM c GROUP BY c.kind", 7, f"Property reference 'c' {NOT_GROUPED}"),
    ("SELECT c.addr.city FROM c GROUP BY c.addr", 7, f"Property reference 'c.addr.city' {NOT_GROUPED}"),
    ("SELECT c['id'] FROM c GROUP BY c.kind", 7, "Property reference 'c[\"id\"]'"),
    ("SELECT c.kind, COUNT(1) + c.n AS x FROM c GROUP BY c.kind", 26, "Property reference 'c.n'"),
    ("SELECT * FROM c GROUP BY c.kind", 7, "'SELECT *' is not allowed with GROUP BY"),
    ("SELECT c.kind FROM c GROUP BY c.kind, (SELECT VALUE 1)", 38, "cannot contain a subquery"),
    ("SELECT COUNT(1) AS n FROM c GROUP BY 1", 37, "at least one property reference"),
    ("SELECT COUNT(1) AS n FROM c GROUP BY @p", 37, "at least one property reference"),
    ("SELECT AVG(SUM(c.n)) AS a FROM c", 7, "Cannot perform an aggregate function on an expression containing an aggregate"),
    ("SELECT VALUE SUM((SELECT VALUE 1)) FROM c", 13, "containing an aggregate or a subquery"),
]


@pytest.mark.parametrize("text,offset,words", REFUSED)
def test_grouped_queries_the_service_refuses_raise_its_message_at_the_offence(text, offset, words):
    with pytest.raises(QueryError) as info:
        compile_query(text, [{"name": "@p", "value": 7}])
    assert info.value.position == offset, info.value.message
    assert words in info.value.message


def test_a_subquery_with_group_by_is_checked_too():
    with pytest.raises(QueryError, match="Property reference 't.n'"):
        compile_query("SELECT VALUE ARRAY(SELECT t.k, t.n FROM t IN c.items GROUP BY t.k) FROM c")
    ok = compile_query("SELECT VALUE ARRAY(SELECT VALUE t.k FROM t IN c.items GROUP BY t.k) FROM c")
    assert ok.execute([{"items": [{"k": 1}, {"k": 1}, {"k": 2}]}], 0) == [[1, 2]]
