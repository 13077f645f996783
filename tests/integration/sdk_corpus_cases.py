"""The SDK query corpus: every query with its reference answer, a plain-Python function of the
stored documents (`ref(D)`), written independently of the engine.

A case compares as a bag (no ORDER BY), exactly (ORDER BY with a total order), by the sequence
of its sort keys plus the bag (ORDER BY with ties: `ordered=` a function of a result row), or
as "any `pick` rows of the reference" (TOP / OFFSET LIMIT without ORDER BY).
"""
import datetime
import math
from dataclasses import dataclass
from typing import Callable

from query_reference import MISSING, get, is_num, row
from sdk_corpus_docs import (
    agg_avg, agg_count, agg_extreme, agg_sum, canon, distinct, eq, groups, gt, iso_parts, lt, n, order, s,
    ticks_add, values,
)


@dataclass
class Case:
    sql: str
    ref: Callable
    params: list | None = None
    ordered: bool | Callable = False
    pick: int | None = None

    @property
    def id(self) -> str:
        return self.sql[:100]


CASES: list = []


def q(sql, ref, params=None, ordered=False, pick=None):
    CASES.append(Case(sql, ref, [{"name": k, "value": v} for k, v in (params or {}).items()] or None,
                      ordered, pick))


def where(pred):
    """Reference of `SELECT * ... WHERE pred` (pred must be exactly true)."""
    return lambda D: [d for d in D if pred(d) is True]


def ids(pred):
    """Reference of `SELECT VALUE c.id ... WHERE pred`."""
    return lambda D: [d["id"] for d in D if pred(d) is True]


def val(f, pred=lambda d: True):
    """Reference of `SELECT VALUE f(c) ... WHERE pred`: undefined results dropped."""
    return lambda D: values(f(d) for d in D if pred(d) is True)


def AND(*xs):
    """Three-valued AND over true / false / undefined (MISSING); non-booleans are undefined."""
    xs = [x if type(x) is bool else MISSING for x in xs]
    if any(x is False for x in xs):
        return False
    return MISSING if any(x is MISSING for x in xs) else True


def NOT(x):
    return (not x) if type(x) is bool else MISSING


def ge(a, b):
    r = lt(a, b)
    return MISSING if r is MISSING else not r


def le(a, b):
    return ge(b, a)


def ne(a, b):
    r = eq(a, b)
    return MISSING if r is MISSING else not r


def ternary(cond, a, b):
    return a if cond is True else b


def _defined(v) -> list:
    """A group-key part that tells undefined from every value (null included)."""
    return [False, None] if v is MISSING else [True, v]


def k(key):
    """An `ordered=` key reading a member of a result row."""
    return lambda r: get(r, key)


name, nn, rank, kind = (lambda d: get(d, "name")), (lambda d: get(d, "n")), (lambda d: d["rank"]), (lambda d: d["kind"])


# ---- WHERE: comparisons, logic, BETWEEN, IN, LIKE, arithmetic, parameters -----------------------
q("SELECT * FROM c", lambda D: D)
q("SELECT * FROM c WHERE c.kind = 'a'", where(lambda d: d["kind"] == "a"))
q("SELECT VALUE c.id FROM c WHERE c.rank > 150", ids(lambda d: d["rank"] > 150))
q("SELECT VALUE c.id FROM c WHERE c.rank >= 150", ids(lambda d: d["rank"] >= 150))
q("SELECT VALUE c.id FROM c WHERE c.rank < 10", ids(lambda d: d["rank"] < 10))
q("SELECT VALUE c.id FROM c WHERE c.rank <= 10", ids(lambda d: d["rank"] <= 10))
q("SELECT VALUE c.id FROM c WHERE c.rank != 5", ids(lambda d: d["rank"] != 5))
q("SELECT VALUE c.id FROM c WHERE c.n > 100", ids(lambda d: gt(nn(d), 100)))
q("SELECT VALUE c.id FROM c WHERE c.n = '20'", ids(lambda d: eq(nn(d), "20")))
q("SELECT VALUE c.id FROM c WHERE c.n = null", ids(lambda d: eq(nn(d), None)))
q("SELECT VALUE c.id FROM c WHERE c.n != null", ids(lambda d: ne(nn(d), None)))
q("SELECT VALUE c.id FROM c WHERE c.n < 'a'", ids(lambda d: lt(nn(d), "a")))
q("SELECT VALUE c.id FROM c WHERE c.n >= 0", ids(lambda d: ge(nn(d), 0)))
q("SELECT VALUE c.id FROM c WHERE c.active = true", ids(lambda d: eq(get(d, "active"), True)))
q("SELECT VALUE c.id FROM c WHERE c.active = false", ids(lambda d: eq(get(d, "active"), False)))
q("SELECT VALUE c.id FROM c WHERE NOT c.active", ids(lambda d: NOT(get(d, "active"))))
q("SELECT VALUE c.id FROM c WHERE c.active", ids(lambda d: get(d, "active")))
q("SELECT VALUE c.id FROM c WHERE c.n", ids(lambda d: nn(d) is True))
q("SELECT VALUE c.id FROM c WHERE c.kind = 'a' AND c.rank > 100", ids(lambda d: d["kind"] == "a" and d["rank"] > 100))
q("SELECT VALUE c.id FROM c WHERE c.kind = 'a' OR c.kind = 'b'", ids(lambda d: d["kind"] in "ab"))
q("SELECT VALUE c.id FROM c WHERE NOT (c.kind = 'a')", ids(lambda d: d["kind"] != "a"))
q("SELECT VALUE c.id FROM c WHERE c.active OR c.rank < 20",
  ids(lambda d: get(d, "active") is True or d["rank"] < 20))
q("SELECT VALUE c.id FROM c WHERE NOT (c.active AND c.rank > 100)",
  ids(lambda d: NOT(AND(get(d, "active"), d["rank"] > 100))))
q("SELECT VALUE c.id FROM c WHERE c.rank BETWEEN 10 AND 20", ids(lambda d: 10 <= d["rank"] <= 20))
q("SELECT VALUE c.id FROM c WHERE c.name BETWEEN 'A' AND 'M'",
  ids(lambda d: AND(ge(name(d), "A"), le(name(d), "M"))))
q("SELECT VALUE c.id FROM c WHERE c.kind IN ('a', 'c')", ids(lambda d: d["kind"] in ("a", "c")))
q("SELECT VALUE c.id FROM c WHERE c.n IN (1, 2, 3, '8', null)",
  ids(lambda d: any(eq(nn(d), v) is True for v in (1, 2, 3, "8", None))))
q("SELECT VALUE c.id FROM c WHERE c.rank NOT IN (1, 2, 3)", ids(lambda d: d["rank"] not in (1, 2, 3)))
q("SELECT VALUE c.id FROM c WHERE c.name LIKE 'A%'",
  ids(lambda d: s(name(d)) is not MISSING and name(d).startswith("A")))
q("SELECT VALUE c.id FROM c WHERE c.name LIKE '%e'", ids(lambda d: s(name(d)) is not MISSING and name(d).endswith("e")))
q("SELECT VALUE c.id FROM c WHERE c.name LIKE '_o%'", ids(lambda d: s(name(d)) is not MISSING and name(d)[1:2] == "o"))
q("SELECT VALUE c.id FROM c WHERE c.name NOT LIKE '%a%'",
  ids(lambda d: s(name(d)) is not MISSING and "a" not in name(d)))
q("SELECT VALUE c.id FROM c WHERE c.addr.city = 'Oslo'", ids(lambda d: get(d, "addr", "city") == "Oslo"))
q("SELECT VALUE c.id FROM c WHERE c.addr.zip > 11000", ids(lambda d: gt(get(d, "addr", "zip"), 11000)))
q("SELECT VALUE c.id FROM c WHERE c.addr.geo.lat > 0", ids(lambda d: gt(get(d, "addr", "geo", "lat"), 0)))
q("SELECT VALUE c.id FROM c WHERE c.addr = null", ids(lambda d: eq(get(d, "addr"), None)))
q("SELECT VALUE c.id FROM c WHERE IS_DEFINED(c.addr) AND NOT IS_DEFINED(c.addr.zip)",
  ids(lambda d: get(d, "addr") is not MISSING and get(d, "addr", "zip") is MISSING))
q("SELECT VALUE c.id FROM c WHERE c.tags[0] = 'red'", ids(lambda d: get(d, "tags", 0) == "red"))
q("SELECT VALUE c.id FROM c WHERE c['größe'] = 2", ids(lambda d: eq(get(d, "größe"), 2)))
q("SELECT VALUE c.id FROM c WHERE c.pk = 42", ids(lambda d: eq(d["pk"], 42)))
q("SELECT VALUE c.id FROM c WHERE c.pk = '日本'", ids(lambda d: d["pk"] == "日本"))
q("SELECT VALUE c.id FROM c WHERE c.pk >= 'p5'", ids(lambda d: ge(d["pk"], "p5")))
q("SELECT VALUE c.id FROM c WHERE (c.rank % 7) = 3", ids(lambda d: d["rank"] % 7 == 3))
q("SELECT VALUE c.id FROM c WHERE c.rank * 2 + 1 > 300", ids(lambda d: d["rank"] * 2 + 1 > 300))
q("SELECT VALUE c.id FROM c WHERE c.rank / 4 = 10", ids(lambda d: d["rank"] / 4 == 10))
q("SELECT VALUE c.id FROM c WHERE -c.rank < -190", ids(lambda d: -d["rank"] < -190))
q("SELECT VALUE c.id FROM c WHERE c.name || '!' = 'bob!'", ids(lambda d: name(d) == "bob"))
q("SELECT VALUE c.id FROM c WHERE (c.name ?? 'anon') = 'anon'", ids(lambda d: name(d) is MISSING))
q("SELECT VALUE c.id FROM c WHERE (c.rank > 100 ? 'hi' : 'lo') = 'lo'", ids(lambda d: d["rank"] <= 100))
q("SELECT VALUE c.id FROM c WHERE c.items[0].qty >= 4", ids(lambda d: ge(get(d, "items", 0, "qty"), 4)))
q("SELECT VALUE c.id FROM c WHERE c.score >= 50.5 AND c.score < 75", ids(lambda d: 50.5 <= d["score"] < 75))
q("SELECT VALUE c.id FROM c WHERE c.mixed = [2, 3]", ids(lambda d: eq(d["mixed"], [2, 3])))
q('SELECT VALUE c.id FROM c WHERE c.mixed = {"v": 3}', ids(lambda d: eq(d["mixed"], {"v": 3})))
q("SELECT VALUE c.id FROM c WHERE (c.rank & 1) = 1", ids(lambda d: d["rank"] & 1 == 1))
q("SELECT VALUE c.id FROM c WHERE true", ids(lambda d: True))
q("SELECT VALUE c.id FROM c WHERE c.created >= '2024-06-01' AND c.created < '2024-07-01'",
  ids(lambda d: "2024-06-01" <= d["created"] < "2024-07-01"))
q("SELECT VALUE c.id FROM c WHERE c.rank IN (@a, @b)", ids(lambda d: d["rank"] in (17, 170)), {"@a": 17, "@b": 170})
q("SELECT VALUE c.id FROM c WHERE c.kind = @k AND c.rank < @r", ids(lambda d: d["kind"] == "b" and d["rank"] < 50),
  {"@k": "b", "@r": 50})
q("SELECT * FROM c WHERE c.name = @name", where(lambda d: name(d) == "Łukasz"), {"@name": "Łukasz"})
q("SELECT VALUE c.id FROM c WHERE ARRAY_CONTAINS(@kinds, c.kind)", ids(lambda d: d["kind"] in ("a", "d")),
  {"@kinds": ["a", "d"]})
q("SELECT VALUE c.id FROM c WHERE c.addr = @a", ids(lambda d: eq(get(d, "addr"), None)), {"@a": None})
q("SELECT VALUE c.id FROM c WHERE c.score > @s.lo AND c.score < @s.hi",
  ids(lambda d: 20 < d["score"] < 30), {"@s": {"lo": 20, "hi": 30}})

# ---- projections, aliases, VALUE, constructors --------------------------------------------------
q("SELECT c.id, c.name FROM c", lambda D: [row(id=d["id"], name=name(d)) for d in D])
q("SELECT c.id AS key, c.addr.city FROM c", lambda D: [row(key=d["id"], city=get(d, "addr", "city")) for d in D])
q("SELECT c.addr.geo.lat FROM c", lambda D: [row(lat=get(d, "addr", "geo", "lat")) for d in D])
q("SELECT VALUE c.name FROM c", val(name))
q("SELECT VALUE c.addr.city FROM c", val(lambda d: get(d, "addr", "city")))
q("SELECT c.id, c.rank * 2 FROM c WHERE c.kind = 'c'",
  lambda D: [{"id": d["id"], "$1": d["rank"] * 2} for d in D if d["kind"] == "c"])
q("SELECT c.id, 1, 'x' FROM c WHERE c.rank = 3",
  lambda D: [{"id": d["id"], "$1": 1, "$2": "x"} for d in D if d["rank"] == 3])
q("SELECT c FROM c WHERE c.rank = 7", lambda D: [{"c": d} for d in D if d["rank"] == 7])
q('SELECT VALUE {"id": c.id, "t": [c.kind, c.rank]} FROM c WHERE c.rank < 5',
  lambda D: [{"id": d["id"], "t": [d["kind"], d["rank"]]} for d in D if d["rank"] < 5])
q("SELECT c['id'], c.tags[0] AS first FROM c", lambda D: [row(id=d["id"], first=get(d, "tags", 0)) for d in D])
q("SELECT VALUE c['größe'] FROM c", val(lambda d: get(d, "größe")))
q("SELECT r.id FROM root r WHERE r.rank < 3", lambda D: [{"id": d["id"]} for d in D if d["rank"] < 3])
q("SELECT VALUE c.rank / 8 FROM c WHERE c.rank < 20", val(lambda d: d["rank"] / 8, lambda d: d["rank"] < 20))
q("SELECT VALUE c.n ?? 'none' FROM c WHERE c.kind = 'b'",
  val(lambda d: "none" if nn(d) is MISSING else nn(d), lambda d: d["kind"] == "b"))
q("SELECT VALUE (c.active ? 'yes' : 'no') FROM c WHERE c.kind = 'd'",
  val(lambda d: ternary(get(d, "active"), "yes", "no"), lambda d: d["kind"] == "d"))
q("SELECT VALUE 1 + 2", lambda D: [3])
q("SELECT c.id, c.n FROM c WHERE IS_NUMBER(c.n) AND c.n > 190",
  lambda D: [{"id": d["id"], "n": nn(d)} for d in D if is_num(nn(d)) and nn(d) > 190])
q("SELECT VALUE c.items[1].sku FROM c", val(lambda d: get(d, "items", 1, "sku")))
q("SELECT c.id, c.addr.geo FROM c WHERE c.kind = 'a'",
  lambda D: [row(id=d["id"], geo=get(d, "addr", "geo")) for d in D if d["kind"] == "a"])
q("SELECT VALUE c.note FROM c", val(lambda d: get(d, "note")))
q("SELECT VALUE c.rank - 0.5 FROM c WHERE c.rank < 4", val(lambda d: d["rank"] - 0.5, lambda d: d["rank"] < 4))
q("SELECT VALUE [c.rank, c.addr.city] FROM c WHERE c.rank < 10",
  val(lambda d: values([d["rank"], get(d, "addr", "city")]), lambda d: d["rank"] < 10))
q("SELECT c.id, c.missing FROM c WHERE c.rank < 5", lambda D: [{"id": d["id"]} for d in D if d["rank"] < 5])
q("SELECT VALUE c.missing FROM c", lambda D: [])
q("SELECT c.id, c.name ?? c.kind AS label FROM c WHERE c.rank < 30",
  lambda D: [{"id": d["id"], "label": d["kind"] if name(d) is MISSING else name(d)} for d in D if d["rank"] < 30])
q("SELECT VALUE c.kind || '/' || c.id FROM c WHERE c.rank >= 190",
  val(lambda d: d["kind"] + "/" + d["id"], lambda d: d["rank"] >= 190))
q("SELECT VALUE c.name || 1 FROM c", lambda D: [])

# ---- DISTINCT -----------------------------------------------------------------------------------
q("SELECT DISTINCT VALUE c.kind FROM c", lambda D: distinct(d["kind"] for d in D))
q("SELECT DISTINCT c.kind FROM c", lambda D: distinct({"kind": d["kind"]} for d in D))
q("SELECT DISTINCT VALUE c.addr.city FROM c", lambda D: distinct(values(get(d, "addr", "city") for d in D)))
q("SELECT DISTINCT VALUE t FROM c JOIN t IN c.tags", lambda D: distinct(t for d in D for t in d.get("tags", [])))
q("SELECT DISTINCT c.kind, c.active FROM c",
  lambda D: distinct(row(kind=d["kind"], active=get(d, "active")) for d in D))
q("SELECT DISTINCT VALUE c.n FROM c WHERE IS_STRING(c.n)", lambda D: distinct(nn(d) for d in D if type(nn(d)) is str))
q("SELECT DISTINCT VALUE c.items[0].sku FROM c", lambda D: distinct(values(get(d, "items", 0, "sku") for d in D)))

# ---- ORDER BY, TOP, OFFSET LIMIT ------------------------------------------------------------------
q("SELECT TOP 5 VALUE c.rank FROM c ORDER BY c.rank", lambda D: sorted(d["rank"] for d in D)[:5], ordered=True)
q("SELECT TOP 5 * FROM c ORDER BY c.rank DESC", lambda D: order(D, (rank, True))[:5], ordered=True)
q("SELECT VALUE c.id FROM c ORDER BY c.rank DESC", lambda D: [d["id"] for d in order(D, (rank, True))], ordered=True)
q("SELECT c.id, c.score FROM c ORDER BY c.score",
  lambda D: [{"id": d["id"], "score": d["score"]} for d in order(D, (lambda d: d["score"], False))], ordered=k("score"))
q("SELECT c.id, c.score FROM c ORDER BY c.score DESC",
  lambda D: [{"id": d["id"], "score": d["score"]} for d in order(D, (lambda d: d["score"], True))], ordered=k("score"))
q("SELECT c.id, c.kind, c.rank FROM c ORDER BY c.kind, c.rank DESC",
  lambda D: [{"id": d["id"], "kind": d["kind"], "rank": d["rank"]} for d in order(D, (kind, False), (rank, True))],
  ordered=True)
q("SELECT c.id, c.kind, c.score FROM c ORDER BY c.kind DESC, c.score ASC",
  lambda D: [{"id": d["id"], "kind": d["kind"], "score": d["score"]}
             for d in order(D, (kind, True), (lambda d: d["score"], False))],
  ordered=lambda r: [r["kind"], r["score"]])
q("SELECT c.id, c.name FROM c ORDER BY c.name",
  lambda D: [row(id=d["id"], name=name(d)) for d in order(D, (name, False))],
  ordered=k("name"))
q("SELECT c.id, c.name FROM c ORDER BY c.name DESC",
  lambda D: [row(id=d["id"], name=name(d)) for d in order(D, (name, True))], ordered=k("name"))
q("SELECT c.id, c.n FROM c ORDER BY c.n", lambda D: [row(id=d["id"], n=nn(d)) for d in order(D, (nn, False))],
  ordered=k("n"))
q("SELECT c.id, c.n FROM c ORDER BY c.n DESC", lambda D: [row(id=d["id"], n=nn(d)) for d in order(D, (nn, True))],
  ordered=k("n"))
q("SELECT c.id, c.n FROM c WHERE c.rank < 48 ORDER BY c.n DESC",
  lambda D: [row(id=d["id"], n=nn(d)) for d in order(D, (nn, True)) if d["rank"] < 48], ordered=k("n"))
q("SELECT c.id, c.kind, c.score FROM c WHERE c.rank < 40 ORDER BY c.kind, c.score DESC",
  lambda D: [{"id": d["id"], "kind": d["kind"], "score": d["score"]}
             for d in order(D, (kind, False), (lambda d: d["score"], True)) if d["rank"] < 40],
  ordered=lambda r: [r["kind"], r["score"]])
q("SELECT c.id, c.created FROM c WHERE c.kind = 'b' ORDER BY c.created",
  lambda D: [{"id": d["id"], "created": d["created"]}
             for d in order(D, (lambda d: d["created"], False)) if d["kind"] == "b"],
  ordered=True)
q("SELECT c.id, c.addr.zip FROM c ORDER BY c.addr.zip DESC",
  lambda D: [row(id=d["id"], zip=get(d, "addr", "zip")) for d in order(D, (lambda d: get(d, "addr", "zip"), True))],
  ordered=k("zip"))
q("SELECT TOP 3 c.id, c.score FROM c WHERE c.kind = 'c' ORDER BY c.score DESC",
  lambda D: [{"id": d["id"], "score": d["score"]}
             for d in order(D, (lambda d: d["score"], True)) if d["kind"] == "c"][:3],
  ordered=k("score"))
q("SELECT TOP @k VALUE c.rank FROM c ORDER BY c.rank DESC", lambda D: sorted((d["rank"] for d in D), reverse=True)[:4],
  {"@k": 4}, ordered=True)
q("SELECT VALUE c.rank FROM c ORDER BY c.rank OFFSET 10 LIMIT 5", lambda D: sorted(d["rank"] for d in D)[10:15],
  ordered=True)
q("SELECT VALUE c.rank FROM c ORDER BY c.rank DESC OFFSET 195 LIMIT 10",
  lambda D: sorted((d["rank"] for d in D), reverse=True)[195:205], ordered=True)
q("SELECT VALUE c.rank FROM c ORDER BY c.rank OFFSET @o LIMIT @l", lambda D: sorted(d["rank"] for d in D)[3:9],
  {"@o": 3, "@l": 6}, ordered=True)
q("SELECT VALUE c.id FROM c ORDER BY c.rank OFFSET 0 LIMIT 0", lambda D: [], ordered=True)
q("SELECT VALUE c.id FROM c ORDER BY c.rank OFFSET 500 LIMIT 5", lambda D: [], ordered=True)
q("SELECT * FROM c WHERE c.pk = 'p3' ORDER BY c.rank",
  lambda D: order([d for d in D if d["pk"] == "p3"], (rank, False)),
  ordered=True)
q("SELECT VALUE c.rank FROM c ORDER BY c['größe'], c.rank",
  lambda D: [d["rank"] for d in order(D, (lambda d: get(d, "größe"), False), (rank, False))], ordered=True)
q("SELECT TOP 10 VALUE c.rank FROM c", lambda D: [d["rank"] for d in D], pick=10)
q("SELECT VALUE c.id FROM c OFFSET 5 LIMIT 7", lambda D: [d["id"] for d in D], pick=7)
q("SELECT DISTINCT TOP 2 VALUE c.kind FROM c ORDER BY c.kind", lambda D: sorted(set(d["kind"] for d in D))[:2],
  ordered=True)
q("SELECT DISTINCT VALUE c.kind FROM c ORDER BY c.kind DESC", lambda D: sorted(set(d["kind"] for d in D), reverse=True),
  ordered=True)
q("SELECT VALUE c.id FROM c WHERE c.kind = 'd' ORDER BY c.rank OFFSET 2 LIMIT 3",
  lambda D: [d["id"] for d in order(D, (rank, False)) if d["kind"] == "d"][2:5], ordered=True)

# ---- aggregates ----------------------------------------------------------------------------------
q("SELECT VALUE COUNT(1) FROM c", lambda D: [len(D)])
q("SELECT COUNT(1) AS n FROM c", lambda D: [{"n": len(D)}])
q("SELECT COUNT(1) FROM c", lambda D: [{"$1": len(D)}])
q("SELECT VALUE COUNT(c.name) FROM c", lambda D: [agg_count(name(d) for d in D)])
q("SELECT VALUE COUNT(c.n) FROM c", lambda D: [agg_count(nn(d) for d in D)])
q("SELECT VALUE SUM(c.rank) FROM c", lambda D: [sum(d["rank"] for d in D)])
q("SELECT VALUE AVG(c.score) FROM c", lambda D: values([agg_avg(d["score"] for d in D)]))
q("SELECT VALUE MIN(c.rank) FROM c WHERE c.kind = 'c'",
  lambda D: values([agg_extreme((d["rank"] for d in D if d["kind"] == "c"), False)]))
q("SELECT VALUE MAX(c.score) FROM c", lambda D: values([agg_extreme((d["score"] for d in D), True)]))
q("SELECT VALUE MAX(c.n) FROM c", lambda D: values([agg_extreme((nn(d) for d in D), True)]))
q("SELECT VALUE MIN(c.n) FROM c", lambda D: values([agg_extreme((nn(d) for d in D), False)]))
q("SELECT VALUE SUM(c.n) FROM c", lambda D: values([agg_sum(nn(d) for d in D)]))
q("SELECT SUM(c.n) AS s FROM c", lambda D: [row(s=agg_sum(nn(d) for d in D))])
q("SELECT VALUE SUM(c.n) FROM c WHERE IS_NUMBER(c.n)", lambda D: [agg_sum(nn(d) for d in D if is_num(nn(d)))])
q("SELECT VALUE AVG(c.n) FROM c WHERE IS_NUMBER(c.n)", lambda D: values([agg_avg(nn(d) for d in D if is_num(nn(d)))]))
q("SELECT COUNT(1) AS n, SUM(c.rank) AS total, AVG(c.rank) AS mean, MIN(c.score) AS lo, MAX(c.score) AS hi FROM c",
  lambda D: [row(n=len(D), total=sum(d["rank"] for d in D), mean=agg_avg(d["rank"] for d in D),
                 lo=agg_extreme((d["score"] for d in D), False), hi=agg_extreme((d["score"] for d in D), True))])
q("SELECT VALUE COUNT(1) FROM c WHERE c.kind = 'z'", lambda D: [0])
q("SELECT VALUE MAX(c.rank) FROM c WHERE c.kind = 'z'", lambda D: [])
q("SELECT VALUE SUM(c.addr.zip) FROM c", lambda D: [agg_sum(get(d, "addr", "zip") for d in D)])
q("SELECT VALUE MIN(c.name) FROM c", lambda D: values([agg_extreme((name(d) for d in D), False)]))
q("SELECT VALUE MAX(c.name) FROM c", lambda D: values([agg_extreme((name(d) for d in D), True)]))
q("SELECT VALUE COUNT(1) FROM c JOIN t IN c.tags", lambda D: [sum(len(d.get("tags", [])) for d in D)])
q("SELECT VALUE AVG(i.price) FROM c JOIN i IN c.items",
  lambda D: values([agg_avg(i["price"] for d in D for i in d["items"])]))
q("SELECT VALUE MAX(c.active) FROM c", lambda D: values([agg_extreme((get(d, "active") for d in D), True)]))
q("SELECT VALUE COUNT(1) FROM c WHERE c.pk = 42", lambda D: [sum(1 for d in D if eq(d["pk"], 42) is True)])
q("SELECT VALUE MAX(c.mixed) FROM c", lambda D: values([agg_extreme((d["mixed"] for d in D), True)]))

# ---- GROUP BY -----------------------------------------------------------------------------------
q("SELECT c.kind, COUNT(1) AS n FROM c GROUP BY c.kind",
  lambda D: [{"kind": key, "n": len(ds)} for key, ds in groups(D, kind).values()])
q("SELECT VALUE c.kind FROM c GROUP BY c.kind", lambda D: [key for key, _ in groups(D, kind).values()])
q("SELECT c.kind, SUM(c.rank) AS total, MAX(c.score) AS best FROM c GROUP BY c.kind",
  lambda D: [{"kind": key, "total": sum(d["rank"] for d in ds), "best": max(d["score"] for d in ds)}
             for key, ds in groups(D, kind).values()])
q("SELECT c.active, COUNT(1) AS n FROM c GROUP BY c.active",
  lambda D: [row(active=key, n=len(ds)) for key, ds in groups(D, lambda d: get(d, "active")).values()])
q("SELECT c.kind, c.active, COUNT(1) AS n FROM c GROUP BY c.kind, c.active",
  lambda D: [row(kind=ds[0]["kind"], active=get(ds[0], "active"), n=len(ds))
             for _, ds in groups(D, lambda d: [d["kind"], "active" in d, get(d, "active") is True]).values()])
q("SELECT c.addr.city AS city, AVG(c.score) AS avg FROM c GROUP BY c.addr.city",
  lambda D: [row(city=key, avg=agg_avg(d["score"] for d in ds))
             for key, ds in groups(D, lambda d: get(d, "addr", "city")).values()])
q("SELECT COUNT(1) AS n, c.pk FROM c GROUP BY c.pk",
  lambda D: [{"n": len(ds), "pk": key} for key, ds in groups(D, lambda d: d["pk"]).values()])
q("SELECT VALUE COUNT(1) FROM c GROUP BY c.kind", lambda D: [len(ds) for _, ds in groups(D, kind).values()])
q("SELECT c.kind, COUNT(1) AS n FROM c WHERE c.rank < 50 GROUP BY c.kind",
  lambda D: [{"kind": key, "n": len(ds)} for key, ds in groups([d for d in D if d["rank"] < 50], kind).values()])
q("SELECT t AS tag, COUNT(1) AS n FROM c JOIN t IN c.tags GROUP BY t",
  lambda D: [{"tag": key, "n": len(ts)}
             for key, ts in groups([t for d in D for t in d.get("tags", [])], lambda t: t).values()])
q("SELECT c.rank % 3 AS r, COUNT(1) AS n FROM c GROUP BY c.rank % 3",
  lambda D: [{"r": key, "n": len(ds)} for key, ds in groups(D, lambda d: d["rank"] % 3).values()])
q("SELECT c.kind, MIN(c.name) AS first FROM c GROUP BY c.kind",
  lambda D: [row(kind=key, first=agg_extreme((name(d) for d in ds), False)) for key, ds in groups(D, kind).values()])

q("SELECT c.kind, MIN(c.rank) AS lo, MAX(c.rank) AS hi, AVG(c.rank) AS mean FROM c WHERE c.rank >= 20 GROUP BY c.kind",
  lambda D: [{"kind": key, "lo": min(d["rank"] for d in ds), "hi": max(d["rank"] for d in ds),
              "mean": agg_avg(d["rank"] for d in ds)}
             for key, ds in groups([d for d in D if d["rank"] >= 20], kind).values()])
q("SELECT c.kind, COUNT(c.name) AS named, MAX(c.name) AS last FROM c GROUP BY c.kind",
  lambda D: [row(kind=key, named=agg_count(name(d) for d in ds), last=agg_extreme((name(d) for d in ds), True))
             for key, ds in groups(D, kind).values()])
q("SELECT c.kind, c.addr.city AS city, AVG(c.score) AS avg, SUM(c.rank) AS total FROM c GROUP BY c.kind, c.addr.city",
  lambda D: [row(kind=ds[0]["kind"], city=get(ds[0], "addr", "city"), avg=agg_avg(d["score"] for d in ds),
                 total=sum(d["rank"] for d in ds))
             for _, ds in groups(D, lambda d: [d["kind"], *_defined(get(d, "addr", "city"))]).values()])
q("SELECT c.kind, COUNT(1) AS n FROM c WHERE c.kind = 'z' GROUP BY c.kind", lambda D: [])
q("SELECT MAX(c.rank) AS hi, MIN(c.rank) AS lo FROM c",
  lambda D: [{"hi": max(d["rank"] for d in D), "lo": min(d["rank"] for d in D)}] if D else [{}])
q("SELECT COUNT(1) AS n, MAX(c.rank) AS hi, AVG(c.score) AS mean FROM c WHERE c.kind = 'z'", lambda D: [{"n": 0}])
q("SELECT COUNT(c.note) AS notes, MIN(c.name) AS first FROM c",
  lambda D: [row(notes=agg_count(get(d, "note") for d in D), first=agg_extreme((name(d) for d in D), False))])

# ---- JOIN ---------------------------------------------------------------------------------------
q("SELECT c.id, t AS tag FROM c JOIN t IN c.tags",
  lambda D: [{"id": d["id"], "tag": t} for d in D for t in d.get("tags", [])])
q("SELECT VALUE i.sku FROM c JOIN i IN c.items WHERE i.qty > 3",
  lambda D: [i["sku"] for d in D for i in d["items"] if i["qty"] > 3])
q("SELECT c.id, i.sku, t FROM c JOIN i IN c.items JOIN t IN c.tags WHERE c.kind = 'a'",
  lambda D: [{"id": d["id"], "sku": i["sku"], "t": t}
             for d in D if d["kind"] == "a" for i in d["items"] for t in d.get("tags", [])])
q("SELECT VALUE m FROM c JOIN m IN c.mixed", lambda D: [m for d in D if type(d["mixed"]) is list for m in d["mixed"]])
q("SELECT VALUE t FROM t IN root.tags", lambda D: [t for d in D for t in d.get("tags", [])])
q("SELECT c.id, i.qty * i.price AS cost FROM c JOIN i IN c.items WHERE c.rank < 30",
  lambda D: [{"id": d["id"], "cost": i["qty"] * i["price"]} for d in D if d["rank"] < 30 for i in d["items"]])
q("SELECT VALUE COUNT(1) FROM c JOIN a IN c.tags JOIN b IN c.tags",
  lambda D: [sum(len(d.get("tags", [])) ** 2 for d in D)])
q("SELECT VALUE c.id FROM c JOIN i IN c.items WHERE i.sku = 'k3'",
  lambda D: [d["id"] for d in D for i in d["items"] if i["sku"] == "k3"])
q("SELECT i FROM i IN c.items WHERE i.price < 5", lambda D: [{"i": i} for d in D for i in d["items"] if i["price"] < 5])

# ---- subqueries: EXISTS, ARRAY, scalar ----------------------------------------------------------
q("SELECT VALUE c.id FROM c WHERE EXISTS(SELECT VALUE t FROM t IN c.tags WHERE t = 'red')",
  ids(lambda d: "red" in d.get("tags", [])))
q("SELECT VALUE c.id FROM c WHERE NOT EXISTS(SELECT VALUE i FROM i IN c.items)", ids(lambda d: not d["items"]))
q("SELECT c.id, ARRAY(SELECT VALUE i.sku FROM i IN c.items WHERE i.qty > 1) AS skus FROM c WHERE c.kind = 'b'",
  lambda D: [{"id": d["id"], "skus": [i["sku"] for i in d["items"] if i["qty"] > 1]} for d in D if d["kind"] == "b"])
q("SELECT c.id, (SELECT VALUE COUNT(1) FROM t IN c.tags) AS ntags FROM c",
  lambda D: [{"id": d["id"], "ntags": len(d.get("tags", []))} for d in D])
q("SELECT c.id, ARRAY(SELECT VALUE UPPER(t) FROM t IN c.tags) AS up FROM c WHERE IS_DEFINED(c.tags)",
  lambda D: [{"id": d["id"], "up": [t.upper() for t in d["tags"]]} for d in D if "tags" in d])
q("SELECT VALUE c.id FROM c WHERE (SELECT VALUE MAX(i.qty) FROM i IN c.items) >= 5",
  ids(lambda d: bool(d["items"]) and max(i["qty"] for i in d["items"]) >= 5))
q("SELECT VALUE c.id FROM c WHERE EXISTS(SELECT VALUE i FROM i IN c.items WHERE i.price > 40 AND i.qty > 2)",
  ids(lambda d: any(i["price"] > 40 and i["qty"] > 2 for i in d["items"])))
q("SELECT VALUE c.id FROM c WHERE EXISTS(SELECT VALUE 1 FROM t IN c.tags WHERE t IN ('ünï', 'x y'))",
  ids(lambda d: any(t in ("ünï", "x y") for t in d.get("tags", []))))



# ---- built-in functions -----------------------------------------------------------------------
def _str_fn(f):
    """SELECT VALUE f(c.name) FROM c: a string function is undefined off strings."""
    return val(lambda d: f(name(d)) if s(name(d)) is not MISSING else MISSING)


def _round_half_away(x):
    return math.copysign(math.floor(abs(x) + 0.5), x)


def _days_between(start: str, end: str) -> int:
    return (datetime.date.fromisoformat(end[:10]) - datetime.date.fromisoformat(start[:10])).days


def _json_text(v) -> str:
    return v if type(v) is str else canon(v).replace(", ", ",").replace(": ", ":")


first_30 = lambda d: d["rank"] < 30        # noqa: E731
city = lambda d: get(d, "addr", "city")    # noqa: E731

q("SELECT VALUE LOWER(c.name) FROM c", _str_fn(str.lower))
q("SELECT VALUE UPPER(c.name) FROM c", _str_fn(str.upper))
q("SELECT VALUE LENGTH(c.name) FROM c", _str_fn(len))
q("SELECT VALUE SUBSTRING(c.name, 1, 3) FROM c", _str_fn(lambda x: x[1:4]))
q("SELECT VALUE LEFT(c.name, 2) FROM c", _str_fn(lambda x: x[:2]))
q("SELECT VALUE RIGHT(c.name, 2) FROM c", _str_fn(lambda x: x[-2:]))
q("SELECT VALUE REPLACE(c.name, 'a', '4') FROM c", _str_fn(lambda x: x.replace("a", "4")))
q("SELECT VALUE REVERSE(c.name) FROM c", _str_fn(lambda x: x[::-1]))
q("SELECT VALUE INDEX_OF(c.name, 'e') FROM c", _str_fn(lambda x: x.find("e")))
q("SELECT VALUE UPPER(c.addr.city) FROM c", val(lambda d: city(d).upper() if s(city(d)) is not MISSING else MISSING))
q("SELECT VALUE CONCAT(c.id, '-', c.kind) FROM c WHERE c.rank < 20",
  val(lambda d: f"{d['id']}-{d['kind']}", lambda d: d["rank"] < 20))
q("SELECT VALUE TRIM(CONCAT('  ', c.kind, ' ')) FROM c WHERE c.rank < 8", val(kind, lambda d: d["rank"] < 8))
q("SELECT VALUE LTRIM(CONCAT('  ', c.kind, ' ')) FROM c WHERE c.rank < 8",
  val(lambda d: d["kind"] + " ", lambda d: d["rank"] < 8))
q("SELECT VALUE REPLICATE(c.kind, 3) FROM c WHERE c.rank < 8", val(lambda d: d["kind"] * 3, lambda d: d["rank"] < 8))
q("SELECT VALUE TOSTRING(c.rank) FROM c WHERE c.rank < 12", val(lambda d: str(d["rank"]), lambda d: d["rank"] < 12))
q("SELECT VALUE ToString(c.mixed) FROM c WHERE c.rank < 12",
  val(lambda d: _json_text(d["mixed"]), lambda d: d["rank"] < 12))
q("SELECT VALUE StringToNumber(c.n) FROM c WHERE IS_STRING(c.n)",
  val(lambda d: int(nn(d)), lambda d: type(nn(d)) is str))
q("SELECT VALUE c.id FROM c WHERE CONTAINS(c.name, 'a')", ids(lambda d: s(name(d)) is not MISSING and "a" in name(d)))
q("SELECT VALUE c.id FROM c WHERE CONTAINS(c.name, 'A', true)",
  ids(lambda d: s(name(d)) is not MISSING and "a" in name(d).lower()))
q("SELECT VALUE c.id FROM c WHERE STARTSWITH(c.name, 'Z')",
  ids(lambda d: s(name(d)) is not MISSING and name(d).startswith("Z")))
q("SELECT VALUE c.id FROM c WHERE STARTSWITH(c.name, 'a', true)",
  ids(lambda d: s(name(d)) is not MISSING and name(d).lower().startswith("a")))
q("SELECT VALUE c.id FROM c WHERE ENDSWITH(c.name, 'é')",
  ids(lambda d: s(name(d)) is not MISSING and name(d).endswith("é")))
q("SELECT VALUE c.id FROM c WHERE StringEquals(c.name, 'ALICE', true)",
  ids(lambda d: s(name(d)) is not MISSING and name(d).lower() == "alice"))
q("SELECT VALUE c.id FROM c WHERE CONTAINS(c.addr.city, 'ü')",
  ids(lambda d: s(city(d)) is not MISSING and "ü" in city(d)))
q("SELECT VALUE ABS(c.rank - 100) FROM c WHERE c.kind = 'a'",
  val(lambda d: abs(d["rank"] - 100), lambda d: d["kind"] == "a"))
q("SELECT VALUE ROUND(c.score) FROM c", val(lambda d: _round_half_away(d["score"])))
q("SELECT VALUE FLOOR(c.score) FROM c", val(lambda d: math.floor(d["score"])))
q("SELECT VALUE CEILING(c.score) FROM c", val(lambda d: math.ceil(d["score"])))
q("SELECT VALUE TRUNC(c.score) FROM c", val(lambda d: math.trunc(d["score"])))
q("SELECT VALUE SQRT(c.rank) FROM c WHERE c.rank < 30", val(lambda d: math.sqrt(d["rank"]), first_30))
q("SELECT VALUE POWER(c.rank, 2) FROM c WHERE c.rank < 30", val(lambda d: d["rank"] ** 2, first_30))
q("SELECT VALUE SIGN(c.rank - 100) FROM c", val(lambda d: (d["rank"] > 100) - (d["rank"] < 100)))
q("SELECT VALUE NumberBin(c.score, 10) FROM c", val(lambda d: math.floor(d["score"] / 10) * 10))
q("SELECT VALUE ABS(c.n) FROM c", val(lambda d: abs(n(nn(d))) if n(nn(d)) is not MISSING else MISSING))
q("SELECT VALUE c.rank % 4 * 10 + 1 FROM c WHERE c.rank < 30", val(lambda d: d["rank"] % 4 * 10 + 1, first_30))
q("SELECT VALUE IS_DEFINED(c.name) FROM c", val(lambda d: name(d) is not MISSING))
q("SELECT VALUE c.id FROM c WHERE IS_NULL(c.addr)", ids(lambda d: "addr" in d and d["addr"] is None))
q("SELECT VALUE c.id FROM c WHERE IS_NUMBER(c.n)", ids(lambda d: is_num(nn(d))))
q("SELECT VALUE c.id FROM c WHERE IS_STRING(c.n)", ids(lambda d: type(nn(d)) is str))
q("SELECT VALUE c.id FROM c WHERE IS_BOOL(c.n)", ids(lambda d: type(nn(d)) is bool))
q("SELECT VALUE c.id FROM c WHERE IS_INTEGER(c.n)", ids(lambda d: type(nn(d)) is int))
q("SELECT VALUE c.id FROM c WHERE IS_ARRAY(c.mixed)", ids(lambda d: type(d["mixed"]) is list))
q("SELECT VALUE c.id FROM c WHERE IS_OBJECT(c.mixed)", ids(lambda d: type(d["mixed"]) is dict))
q("SELECT VALUE c.id FROM c WHERE IS_PRIMITIVE(c.mixed)", ids(lambda d: type(d["mixed"]) not in (list, dict)))
q("SELECT VALUE c.id FROM c WHERE NOT IS_DEFINED(c.tags)", ids(lambda d: "tags" not in d))
q("SELECT VALUE c.id FROM c WHERE IS_FINITE_NUMBER(c.score) AND c.score < 10", ids(lambda d: d["score"] < 10))
q("SELECT VALUE ARRAY_LENGTH(c.tags) FROM c", val(lambda d: len(d["tags"]) if "tags" in d else MISSING))
q("SELECT VALUE c.id FROM c WHERE ARRAY_CONTAINS(c.tags, 'ünï')", ids(lambda d: "ünï" in d.get("tags", [])))
q('SELECT VALUE c.id FROM c WHERE ARRAY_CONTAINS(c.items, {"sku": "k3"}, true)',
  ids(lambda d: any(i["sku"] == "k3" for i in d["items"])))
q('SELECT VALUE c.id FROM c WHERE ARRAY_CONTAINS(c.items, {"sku": "k3"})', ids(lambda d: False))
q("SELECT VALUE ARRAY_SLICE(c.tags, 1) FROM c WHERE c.kind = 'a'",
  val(lambda d: d["tags"][1:] if "tags" in d else MISSING, lambda d: d["kind"] == "a"))
q("SELECT VALUE ARRAY_SLICE(c.tags, 0, 1) FROM c", val(lambda d: d["tags"][:1] if "tags" in d else MISSING))
q("SELECT VALUE ARRAY_CONCAT(c.tags, ['z']) FROM c WHERE c.rank < 15",
  val(lambda d: d["tags"] + ["z"] if "tags" in d else MISSING, lambda d: d["rank"] < 15))
q("SELECT VALUE ARRAY_LENGTH(SetUnion(c.tags, ['red'])) FROM c WHERE IS_DEFINED(c.tags)",
  val(lambda d: len(set(d["tags"]) | {"red"}), lambda d: "tags" in d))
q("SELECT VALUE ARRAY_LENGTH(SetIntersect(c.tags, ['red', 'blue'])) FROM c WHERE IS_DEFINED(c.tags)",
  val(lambda d: len(set(d["tags"]) & {"red", "blue"}), lambda d: "tags" in d))
q("SELECT VALUE c.id FROM c WHERE ARRAY_CONTAINS_ANY(c.tags, 'red', 'x y')",
  ids(lambda d: bool({"red", "x y"} & set(d.get("tags", []))) if "tags" in d else MISSING))
q("SELECT VALUE c.id FROM c WHERE ARRAY_CONTAINS_ALL(c.tags, 'red', 'green')",
  ids(lambda d: {"red", "green"} <= set(d["tags"]) if "tags" in d else MISSING))
q("SELECT VALUE c.id FROM c WHERE ARRAY_LENGTH(c.items) > 2", ids(lambda d: len(d["items"]) > 2))
q("SELECT VALUE CHOOSE(2, 'x', c.kind, 'z') FROM c WHERE c.rank < 6", val(kind, lambda d: d["rank"] < 6))
q("SELECT VALUE DateTimePart('mm', c.created) FROM c WHERE c.rank < 30",
  val(lambda d: iso_parts(d["created"])["mm"], first_30))
q("SELECT VALUE DateTimePart('hh', c.created) FROM c WHERE c.rank < 30",
  val(lambda d: iso_parts(d["created"])["hh"], first_30))
q("SELECT VALUE DateTimeAdd('dd', 1, c.created) FROM c WHERE c.rank < 30",
  val(lambda d: ticks_add(d["created"], "dd", 1), first_30))
q("SELECT VALUE DateTimeAdd('hh', -5, c.created) FROM c WHERE c.rank < 30",
  val(lambda d: ticks_add(d["created"], "hh", -5), first_30))
q("SELECT VALUE DateTimeDiff('dd', c.created, '2024-12-31T00:00:00.0000000Z') FROM c WHERE c.rank < 30",
  val(lambda d: _days_between(d["created"], "2024-12-31"), first_30))
q("SELECT VALUE DateTimeFromParts(2024, c.rank % 12 + 1, 1) FROM c WHERE c.rank < 30",
  val(lambda d: f"2024-{d['rank'] % 12 + 1:02d}-01T00:00:00.0000000Z", first_30))
q("SELECT VALUE COUNT(1) FROM c WHERE c.created < GetCurrentDateTime()", lambda D: [len(D)])
q("SELECT VALUE c.id FROM c WHERE IS_STRING(GetCurrentDateTime()) AND c.rank < 3", ids(lambda d: d["rank"] < 3))
q("SELECT VALUE c.id FROM c WHERE GetCurrentTimestamp() > 1700000000000 AND c.rank < 3", ids(lambda d: d["rank"] < 3))
