"""Proves the throughput knobs work end to end on a real emulator: set over the control port
(JSON) and from the CLI (`regionlab throttle ...` and the server's start flags), they change
what the official SDK meets on its next request (credits, RU/s per container, storms confined
to one region and one operation kind), refused bodies are 400s that change nothing, and the
throttled counters (per region, partition and reason) appear in GET /throttle, GET /topology
and GET /metrics, the last in valid Prometheus text format."""
import io
import json
import re
import urllib.error
import urllib.parse
import urllib.request

import pytest
from azure.cosmos import PartitionKey
from azure.cosmos.exceptions import CosmosHttpResponseError

from regionlab.emulator import cli, ctl
from sdk_harness import make_client
from test_sdk_throttling import BIG, control, no_retry_client

SAMPLE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? -?[0-9.e+-]+$')


def control_error(emu, method: str, path: str, body) -> tuple[int, str]:
    try:
        control(emu, method, path, body)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())["error"]
    raise AssertionError(f"{method} {path} {body} was accepted")


def metrics(emu) -> str:
    with urllib.request.urlopen(emu.control_endpoint + "metrics", timeout=5) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return resp.read().decode()


def check_prometheus(text: str) -> dict:
    """Every sample line is well formed and belongs to a family announced by HELP and TYPE;
    returns {family: [sample lines]}."""
    families, current = {}, None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            current = line.split()[2]
            families[current] = []
        elif line.startswith("# TYPE "):
            assert line.split()[2] == current and line.split()[3] in ("counter", "gauge")
        elif line:
            assert SAMPLE.match(line), line
            assert line.split("{")[0].split(" ")[0] == current, line
            families[current].append(line)
    return families


def flood(c, n: int = 60) -> CosmosHttpResponseError:
    for i in range(n):
        try:
            c.create_item({"id": f"f{i}", "pk": "p", "big": BIG})
        except CosmosHttpResponseError as e:
            return e
    raise AssertionError("never throttled")


def test_knobs_change_the_next_request_and_bad_ones_change_nothing(regionlab):
    with no_retry_client(regionlab) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        state = control(regionlab, "PUT", "/throttle", {"credits_per_s": 1, "burst": True})
        assert (state["credits_per_s"], state["burst"]) == (1, True)
        assert control_error(regionlab, "PUT", "/throttle", {"credits_per_s": 0, "burst": False})[0] == 400
        assert control_error(regionlab, "PUT", "/throttle", {"turbo": True})[0] == 400
        assert control(regionlab, "GET", "/throttle")["burst"] is True          # all or nothing
        c.create_item({"id": "a", "pk": "p"})
        with pytest.raises(CosmosHttpResponseError) as e:
            while True:                     # one credit a second: the next create in this window
                c.create_item({"id": "b", "pk": "p"})
                c.delete_item("b", partition_key="p")
        assert (e.value.status_code, e.value.sub_status) == (429, 50009)
        assert control(regionlab, "PUT", "/throttle", {"credits_per_s": None})["credits_per_s"] is None
        # RU/s per container, seen by the SDK as the container's offer.
        reply = control(regionlab, "PUT", "/throttle/containers/db/c", {"ru_per_s": 400})
        assert reply["partition_ru_per_s"] == 400
        assert c.get_throughput().offer_throughput == 400
        assert flood(c).sub_status == 3200
        control(regionlab, "PUT", "/throttle/containers/db/c", {"autoscale_max": 4000})
        assert c.get_throughput().auto_scale_max_throughput == 4000
        assert control_error(regionlab, "PUT", "/throttle/containers/db/c", {"ru_per_s": 10})[0] == 400
        assert control_error(regionlab, "PUT", "/throttle/containers/db/nope", {"ru_per_s": 400})[0] == 404
        assert control(regionlab, "PUT", "/throttle/containers/db/c", {"ru_per_s": None})["offer"] is None
        assert control(regionlab, "PUT", "/throttle", {"ru": False})["ru"] is False


@pytest.mark.regionlab_config(partitions=2)
def test_a_storm_hits_one_region_and_one_kind_and_is_counted_everywhere(regionlab):
    with make_client(regionlab) as setup:
        c = setup.create_database("db").create_container("c", PartitionKey(path="/pk"), offer_throughput=800)
        c.create_item({"id": "a", "pk": "p"})
    storm = control(regionlab, "PUT", "/throttle/storms/West US", {"share": 1.0, "op": "read", "retry_after_ms": 5})
    assert storm["op"] == "read"
    with no_retry_client(regionlab, preferred_locations=["West US"]) as west, \
            no_retry_client(regionlab, preferred_locations=["East US"]) as east:
        wc = west.get_database_client("db").get_container_client("c")
        ec = east.get_database_client("db").get_container_client("c")
        with pytest.raises(CosmosHttpResponseError) as e:
            wc.read_item("a", partition_key="p")
        assert (e.value.status_code, e.value.sub_status, e.value.headers["x-ms-retry-after-ms"]) == (429, 3200, "5")
        assert ec.read_item("a", partition_key="p")["id"] == "a"              # another region
        wc.upsert_item({"id": "b", "pk": "p"})                                 # another kind (writes go east)
        refused = flood(ec)
        assert refused.sub_status == 3200
    throttled = control(regionlab, "GET", "/throttle")["throttled"]
    reasons = {(t["region"], t["reason"]) for t in throttled}
    assert reasons == {("West US", "storm"), ("East US", "ru")}
    assert all(t["database"] == "db" and t["container"] == "c" and t["partition"] in ("0", "1") for t in throttled)
    assert control(regionlab, "GET", "/topology")["throttling"]["throttled"] == throttled
    families = check_prometheus(metrics(regionlab))
    lines = families["regionlab_throttled_requests_total"]
    assert any('region="West US"' in line and 'reason="storm"' in line for line in lines)
    assert any('region="East US"' in line and 'reason="ru"' in line for line in lines)
    assert families["regionlab_partition_budget_ru_per_s"] == [
        'regionlab_partition_budget_ru_per_s{database="db",container="c",partition="0"} 400',
        'regionlab_partition_budget_ru_per_s{database="db",container="c",partition="1"} 400']
    assert 'regionlab_storm_requests_total{region="West US",outcome="throttled"} 1' in families[
        "regionlab_storm_requests_total"]
    assert families["regionlab_requests_total"] and families["regionlab_request_units_total"]
    assert control(regionlab, "DELETE", "/throttle/storms/West US")["cleared"]["requests_throttled"] == 1
    assert control_error(regionlab, "DELETE", "/throttle/storms/West US", None)[0] == 404
    assert control_error(regionlab, "PUT", "/throttle/storms/Mars", {"share": 1})[0] == 404
    assert control_error(regionlab, "PUT", "/throttle/storms/East US", {"share": 2})[0] == 400
    assert control_error(regionlab, "PUT", "/throttle/storms/East US", {"op": "juggle"})[0] == 400


def run_cli(*argv) -> dict:
    out = io.StringIO()
    assert ctl.main(["throttle", *argv], out=out) == 0
    return json.loads(out.getvalue())


def test_the_cli_sets_every_knob(regionlab, monkeypatch):
    monkeypatch.setenv("REGIONLAB_CONTROL", regionlab.control_endpoint)
    with make_client(regionlab) as client:
        client.create_database("db").create_container("c", PartitionKey(path="/pk"))
    state = run_cli("set", "--credits-per-s", "default", "--burst", "on", "--serverless-ru-per-s", "2000")
    assert (state["credits_per_s"], state["burst"], state["serverless_ru_per_s"]) == (1000, True, 2000)
    assert run_cli("set", "--credits-per-s", "off", "--ru-limits", "off")["credits_per_s"] is None
    assert run_cli("container", "db", "c", "--ru-per-s", "500")["partition_ru_per_s"] is None   # ru limits off
    assert run_cli("set", "--ru-limits", "on")["containers"][0]["ru_per_s"] == 500
    assert run_cli("database", "db", "--autoscale-max", "4000")["offer"]["content"]["offerAutopilotSettings"] == {
        "maxThroughput": 4000}
    assert run_cli("storm", "East US", "--share", "0.25", "--op", "write", "--seed", "3")["share"] == 0.25
    assert run_cli()["storms"][0]["op"] == "write"
    assert run_cli("storm", "East US", "--off")["cleared"]["seed"] == 3
    assert run_cli("show")["storms"] == []
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    assert ctl.main(["throttle", "storm", "Mars"]) == 1 and "No region named 'Mars'" in err.getvalue()


def test_server_start_flags_and_environment():
    parse = lambda *argv: cli.config_from_args(cli.build_parser().parse_args(list(argv))).account.throttle  # noqa: E731
    assert (parse().ru, parse().credits_per_s, parse().burst, parse().serverless) == (True, None, False, False)
    assert parse("--credits-per-s").credits_per_s == 1000
    t = parse("--credits-per-s", "50", "--burst", "--serverless", "--serverless-ru-per-s", "900", "--no-ru-limits")
    assert (t.credits_per_s, t.burst, t.serverless, t.serverless_ru_per_s, t.ru) == (50, True, True, 900, False)
