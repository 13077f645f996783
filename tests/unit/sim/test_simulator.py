"""Proves the request layer and the core keep every consistency and failover promise under random
faults, by running the deterministic simulator (emulator/sim: the real service and core, virtual
time, clients composed with a random fault workload) over many seeds and judging each history with the checker; and proves
a run is a pure function of its seed, so any failing seed below is a one-line reproduction:
`python -m emulator.sim --seed N [--consistency Strong]`."""
import ast
import json
from pathlib import Path

import pytest

from regionlab.emulator.core.replica_set import LOG_RETAINED_COMMITS_MAX
from regionlab.emulator.sim import SimConfig, run
from regionlab.emulator.sim.__main__ import main as sim_main

SEEDS = range(120)
STRONG_SEEDS = range(1000, 1030)
STEPS = 200


def _verdict(result) -> str:
    c = result.config
    return "\n".join([f"reproduce: python -m emulator.sim --seed {result.seed} --steps {c['steps']}"
                      f" --consistency {c['consistency']} --partitions {c['partitions']}"
                      f" --containers {c['containers']} --keys {c['keys']}"
                      f" --intra-region-delay-ms {c['intra_region_delay_ms']}"
                      f" --log-retained-commits {c['log_retained_commits']}"]
                     + [f"  {v['check']}: {v['message']}" for v in result.violations[:10]])


@pytest.mark.parametrize("seed", SEEDS)
def test_random_faults_keep_every_promise(seed):
    result = run(seed, SimConfig(steps=STEPS))
    assert result.ok, _verdict(result)


@pytest.mark.parametrize("seed", STRONG_SEEDS)
def test_random_faults_keep_strong_promises(seed):
    result = run(seed, SimConfig(steps=STEPS, consistency="Strong"))
    assert result.ok, _verdict(result)


# Seeds that found core bugs (commit messages name them), with the settings they drew then (the
# retained log was always the real one before the simulator drew it).
OLD_LOG = dict(log_retained_commits=LOG_RETAINED_COMMITS_MAX)
REGRESSIONS = [
    (1094, dict(consistency="Strong", partitions=4, containers=2, keys=6, intra_region_delay_ms=2)),
    (1139, dict(consistency="Session", partitions=2, containers=2, keys=6, intra_region_delay_ms=20)),
    (445, dict(consistency="Strong", partitions=1, containers=1, keys=2, intra_region_delay_ms=2)),
    (40013, dict(steps=1500)),
    (42122, dict(steps=1500, consistency="Strong", partitions=4, containers=1, keys=2, intra_region_delay_ms=5)),
    (44276, dict(steps=1500, consistency="Strong", partitions=3, containers=1, keys=6, intra_region_delay_ms=1)),
]


@pytest.mark.parametrize("seed, settings", REGRESSIONS, ids=[str(s) for s, _ in REGRESSIONS])
def test_seeds_that_once_found_bugs(seed, settings):
    result = run(seed, SimConfig(**OLD_LOG, **settings))
    assert result.ok, _verdict(result)


def test_the_seeds_exercise_what_they_claim_to():
    """Not vacuous: across a handful of seeds the fault workload injects every kind of fault and
    both kinds of failover, and some writes are lost by forced failovers (and checked)."""
    kinds, failovers, lost, unknown = set(), set(), 0, 0
    for seed in range(12):
        h = run(seed, SimConfig(steps=STEPS)).history
        kinds |= {e["spec"]["type"] for e in h["events"] if e["kind"] == "fault" and "id" in e}
        failovers |= {f["kind"] for f in h["failovers"]}
        lost += len(h["lost_writes"])
        unknown += sum(1 for op in h["ops"] if op.get("reply") == "unknown" and op["outcome"] == "info")
    assert kinds == {"region_outage", "link_cut", "link_lag", "primary_crash", "replica_crash", "replica_slow",
                     "latency", "error", "timeout_after_apply", "tcp_reset", "clock_skew"}
    assert unknown > 0                      # replies lost after the request ran: indefinite
    assert failovers == {"graceful", "forced"}
    assert lost > 0


def test_same_seed_same_history_byte_for_byte():
    a, b = run(42, SimConfig(steps=STEPS)), run(42, SimConfig(steps=STEPS))
    assert a.history_json() == b.history_json()
    assert run(43, SimConfig(steps=STEPS)).history_json() != a.history_json()


def test_no_faults_means_no_failures_of_the_system():
    h = run(7, SimConfig(steps=STEPS, faults=False)).history
    assert h["events"] == [] and h["lost_writes"] == []
    # Only the workload's own conflicts fail: creating what exists, replacing or deleting what does not.
    assert {o["status"] for o in h["ops"] if o["outcome"] != "ok"} <= {404, 409}


def test_command_line_prints_a_summary_and_fails_on_violations(capsys, tmp_path):
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps([{"at_ms": 100, "fault": {"type": "region_outage", "region": "West US",
                                                             "duration_ms": 500}}]))
    history = tmp_path / "history.json"
    assert sim_main(["--seed", "3", "--steps", "80", "--scenario", str(scenario), "--history", str(history)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["seed"] == 3 and summary["ops"] >= 80 and summary["faults"] == 1 and summary["violations"] == 0
    assert json.loads(history.read_text())["seed"] == 3
    assert sim_main(["--seeds", "0-2", "--steps", "30"]) == 0
    assert [json.loads(line)["seed"] for line in capsys.readouterr().out.splitlines()] == [0, 1, 2]
    bad = tmp_path / "bad.json"
    bad.write_text('[{"at_ms": 1}]')
    assert sim_main(["--scenario", str(bad)]) == 2


def test_the_command_line_runs_direct_mode_faults_with_the_nodes_they_need(capsys, tmp_path):
    """A replica_move needs a fifth node: --nodes-per-region gives it one (with the default four
    the move is refused, and the history says why)."""
    scenario = tmp_path / "direct.json"
    scenario.write_text(json.dumps([
        {"at_ms": 100, "fault": {"type": "replica_move", "region": "East US", "replica": 1}, "as": "m"},
        {"at_ms": 150, "fault": {"type": "node_crash", "region": "West US", "node": 0}, "as": "n"},
        {"at_ms": 200, "fault": {"type": "direct_ports_blocked"}, "as": "b"},
        {"at_ms": 600, "heal": "all"}]))
    runs = {}
    for nodes in (["--nodes-per-region", "5"], []):
        history = tmp_path / f"history{len(nodes)}.json"
        assert sim_main(["--seed", "4", "--steps", "60", "--scenario", str(scenario), *nodes,
                         "--history", str(history)]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["violations"] == 0
        refused = [e for e in json.loads(history.read_text())["events"] if e.get("refused")]
        runs[len(nodes)] = (summary["faults"], refused)
    assert runs[2] == (3, [])
    assert runs[0][0] == 2 and "free node" in runs[0][1][0]["refused"]


def test_the_simulator_drives_the_core_alone():
    """STYLE.md: sim -> service -> core. It never touches the asyncio shells, sockets or the wall clock."""
    forbidden = ("asyncio", "socket", "time", "threading", "aiohttp", "uvloop", "regionlab.emulator.gateway",
                 "regionlab.emulator.runtime")
    root = Path(__file__).resolve().parents[3] / "emulator" / "sim"
    found = []
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            found += [f"{path.name}: {n}" for n in names if any(n == f or n.startswith(f + ".") for f in forbidden)]
    assert found == []
