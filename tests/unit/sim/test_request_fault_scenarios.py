"""Proves the request faults (latency, error, timeout_after_apply, tcp_reset, clock_skew) do in the
simulator what they do live, by running each as a JSON scenario (the POST /faults body) in
virtual time: the checker finds no violation, and the fault's effect shows in the history."""
from regionlab.emulator.sim import SimConfig, run
from regionlab.emulator.sim.checker import WRITE_FS

EAST = "East US"


def scenario(schedule, seed=3, **settings):
    settings.setdefault("steps", 300)
    settings.setdefault("clients", 6)
    settings.setdefault("consistency", "Session")
    settings.setdefault("faults", False)
    result = run(seed, SimConfig.from_scenario({"schedule": schedule, **settings}))
    assert result.violations == [], result.violations[:5]
    return result.history


def during(h, region, lo, hi, f=WRITE_FS):
    return [o for o in h["ops"] if o["f"] in f and o["region"] == region and lo <= o["invoke_ms"] - h["start_ms"] < hi]


def test_error_fault_refuses_writes_definitely_and_applies_nothing():
    h = scenario([{"at_ms": 200, "fault": {"type": "error", "region": EAST, "status": 503, "op": "write",
                                          "duration_ms": 1500}}])
    hit = during(h, EAST, 200, 1700)
    assert hit and all(o["outcome"] == "fail" and o["status"] == 503 for o in hit)
    assert all(o.get("lsn") is None for o in hit)                    # never reached the core
    assert any(o["outcome"] == "ok" for o in during(h, EAST, 1800, 10**9))


def test_timeout_after_apply_records_unknown_outcomes_of_applied_writes():
    h = scenario([{"at_ms": 200, "fault": {"type": "timeout_after_apply", "region": EAST, "op": "write",
                                          "duration_ms": 1500}}])
    hit = during(h, EAST, 200, 1700)
    assert hit and all(o["outcome"] == "info" and o["reply"] == "unknown" for o in hit)
    assert any(o.get("fate") == "committed" for o in hit)             # applied all the same


def test_tcp_reset_share_loses_some_replies():
    h = scenario([{"at_ms": 0, "fault": {"type": "tcp_reset", "region": EAST, "share": 0.5, "seed": 1}}],
                 steps=400)
    east = [o for o in h["ops"] if o["region"] == EAST]
    lost = [o for o in east if o.get("reply") == "unknown"]
    assert 0 < len(lost) < len(east)


def test_latency_holds_replies_in_virtual_time():
    h = scenario([{"at_ms": 0, "fault": {"type": "latency", "region": EAST, "delay_ms": 700, "op": "read"}}])
    reads = [o for o in h["ops"] if o["f"] in ("read", "snapshot") and o["region"] == EAST and o["outcome"] == "ok"]
    assert reads and all(o["complete_ms"] - o["invoke_ms"] >= 700 for o in reads)
    writes = [o for o in h["ops"] if o["f"] in WRITE_FS and o["outcome"] == "ok"]
    assert any(o["complete_ms"] - o["invoke_ms"] < 700 for o in writes)     # op "read" only


def test_same_scenario_same_history():
    steps = [{"at_ms": 0, "fault": {"type": "error", "region": EAST, "status": 500, "share": 0.3}}]
    a = run(5, SimConfig.from_scenario({"schedule": steps, "steps": 200, "faults": False}))
    b = run(5, SimConfig.from_scenario({"schedule": steps, "steps": 200, "faults": False}))
    assert a.history_json() == b.history_json()
