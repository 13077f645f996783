"""Query plans on the wire: a plan request (as the Python and JS SDKs send it) gets the
service's plan shape, a client lacking a feature the query needs gets the service's 400, and a
query regionlab does not plan gets a clear 400; under --query-mode service a cross-partition
query that needs client-side work answers 400/1004 with its plan in `additionalErrorInfo`,
while partition-scoped and plain cross-partition queries are served, and the default mode
never answers 1004. Real emulator, signed raw HTTP (the SDK paths are in the corpus tests)."""
import json

import pytest
from azure.cosmos import PartitionKey

from emulator.config import ConfigError
from emulator.testing import running_emulator
from sdk_harness import WireLog, make_client, raw_request

DOCS_PATH = "/dbs/db/colls/items/docs"
ALL_FEATURES = ("Aggregate,CompositeAggregate,Distinct,MultipleOrderBy,OffsetAndLimit,OrderBy,Top,"
                "NonStreamingOrderBy,HybridSearch,CountIf,WeightedRankFusion")
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
                        **(headers or {})})


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
    r = plan_request(emu, "SELECT c.pk, COUNT(1) AS n FROM c GROUP BY c.pk", ALL_FEATURES + ",GroupBy")
    assert r.status == 400 and "does not plan GROUP BY" in r.message


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
    plain = query_request(emu, "SELECT VALUE c.id FROM c WHERE c.n < 3")
    assert plain.status == 200 and sorted(plain.json()["Documents"]) == ["i0", "i1", "i2"]
    grouped = query_request(emu, "SELECT c.pk, COUNT(1) AS n FROM c GROUP BY c.pk")
    assert grouped.status == 200 and len(grouped.json()["Documents"]) == 4     # not planned: run whole


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
