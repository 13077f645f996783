"""The official JavaScript SDK (@azure/cosmos, pinned in tests/js/package.json) works against
regionlab as the Python one does: real Node processes run the scripts in tests/js/ against a
real emulator on loopback, print what the SDK returned as JSON, and each test judges one part
(CRUD, patch, bulk, batch, queries, change feed, preferred-region routing, session consistency
across regions, and what an app sees under each region_outage mode). The SDK is installed from
npm into tests/js/node_modules once per session. Without Node and npm the tests are skipped, but
in CI (CI=true) they are installed with apt-get first, and the tests fail if they still are not
there (tests/tiers.py)."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from regionlab.emulator.testing import running_emulator
from tiers import require
from sdk_harness import no_lag

JS_DIR = Path(__file__).resolve().parents[1] / "js"
NODE_PACKAGES = ("nodejs", "npm")       # Debian's: what CI installs when Node or npm is missing
NPM_TIMEOUT_S = 300
SCRIPT_TIMEOUT_S = 120
EAST, EAST2, WEST = "East US", "East US 2", "West US"
REGIONS = (EAST, EAST2, WEST)
NO_LAG = no_lag(REGIONS)

pytestmark = pytest.mark.slow           # each test runs Node; the first installs the SDK with npm


def _installed_as_locked() -> bool:
    """Whether node_modules holds every package of package-lock.json at its locked version."""
    locked = json.loads((JS_DIR / "package-lock.json").read_text())["packages"]
    for path, entry in locked.items():
        manifest = JS_DIR / path / "package.json"
        if path and (not manifest.exists() or json.loads(manifest.read_text()).get("version") != entry["version"]):
            return False
    return True


def node_and_npm() -> list[str]:
    """The paths of node and npm (in CI, installed when missing; tests/tiers.py)."""
    return require(("node", "npm"), NODE_PACKAGES, "the JavaScript SDK tests need Node.js and npm")


@pytest.fixture(scope="session")
def js_sdk() -> Path:
    """tests/js with its node_modules installed exactly as package-lock.json says (npm ci, once
    per session, and only when what is installed differs from the lock)."""
    _, npm = node_and_npm()
    if not _installed_as_locked():
        done = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JS_DIR, capture_output=True,
                              text=True, timeout=NPM_TIMEOUT_S)
        assert done.returncode == 0, f"npm ci in {JS_DIR} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert _installed_as_locked()
    pinned = json.loads((JS_DIR / "package.json").read_text())["dependencies"]["@azure/cosmos"]
    assert json.loads((JS_DIR / "node_modules/@azure/cosmos/package.json").read_text())["version"] == pinned
    return JS_DIR


def run_node(js_dir: Path, script: str, emu, **env) -> dict:
    """Run one script against the emulator; its JSON report (the last line it prints)."""
    full_env = dict(os.environ, REGIONLAB_ENDPOINT=emu.endpoint, REGIONLAB_KEY=emu.key,
                    REGIONLAB_CONTROL=emu.control_endpoint, **{k: str(v) for k, v in env.items()})
    done = subprocess.run([node_and_npm()[0], script], cwd=js_dir, env=full_env, capture_output=True, text=True,
                          timeout=SCRIPT_TIMEOUT_S)
    assert done.returncode == 0, f"node {script} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def ok(report: dict, case: str) -> dict:
    result = report[case]
    assert "error" not in result, f"{case}: the SDK raised {result}"
    return result


# ---- the typical operations: one emulator (4 partitions), one node run ------------------------
@pytest.fixture(scope="module")
def cases(js_sdk) -> dict:
    with running_emulator(partitions=4, lag_ms=NO_LAG) as emu:
        return run_node(js_sdk, "cases.mjs", emu)


def test_crud_and_the_content_path_the_sdk_keys_sessions_on(cases):
    r = ok(cases, "crud")
    assert r["create"] == 201 and r["contentPath"] == r["containerRid"]
    assert r["read"] == [200, 1] and r["replace"] == [200, 2] and r["upsert"] == [201, 200, 4]
    assert (r["duplicate"], r["stale"], r["delete"], r["readDeleted"]) == (409, 412, 204, 404)


def test_patch_with_a_bare_array_body_and_with_a_condition(cases):
    r = ok(cases, "patch")
    assert r["status"] == 200
    assert r["doc"] == {"n": 6, "tags": ["a", "b"], "name": "x", "gone": None}
    assert (r["condition"], r["invalid"]) == (412, 400)


def test_bulk_applies_each_operation_on_its_own(cases):
    r = ok(cases, "bulk")
    assert r["statuses"] == [201] * 20 + [409, 200, 201, 200, 200, 204]
    assert r["charged"] and r["etags"] and r["readBody"] == 0
    assert r["exec"] == [201, 404]
    assert r["after"] == {"b0": 0, "b1": 100, "b2": 42, "b3": None, "bup": 1, "e1": 1}


def test_transactional_batch_all_or_nothing(cases):
    r = ok(cases, "batch")
    assert (r["status"], r["ops"]) == (200, [201, 201, 200])
    assert r["failed"] == {"status": 207, "ops": [424, 409]} and r["notApplied"] == 404


def test_queries_filter_order_scope_aggregate_and_page(cases):
    r = ok(cases, "queries")
    assert r["where"] == ["q5", "q4", "q3"] and r["scoped"] == [1, 3, 5] and r["count"] == [6]
    # Three items in each of two ranges, two a page: a page ends at each range, as the service's do.
    assert r["pages"] == [2, 1, 2, 1]


def test_change_feed_for_one_partition_key_and_for_the_container(cases):
    r = ok(cases, "changeFeed")
    assert r["key"] == ["f1", "f4"] and r["keyLast"] == 304     # only that key, then "nothing new"
    assert r["keyNext"] == ["f-new"]                             # continues, still only that key
    assert r["whole"] == ["f-new", "f-other", "f0", "f1", "f2", "f3", "f4", "f5"]


def test_reads_go_to_the_preferred_region_and_writes_to_the_write_region(cases):
    r = ok(cases, "routing")
    assert r[WEST] == {WEST: {"GET 200": 1}, EAST: {"POST 201": 1}}
    assert r[EAST2] == {EAST2: {"GET 200": 1}, EAST: {"POST 201": 1}}


def test_session_reads_in_a_lagging_region_see_the_clients_own_writes(cases):
    r = ok(cases, "session")
    assert r["seen"] == [0, 1, 2] and (r["created"], r["fresh"]) == (201, 200)
    assert r["hits"] == {EAST: {"POST 201": 2, "POST 200": 2}, WEST: {"GET 200": 4}}


# ---- region outages: what the app sees in each mode --------------------------------------------
# A read region (West US, preferred) or the write region (East US) is out; the client prefers
# West US, then East US, with a 2 s request timeout. Measured with @azure/cosmos 4.9.3; the table
# in docs/control-api.md says the same.
def _outage(js_sdk, mode: str) -> dict:
    with running_emulator(lag_ms=NO_LAG, detection_delay_ms=600_000) as emu:
        return run_node(js_sdk, "outage.mjs", emu, REGIONLAB_OUTAGE_MODE=mode)


def _served_by(step: dict, region: str, op: str) -> bool:
    return step["ok"] and step["hits"].get(region, {}).get(op, 0) == 1


@pytest.mark.parametrize("mode", ["unavailable", "blackhole"])
def test_js_rides_through_a_read_region_outage_in_modes_that_answer_503_or_time_out(js_sdk, mode):
    r = _outage(js_sdk, mode)
    read_out = ok(r, "readRegionOut")
    assert read_out["read"] == {"ok": True, "status": 200, "ms": read_out["read"]["ms"]}
    assert read_out["write"] == {"ok": True, "status": 201, "ms": read_out["write"]["ms"]}
    west = {"GET 503": 1} if mode == "unavailable" else None     # tried, answered 503, moved on
    assert read_out["hits"] == {EAST: {"GET 200": 1, "POST 201": 1}, **({WEST: west} if west else {})}
    write_out = ok(r, "writeRegionOut")
    assert _served_by(write_out["read"], WEST, "GET 200")
    assert _served_by(write_out["freshRead"], WEST, "GET 200")   # discovery still works
    error = write_out["write"]["error"]                           # no other write region yet
    if mode == "unavailable":
        assert (error["code"], error["substatus"]) == (503, 0)
    else:
        assert error["code"] == "TimeoutError"


@pytest.mark.parametrize("mode, code", [("refuse", "ECONNREFUSED"), ("reset", "ECONNRESET")])
def test_js_fails_the_app_when_a_region_refuses_or_resets_connections(js_sdk, mode, code):
    r = _outage(js_sdk, mode)
    read_out = ok(r, "readRegionOut")
    assert not read_out["read"]["ok"] and read_out["read"]["error"]["code"] == code
    assert not read_out["write"]["ok"] and read_out["write"]["error"]["code"] == code
    write_out = ok(r, "writeRegionOut")
    assert _served_by(write_out["read"], WEST, "GET 200")
    assert _served_by(write_out["freshRead"], WEST, "GET 200")   # discovery still works
    assert write_out["write"]["error"]["code"] == code


# ---- HTTPS (--https): the SDK verifies the generated certificate it is told to trust -----------
def test_js_over_https_trusting_the_certificate_through_node_extra_ca_certs(js_sdk, tmp_path):
    with running_emulator(https=True, cert_dir=str(tmp_path), lag_ms=NO_LAG) as emu:
        assert emu.endpoint.startswith("https://")
        r = ok(run_node(js_sdk, "https.mjs", emu, NODE_EXTRA_CA_CERTS=emu.certificate), "https")
        assert r["statuses"] == [201, 200, 204] and r["query"] == [2, 3] and r["read"] == 2
        assert r["hits"] == {WEST: {"GET 200": 1}}
        untrusted = run_node(js_sdk, "https.mjs", emu)["https"]      # no CA: node refuses the certificate
        assert "error" in untrusted and "certificate" in untrusted["error"]["message"].lower()


# ---- query plans: forceQueryPlan, and --query-mode service -----------------------------------
CITIES = ("Oslo", "Rome", None, "Lima", "Oslo")        # null is a city too; every 7th document has none


def _plan_doc(i: int) -> dict:
    doc = {"id": f"d{i:02}", "pk": f"p{i % 5}", "n": (i * 7) % 13, "kind": "abc"[i % 3], "rank": i}
    if i % 7:
        doc["city"] = CITIES[i % len(CITIES)]
    return doc


PLAN_DOCS = [_plan_doc(i) for i in range(40)]
PLANNED = {        # query -> its expected results, from PLAN_DOCS (None: any order)
    "SELECT VALUE c.rank FROM c ORDER BY c.n DESC, c.rank": [
        d["rank"] for d in sorted(PLAN_DOCS, key=lambda d: (-d["n"], d["rank"]))],
    "SELECT c.id, c.n FROM c WHERE c.kind = 'b' ORDER BY c.n, c.id OFFSET 2 LIMIT 5": [
        {"id": d["id"], "n": d["n"]} for d in sorted((d for d in PLAN_DOCS if d["kind"] == "b"),
                                                     key=lambda d: (d["n"], d["id"]))[2:7]],
    "SELECT TOP 4 * FROM c ORDER BY c.rank DESC": [d["id"] for d in PLAN_DOCS[::-1][:4]],
    "SELECT VALUE COUNT(1) FROM c WHERE c.n > 3": [sum(1 for d in PLAN_DOCS if d["n"] > 3)],
    "SELECT VALUE SUM(c.n) FROM c": [sum(d["n"] for d in PLAN_DOCS)],
    "SELECT VALUE AVG(c.rank) FROM c": [sum(range(40)) / 40],
    "SELECT VALUE MAX(c.n) FROM c WHERE c.kind = 'a'": [max(d["n"] for d in PLAN_DOCS if d["kind"] == "a")],
    "SELECT DISTINCT VALUE c.kind FROM c": None,
}


def _judge_planned(report: dict) -> None:
    for sql, expected in PLANNED.items():
        r = ok(report, sql)
        forced, plain = r["forced"], r["plain"]
        if sql.startswith("SELECT TOP 4 *"):
            forced, plain = [d["id"] for d in forced], [d["id"] for d in plain]
        if expected is None:
            assert sorted(forced) == sorted(plain) == ["a", "b", "c"], sql
        else:
            assert forced == plain == expected, sql


# GROUP BY and aggregates outside SELECT VALUE: the SDK merges per-group partials
# (groupByItems/payload). name -> (query, expected results as a bag).
_MISSING = object()


def _group(docs, *fields) -> dict:
    """{key tuple: docs} in first-seen order; an absent field is its own key (undefined)."""
    out = {}
    for d in docs:
        out.setdefault(tuple(d.get(f, _MISSING) for f in fields), []).append(d)
    return out


def _row(**fields) -> dict:
    return {k: v for k, v in fields.items() if v is not _MISSING}


def _keys(fields, key) -> dict:
    return dict(zip(fields, key))


def _some(docs, field, pick):
    vals = [d[field] for d in docs if field in d]
    return pick(vals) if vals else _MISSING


def _mean(vals):
    return sum(vals) / len(vals)


D = PLAN_DOCS
WHERE_RANK = [d for d in D if d["rank"] > 5]
GROUPED = {
    "by one field": ("SELECT c.kind, COUNT(1) AS n FROM c GROUP BY c.kind",
                     [{"kind": k[0], "n": len(ds)} for k, ds in _group(D, "kind").items()]),
    "by a field some documents lack": (
        "SELECT COUNT(1) AS n, c.city FROM c GROUP BY c.city",
        [_row(n=len(ds), **_keys(["city"], k)) for k, ds in _group(D, "city").items()]),
    "by two fields": (
        "SELECT c.kind, c.city, COUNT(1) AS n, SUM(c.n) AS total FROM c GROUP BY c.kind, c.city",
        [_row(**_keys(["kind", "city"], k), n=len(ds), total=sum(d["n"] for d in ds))
         for k, ds in _group(D, "kind", "city").items()]),
    "min max avg with where": (
        "SELECT c.kind, MIN(c.n) AS lo, MAX(c.n) AS hi, AVG(c.rank) AS mean FROM c WHERE c.rank > 5 GROUP BY c.kind",
        [{"kind": k[0], "lo": min(d["n"] for d in ds), "hi": max(d["n"] for d in ds),
          "mean": _mean([d["rank"] for d in ds])} for k, ds in _group(WHERE_RANK, "kind").items()]),
    "count of a field some lack, by group": (
        "SELECT c.kind, COUNT(c.city) AS n, MAX(c.city) AS last FROM c WHERE IS_STRING(c.city) GROUP BY c.kind",
        [{"kind": k[0], "n": len(ds), "last": max(d["city"] for d in ds)}
         for k, ds in _group([d for d in D if isinstance(d.get("city"), str)], "kind").items()]),
    "value aggregate by group": ("SELECT VALUE COUNT(1) FROM c GROUP BY c.kind",
                                 [len(ds) for ds in _group(D, "kind").values()]),
    "value of the group key": ("SELECT VALUE c.city FROM c GROUP BY c.city",
                               [k[0] for k in _group(D, "city") if k[0] is not _MISSING]),
    "count outside value": ("SELECT COUNT(1) FROM c", [{"$1": len(D)}]),
    "max and min outside value": ("SELECT MAX(c.n) AS m, MIN(c.n) AS mi FROM c",
                                  [{"m": max(d["n"] for d in D), "mi": min(d["n"] for d in D)}]),
    "avg of a field some lack": ("SELECT AVG(c.rank) AS a, COUNT(c.city) AS n FROM c WHERE c.city = 'Oslo'",
                                 [{"a": _mean([d["rank"] for d in D if d.get("city") == "Oslo"]),
                                   "n": sum(1 for d in D if d.get("city") == "Oslo")}]),
    "aggregates over nothing": ("SELECT COUNT(1) AS n, SUM(c.rank) AS s, AVG(c.rank) AS a, MAX(c.n) AS m "
                                "FROM c WHERE c.kind = 'zz'", [{"n": 0, "s": 0}]),
    "groups of nothing": ("SELECT c.kind, COUNT(1) AS n FROM c WHERE c.rank < 0 GROUP BY c.kind", []),
    "scoped to one partition key": (
        {"sql": "SELECT c.kind, COUNT(1) AS n, SUM(c.rank) AS s FROM c GROUP BY c.kind", "partitionKey": "p2"},
        [{"kind": k[0], "n": len(ds), "s": sum(d["rank"] for d in ds)}
         for k, ds in _group([d for d in D if d["pk"] == "p2"], "kind").items()]),
    "empty container, grouped": ({"sql": "SELECT c.kind, COUNT(1) AS n FROM c GROUP BY c.kind", "container": "empty"},
                                 []),
    "empty container, count": ({"sql": "SELECT COUNT(1) AS n, MIN(c.n) AS lo FROM c", "container": "empty"},
                               [{"n": 0}]),
}


SCOPED_GROUPED = "scoped to one partition key"


def _grouped_queries() -> list:
    out = []
    for name, (query, _) in GROUPED.items():
        out.append(dict({"name": name}, **(query if isinstance(query, dict) else {"sql": query})))
    return out


def _number(v):
    """2.0 and 2 are one JSON number (JavaScript has no int)."""
    if isinstance(v, dict):
        return {k: _number(x) for k, x in v.items()}
    return int(v) if type(v) is float and v == int(v) else v


def _canon(rows) -> list:
    return sorted(json.dumps(_number(r), sort_keys=True) for r in rows)


@pytest.mark.parametrize("mode", ["whole", "service"])
def test_js_plans_group_by_and_aggregates_itself_and_gets_the_same_results(js_sdk, mode):
    with running_emulator(partitions=4, query_mode=mode) as emu:
        report = run_node(js_sdk, "query_plan.mjs", emu, REGIONLAB_DOCS=json.dumps(PLAN_DOCS),
                          REGIONLAB_QUERIES=json.dumps(_grouped_queries()))
        refused = sum(g.requests_served[("POST", "docs", 400, 1004)] for g in emu.emulator.services.values())
    for name, (_, expected) in GROUPED.items():
        r = ok(report, name)
        assert _canon(r["plain"]) == _canon(expected), (name, r["plain"])
        if name == SCOPED_GROUPED:
            # @azure/cosmos 4.9.3 drops the partitionKey option once it plans (forceQueryPlan):
            # neither the plan request nor the per-range queries carry it, and the plan's
            # queryRanges (from the query's filter, as the service's) span the container.
            expected = GROUPED["by one field"][1]
            r["forced"] = [{"kind": g["kind"], "n": g["n"]} for g in r["forced"]]
        assert _canon(r["forced"]) == _canon(expected), (name, r["forced"])
    assert (refused > 0) == (mode == "service")


@pytest.mark.parametrize("mode", ["whole", "service"])
def test_js_plans_queries_itself_with_force_query_plan_and_gets_the_same_results(js_sdk, mode):
    with running_emulator(partitions=4, query_mode=mode) as emu:
        report = run_node(js_sdk, "query_plan.mjs", emu, REGIONLAB_DOCS=json.dumps(PLAN_DOCS),
                          REGIONLAB_QUERIES=json.dumps(list(PLANNED)))
        refused = sum(g.requests_served[("POST", "docs", 400, 1004)] for g in emu.emulator.services.values())
    _judge_planned(report)
    # service mode: the SDK's unforced runs met 400/1004 (and planned from additionalErrorInfo)
    assert (refused > 0) == (mode == "service")


REFUSED_GROUPED = {
    "a property neither grouped nor aggregated": (
        "SELECT c.id, COUNT(1) AS n FROM c GROUP BY c.kind",
        "Property reference 'c.id' is invalid in the select list because it is not contained in either an "
        "aggregate function or the GROUP BY clause"),
    "select star with group by": ("SELECT * FROM c GROUP BY c.kind", "'SELECT *' is not allowed with GROUP BY"),
}


@pytest.mark.parametrize("mode", ["whole", "service"])
def test_js_gets_the_service_400_for_a_select_list_the_group_by_does_not_cover(js_sdk, mode):
    queries = [{"name": name, "sql": sql, "refused": True} for name, (sql, _) in REFUSED_GROUPED.items()]
    with running_emulator(partitions=4, query_mode=mode) as emu:
        report = run_node(js_sdk, "query_plan.mjs", emu, REGIONLAB_DOCS=json.dumps(PLAN_DOCS),
                          REGIONLAB_QUERIES=json.dumps(queries))
    for name, (_, words) in REFUSED_GROUPED.items():
        r = ok(report, name)
        for run in ("forced", "plain"):          # planned by the SDK, and sent as the query itself
            error = r[run].get("error") if isinstance(r[run], dict) else None
            assert error is not None and error["code"] == 400 and words in error["message"], (name, run, r[run])
