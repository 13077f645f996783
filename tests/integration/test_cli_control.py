"""Proves every `regionlab` control command does what docs/control-api.md says, end to end: the
real CLI entry point (emulator.cli.main with argv) talks over HTTP to a real in-process emulator's
control port (emulator.testing.running_emulator), and each effect is checked through another
command or the account itself. No mocks, no sleeps: a graceful failover is waited for by the
control API itself, everything else takes effect before the reply."""
import json

import pytest

from regionlab.emulator import cli
from regionlab.emulator.core.container import canonical_pk_json
from regionlab.emulator.core.documents import Writer
from regionlab.emulator.testing import running_emulator
from control_harness import PK_DEF, regionlab


@pytest.fixture
def emu():
    with running_emulator(partitions=2, auth=False) as handle:
        handle.call(lambda a: a.create_container(a.create_database({"id": "db"}), {"id": "c", "partitionKey": PK_DEF}))
        yield handle


def write_item(account, id: str) -> int:
    c = account.database("db").containers["c"]
    w = Writer(c, account.hub_region, canonical_pk_json(["p"]), ["p"], account.clock.now_ms())
    w.upsert({"id": id, "pk": "p"})
    return w.commit()


def test_topology_and_health(capsys, emu):
    rc, topo, _ = regionlab(capsys, emu, "topology")
    assert rc == 0
    assert topo["write_regions"] == ["East US"]
    assert [r["name"] for r in topo["regions"]] == emu.regions
    assert len(topo["databases"][0]["containers"][0]["partitions"]) == 2
    rc, health, _ = regionlab(capsys, emu, "health")
    assert rc == 0 and health["status"] == "ok" and set(health["regions"].values()) == {"up"}


def test_control_url_from_the_environment(capsys, emu, monkeypatch):
    monkeypatch.setenv("REGIONLAB_CONTROL", emu.control_endpoint)
    assert cli.main(["failovers"]) == 0
    assert json.loads(capsys.readouterr().out) == {"failovers": []}


def test_inject_json_list_and_heal(capsys, emu):
    spec = {"type": "link_lag", "from": "East US", "to": "West US", "lag_ms": 700, "jitter_ms": 5}
    rc, fault, _ = regionlab(capsys, emu, "fault", "inject", json.dumps(spec))
    assert rc == 0 and fault["type"] == "link_lag" and isinstance(fault["id"], int)
    _, topo, _ = regionlab(capsys, emu, "topology")
    lags = {(l["from"], l["to"]): l["lag_ms"] for l in topo["links"]}
    assert lags[("East US", "West US")] == lags[("West US", "East US")] == 700
    _, listed, _ = regionlab(capsys, emu, "faults", "list")
    assert [f["id"] for f in listed["faults"]] == [fault["id"]]
    rc, healed, _ = regionlab(capsys, emu, "fault", "heal", str(fault["id"]))
    assert rc == 0 and healed["healed"]["id"] == fault["id"]
    assert regionlab(capsys, emu, "faults")[1] == {"faults": []}
    _, topo, _ = regionlab(capsys, emu, "topology")
    assert {l["lag_ms"] for l in topo["links"] if {l["from"], l["to"]} == {"East US", "West US"}} != {700}


def test_region_outage_by_flags_then_heal_all(capsys, emu):
    rc, fault, _ = regionlab(capsys, emu, "fault", "region-outage", "West US", "--mode", "blackhole",
                             "--duration-ms", "30000")
    assert rc == 0
    assert {k: fault[k] for k in ("type", "region", "mode", "duration_ms")} == \
        {"type": "region_outage", "region": "West US", "mode": "blackhole", "duration_ms": 30000}
    assert regionlab(capsys, emu, "health")[1]["regions"]["West US"] == "down"
    rc, _, _ = regionlab(capsys, emu, "fault", "link-cut", "East US", "East US 2", "--one-way")
    assert rc == 0
    rc, healed, _ = regionlab(capsys, emu, "fault", "heal", "all")
    assert rc == 0 and len(healed["healed"]) == 2
    assert regionlab(capsys, emu, "health")[1]["regions"]["West US"] == "up"
    assert all(l["state"] == "active" for l in regionlab(capsys, emu, "topology")[1]["links"])


def test_replica_faults_by_flags(capsys, emu):
    rc, slow, _ = regionlab(capsys, emu, "fault", "replica-slow", "East US 2", "--replica", "2",
                            "--delay-ms", "150", "--database", "db", "--container", "c", "--partition", "1")
    assert rc == 0 and slow["delay_ms"] == 150 and slow["partition"] == "1"
    parts = regionlab(capsys, emu, "topology")[1]["databases"][0]["containers"][0]["partitions"]
    assert parts[1]["regions"]["East US 2"]["replicas"][2]["extra_delay_ms"] == 150
    assert parts[0]["regions"]["East US 2"]["replicas"][2]["extra_delay_ms"] == 0
    rc, crash, _ = regionlab(capsys, emu, "fault", "primary-crash", "East US", "--partition", "0")
    assert rc == 0 and crash["type"] == "primary_crash"
    rc, out, err = regionlab(capsys, emu, "fault", "replica-crash", "West US", "--replica", "0")
    assert rc == 1 and out is None and "primary" in err


def test_direct_faults_by_flags(capsys):
    """replica-move, node-crash and direct-ports-blocked, as docs/control-api.md lists them."""
    with running_emulator(nodes_per_region=5, auth=False) as emu:
        emu.call(lambda a: a.create_container(a.create_database({"id": "db"}), {"id": "c", "partitionKey": PK_DEF}))
        rc, move, _ = regionlab(capsys, emu, "fault", "replica-move", "East US", "--replica", "1", "--container", "c")
        assert rc == 0 and move["type"] == "replica_move" and move["replica"] == 1 and move["container"] == "c"
        rc, crash, _ = regionlab(capsys, emu, "fault", "node-crash", "West US", "--node", "3")
        assert rc == 0 and (crash["type"], crash["region"], crash["node"]) == ("node_crash", "West US", 3)
        rc, blocked, _ = regionlab(capsys, emu, "fault", "direct-ports-blocked", "--region", "East US 2")
        assert rc == 0 and blocked == {**blocked, "type": "direct_ports_blocked", "region": "East US 2"}
        rc, everywhere, _ = regionlab(capsys, emu, "fault", "direct-ports-blocked", "--duration-ms", "60000")
        assert rc == 0 and "region" not in everywhere
        _, topo, _ = regionlab(capsys, emu, "topology")
        direct = topo["direct"]["regions"]
        assert direct["East US 2"]["blocked"] and direct["East US"]["blocked"]      # all regions: the second
        assert [n["state"] for n in direct["West US"]["nodes"]][3] == "down"
        rc, _, err = regionlab(capsys, emu, "fault", "node-crash", "West US", "--node", "9")
        assert rc == 1 and "'node' must be an integer 0-4" in err


def test_graceful_failover_moves_the_write_region_and_loses_nothing(capsys, emu):
    emu.call(write_item, "a")
    rc, f, _ = regionlab(capsys, emu, "failover", "East US 2")
    assert rc == 0 and (f["kind"], f["state"], f["lost_writes"]) == ("graceful", "completed", 0)
    assert regionlab(capsys, emu, "topology")[1]["write_regions"] == ["East US 2"]
    assert regionlab(capsys, emu, "lost-writes")[1] == {"count": 0, "writes": []}
    rc, again, err = regionlab(capsys, emu, "failover", "East US 2")
    assert rc == 1 and again is None and "already the write region" in err


def test_forced_failover_lists_what_it_lost(capsys, emu):
    assert regionlab(capsys, emu, "fault", "link-cut", "East US", "East US 2")[0] == 0
    lsn = emu.call(write_item, "only-in-east")
    rc, f, _ = regionlab(capsys, emu, "failover", "East US 2", "--forced")
    assert rc == 0 and (f["kind"], f["lost_writes"]) == ("forced", 1)
    _, lost, _ = regionlab(capsys, emu, "lost-writes")
    assert lost["count"] == 1
    assert {k: lost["writes"][0][k] for k in ("id", "lsn", "container")} == \
        {"id": "only-in-east", "lsn": lsn, "container": "c"}
    assert [x["kind"] for x in regionlab(capsys, emu, "failovers")[1]["failovers"]] == ["forced"]


def test_errors_exit_non_zero_with_the_reason(capsys, emu):
    rc, _, err = regionlab(capsys, emu, "fault", "inject", "{not json")
    assert rc == 2 and "not JSON" in err
    rc, _, err = regionlab(capsys, emu, "fault", "inject", json.dumps({"type": "meteor"}))
    assert rc == 1 and "region_outage" in err
    rc, _, err = regionlab(capsys, emu, "fault", "heal", "99")
    assert rc == 1 and "404" in err
    rc = cli.main(["topology", "--control", "http://127.0.0.1:1"])
    assert rc == 1 and "cannot reach the control port" in capsys.readouterr().err


def test_sim_subcommand_runs_the_simulator(capsys):
    assert cli.main(["sim", "--seed", "3", "--steps", "60"]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[0])
    assert summary["seed"] == 3 and summary["ops"] == 60 and summary["violations"] == 0


def test_region_add_and_remove(capsys, emu):
    rc, added, _ = regionlab(capsys, emu, "region", "add", "North Europe")
    assert rc == 0 and added["name"] == "North Europe" and added["endpoint"].startswith("http://127.0.0.1:")
    assert "North Europe" in regionlab(capsys, emu, "health")[1]["regions"]
    rc, removed, _ = regionlab(capsys, emu, "region", "remove", "North Europe")
    assert rc == 0 and removed == {"removed": "North Europe"}
    rc, _, err = regionlab(capsys, emu, "region", "remove", "East US")
    assert rc == 1 and "write region" in err
