"""Proves that a drill's verdict judges the fault itself, through the real command line against a
real emulator: a fault window that fails its assertions exits 1 (the outage's availability is
measured inside the window), a stall with no failures has an RTO (a latency fault holds every
request), a stop condition aborts the run early (the emulator's faults healed, the report kept
and marked aborted, exit 1), a steady state that does not hold before the first fault aborts
before anything is injected, SIGINT or SIGTERM end a run cleanly (no traceback, faults healed, the
database it created removed, the report of what ran written and marked interrupted, exit 128 + the
signal), and a misspelt
fault type or a region the running emulator lacks is exit 2 with one line before anything runs."""
import json
import os
import signal
import subprocess
import sys

import pytest

from regionlab.client import CosmosClient
from regionlab.emulator.core.faults import FAULT_TYPES
from regionlab.emulator.drill.workload import DATABASE
from regionlab.emulator.testing import running_emulator

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN_TIMEOUT_S = 60
TWO = ["East US", "East US 2"]
NO_FAILOVER = {"detection_delay_ms": 600_000}


def drill_command(scenario, out, *args):
    return [sys.executable, "-m", "regionlab.emulator", "drill", "run", str(scenario), "--out", str(out), *args]


def run_drill(tmp_path, scenario: dict, *args):
    path = tmp_path / f"{scenario['name']}.json"
    path.write_text(json.dumps(scenario))
    out = tmp_path / scenario["name"]
    done = subprocess.run(drill_command(path, out, *args), cwd=ROOT, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else None
    return done, report


def verdicts(report) -> dict:
    return {a["name"]: a for a in report["assertions"]}


def outage(at_ms, region="East US", name="out", mode="unavailable"):
    return {"at_ms": at_ms, "fault": {"type": "region_outage", "region": region, "mode": mode}, "as": name}


def test_a_fault_window_failing_its_assertions_exits_1_and_a_stall_has_an_rto(tmp_path):
    done, report = run_drill(tmp_path, {
        "name": "judged", "duration_ms": 4500,
        "account": {"regions": TWO, "options": NO_FAILOVER},
        "workload": {"mix": {"write": 1}, "concurrency": 4, "keys": 5, "rate_per_s": 200},
        "schedule": [outage(500), {"at_ms": 1500, "heal": "out"},
                     {"at_ms": 2500, "fault": {"type": "latency", "region": "East US", "delay_ms": 600,
                                               "duration_ms": 600}, "label": "held 600 ms"}],
        "assertions": {"availability_min": 0.9, "faults": {"availability_min": 0.5},
                       "recovery": {"availability_min": 0.95, "hold_ms": 300}}})
    assert done.returncode == 1, done.stderr
    out_window, held = report["faults"]
    assert out_window["ops"] > 0 and out_window["availability"] < 0.1        # every write failed in the outage
    v = verdicts(report)
    assert v["availability in [region_outage East US (unavailable)]"]["held"] is False
    assert v["availability outside fault windows"]["held"] is True
    assert "FAIL  availability in [region_outage East US (unavailable)]" in done.stdout
    assert "result: FAILED" in done.stdout
    # Nothing failed while East US held every request 600 ms, but nothing completed either: down.
    assert held["errors"] == 0 and v["availability in [held 600 ms]"]["held"] is True
    assert held["rto_ms"] >= 500 and out_window["rto_ms"] >= 900


def test_a_stop_condition_aborts_and_a_failed_steady_state_injects_nothing(tmp_path):
    with running_emulator(regions=TWO, **NO_FAILOVER) as emu:
        control = ("--control", emu.control_endpoint)
        done, report = run_drill(tmp_path, {
            "name": "stopped", "duration_ms": 20000,
            "workload": {"mix": {"write": 1}, "concurrency": 4, "keys": 5, "rate_per_s": 200},
            "schedule": [outage(500), {"at_ms": 15000, "heal": "out"}],
            "stop": {"error_rate_above": 0.5, "over_ms": 400}}, *control)
        assert emu.control("GET", "/faults")["faults"] == []           # healed at the abort
        assert done.returncode == 1, done.stderr
        assert report["ended"]["kind"] == "aborted" and "stop condition" in report["ended"]["reason"]
        assert 500 < report["ended"]["at_ms"] < 5000 and report["duration_ms"] < 5000
        assert report["passed"] is False and "result: ABORTED" in done.stdout
        assert report["faults"][0]["availability"] < 0.5

        done, report = run_drill(tmp_path, {
            "name": "unsteady", "duration_ms": 20000,
            "workload": {"mix": {"read": 1}, "concurrency": 2, "keys": 5},
            "schedule": [outage(500), {"at_ms": 15000, "heal": "out"}],
            "assertions": {"steady_state": {"p99_ms_max": 0}}}, *control)
        assert done.returncode == 1, done.stderr
        assert report["ended"]["kind"] == "aborted" and "steady state" in report["ended"]["reason"]
        assert report["faults"] == [] and report["duration_ms"] < 5000          # nothing was injected
        assert emu.control("GET", "/faults")["faults"] == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_the_run_cleanly_with_the_report_of_what_ran(tmp_path, signum):
    scenario = tmp_path / "long.json"
    scenario.write_text(json.dumps({
        "name": "long", "duration_ms": 60000, "workload": {"mix": {"read": 1, "write": 1}, "concurrency": 2, "keys": 5,
                                                   "rate_per_s": 100},
        "schedule": [outage(300, region="East US 2"), {"at_ms": 50000, "heal": "out"}]}))
    out = tmp_path / "out"
    with running_emulator(regions=TWO, **NO_FAILOVER) as emu:
        proc = subprocess.Popen(drill_command(scenario, out, "--control", emu.control_endpoint), cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            first = proc.stdout.readline()       # printed as the outage step begins (stdout is no terminal)
            assert "steady state" in first, (first, proc.stderr.read() if proc.poll() is not None else "")
            proc.send_signal(signum)
            rest, err = proc.communicate(timeout=RUN_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert emu.control("GET", "/faults")["faults"] == []
        assert DATABASE not in [d["id"] for d in CosmosClient(emu.endpoint, emu.key).list_databases()]   # removed
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err
    report = json.loads((out / "report.json").read_text())
    assert report["ended"]["kind"] == "interrupted"
    assert report["ended"]["reason"] == f"{signal.Signals(signum).name} received"
    assert report["duration_ms"] < 30000 and report["total"]["ops"] > 0
    assert [w["label"] for w in report["faults"]] == ["region_outage East US 2 (unavailable)"]
    assert "result: INTERRUPTED" in rest and (out / "report.html").exists()


def test_a_misspelt_fault_or_an_unknown_heal_is_exit_2_before_anything_starts(tmp_path):
    bad = {"name": "bad", "schedule": [{"at_ms": 100, "fault": {"type": "region_outgae", "region": "East US"}}]}
    done, report = run_drill(tmp_path, bad)
    assert done.returncode == 2 and report is None and done.stdout == ""
    assert done.stderr.strip() == ("regionlab drill: error: schedule: step 0: unknown fault type 'region_outgae'; "
                                   "the catalogue has: " + ", ".join(FAULT_TYPES))
    with running_emulator(regions=TWO) as emu:
        west = {"name": "west", "schedule": [outage(100, region="West US"), {"at_ms": 200, "heal": "out"}]}
        done, report = run_drill(tmp_path, west, "--control", emu.control_endpoint)
        assert done.returncode == 2 and report is None
        assert done.stderr.strip() == ("regionlab drill: error: step 0 names region 'West US'; the running "
                                       "emulator's regions are East US, East US 2")
        assert emu.control("GET", "/faults")["faults"] == []
