"""Proves `regionlab drill` end to end: each built-in drill runs in its short form against a real
emulator (real sockets, the bundled client), through the CLI driving it with --control, and the
report's figures agree with the emulator's own counters: the lost writes the report lists are the
ones GET /lost-writes holds, and equal to the acknowledged writes the workload can no longer read
(after a forced failover, more than none); the 429s the client retried are the 429s the storm
served; the 410s of a moved replica are the address refreshes the client made; the 429/50009s the
client backed off from are the credit refusals the emulator counted; hedged extra RU appears only
in the setups that hedge, the breaker opens only where it is on (hedging-vs-breaker: without
either East US's 500s reach the application, with hedging none does, the breaker opens once
after 10 to 17 failed reads); after the playbook's client step
every read East US 2 served is one the emulator counted there; the exit status is 0 exactly when
no assertion failed; region-outage's four modes each show their own behaviour (503s retried,
refused connects, reset responses, a blackhole's stall). Also: the in-process emulator (no
--control), `drill list` (all nine), a bad scenario file (exit 2, one line), and `emu.drill(...)`."""
import json
import os
import subprocess
import sys

import pytest

from regionlab.emulator.drill import SHORT_SCALE, builtin, builtin_names
from regionlab.emulator.drill.runner import account_options
from regionlab.emulator.drill.workload import CONTAINER, DATABASE
from regionlab.emulator.testing import running_emulator

pytestmark = pytest.mark.slow          # each drill runs for seconds
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DRILL_TIMEOUT_S = 180
NINE = ("failover", "region-outage", "lag", "primary-crash", "replica-move", "throttle", "credits",
        "hedging-vs-breaker", "outage-playbook")


def regionlab(*args, env=None):
    return subprocess.run([sys.executable, "-m", "regionlab.emulator", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=DRILL_TIMEOUT_S, env={**os.environ, **(env or {})})


def docs_status_counts(emu) -> dict:
    """{status: replies} of item requests (docs) the emulator served, every region together."""
    out = {}
    for counts in emu.topology()["requests"].values():
        for key, n in counts.items():
            _, kind, status = key.split(" ")
            if kind == "docs":
                out[status] = out.get(status, 0) + n
    return out


def direct_gone_counts(emu) -> int:
    """410 replies the direct nodes sent, every region and operation together."""
    return sum(n for counts in emu.topology().get("direct_requests", {}).values()
               for key, n in counts.items() if key.split(" ")[-1].startswith("410"))


def served_2xx(emu, region: str) -> int:
    """Item requests (docs) the region answered with a success."""
    return sum(n for key, n in emu.topology()["requests"][region].items()
               if key.split(" ")[1] == "docs" and key.split(" ")[2].startswith("2"))


def credit_refusals(emu) -> int:
    """429/50009s the emulator's throttle counted for the drill's container, every region."""
    return sum(t["count"] for t in emu.control("GET", "/throttle")["throttled"]
               if t["reason"] == "credits" and t["database"] == DATABASE and t["container"] == CONTAINER)


def seen_50009(summary: dict) -> int:
    return summary["retries_by_reason"].get("429/50009 credits spent", 0) + summary["errors_by_status"].get("429/50009", 0)


def drill_lost_writes(emu) -> list:
    return sorted(w["id"] for w in emu.lost_writes() if w["database"] == DATABASE and w["container"] == CONTAINER)


@pytest.mark.parametrize("name", builtin_names())
def test_builtin_drill_short_form_agrees_with_the_emulator(name, tmp_path):
    drill = builtin(name)
    with running_emulator(**account_options(drill)) as emu:
        before, gone_before = docs_status_counts(emu), direct_gone_counts(emu)
        credits_before, east2_before = credit_refusals(emu), served_2xx(emu, drill.regions[1])
        done = regionlab("drill", name, "--short", "--control", emu.control_endpoint, "--keep-database",
                         "--out", str(tmp_path))      # the counters below are the database's
        assert done.returncode in (0, 1), done.stderr
        report = json.loads((tmp_path / "report.json").read_text())
        after, gone_after = docs_status_counts(emu), direct_gone_counts(emu)
        credits_after, east2_after = credit_refusals(emu), served_2xx(emu, drill.regions[1])
        listed_by_emulator = drill_lost_writes(emu)
    assert done.returncode == (0 if report["passed"] else 1), done.stderr
    assert report["passed"], (done.stdout, report["assertions"])
    assert "result: passed" in done.stdout and "steady state" in done.stdout
    assert (tmp_path / "report.html").read_text().startswith("<!doctype html>")
    lost = report["lost_writes"]
    assert sorted(w["id"] for w in lost["writes"]) == listed_by_emulator
    assert lost["acknowledged_unreadable"] == lost["listed_acknowledged"] and lost["match"]
    scale = max(SHORT_SCALE, drill.scale_min)          # hedging-vs-breaker: its duration_scale_min
    assert report["total"]["ops"] > 0 and report["duration_ms"] == int(drill.duration_ms * scale)
    assert report["duration_scale"] == scale and report["ended"] == {"kind": "completed"}
    for run in report.get("setups") or [report]:      # the history checker judged every write it issued
        check = run["history_check"]
        assert check["valid"], check["violations"]
        assert check["level"] == drill.consistency
        assert check["writes"].get("ok", 0) == run["lost_writes"]["acknowledged_writes"]
        assert sum(check["writes"].values()) == run["total"]["ops_by_kind"].get("write", 0)
    assert len(report["phases"]) == len({s["at_ms"] for s in drill.schedule} | {0}) * max(1, len(drill.setups))
    if name == "failover":
        assert lost["listed"] > 0 and lost["acknowledged_unreadable"] > 0       # lag 300 ms under writes
        assert sum(w["rpo_writes"] for w in report["faults"]) == sum(
            f["lost_writes"] for f in report["failovers"])
    if name == "throttle":
        served_429 = after.get("429/3200", 0) - before.get("429/3200", 0)
        seen_429 = report["total"]["retries_by_reason"].get("429/3200 throttled", 0) + \
            report["total"]["errors_by_status"].get("429/3200", 0)
        assert served_429 > 0 and seen_429 == served_429
    if name == "replica-move":
        refreshes = sum(n for reason, n in report["total"]["retries_by_reason"].items()
                        if reason.startswith("direct: address refresh after 410/"))
        assert refreshes > 0 and refreshes == gone_after - gone_before
    if name == "credits":
        assert credits_after - credits_before == seen_50009(report["total"]) > 0
        steady, squeezed, healed = report["phases"]
        assert squeezed["ops_per_s"] < steady["ops_per_s"] / 2 and healed["ops_per_s"] > squeezed["ops_per_s"]
        assert after.get("429/50009", 0) - before.get("429/50009", 0) == seen_50009(report["total"])
    if name == "hedging-vs-breaker":
        rows = {r["setup"]: r for r in report["comparison"]}
        assert list(rows) == ["none", "hedging", "circuit breaker", "both"]
        for setup in report["setups"]:
            row, opts = rows[setup["name"]], setup["client_options"]
            assert (row["hedged_extra_charge"] > 0) == bool(opts["availability_strategy"]), row
            assert row["ops"] == setup["total"]["ops"] and (opts["circuit_breaker"] or row["breaker_opened"] == 0)
        assert sum(r["ops"] for r in rows.values()) == report["total"]["ops"]
        assert rows["hedging"]["availability_in_fault_windows"] > rows["none"]["availability_in_fault_windows"]
        assert rows["hedging"]["p99_ms_in_fault_windows"] < rows["none"]["p99_ms_in_fault_windows"]
        errors = {s["name"]: s["total"]["errors_by_status"] for s in report["setups"]}
        # none: East US's 500 (after its 300 ms) reaches the application; most fault-window reads fail
        # (a loaded machine may add end-to-end timeouts, 408, to any setup's errors)
        assert errors["none"].get("500/0", 0) > 0 and rows["none"]["availability_in_fault_windows"] < 0.5
        # hedging (alone or with the breaker): a 500 never wins a race another copy still runs
        for setup in ("hedging", "both"):
            assert "500/0" not in errors[setup] and rows[setup]["availability_in_fault_windows"] >= 0.99
        # the breaker: the one range opens once (30 s to HealthyTentative is past the run), after
        # 10 failed reads and those in flight in East US then (at most concurrency - 1 more)
        assert rows["circuit breaker"]["breaker_opened"] == 1
        assert 10 <= errors["circuit breaker"].get("500/0", 0) <= 10 + drill.concurrency - 1
        assert "Setups compared" in (tmp_path / "report.html").read_text()
    if name == "outage-playbook":
        [change] = report["client_changes"]
        assert change["availability_before"] < 0.9 and change["availability_after"] >= 0.99
        assert report["total"]["served_by"].get("East US 2", 0) == east2_after - east2_before > 0
        assert report["phases"][0]["served_by"] == {"East US": report["phases"][0]["ops"]}
    if name == "region-outage":             # each mode meets a client that has not sidelined East US 2
        mode = {p["name"].split("(")[1].rstrip(")"): p for p in report["phases"] if p["name"].startswith("region_outage")}
        windows = {w["label"].split("(")[1].rstrip(")"): w for w in report["faults"]}
        assert mode["unavailable"]["retries_by_reason"].get("503/0", 0) > 0            # a 503, then East US
        assert mode["refuse"]["retries_by_reason"].get("connect", 0) > 0                # refused at connect
        assert mode["reset"]["retries_by_reason"].get("response", 0) > 0 and "503/0" not in mode["reset"]["retries_by_reason"]
        assert windows["blackhole"]["p99_ms"] >= 500 > windows["refuse"]["p99_ms"]      # held until the client gives up
        assert windows["blackhole"]["rto_ms"] > 0 and all(w["availability"] >= 0.99 for w in windows.values())
    if name == "primary-crash":
        crash = report["faults"][0]
        assert crash["rto_ms"] is not None and report["phases"][1]["errors"] > 0


def test_in_process_emulator_failing_assertion_exits_1_and_plots_can_be_off(tmp_path):
    scenario = tmp_path / "strict.json"
    scenario.write_text(json.dumps({
        "name": "strict", "duration_ms": 1500, "account": {"regions": ["East US", "East US 2"]},
        "workload": {"mix": {"read": 1, "write": 1, "query": 1}, "concurrency": 2, "keys": 5},
        "schedule": [{"at_ms": 500, "fault": {"type": "latency", "region": "East US", "delay_ms": 20}, "as": "slow"},
                     {"at_ms": 1000, "heal": "slow"}],
        "assertions": {"p99_ms_max": 0, "lost_writes_max": 0}}))
    done = regionlab("drill", "run", str(scenario), "--out", str(tmp_path / "out"),
                     env={"REGIONLAB_REPORT_NO_PLOTS": "1"})
    assert done.returncode == 1, done.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [a["held"] for a in report["assertions"]] == [False, True]
    assert report["phases"][1]["p50_ms"] >= 20 > report["phases"][0]["p50_ms"]
    page = (tmp_path / "out" / "report.html").read_text()
    assert "regionlab[report]" in page and "data:image/png" not in page
    assert "FAIL  p99 latency" in done.stdout


def test_list_and_bad_scenario(tmp_path):
    listed = regionlab("drill", "list")
    assert listed.returncode == 0
    assert [line.split()[0] for line in listed.stdout.splitlines()] == builtin_names() == sorted(NINE)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"workload": {"client": "azure-cosmos", "client_options": {"circuit_breaker": True}}}))
    done = regionlab("drill", "run", str(bad))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        "regionlab drill: error: workload.client_options.circuit_breaker is an option of the bundled client only "
        "(\"client\": \"regionlab\"): the SDK's partition-level circuit breaker is the process-wide environment "
        "variable AZURE_COSMOS_ENABLE_CIRCUIT_BREAKER, not a client option")
    assert regionlab("drill", "no-such-drill").returncode == 2


def test_fixture_handle_runs_a_drill_and_returns_the_report(tmp_path):
    with running_emulator(regions=("East US", "East US 2"), lag_ms={("East US", "East US 2"): 300}) as emu:
        report = emu.drill({"name": "mini", "duration_ms": 2000,
                            "account": {"regions": ["East US", "East US 2"]},
                            "workload": {"mix": {"write": 1}, "concurrency": 4, "keys": 5},
                            "schedule": [{"at_ms": 1000, "failover": {"region": "East US 2", "kind": "forced"}}],
                            "assertions": {"lost_writes_match": True}}, report_dir=str(tmp_path))
        assert report.passed
        assert sorted(w["id"] for w in report.lost_writes) == drill_lost_writes(emu)
        assert len(report.lost_writes) > 0
    assert "data:image/png;base64," in (tmp_path / "report.html").read_text()
