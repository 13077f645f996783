"""Proves WHERE filtering follows the dialect's rules, query by query.

Each case runs a query over the 60 fixed documents of `query_corpus_data` and
compares the ids it returns with ids picked by a plain-Python predicate written
in this file (type-aware comparisons, three-valued logic spelled out by hand),
never with anything the engine computed.
"""

from __future__ import annotations

import math

import pytest

from regionlab.emulator.core.query import compile_query
from query_corpus_data import DOCS, NOW_MS, ids, where
from query_reference import MISSING, get, is_num


def kind(v) -> str:
    if v is None:
        return "null"
    if type(v) is bool:
        return "bool"
    if is_num(v):
        return "num"
    return {str: "str", list: "array", dict: "object"}[type(v)]


def cmp3(op, a, b):
    """Comparison under the service's rules: MISSING stands for undefined."""
    if a is MISSING or b is MISSING or kind(a) != kind(b):
        return MISSING
    if op == "=":
        return a == b
    if op == "!=":
        return a != b
    if kind(a) in ("array", "object"):
        return MISSING
    if a is None:
        return op in ("<=", ">=")
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def and3(a, b):
    if a is False or b is False:
        return False
    return True if a is True and b is True else MISSING


def or3(a, b):
    if a is True or b is True:
        return True
    return False if a is False and b is False else MISSING


def not3(a):
    return {True: False, False: True}.get(a, MISSING) if type(a) is bool else MISSING


def n(d):
    return get(d, "n")


def cmod(a, b):
    if type(a) is int and type(b) is int:
        r = abs(a) % abs(b)
        return -r if a < 0 else r
    return math.fmod(a, b)


def q(text, pred, params=None):
    return pytest.param(text, params, ids(where(lambda d: pred(d) is True)), id=text[:90])


SELECT = "SELECT VALUE c.id FROM c WHERE "

CASES = [
    q(SELECT + "c.n = 7", lambda d: cmp3("=", n(d), 7)),
    q(SELECT + "c.n > 10", lambda d: cmp3(">", n(d), 10)),
    q(SELECT + "c.n >= 10", lambda d: cmp3(">=", n(d), 10)),
    q(SELECT + "c.n < 0", lambda d: cmp3("<", n(d), 0)),
    q(SELECT + "c.n <= 5", lambda d: cmp3("<=", n(d), 5)),
    q(SELECT + "c.n != 7", lambda d: cmp3("!=", n(d), 7)),
    q(SELECT + "c.n <> 7", lambda d: cmp3("!=", n(d), 7)),
    q(SELECT + "7 = c.n", lambda d: cmp3("=", n(d), 7)),
    q(SELECT + "10 < c.n", lambda d: cmp3(">", n(d), 10)),
    q(SELECT + 'c.n = "s12"', lambda d: cmp3("=", n(d), "s12")),
    q(SELECT + 'c.n > "s3"', lambda d: cmp3(">", n(d), "s3")),
    q(SELECT + "c.n = null", lambda d: cmp3("=", n(d), None)),
    q(SELECT + "c.n != null", lambda d: cmp3("!=", n(d), None)),
    q(SELECT + "c.n <= null", lambda d: cmp3("<=", n(d), None)),
    q(SELECT + "c.n < null", lambda d: cmp3("<", n(d), None)),
    q(SELECT + "c.n >= c.addr.city", lambda d: cmp3(">=", n(d), get(d, "addr", "city"))),
    q(SELECT + "c.n = true", lambda d: cmp3("=", n(d), True)),
    q(SELECT + "c.n = false", lambda d: cmp3("=", n(d), False)),
    q(SELECT + "c.n < true", lambda d: cmp3("<", n(d), True)),
    q(SELECT + "c.n = [8]", lambda d: cmp3("=", n(d), [8])),
    q(SELECT + 'c.n = {"v": 9}', lambda d: cmp3("=", n(d), {"v": 9})),
    q(SELECT + "c.n > [1]", lambda d: cmp3(">", n(d), [1])),
    q(SELECT + "c.nothing = null", lambda d: False),
    q(SELECT + "c.n = 20.0", lambda d: cmp3("=", n(d), 20)),
    q(SELECT + "c.n = 10.5", lambda d: cmp3("=", n(d), 10.5)),
    q(SELECT + "c.score > 15.5", lambda d: cmp3(">", d["score"], 15.5)),
    q(SELECT + "c.flag", lambda d: get(d, "flag")),
    q(SELECT + "NOT c.flag", lambda d: not3(get(d, "flag"))),
    q(SELECT + "c.flag = true AND c.n > 5", lambda d: and3(cmp3("=", get(d, "flag"), True), cmp3(">", n(d), 5))),
    q(SELECT + "c.flag OR c.n > 50", lambda d: or3(get(d, "flag"), cmp3(">", n(d), 50))),
    q(SELECT + "NOT (c.n > 20)", lambda d: not3(cmp3(">", n(d), 20))),
    q(SELECT + "NOT (c.n > 20 OR c.flag)", lambda d: not3(or3(cmp3(">", n(d), 20), get(d, "flag")))),
    q(SELECT + "NOT (c.n > 20 AND c.flag)", lambda d: not3(and3(cmp3(">", n(d), 20), get(d, "flag")))),
    q(SELECT + "c.n > 5 AND NOT c.flag", lambda d: and3(cmp3(">", n(d), 5), not3(get(d, "flag")))),
    q(SELECT + "(c.n > 5) = false", lambda d: cmp3("=", cmp3(">", n(d), 5), False)),
    q(SELECT + "NOT NOT c.flag", lambda d: get(d, "flag")),
    q(SELECT + "c.flag AND c.nothing", lambda d: False),
    q(SELECT + "NOT (c.flag AND c.nothing)", lambda d: not3(and3(get(d, "flag"), MISSING))),
    q(SELECT + "c.flag = false OR c.nothing", lambda d: cmp3("=", get(d, "flag"), False)),
    q(SELECT + "c.n BETWEEN 5 AND 15", lambda d: and3(cmp3(">=", n(d), 5), cmp3("<=", n(d), 15))),
    q(SELECT + "c.n NOT BETWEEN 5 AND 15", lambda d: not3(and3(cmp3(">=", n(d), 5), cmp3("<=", n(d), 15)))),
    q(SELECT + 'c.name BETWEEN "a" AND "h"', lambda d: and3(cmp3(">=", get(d, "name"), "a"), cmp3("<=", get(d, "name"), "h"))),
    q(SELECT + 'c.n IN (1, 7, "s2", null, true)', lambda d: n(d) is not MISSING and any(cmp3("=", n(d), v) is True for v in (1, 7, "s2", None, True))),
    q(SELECT + "c.n NOT IN (0, 7)", lambda d: n(d) is not MISSING and not any(cmp3("=", n(d), v) is True for v in (0, 7))),
    q(SELECT + 'c.pk IN ("a", "b")', lambda d: d["pk"] in ("a", "b")),
    q(SELECT + "c.n IN ([8], [18])", lambda d: n(d) in ([8], [18])),
    q(SELECT + 'c.name LIKE "a%"', lambda d: str(get(d, "name")).startswith("a") and "name" in d),
    q(SELECT + 'c.name LIKE "%a"', lambda d: "name" in d and d["name"].endswith("a")),
    q(SELECT + 'c.name LIKE "_eta"', lambda d: "name" in d and len(d["name"]) == 4 and d["name"][1:] == "eta"),
    q(SELECT + 'c.name LIKE "%lph%"', lambda d: "name" in d and "lph" in d["name"]),
    q(SELECT + 'c.name LIKE "[ab]%"', lambda d: "name" in d and d["name"][:1] in ("a", "b")),
    q(SELECT + 'c.name LIKE "[^a]%"', lambda d: "name" in d and d["name"][:1] != "a"),
    q(SELECT + 'c.name LIKE "[a-g]%"', lambda d: "name" in d and "a" <= d["name"][:1] <= "g"),
    q(SELECT + 'c.name NOT LIKE "%a%"', lambda d: "name" in d and "a" not in d["name"]),
    q(SELECT + 'c.id LIKE "d0_"', lambda d: d["id"].startswith("d0")),
    q(SELECT + 'c.id LIKE "d!_%" ESCAPE "!"', lambda d: False),
    q(SELECT + '"50%" LIKE "50!%" ESCAPE "!"', lambda d: True),
    q(SELECT + 'c.n LIKE "s1%"', lambda d: type(n(d)) is str and n(d).startswith("s1")),
    q(SELECT + "(c.n ?? 0) = 0", lambda d: n(d) is MISSING or cmp3("=", n(d), 0)),
    q(SELECT + "(c.flag ? c.n : -1) = -1", lambda d: cmp3("=", n(d) if get(d, "flag") is True else -1, -1)),
    q(SELECT + "c.n + 1 = 8", lambda d: is_num(n(d)) and n(d) + 1 == 8),
    q(SELECT + "c.n * 2 > 100", lambda d: is_num(n(d)) and n(d) * 2 > 100),
    q(SELECT + "c.n / 2 = 5", lambda d: is_num(n(d)) and n(d) / 2 == 5),
    q(SELECT + "c.n % 3 = -1", lambda d: is_num(n(d)) and cmod(n(d), 3) == -1),
    q(SELECT + "c.n - c.score > 0", lambda d: is_num(n(d)) and n(d) - d["score"] > 0),
    q(SELECT + "-c.n > 50", lambda d: is_num(n(d)) and -n(d) > 50),
    q(SELECT + "c.n & 1 = 1", lambda d: is_num(n(d)) and int(n(d)) & 1 == 1),
    q(SELECT + 'c.name || "!" = "zeta!"', lambda d: get(d, "name") == "zeta"),
    q(SELECT + 'c.n || "x" = "s2x"', lambda d: n(d) == "s2"),
    q(SELECT + 'c.addr.city = "Oslo"', lambda d: get(d, "addr", "city") == "Oslo"),
    q(SELECT + "c.addr.zip > 10040", lambda d: cmp3(">", get(d, "addr", "zip"), 10040)),
    q(SELECT + 'c["addr"]["city"] = "Lima"', lambda d: get(d, "addr", "city") == "Lima"),
    q(SELECT + "c.addr.city = null", lambda d: get(d, "addr", "city") is None),
    q(SELECT + 'c.tags[0] = "red"', lambda d: get(d, "tags", 0) == "red"),
    q(SELECT + 'c.tags[1] = "blue"', lambda d: get(d, "tags", 1) == "blue"),
    q(SELECT + "c.items[1].qty = 3", lambda d: cmp3("=", get(d, "items", 1, "qty"), 3)),
    q(SELECT + "c.nested.a.b = 2", lambda d: cmp3("=", get(d, "nested", "a", "b"), 2)),
    q(SELECT + "c.nested.a = null", lambda d: get(d, "nested", "a") is None),
    q(SELECT + "c.tags = []", lambda d: get(d, "tags") == []),
    q(SELECT + 'c.tags = ["blue"]', lambda d: get(d, "tags") == ["blue"]),
    q(SELECT + 'c.name >= "Ω"', lambda d: cmp3(">=", get(d, "name"), "Ω")),
    q(SELECT + 'c.name = "naïve"', lambda d: get(d, "name") == "naïve"),
    q(SELECT + 'c.name = "日本"', lambda d: get(d, "name") == "日本"),
    q(SELECT + 'c.id = "d01" OR c.id = "d02"', lambda d: d["id"] in ("d01", "d02")),
    q(SELECT + "true", lambda d: True),
    q(SELECT + "false", lambda d: False),
    q(SELECT + "1", lambda d: False),
    q(SELECT + "undefined", lambda d: False),
    q(SELECT + "null", lambda d: False),
    q("select value c.id from c where c.n between 1 and 3", lambda d: and3(cmp3(">=", n(d), 1), cmp3("<=", n(d), 3))),
    q(SELECT + "c.n = @v", lambda d: cmp3("=", n(d), 7), [{"name": "@v", "value": 7}]),
    q(SELECT + "c.pk = @pk AND c.n > @lo", lambda d: and3(cmp3("=", d["pk"], "b"), cmp3(">", n(d), 20)),
      [{"name": "@pk", "value": "b"}, {"name": "@lo", "value": 20}]),
    q(SELECT + "c.name IN (@a, @b)", lambda d: get(d, "name") in ("zeta", "Beta"),
      [{"name": "@a", "value": "zeta"}, {"name": "@b", "value": "Beta"}]),
    q(SELECT + 'c.tags[@i] = "blue"', lambda d: get(d, "tags", 1) == "blue", [{"name": "@i", "value": 1}]),
    q(SELECT + 'c[@prop] = "b"', lambda d: d["pk"] == "b", [{"name": "@prop", "value": "pk"}]),
    q(SELECT + "c.n = @obj", lambda d: n(d) == {"v": 19}, [{"name": "@obj", "value": {"v": 19}}]),
    q(SELECT + "c.n = @nil", lambda d: n(d) is None, [{"name": "@nil", "value": None}]),
]


@pytest.mark.parametrize("text,params,expected", CASES)
def test_where(text, params, expected):
    assert compile_query(text, params).execute(DOCS, NOW_MS) == expected


def test_corpus_is_not_trivial():
    """Guard against a corpus whose expectations are all empty or all full."""
    sizes = [len(case.values[2]) for case in CASES]
    assert sum(1 for s in sizes if 0 < s < len(DOCS)) > len(CASES) * 2 // 3


@pytest.mark.parametrize("text,params,expected", CASES[:40])
def test_filter_matches_agrees_with_execute(text, params, expected):
    query = compile_query(text, params)
    assert [d["id"] for d in DOCS if query.filter_matches(d, NOW_MS)] == expected
