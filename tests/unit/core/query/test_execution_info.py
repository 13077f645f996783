"""The query plan handed to SDKs (core/query/execution_info.py) has the service's shape, and its
rewritten query, run by the engine on each partition's documents and merged as an SDK merges
(sort by orderByItems, combine aggregate partials, dedupe, TOP/OFFSET/LIMIT), gives what the
whole query gives over all documents. Pure: the engine runs in-process on plain lists."""
import heapq
import itertools

import pytest

from emulator.core.query import compile_query
from emulator.core.query.execution_info import (
    FULL_RANGE, ORDER_BY_FILTER, features_needed, needs_pipeline, plan_of, plannable)
from emulator.core.query.values import sort_key

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
    ("SELECT COUNT(1) AS n FROM c", True, False, ["Aggregate"]),
    ("SELECT c.k, COUNT(1) AS n FROM c GROUP BY c.k", True, False, ["GroupBy"]),
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
