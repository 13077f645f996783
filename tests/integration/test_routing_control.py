"""Proves the read-routing knobs work at runtime on a real emulator: PUT /routing and
PUT /routing/weights (and their CLI commands) change routing at once for the account or one
region, refusals are 400s that change nothing, and reads served by each replica show in
GET /topology and /metrics; reads held by a latency fault spread over the weighted secondaries."""
import http.client
import json
import urllib.request

import pytest
from azure.cosmos import PartitionKey

from regionlab.emulator import cli
from regionlab.emulator.ctl import ControlError
from sdk_harness import control_json, host_port, make_client, signed_headers

EAST = "East US"


def _replicas(emu, region=EAST):
    topo = control_json(emu, "GET", "/topology")
    part = topo["databases"][0]["containers"][0]["partitions"][0]
    return part["regions"][region]["replicas"]


@pytest.fixture
def seeded(regionlab):
    with make_client(regionlab) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "x", "pk": "p"})
    return regionlab


def test_weights_and_settings_apply_at_once_per_account_and_region(seeded):
    emu = seeded
    assert [r["weight"] for r in _replicas(emu)] == [1, 1, 1, 1]          # the default
    out = control_json(emu, "PUT", "/routing/weights", {"weights": [0, 1, 2, 3]})
    assert out["weights"] == [0, 1, 2, 3]
    control_json(emu, "PUT", "/routing/weights", {"weights": [5, 5, 5, 5], "region": "West US"})
    assert [r["weight"] for r in _replicas(emu)] == [0, 1, 2, 3]
    assert [r["weight"] for r in _replicas(emu, "West US")] == [5, 5, 5, 5]
    control_json(emu, "PUT", "/routing/weights", {"weights": None, "region": "West US"})
    assert [r["weight"] for r in _replicas(emu, "West US")] == [0, 1, 2, 3]
    out = control_json(emu, "PUT", "/routing", {"primary_accepts_reads": False, "region": EAST})
    assert out["regions"] == {EAST: {"primary_accepts_reads": False}} and out["primary_accepts_reads"] is True
    assert control_json(emu, "GET", "/topology")["routing"] == out


@pytest.mark.parametrize("path, body, message", [
    ("/routing/weights", {"weights": [1, 2, 3]}, "4 integers from 0 to 100"),
    ("/routing/weights", {"weights": [1, 2, 3, 101]}, "4 integers from 0 to 100"),
    ("/routing/weights", {"weights": [1, 1, 1, 1], "region": "Mars"}, "Unknown region 'Mars'"),
    ("/routing", {"primary_accepts_reads": "yes"}, "must be true or false"),
    ("/routing", {"strategy": "round_robin"}, "strategy must be one of active_requests"),
    ("/routing", {"primary_reads": False}, "Unknown routing key 'primary_reads'"),
])
def test_refusals_change_nothing(seeded, path, body, message):
    before = control_json(seeded, "GET", "/routing")
    with pytest.raises(ControlError) as e:
        control_json(seeded, "PUT", path, body)
    assert e.value.status == 400 and message in e.value.message
    assert control_json(seeded, "GET", "/routing") == before


def test_cli_routing_commands(seeded, capsys):
    base = ["--control", seeded.control_endpoint]
    assert cli.main(["routing", "weights", "0", "1", "2", "3", *base]) == 0
    assert json.loads(capsys.readouterr().out)["weights"] == [0, 1, 2, 3]
    assert cli.main(["routing", "set", "--primary-accepts-reads", "off", "--region", EAST, *base]) == 0
    assert json.loads(capsys.readouterr().out)["regions"][EAST] == {"primary_accepts_reads": False}
    assert cli.main(["routing", "show", *base]) == 0
    assert json.loads(capsys.readouterr().out)["weights"] == [0, 1, 2, 3]
    assert cli.main(["routing", "weights", "1", "2", *base]) == 1
    assert "4 integers" in capsys.readouterr().err


@pytest.mark.slow
def test_held_reads_spread_by_weight_and_are_counted(seeded):
    """Twelve concurrent reads held 1.5 s by a latency fault, primary off, weights 0:1:2:3:
    each new read goes to the highest weight / (in_flight + 1), so the heavier replicas serve more."""
    emu = seeded
    control_json(emu, "PUT", "/routing", {"primary_accepts_reads": False})
    control_json(emu, "PUT", "/routing/weights", {"weights": [1, 1, 2, 3]})
    control_json(emu, "POST", "/faults", {"type": "latency", "region": EAST, "delay_ms": 1500, "op": "read"})
    path = "/dbs/db/colls/c/docs/x"
    host, port = host_port(emu.region_endpoints[EAST])
    conns = [http.client.HTTPConnection(host, port, timeout=10) for _ in range(12)]
    for conn in conns:
        conn.request("GET", path, headers=signed_headers(emu.key, "GET", path, {"x-ms-documentdb-partitionkey": '["p"]'}))
    assert {conn.getresponse().status for conn in conns} == {200}
    for conn in conns:
        conn.close()
    served = [r["reads_served"] for r in _replicas(emu)]
    assert served[0] == 0 and sum(served) == 12 and served[1] <= served[2] <= served[3] and served[3] > served[1]
    assert max(r["in_flight_peak"] for r in _replicas(emu)) >= 2
    assert all(r["in_flight"] == 0 for r in _replicas(emu))
    with urllib.request.urlopen(emu.control_endpoint + "metrics") as resp:
        text = resp.read().decode()
    assert 'regionlab_replica_reads_served_total{region="East US",database="db",container="c",partition="0",' \
           f'replica="3",role="secondary"}} {served[3]}' in text
    assert "regionlab_replica_reads_in_flight_peak{" in text
