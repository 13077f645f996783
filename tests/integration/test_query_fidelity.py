"""The service's query behaviours that SDK tests check (issue #26, section 2; docs/service-edges.md),
each through the official azure-cosmos SDK against one real regionlab for the module: a query
spanning more than one partition key range needs the cross-partition flag (400 with the service's
words otherwise; a one-range container and a query fixing the partition key are served); a
cross-partition query's pages end at each partition key range, as the SDK counts them; a VALUE
aggregate over nothing is `[null]` across ranges (what the SDK's merge gives) in both query modes,
and ORDER BY / DISTINCT over mixed types follow the service's type order in both; query metrics
and index metrics come in the service's formats when asked for."""
import json
import math

import pytest
from azure.cosmos import PartitionKey, exceptions

from regionlab.emulator.testing import running_emulator
from sdk_harness import make_client

DISABLED = "Cross partition query is required but disabled"
# One of each JSON type, in the service's ORDER BY order: undefined < null < false < true <
# numbers < strings (ordinal) < arrays < objects.
MIXED = [("u", None), ("n", "null"), ("f", "false"), ("t", "true"), ("x1", "1.5"), ("x2", "2"),
         ("sB", '"B"'), ("sa", '"a"'), ("ar", "[1]"), ("ob", '{"a": 1}')]


def mixed_doc(name: str, value: str | None) -> dict:
    doc = {"id": name, "pk": "m"}
    if value is not None:
        doc["v"] = json.loads(value)
    return doc


def load(emu, client, mode: str):
    database = client.create_database("db")
    database.create_container("empty", PartitionKey(path="/pk"), offer_throughput=30_000)
    mixed = database.create_container("mixed", PartitionKey(path="/pk"), offer_throughput=30_000)
    for name, value in MIXED:
        mixed.create_item(mixed_doc(name, value))
    mixed.create_item(mixed_doc("x2again", "2"))     # DISTINCT keeps one 2
    mixed.create_item(mixed_doc("na", "null"))       # and one null
    database.emu = emu
    emu.mode = mode
    return database


@pytest.fixture(scope="module")
def service_db():
    """The same containers under --query-mode service, where the SDK plans and merges."""
    with running_emulator(query_mode="service") as emu, make_client(emu) as client:
        yield load(emu, client, "service")


@pytest.fixture(scope="module")
def db():
    with running_emulator() as emu, make_client(emu) as client:
        database = load(emu, client, "whole")
        multi = database.create_container("multi", PartitionKey(path="/pk"), offer_throughput=30_000)
        single = database.create_container("single", PartitionKey(path="/pk"))
        for c in (multi, single):
            for i in range(12):
                c.create_item({"id": f"i{i}", "pk": f"p{i % 6}", "n": i})
        yield database


def test_a_multi_range_query_without_the_cross_partition_flag_is_400(db):
    multi = db.get_container_client("multi")
    assert len(list(multi.read_feed_ranges())) == 3
    with pytest.raises(exceptions.CosmosHttpResponseError) as refused:
        list(multi.query_items("SELECT * FROM c"))
    assert refused.value.status_code == 400 and DISABLED in refused.value.message
    assert len(list(multi.query_items("SELECT * FROM c", enable_cross_partition_query=True))) == 12
    assert len(list(multi.query_items("SELECT * FROM c", partition_key="p1"))) == 2
    # A WHERE clause that fixes the partition key routes the query to one range.
    assert [d["id"] for d in multi.query_items("SELECT * FROM c WHERE c.pk = 'p1' AND c.n > 2")] == ["i7"]


def test_a_one_range_container_answers_without_the_flag(db):
    assert len(list(db.get_container_client("single").query_items("SELECT * FROM c"))) == 12


def test_a_hierarchical_query_with_an_empty_prefix_is_400(db):
    h = db.create_container("h", PartitionKey(path=["/a", "/b"], kind="MultiHash"), offer_throughput=20_000)
    h.create_item({"id": "x", "a": "1", "b": "2"})
    with pytest.raises(exceptions.CosmosHttpResponseError) as refused:
        list(h.query_items("SELECT * FROM c", partition_key=[]))
    assert refused.value.status_code == 400 and DISABLED in refused.value.message
    assert [d["id"] for d in h.query_items("SELECT * FROM c", partition_key=["1"])] == ["x"]


def test_cross_partition_pages_end_at_each_partition_key_range(db):
    multi = db.get_container_client("multi")
    per_range = [len(list(multi.query_items("SELECT * FROM c", feed_range=r))) for r in multi.read_feed_ranges()]
    assert all(per_range) and sum(per_range) == 12
    for size, expected in ((100, len(per_range)), (2, sum(math.ceil(n / 2) for n in per_range))):
        pages = [list(p) for p in multi.query_items("SELECT VALUE c.id FROM c", enable_cross_partition_query=True,
                                                     max_item_count=size).by_page()]
        assert len(pages) == expected, (size, [len(p) for p in pages])
        assert sorted(i for p in pages for i in p) == sorted(f"i{i}" for i in range(12))


@pytest.fixture(params=["whole", "service"])
def mode_db(request):
    return request.getfixturevalue("db" if request.param == "whole" else "service_db")


@pytest.mark.parametrize("sql,expected", [
    ("SELECT VALUE MAX(c.x) FROM c", [None]), ("SELECT VALUE MIN(c.x) FROM c", [None]),
    ("SELECT VALUE AVG(c.x) FROM c", [None]), ("SELECT VALUE SUM(c.x) FROM c", [0]),
    ("SELECT VALUE COUNT(1) FROM c", [0])])
def test_a_value_aggregate_over_nothing_has_the_service_shape(mode_db, sql, expected):
    empty = mode_db.get_container_client("empty")
    assert list(empty.query_items(sql, enable_cross_partition_query=True)) == expected
    # One logical partition's own answer: an undefined aggregate is no row.
    assert list(empty.query_items(sql, partition_key="p")) == [r for r in expected if r is not None]


def test_order_by_over_mixed_types_follows_the_service_type_order(mode_db):
    mixed = mode_db.get_container_client("mixed")
    got = list(mixed.query_items("SELECT VALUE c.id FROM c WHERE c.id != 'x2again' AND c.id != 'na' "
                                 "ORDER BY c.v", enable_cross_partition_query=True))
    assert got == [name for name, _ in MIXED]
    got = list(mixed.query_items("SELECT VALUE c.id FROM c WHERE c.id != 'x2again' AND c.id != 'na' "
                                 "ORDER BY c.v DESC", enable_cross_partition_query=True))
    assert got == [name for name, _ in reversed(MIXED)]


def test_distinct_over_mixed_types_keeps_one_of_each_value(mode_db):
    mixed = mode_db.get_container_client("mixed")
    got = list(mixed.query_items("SELECT DISTINCT VALUE c.v FROM c", enable_cross_partition_query=True))
    expected = [json.loads(v) for _, v in MIXED if v is not None]      # undefined is no result
    scoped = list(mixed.query_items("SELECT DISTINCT VALUE c.v FROM c", partition_key="m"))
    assert sorted(map(json.dumps, scoped)) == sorted(map(json.dumps, expected))
    if mode_db.emu.mode == "service":
        # The SDK merges DISTINCT itself and its pipeline drops a null result (azure-cosmos
        # 4.17.1, docs/queries.md); the range's own answer above holds it.
        expected.remove(None)
    assert sorted(map(json.dumps, got)) == sorted(map(json.dumps, expected))


METRICS_KEYS = ["totalExecutionTimeInMs", "queryCompileTimeInMs", "queryLogicalPlanBuildTimeInMs",
                "queryPhysicalPlanBuildTimeInMs", "queryOptimizationTimeInMs", "VMExecutionTimeInMs",
                "indexLookupTimeInMs", "documentLoadTimeInMs", "systemFunctionExecuteTimeInMs",
                "userFunctionExecuteTimeInMs", "retrievedDocumentCount", "retrievedDocumentSize",
                "outputDocumentCount", "outputDocumentSize", "writeOutputTimeInMs", "indexUtilizationRatio"]


def test_query_metrics_come_in_the_service_format(db):
    multi = db.get_container_client("multi")
    got = list(multi.query_items("SELECT * FROM c WHERE c.n > 2", partition_key="p1", populate_query_metrics=True))
    assert [d["id"] for d in got] == ["i7"]
    header = multi.client_connection.last_response_headers["x-ms-documentdb-query-metrics"]
    fields = [f.split("=") for f in header.split(";")]
    assert [k for k, _ in fields] == METRICS_KEYS
    metrics = dict(fields)
    assert metrics["retrievedDocumentCount"] == "2" and metrics["outputDocumentCount"] == "1"
    assert int(metrics["retrievedDocumentSize"]) > int(metrics["outputDocumentSize"]) > 0
    assert metrics["indexUtilizationRatio"] == "0.50"
    assert all(float(metrics[k]) >= 0 and len(metrics[k].split(".")[1]) == 2 for k in METRICS_KEYS if "Time" in k)
    list(multi.query_items("SELECT * FROM c", partition_key="p1"))
    assert "x-ms-documentdb-query-metrics" not in multi.client_connection.last_response_headers


def test_index_metrics_name_the_indexes_used_as_the_service_does(db):
    multi = db.get_container_client("multi")
    assert len(list(multi.query_items("SELECT * from c", partition_key="p1", populate_index_metrics=True))) == 2
    # What azure-sdk-for-python's test_populate_index_metrics expects of the service.
    assert multi.client_connection.last_response_headers["x-ms-cosmos-index-utilization"] == {
        "UtilizedSingleIndexes": [{"FilterExpression": "", "IndexSpec": "/pk/?", "FilterPreciseSet": True,
                                   "IndexPreciseSet": True, "IndexImpactScore": "High"}],
        "PotentialSingleIndexes": [], "UtilizedCompositeIndexes": [], "PotentialCompositeIndexes": []}
    excluded = db.create_container("excluded", PartitionKey(path="/pk"), indexing_policy={
        "includedPaths": [{"path": "/*"}], "excludedPaths": [{"path": "/secret/?"}]})
    list(excluded.query_items("SELECT * FROM c WHERE c.n = 1 AND c.secret = 'x'", enable_cross_partition_query=True,
                              populate_index_metrics=True))
    used = excluded.client_connection.last_response_headers["x-ms-cosmos-index-utilization"]
    assert [e["IndexSpec"] for e in used["UtilizedSingleIndexes"]] == ["/n/?"]
    assert [e["IndexSpec"] for e in used["PotentialSingleIndexes"]] == ["/secret/?"]
    assert used["UtilizedSingleIndexes"][0]["FilterExpression"] == "(ROOT.n = 1)"


COMPUTED = [{"name": "cp_lower", "query": "SELECT VALUE LOWER(c.db_group) FROM c"},
            {"name": "cp_power", "query": "SELECT VALUE POWER(c.val, 2) FROM c"},
            {"name": "cp_str_len", "query": "SELECT VALUE LENGTH(c.stringProperty) FROM c"}]


def test_computed_properties_are_evaluated_in_queries(db):
    # The scenario of azure-sdk-for-python's test_computed_properties_query.
    c = db.create_container("computed", PartitionKey(path="/pk"), computed_properties=COMPUTED)
    groups = ["GroUp1", "GrOUp1", "GroUp2", "groUp1", "GroUp3", "GrOUP1", "GroUp2", "group1", "group2", "GroUp3"]
    vals = [5, 5, 5, 5, 5, 5, 5, 0, 3, 2]
    words = ["prefixOne", "prefixTwo"] + [f"randomWord{i}" for i in range(1, 9)]
    for i, (g, v, w) in enumerate(zip(groups, vals, words)):
        c.create_item({"id": f"d{i}", "pk": "test", "val": v, "stringProperty": w, "db_group": g})
    assert c.read()["computedProperties"] == COMPUTED

    def count(where: str) -> int:
        return len(list(c.query_items(f"SELECT * FROM c WHERE {where}", partition_key="test")))
    assert count('c.cp_upper = "GROUP2"') == 0
    assert count('c.cp_lower = "group1"') == 5 and count('c.cp_lower = "group4"') == 0
    assert count("c.cp_power = 25") == 7 and count("c.cp_power = 16") == 0
    assert count("c.cp_str_len = 9") == 2 and count("c.cp_str_len = 3") == 0
    # SELECT * shows the stored item only; a computed property is selected by name.
    first = next(iter(c.query_items("SELECT * FROM c WHERE c.id = 'd0'", partition_key="test")))
    assert "cp_lower" not in first
    assert list(c.query_items("SELECT c.id, c.cp_lower FROM c WHERE c.id = 'd0'", partition_key="test")) == [
        {"id": "d0", "cp_lower": "group1"}]
    ordered = list(c.query_items("SELECT VALUE c.id FROM c ORDER BY c.cp_str_len DESC, c.id", partition_key="test"))
    assert ordered[:2] == ["d2", "d3"]          # randomWordN: 11 characters, then ids in order
    # A replace changes them.
    db.replace_container(c, PartitionKey(path="/pk"), computed_properties=[
        {"name": "cp_lower", "query": "SELECT VALUE UPPER(c.db_group) FROM c"}])
    assert count('c.cp_lower = "GROUP1"') == 5 and count("c.cp_power = 25") == 0


@pytest.mark.parametrize("definitions,refusal", [
    ([{"name": "id", "query": "SELECT VALUE 1 FROM c"}], "not a system property"),
    ([{"name": "a", "query": "SELECT c.x FROM c"}], "must be of the form 'SELECT VALUE <expression> FROM c'"),
    ([{"name": "a", "query": "SELECT VALUE c.x FROM c WHERE c.y = 1"}], "may not use WHERE"),
    ([{"name": "a", "query": "SELECT VALUE c.x FROM c JOIN t IN c.tags"}], "may not use JOIN"),
    ([{"name": "a", "query": "SELECT VALUE (SELECT VALUE 1) FROM c"}], "may not use a subquery"),
    ([{"name": "a", "query": "SELECT VALUE COUNT(1) FROM c"}], "may not use an aggregate function (COUNT)"),
    ([{"name": "a", "query": "SELECT VALUE GetCurrentDateTime() FROM c"}], "non-deterministic function"),
    ([{"name": "a", "query": "SELECT VALUE c.b FROM c"}, {"name": "b", "query": "SELECT VALUE 1 FROM c"}],
     "may not use another computed property (b)"),
    ([{"name": "a", "query": "SELECT VALUE NOSUCH(c.x) FROM c"}], "is not a valid query"),
    ([{"name": "a", "query": "SELECT VALUE 1 FROM c"}, {"name": "a", "query": "SELECT VALUE 2 FROM c"}],
     "used more than once"),
    ([{"name": f"a{i}", "query": "SELECT VALUE 1 FROM c"} for i in range(21)], "at most 20 computed properties"),
])
def test_a_bad_computed_property_is_400_and_nothing_is_created(db, definitions, refusal):
    with pytest.raises(exceptions.CosmosHttpResponseError) as refused:
        db.create_container("badcp", PartitionKey(path="/pk"), computed_properties=definitions)
    assert refused.value.status_code == 400 and refusal in refused.value.message
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        db.get_container_client("badcp").read()


def test_spatial_functions_are_evaluated(db):
    places = db.create_container("places", PartitionKey(path="/pk"))
    seattle, redmond = [-122.3321, 47.6062], [-122.1215, 47.6740]
    places.create_item({"id": "seattle", "pk": "wa", "location": {"type": "Point", "coordinates": seattle}})
    places.create_item({"id": "redmond", "pk": "wa", "location": {"type": "Point", "coordinates": redmond}})
    places.create_item({"id": "route", "pk": "wa", "location": {"type": "LineString",
                                                                "coordinates": [[-122.5, 47.5], [-122.0, 47.7]]}})
    places.create_item({"id": "broken", "pk": "wa", "location": {"type": "Point", "coordinates": [31.9, -132.8]}})
    near = list(places.query_items(
        "SELECT c.id, ST_DISTANCE(c.location, @here) AS m FROM c WHERE ST_DISTANCE(c.location, @here) < 20000",
        parameters=[{"name": "@here", "value": {"type": "Point", "coordinates": seattle}}], partition_key="wa"))
    metres = {d["id"]: d["m"] for d in near}
    assert sorted(metres) == ["redmond", "route", "seattle"]
    # The WGS-84 geodesic (test_spatial_functions.py checks the formula against geopy's).
    assert metres["seattle"] == 0 and metres["redmond"] == pytest.approx(17528.78, abs=0.01)
    box = {"type": "Polygon", "coordinates": [[[-122.4, 47.5], [-122.2, 47.5], [-122.2, 47.7], [-122.4, 47.7],
                                                [-122.4, 47.5]]]}
    params = [{"name": "@box", "value": box}]
    assert [d for d in places.query_items("SELECT VALUE c.id FROM c WHERE ST_WITHIN(c.location, @box)",
                                          parameters=params, partition_key="wa")] == ["seattle"]
    assert sorted(places.query_items("SELECT VALUE c.id FROM c WHERE ST_INTERSECTS(c.location, @box)",
                                     parameters=params, partition_key="wa")) == ["route", "seattle"]
    validity = list(places.query_items("SELECT VALUE ST_ISVALIDDETAILED(c.location) FROM c WHERE c.id = 'broken'",
                                       partition_key="wa"))
    assert validity == [{"valid": False, "reason": "Latitude values must be between -90 and 90 degrees."}]


SERVICE_TOKEN = "-RID:~a0NPAOszCpOChB4AAAAAAA==#RT:1#TRC:{}#ISV:2#IEO:65567#QCF:8"


def test_a_service_format_continuation_resumes_the_query(db):
    multi = db.create_container("resume", PartitionKey(path="/pk"), offer_throughput=30_000)
    for i in range(40):
        multi.create_item({"id": f"r{i:02d}", "pk": f"k{i}", "n": i})
    ranges = list(multi.read_feed_ranges())
    sql = "SELECT VALUE c.id FROM c"
    in_order = [list(multi.query_items(sql, feed_range=r)) for r in ranges]
    assert all(len(ids) >= 3 for ids in in_order)
    # The backend form, as azure-sdk-for-python's test_query_feed_range replays one (its RID names
    # no document here: the count of results already returned is what resumes).
    pages = multi.query_items(sql, feed_range=ranges[1], max_item_count=1).by_page(SERVICE_TOKEN.format(2))
    assert [i for p in pages for i in p] == in_order[1][2:]
    # The gateway's composite form names the range it belongs to.
    second_min = ranges[1]["Range"]["min"]
    composite = json.dumps([{"token": SERVICE_TOKEN.format(1), "range": {"min": second_min, "max": "FF"}}])
    pages = multi.query_items(sql, enable_cross_partition_query=True).by_page(composite)
    assert [i for p in pages for i in p] == in_order[1][1:] + in_order[2]
    with pytest.raises(exceptions.CosmosHttpResponseError) as refused:
        list(multi.query_items("SELECT VALUE c.id FROM c ORDER BY c.n", partition_key="k1").by_page(
            SERVICE_TOKEN.format(1)))
    assert refused.value.status_code == 400 and "cannot resume an ORDER BY query" in refused.value.message
