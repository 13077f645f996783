"""The query plan handed to SDKs (core/query/execution_info.py) has the service's shape, and its
rewritten query, run by the engine on each partition's documents and merged as an SDK merges
(sort by orderByItems, combine aggregate partials, merge GROUP BY partials per group and alias,
dedupe, TOP/OFFSET/LIMIT), gives what the whole query gives over all documents. Pure: the engine runs in-process on plain lists."""
import heapq
import itertools
import json

import pytest

from regionlab.emulator.core.query import compile_query
from regionlab.emulator.core.query.execution_info import (
    FULL_RANGE, ORDER_BY_FILTER, features_needed, needs_pipeline, plan_of, plannable)
from regionlab.emulator.core.query.values import sort_key

DOCS = [{"id": f"d{i:02}", "_rid": f"r{i:02}", "pk": f"p{i % 3}", "n": (i * 5) % 7, "k": "xyz"[i % 3],
         "tags": ["t", f"u{i % 2}"]} for i in range(24)]
PARTITIONS = [DOCS[i::3] for i in range(3)]


def per_partition(sql: str, params=None) -> tuple:
    plan = plan_of(compile_query(sql, params))
    rewritten = compile_query(plan["queryInfo"]["rewrittenQuery"].replace(ORDER_BY_FILTER, "true"), params)
    return plan["queryInfo"], [rewritten.execute(p, 0) for p in PARTITIONS]


def merge_order_by(info: dict, parts: list) -> list:
    descending = [d == "Descending" for d in info["orderBy"]]

    def ordered(row):           # the service's order of each ORDER BY item, descending ones reversed
        return [(sort_key(i["item"]) if not d else _Desc(sort_key(i["item"]))) for d, i in
                zip(descending, row["orderByItems"])]
    merged = [row["payload"] for row in heapq.merge(*parts, key=ordered)]
    skip = info["offset"] or 0
    take = info["limit"] if info["limit"] is not None else info["top"]
    return merged[skip:None if take is None else skip + take]


class _Desc:
    def __init__(self, k):
        self.k = k

    def __lt__(self, other):
        return other.k < self.k

    def __eq__(self, other):
        return self.k == other.k


@pytest.mark.parametrize("sql", [
    "SELECT * FROM c ORDER BY c.n DESC, c.id",
    "SELECT c.id, c.n AS num FROM c WHERE c.k != 'y' ORDER BY c.n, c.id DESC",
    "SELECT VALUE c.id FROM c ORDER BY c.id OFFSET 3 LIMIT 5",
    "SELECT TOP 4 c.id FROM c ORDER BY c.n DESC, c.id",
    "SELECT c.id FROM c JOIN t IN c.tags WHERE t = 'u1' ORDER BY c.id",
])
def test_order_by_rewrite_merged_equals_the_whole_query(sql):
    info, parts = per_partition(sql)
    assert all(set(r) == {"_rid", "orderByItems", "payload"} for p in parts for r in p)
    assert merge_order_by(info, parts) == compile_query(sql).execute(DOCS, 0)


@pytest.mark.parametrize("sql,merge", [
    ("SELECT VALUE COUNT(1) FROM c WHERE c.n > 2", lambda items: sum(items)),
    ("SELECT VALUE SUM(c.n) FROM c", lambda items: sum(items)),
    ("SELECT VALUE MAX(c.n) FROM c WHERE c.k = 'x'", max),
    ("SELECT VALUE MIN(c.id) FROM c", min),
    ("SELECT VALUE AVG(c.n) FROM c", lambda items: sum(i["sum"] for i in items) / sum(i["count"] for i in items)),
])
def test_value_aggregate_partials_combine_to_the_whole_result(sql, merge):
    info, parts = per_partition(sql)
    assert info["hasSelectValue"] is True and len(info["aggregates"]) == 1
    items = [row[0]["item"] for part in parts for row in part if "item" in row[0]]   # {}: nothing there
    assert [merge(items)] == compile_query(sql).execute(DOCS, 0)


def test_min_max_partials_carry_item2_for_empty_partitions():
    _, parts = per_partition("SELECT VALUE MAX(c.n) FROM c WHERE c.pk = 'p1'")
    assert [p[0][0] for p in parts] == [{"item2": {"count": 0}}, {"item": 6, "item2": {"max": 6, "count": 8}},
                                        {"item2": {"count": 0}}]


def test_plan_shape_for_order_by_with_offset_limit():
    plan = plan_of(compile_query("SELECT c.id FROM c WHERE c.n > @n ORDER BY c.n DESC, c.id OFFSET 2 LIMIT 3",
                                 [{"name": "@n", "value": 1}]))
    info = plan["queryInfo"]
    assert plan["partitionedQueryExecutionInfoVersion"] == 2 and plan["queryRanges"] == [FULL_RANGE]
    assert info["orderBy"] == ["Descending", "Ascending"] and info["orderByExpressions"] == ["c.n", "c.id"]
    assert (info["offset"], info["limit"], info["top"], info["distinctType"]) == (2, 3, None, "None")
    assert info["rewrittenQuery"] == (
        'SELECT TOP 5 c._rid, [{"item": c.n}, {"item": c.id}] AS orderByItems, {"id": c.id} AS payload '
        f"FROM c WHERE ({ORDER_BY_FILTER}) AND (c.n > @n) ORDER BY c.n DESC, c.id")
    for key in ("groupByExpressions", "groupByAliases", "aggregates", "groupByAliasToAggregateType",
                "hasSelectValue", "dCountInfo"):
        assert key in info


def test_distinct_and_top_rewrites():
    info = plan_of(compile_query("SELECT DISTINCT VALUE c.k FROM c"))["queryInfo"]
    assert info["distinctType"] == "Unordered" and info["rewrittenQuery"] == "SELECT DISTINCT VALUE c.k FROM c"
    info = plan_of(compile_query("SELECT TOP 3 c.id FROM c WHERE c.n = 1"))["queryInfo"]
    assert info["top"] == 3 and info["rewrittenQuery"] == "SELECT TOP 3 c.id FROM c WHERE c.n = 1"


@pytest.mark.parametrize("sql,pipeline,can_plan,features", [
    ("SELECT * FROM c WHERE c.n = 1", False, True, []),
    ("SELECT * FROM c ORDER BY c.n", True, True, ["OrderBy"]),
    ("SELECT * FROM c ORDER BY c.n, c.id", True, True, ["MultipleOrderBy"]),
    ("SELECT VALUE COUNT(1) FROM c", True, True, ["Aggregate"]),
    ("SELECT COUNT(1) AS n FROM c", True, True, ["NonValueAggregate"]),
    ("SELECT c.k, COUNT(1) AS n FROM c GROUP BY c.k", True, True, ["GroupBy", "NonValueAggregate"]),
    ("SELECT VALUE COUNT(1) FROM c GROUP BY c.k", True, True, ["GroupBy", "Aggregate"]),
    ("SELECT VALUE c.k FROM c GROUP BY c.k", True, True, ["GroupBy"]),
    ("SELECT c.k, (SELECT VALUE COUNT(1) FROM t IN c.tags) AS z FROM c GROUP BY c.k", True, True, ["GroupBy"]),
    ("SELECT c.k, COUNT(1) + 1 AS n FROM c GROUP BY c.k", True, False, ["GroupBy", "NonValueAggregate"]),
    ("SELECT VALUE {'k': c.k, 'n': COUNT(1)} FROM c GROUP BY c.k", True, False, ["GroupBy", "Aggregate"]),
    ("SELECT DISTINCT c.k FROM c GROUP BY c.k", True, False, ["GroupBy", "Distinct"]),
    ("SELECT DISTINCT VALUE c.k FROM c ORDER BY c.k", True, False, ["OrderBy", "Distinct"]),
    ("SELECT * FROM c OFFSET 1 LIMIT 2", True, True, ["OffsetAndLimit"]),
    ("SELECT TOP 1 * FROM c", True, True, ["Top"]),
])
def test_which_queries_need_and_get_a_plan(sql, pipeline, can_plan, features):
    q = compile_query(sql)
    assert (needs_pipeline(q), plannable(q), features_needed(q)) == (pipeline, can_plan, features)


def test_every_partition_split_gives_the_whole_order():
    sql = "SELECT VALUE c.id FROM c ORDER BY c.n, c.id"
    info, _ = per_partition(sql)
    rewritten = compile_query(info["rewrittenQuery"].replace(ORDER_BY_FILTER, "true"))
    for cut in itertools.combinations(range(1, len(DOCS)), 2):
        parts = [DOCS[:cut[0]], DOCS[cut[0]:cut[1]], DOCS[cut[1]:]]
        rows = [rewritten.execute(p, 0) for p in parts]
        assert merge_order_by(info, rows) == compile_query(sql).execute(DOCS, 0)


# ---- GROUP BY and aggregates outside SELECT VALUE: merged per group and alias, as an SDK does --
GROUPED_DOCS = [dict(d, city=["Oslo", None, "Rome"][i % 3]) if i % 4 else d for i, d in enumerate(DOCS)]
GROUPED_PARTITIONS = [GROUPED_DOCS[i::3] for i in range(3)] + [[]]       # one partition holds nothing


_NOTHING = object()       # a merge that saw no value (null is a value)


def _partial_value(kind, p):
    """What a partition's partial says, or _NOTHING (item2 first, as the SDKs read it)."""
    if kind is None:
        return p
    p = p.get("item2", p.get("item", _NOTHING)) if p else _NOTHING
    if kind in ("Max", "Min"):
        return _NOTHING if p is _NOTHING or not p["count"] else p[kind.lower()]
    return p


def _merge(kind, parts: list):
    vals = [v for v in (_partial_value(kind, p) for p in parts) if v is not _NOTHING]
    if not vals:
        return 0 if kind == "Count" else _NOTHING
    if kind is None:
        return vals[0]
    if kind in ("Count", "Sum"):
        return sum(vals)
    if kind == "Average":
        vals = [v for v in vals if "sum" in v]
        count = sum(v["count"] for v in vals)
        return sum(v["sum"] for v in vals) / count if count else _NOTHING
    key = (max if kind == "Max" else min)(sort_key(v) for v in vals)
    return next(v for v in vals if sort_key(v) == key)


def merge_groups(info: dict, parts: list) -> list:
    groups: dict = {}
    for row in (r for part in parts for r in part):
        groups.setdefault(json.dumps(row.get("groupByItems")), []).append(row.get("payload", _NOTHING))
    out = []
    for payloads in groups.values():
        if info["hasSelectValue"]:
            kind = info["aggregates"][0] if info["aggregates"] else None
            value = _merge(kind, [p[0] if kind else p for p in payloads if p is not _NOTHING])
            if value is not _NOTHING:
                out.append(value)
            continue
        merged = {alias: _merge(kind, [p[alias] for p in payloads if alias in p])
                  for alias, kind in info["groupByAliasToAggregateType"].items()}
        out.append({k: v for k, v in merged.items() if v is not _NOTHING})
    return out


def _bag(rows) -> list:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


@pytest.mark.parametrize("sql", [
    "SELECT c.k, COUNT(1) AS n FROM c GROUP BY c.k",
    "SELECT COUNT(1) AS n, c.city FROM c GROUP BY c.city",
    "SELECT c.k, c.city, COUNT(1) AS n, SUM(c.n) AS s, MIN(c.n) AS lo, MAX(c.id) AS hi FROM c GROUP BY c.k, c.city",
    "SELECT c.k, AVG(c.n) AS mean FROM c WHERE c.n > 1 GROUP BY c.k",
    "SELECT c.k, MAX(c.city) AS m, COUNT(c.city) AS cities FROM c WHERE IS_STRING(c.city) GROUP BY c.k",
    "SELECT VALUE COUNT(1) FROM c GROUP BY c.city",
    "SELECT VALUE MAX(c.n) FROM c GROUP BY c.k",
    "SELECT VALUE c.city FROM c GROUP BY c.city",
    "SELECT c.k, COUNT(1) AS n FROM c WHERE c.n > 100 GROUP BY c.k",
    "SELECT COUNT(1) FROM c",
    "SELECT MAX(c.n) AS m, MIN(c.n) AS mi, AVG(c.n) AS a, SUM(c.n) AS s FROM c WHERE c.k = 'x'",
    "SELECT COUNT(1) AS n, SUM(c.n) AS s FROM c WHERE c.n > 100",
    "SELECT COUNT(t) AS n FROM c JOIN t IN c.tags WHERE t != 't'",
])
def test_grouped_partials_merged_per_group_equal_the_whole_query(sql):
    info = plan_of(compile_query(sql))["queryInfo"]
    rewritten = compile_query(info["rewrittenQuery"])
    parts = [rewritten.execute(p, 0) for p in GROUPED_PARTITIONS]
    assert all(set(r) <= {"groupByItems", "payload"} for p in parts for r in p)
    assert _bag(merge_groups(info, parts)) == _bag(compile_query(sql).execute(GROUPED_DOCS, 0))


def test_a_group_by_plan_names_its_expressions_aliases_and_aggregates():
    info = plan_of(compile_query("SELECT c.k AS kind, COUNT(1), AVG(c.n) AS mean FROM c WHERE c.n > @n "
                                 "GROUP BY c.k OFFSET 1 LIMIT 2", [{"name": "@n", "value": 0}]))["queryInfo"]
    assert info["groupByExpressions"] == ["c.k"] and info["groupByAliases"] == ["kind", "$1", "mean"]
    assert info["groupByAliasToAggregateType"] == {"kind": None, "$1": "Count", "mean": "Average"}
    assert (info["aggregates"], info["hasSelectValue"], info["offset"], info["limit"]) == ([], False, 1, 2)
    assert info["rewrittenQuery"] == (          # every group from every partition: no TOP, OFFSET or LIMIT
        'SELECT [{"item": c.k}] AS groupByItems, {"kind": c.k, "$1": {"item": COUNT(1)}, '
        '"mean": {"item": {"sum": SUM(c.n), "count": COUNT(c.n)}}} AS payload FROM c WHERE c.n > @n GROUP BY c.k')



CHAIN_EXPRESSIONS = ["c.n" + "+1" * 20_000, "c.a ?? " * 20_000 + "c.n", "NOT " * 20_000 + "c.t", "c" + ".a" * 20_000]


@pytest.mark.parametrize("expression", CHAIN_EXPRESSIONS)
def test_planning_walks_a_chain_of_any_length_in_a_loop(expression):
    """An operator or member chain nests as deep as it is long: no walk may recurse over it."""
    q = compile_query(f"SELECT TOP 5 {expression} AS x FROM c")
    assert features_needed(q) == ["Top"] and plannable(q)
    assert plan_of(q)["queryInfo"]["top"] == 5
    composed = compile_query(f"SELECT [{expression}, COUNT(1)] AS x FROM c")    # found past the chain
    assert features_needed(composed) == ["NonValueAggregate"] and not plannable(composed)
