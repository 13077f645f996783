"""Query plans on the wire: a plan request (as the Python and JS SDKs send it) gets the
service's plan shape (GROUP BY and aggregates outside SELECT VALUE included, whose per-range
partials merge to the whole query's answer), a client lacking a feature the query needs gets the
service's 400, a query regionlab does not plan gets a clear 400, a GROUP BY whose select list
names a property it does not group gets the service's 400 on every path (plan requests as both
SDKs send them, the query itself, the official Python SDK cross-partition and scoped); under --query-mode service a cross-partition
query that needs client-side work answers 400/1004 with its plan in `additionalErrorInfo`,
while partition-scoped and plain cross-partition queries are served, and the default mode
never answers 1004. Real emulator, signed raw HTTP (the SDK paths are in the corpus tests)."""
import json
import logging

import pytest
from azure.cosmos import PartitionKey, exceptions

from regionlab.emulator.config import ConfigError
from regionlab.emulator.testing import running_emulator
from sdk_harness import WireLog, make_client, raw_request

DOCS_PATH = "/dbs/db/colls/items/docs"
PYTHON_FEATURES = ("Aggregate,CompositeAggregate,Distinct,MultipleOrderBy,OffsetAndLimit,OrderBy,Top,"
                   "NonStreamingOrderBy,HybridSearch,CountIf,WeightedRankFusion")      # azure-cosmos 4.17.1
ALL_FEATURES = PYTHON_FEATURES + ",GroupBy,NonValueAggregate,MultipleAggregates"
ORDERED = "SELECT c.id FROM c WHERE c.n > 1 ORDER BY c.n DESC"



@pytest.fixture(scope="module", params=["whole", "service"])
def emu(request):
    with running_emulator(partitions=3, query_mode=request.param) as e, make_client(e) as client:
        c = client.create_database("db").create_container("items", PartitionKey(path="/pk"))
        for i in range(12):
            c.create_item({"id": f"i{i}", "pk": f"p{i % 4}", "n": i})
        e.mode = request.param
        yield e


def plan_request(emu, sql: str, features: str = ALL_FEATURES):
    return raw_request(emu, "POST", DOCS_PATH, {"query": sql, "parameters": []},
                       {"x-ms-cosmos-is-query-plan-request": "True", "x-ms-cosmos-supported-query-features": features,
                        "x-ms-cosmos-query-version": "1.0"})


def query_request(emu, sql: str, headers: dict | None = None):
    return raw_request(emu, "POST", DOCS_PATH, {"query": sql, "parameters": []},
                       {"content-type": "application/query+json", "x-ms-documentdb-isquery": "true",
                        "x-ms-documentdb-query-enablecrosspartition": "True", **(headers or {})})


def query_pages(emu, sql: str) -> list:
    """Every page's reply, following x-ms-continuation."""
    replies, token = [], None
    while True:
        replies.append(query_request(emu, sql, {"x-ms-continuation": token} if token else None))
        token = replies[-1].headers.get("x-ms-continuation")
        if not token or replies[-1].status != 200:
            return replies


def test_a_plan_request_gets_the_service_plan_shape(emu):
    r = plan_request(emu, ORDERED)
    assert r.status == 200, r
    plan = r.json()
    assert plan["partitionedQueryExecutionInfoVersion"] == 2
    assert plan["queryRanges"] == [{"min": "", "max": "FF", "isMinInclusive": True, "isMaxInclusive": False}]
    info = plan["queryInfo"]
    assert info["orderBy"] == ["Descending"] and info["orderByExpressions"] == ["c.n"]
    assert "orderByItems" in info["rewrittenQuery"] and "{documentdb-formattableorderbyquery-filter}" in info[
        "rewrittenQuery"]


def test_the_rewritten_query_runs_per_partition_key_range(emu):
    info = plan_request(emu, ORDERED).json()["queryInfo"]
    sql = info["rewrittenQuery"].replace("{documentdb-formattableorderbyquery-filter}", "true")
    rows = []
    for rid in ("0", "1", "2"):
        r = query_request(emu, sql, {"x-ms-documentdb-partitionkeyrangeid": rid})
        assert r.status == 200, r
        part = r.json()["Documents"]
        keys = [row["orderByItems"][0]["item"] for row in part]
        assert keys == sorted(keys, reverse=True)               # each partition in ORDER BY order
        rows += part
    assert sorted((row["payload"]["id"], row["orderByItems"][0]["item"]) for row in rows) == sorted(
        (f"i{i}", i) for i in range(2, 12))


def test_a_client_missing_a_feature_gets_the_service_400(emu):
    r = plan_request(emu, ORDERED, features="Aggregate,Distinct")
    assert r.status == 400 and "unsupported features" in r.message and "OrderBy" in r.message


def test_a_query_regionlab_does_not_plan_gets_a_clear_400(emu):
    r = plan_request(emu, "SELECT c.pk, COUNT(1) + 1 AS n FROM c GROUP BY c.pk")
    assert r.status == 400 and "does not plan an aggregate inside another expression" in r.message
    assert "Message: Compositions of aggregates and other expressions are not allowed. regionlab" in r.message
    r = plan_request(emu, "SELECT DISTINCT c.pk FROM c GROUP BY c.pk")
    assert r.status == 400 and "Compositions" not in r.message and "DISTINCT with GROUP BY" in r.message


GROUPED = "SELECT COUNT(1) AS n, c.pk, MAX(c.n) AS hi, AVG(c.n) AS mean FROM c WHERE c.n > 0 GROUP BY c.pk"


def test_a_group_by_plan_has_the_service_shape(emu):
    r = plan_request(emu, GROUPED)
    assert r.status == 200, r
    info = r.json()["queryInfo"]
    assert info["groupByExpressions"] == ["c.pk"] and info["groupByAliases"] == ["n", "pk", "hi", "mean"]
    assert info["groupByAliasToAggregateType"] == {"n": "Count", "pk": None, "hi": "Max", "mean": "Average"}
    assert info["aggregates"] == [] and info["hasSelectValue"] is False and info["orderBy"] == []
    assert info["rewrittenQuery"] == (
        'SELECT [{"item": c.pk}] AS groupByItems, {"n": {"item": COUNT(1)}, "pk": c.pk, '
        '"hi": {"item": MAX(c.n), "item2": {"max": MAX(c.n), "count": COUNT(c.n)}}, '
        '"mean": {"item": {"sum": SUM(c.n), "count": COUNT(c.n)}}} AS payload FROM c WHERE c.n > 0 GROUP BY c.pk')


@pytest.mark.parametrize("sql,aliases,rewritten", [
    ("SELECT COUNT(1) FROM c", {"$1": "Count"}, 'SELECT {"$1": {"item": COUNT(1)}} AS payload FROM c'),
    ("SELECT MAX(c.n) AS m, MIN(c.n) AS mi FROM c", {"m": "Max", "mi": "Min"},
     'SELECT {"m": {"item": MAX(c.n), "item2": {"max": MAX(c.n), "count": COUNT(c.n)}}, '
     '"mi": {"item": MIN(c.n), "item2": {"min": MIN(c.n), "count": COUNT(c.n)}}} AS payload FROM c'),
])
def test_aggregates_outside_select_value_are_planned_as_one_group(emu, sql, aliases, rewritten):
    info = plan_request(emu, sql).json()["queryInfo"]
    assert info["groupByExpressions"] == [] and info["groupByAliases"] == list(aliases)
    assert info["groupByAliasToAggregateType"] == aliases and info["aggregates"] == []
    assert info["rewrittenQuery"] == rewritten and info["hasSelectValue"] is False


def test_a_value_aggregate_by_group_plans_its_aggregate_with_select_value(emu):
    info = plan_request(emu, "SELECT VALUE SUM(c.n) FROM c GROUP BY c.pk").json()["queryInfo"]
    assert info["aggregates"] == ["Sum"] and info["hasSelectValue"] is True
    assert info["groupByAliases"] == [] and info["groupByAliasToAggregateType"] == {}
    assert info["rewrittenQuery"] == (
        'SELECT [{"item": c.pk}] AS groupByItems, [{"item": SUM(c.n)}] AS payload FROM c GROUP BY c.pk')


def test_grouped_partials_from_every_partition_key_range_merge_to_the_whole_answer(emu):
    sql = plan_request(emu, GROUPED).json()["queryInfo"]["rewrittenQuery"]
    merged: dict = {}
    for rid in ("0", "1", "2"):
        r = query_request(emu, sql, {"x-ms-documentdb-partitionkeyrangeid": rid})
        assert r.status == 200, r
        for row in r.json()["Documents"]:
            key = json.dumps(row["groupByItems"])
            p = row["payload"]
            n, total, count, hi = merged.get(key, (0, 0, 0, None))
            part_hi = p["hi"]["item2"]
            if part_hi["count"]:
                hi = part_hi["max"] if hi is None else max(hi, part_hi["max"])
            merged[key] = (n + p["n"]["item"], total + p["mean"]["item"]["sum"],
                           count + p["mean"]["item"]["count"], hi)
    docs = [{"pk": f"p{i % 4}", "n": i} for i in range(1, 12)]       # the fixture's documents with n > 0
    expected = {}
    for pk in sorted({d["pk"] for d in docs}):
        ns = [d["n"] for d in docs if d["pk"] == pk]
        expected[json.dumps([{"item": pk}])] = (len(ns), sum(ns), len(ns), max(ns))
    assert merged == expected


def test_a_client_without_group_by_or_non_value_aggregates_gets_the_service_400(emu):
    r = plan_request(emu, GROUPED, features=PYTHON_FEATURES)
    assert r.status == 400 and "Query contained GroupBy, NonValueAggregate, which the calling client does not support" in r.message
    r = plan_request(emu, "SELECT COUNT(1) AS n FROM c", features=PYTHON_FEATURES)
    assert r.status == 400 and "Query contained NonValueAggregate, which" in r.message
    assert plan_request(emu, "SELECT VALUE COUNT(1) FROM c", features=PYTHON_FEATURES).status == 200


def test_group_by_with_order_by_is_refused(emu):
    for r in (plan_request(emu, "SELECT c.pk, COUNT(1) AS n FROM c GROUP BY c.pk ORDER BY c.pk"),
              query_request(emu, "SELECT c.pk, COUNT(1) AS n FROM c GROUP BY c.pk ORDER BY c.pk")):
        assert r.status == 400 and "ORDER BY is not supported together with aggregates or GROUP BY" in r.message


NOT_GROUPED = ("Property reference 'c.id' is invalid in the select list because it is not contained in either an "
               "aggregate function or the GROUP BY clause")


def test_a_select_list_property_not_in_the_group_by_is_the_service_400_on_every_path(emu):
    bad = "SELECT c.id, COUNT(1) FROM c GROUP BY c.pk"
    js_plan = {"content-type": "application/query+json"}        # the JS SDK's plan request form
    for r in (plan_request(emu, bad), plan_request(emu, bad, features=PYTHON_FEATURES),
              raw_request(emu, "POST", DOCS_PATH, {"query": bad, "parameters": []},
                          {"x-ms-cosmos-is-query-plan-request": "True", **js_plan}),
              query_request(emu, bad), query_request(emu, bad, {"x-ms-documentdb-partitionkey": '["p1"]'})):
        assert r.status == 400 and NOT_GROUPED in r.message, r
    r = query_request(emu, "SELECT * FROM c GROUP BY c.pk")
    assert r.status == 400 and "'SELECT *' is not allowed with GROUP BY" in r.message
    with make_client(emu) as client:
        c = client.get_database_client("db").get_container_client("items")
        for scope in ({"enable_cross_partition_query": True}, {"partition_key": "p1"}):
            with pytest.raises(exceptions.CosmosHttpResponseError) as info:
                list(c.query_items(bad, **scope))
            assert info.value.status_code == 400 and NOT_GROUPED in info.value.message
        fine = list(c.query_items("SELECT c.pk, UPPER(c.pk) AS up, COUNT(1) AS n FROM c GROUP BY c.pk",
                                  partition_key="p1"))
        assert fine == [{"pk": "p1", "up": "P1", "n": 3}]


def test_service_mode_refuses_cross_partition_pipelines_with_the_plan_and_serves_the_rest(emu):
    r = query_request(emu, ORDERED)
    if emu.mode == "whole":
        assert r.status == 200 and [d["id"] for d in r.json()["Documents"]] == [f"i{i}" for i in range(11, 1, -1)]
        return
    assert r.status == 400 and r.headers["x-ms-substatus"] == "1004", r
    body = r.json()
    assert "can not be directly served by the gateway" in body["message"]
    assert json.loads(body["additionalErrorInfo"]) == plan_request(emu, ORDERED).json()
    scoped = query_request(emu, ORDERED, {"x-ms-documentdb-partitionkey": '["p1"]'})
    assert scoped.status == 200 and [d["id"] for d in scoped.json()["Documents"]] == ["i9", "i5"]
    plain = query_pages(emu, "SELECT VALUE c.id FROM c WHERE c.n < 3")      # a page per range holding results
    assert all(r.status == 200 for r in plain) and sorted(i for r in plain for i in r.json()["Documents"]) == [
        "i0", "i1", "i2"]
    for sql in ("SELECT c.pk, COUNT(1) AS n FROM c GROUP BY c.pk", "SELECT COUNT(1) FROM c"):
        grouped = query_request(emu, sql)
        assert grouped.status == 400 and grouped.headers["x-ms-substatus"] == "1004", (sql, grouped)
        assert json.loads(grouped.json()["additionalErrorInfo"]) == plan_request(emu, sql).json()
    scoped_grouped = query_request(emu, "SELECT c.pk, COUNT(1) AS n FROM c GROUP BY c.pk",
                                   {"x-ms-documentdb-partitionkey": '["p1"]'})
    assert scoped_grouped.status == 200 and scoped_grouped.json()["Documents"] == [{"pk": "p1", "n": 3}]
    composite = query_request(emu, "SELECT c.pk, COUNT(1) + 1 AS n FROM c GROUP BY c.pk")
    assert composite.status == 200 and len(composite.json()["Documents"]) == 4     # not planned: run whole


def test_the_python_sdk_asks_for_a_plan_only_in_service_mode(emu):
    wire = WireLog()
    with make_client(emu, raw_response_hook=wire) as client:
        c = client.get_database_client("db").get_container_client("items")
        assert list(c.query_items("SELECT VALUE MAX(c.n) FROM c", enable_cross_partition_query=True)) == [11]
    asked = any(e.request_headers.get("x-ms-cosmos-is-query-plan-request") for e in wire.entries)
    assert asked == (emu.mode == "service")


def test_query_mode_is_checked():
    with pytest.raises(ConfigError, match="query_mode='fast': must be one of whole, service"):
        running_emulator(query_mode="fast").__enter__()


def test_the_python_sdk_runs_group_by_whole_and_meets_the_service_refusal_when_it_must_plan(emu):
    from azure.cosmos.exceptions import CosmosHttpResponseError
    with make_client(emu) as client:
        c = client.get_database_client("db").get_container_client("items")
        sql = "SELECT c.pk, COUNT(1) AS n FROM c GROUP BY c.pk"
        scoped = list(c.query_items(sql, partition_key="p2"))
        assert scoped == [{"pk": "p2", "n": 3}]
        if emu.mode == "whole":
            assert sorted(r["pk"] for r in c.query_items(sql, enable_cross_partition_query=True)) == [
                "p0", "p1", "p2", "p3"]
            return
        # azure-cosmos 4.17.1 lists neither GroupBy nor NonValueAggregate, so the service
        # will not plan the query for it.
        with pytest.raises(CosmosHttpResponseError, match="Query contained GroupBy, NonValueAggregate") as e:
            list(c.query_items(sql, enable_cross_partition_query=True))
        assert e.value.status_code == 400


# Operator and member chains nest as deep as they are long; docs/limits.md promises them at any
# length. Each sits in a select item, which the plan path walks (features, plannability).
CHAINS = {
    "1+1+... x990": ("1" + "+1" * 990, [991] * 12),
    "?? x1000": ("c.missing ?? " * 1000 + "c.n", list(range(12))),
    "NOT NOT ... x1000": ("NOT " * 1000 + "(c.n > 5)", [n > 5 for n in range(12)]),
    "c.a.a... x1000": ("IS_DEFINED(c" + ".a" * 1000 + ")", [False] * 12),
}


@pytest.mark.parametrize("chain", CHAINS)
def test_a_long_chain_is_planned_on_every_path(emu, chain, caplog):
    caplog.set_level(logging.WARNING)
    expression, expected = CHAINS[chain]
    sql = f"SELECT TOP 100 VALUE {expression} FROM c"
    r = plan_request(emu, sql)
    assert r.status == 200, r
    assert r.json()["queryInfo"]["top"] == 100
    r = plan_request(emu, sql, features=PYTHON_FEATURES)
    assert r.status == 200, r
    wire = WireLog()
    with make_client(emu, raw_response_hook=wire) as client:
        c = client.get_database_client("db").get_container_client("items")
        assert sorted(c.query_items(sql, enable_cross_partition_query=True)) == sorted(expected)
    plans = [e.status for e in wire.entries if e.request_headers.get("x-ms-cosmos-is-query-plan-request")]
    assert plans == ([200] if emu.mode == "service" else [])      # the SDK's own plan request
    # The emulator's log (the SDK's own background health checks log as azure.*).
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR and rec.name.startswith("regionlab")], \
        caplog.text[:2000]
