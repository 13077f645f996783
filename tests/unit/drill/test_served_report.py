"""Proves the server-side report of a drill without a workload (drill/served.py) on hand-made
GET /requests windows: which replies count as served, each request's times on the drill's clock
and the region that answered it, when requests are "expected", that RTO counts an empty bin as
down only then, that a fault window's availability counts the requests the application did not
send while they were expected, the per-region breakdown, and the scenario rules (no workload,
no setups, no client steps) with the refusal of a run that has no emulator to watch."""
import pytest

from regionlab.emulator.drill import DrillError, run
from regionlab.emulator.drill.report import LostWrites, build, recovery
from regionlab.emulator.drill.scenario import parse
from regionlab.emulator.drill.served import annotate, expected_per_bin, ops_of, served_ok

OUTAGE = [{"at_ms": 1000, "fault": {"type": "region_outage", "region": "East US"}, "as": "o"},
          {"at_ms": 2000, "heal": "o"}]
RULE = {"availability_min": 0.95, "hold_ms": 500, "stall_ms": 500}


def window(start_ms, *requests):
    return {"start_ms": start_ms, "requests": [
        {"region": r, "op": op, "status": st, "substatus": sub, "latency_ms_max": lat, "count": n}
        for r, op, st, sub, lat, n in requests]}


def steady(offset, until_ms, per_bin=5, region="East US"):
    return [window(offset + t, (region, "read", 200, 0, 2, per_bin)) for t in range(0, until_ms, 100)]


def test_served_is_what_the_service_did_not_refuse_for_its_own_reasons():
    served = [(200, 0), (201, 0), (304, 0), (404, 0), (400, 0), (409, 0), (412, 0), (401, 0)]
    failed = [(503, 0), (500, 0), (408, 0), (410, 21001), (429, 3200), (449, 0), (403, 3), (404, 1002),
              (201, "drop_after_apply"), (200, "reset")]
    assert all(served_ok(s, sub) for s, sub in served) and not any(served_ok(s, sub) for s, sub in failed)


def test_requests_end_mid_window_on_the_drill_clock_and_failed_ones_are_served_by_no_region():
    ops = ops_of([window(10_100, ("East US", "write", 201, 0, 8, 2), ("East US", "write", 503, 0, 0, 1))], 10_000)
    assert [(o.start_ms, o.latency_ms, o.ok, o.region, o.answered_by) for o in ops] == [
        (142.0, 8.0, True, "East US", "East US"), (142.0, 8.0, True, "East US", "East US"),
        (150.0, 0.0, False, None, "East US")]


def test_requests_are_expected_when_the_application_sent_one_per_bin_before_the_first_step():
    busy = ops_of(steady(0, 1000, per_bin=3), 0)
    assert expected_per_bin(busy, 1000, 100) == 3.0
    sparse = ops_of([window(0, ("East US", "read", 200, 0, 1, 2))], 0)        # 2 requests in 1 s
    assert expected_per_bin(sparse, 1000, 100) == 0.0 and expected_per_bin(busy, 0, 100) == 0.0


def test_an_empty_bin_is_down_for_rto_only_while_requests_are_expected():
    # Nothing at all from 1.0 s to 1.9 s, then the application is back.
    ops = ops_of(steady(0, 1000) + steady(1900, 1100), 0)
    # Idle bins are no stall: the first hold-long run with completions counts, 400 ms too early.
    assert recovery(ops, 1000, 3000, RULE) == 500.0
    assert recovery(ops, 1000, 3000, RULE, expected_per_bin=5.0) == 900.0


def test_a_window_counts_the_requests_missing_while_expected_and_each_regions_replies():
    drill = parse({"duration_ms": 3000, "account": {"regions": ["East US", "East US 2"]}, "schedule": OUTAGE,
                   "assertions": {"faults": {"availability_min": 0.5}}})
    assert drill.served
    windows = steady(0, 1000) + [window(1000, ("East US", "write", 503, 0, 1, 2))] + steady(2000, 1000)
    ops = ops_of(windows, 0)
    report = annotate(build(drill, ops, LostWrites([], 0, []), [], 0.0, None, None,
                            expected_per_bin=expected_per_bin(ops, 1000, 100)), ops)
    w = report["faults"][0]
    assert (w["ops"], w["errors"], w["missing_requests"]) == (2, 2, 45)        # 9 empty bins of 5
    assert w["availability"] == 0.0 and report["passed"] is False
    assert report["recovery"]["expected_per_bin"] == 5.0 and w["rto_ms"] == 1000.0
    assert w["requests_by_region"] == {"East US": {"write": {"503/0": 2}}}
    assert report["phases"][0]["requests_by_region"] == {"East US": {"read": {"200/0": 50}}}
    assert report["workload"]["served"] is True


def test_only_a_scenario_without_workload_setups_or_client_steps_is_served():
    assert parse({"schedule": OUTAGE}).served
    assert not parse({"workload": {}, "schedule": OUTAGE}).served
    assert not parse({"setups": [{"name": "a"}, {"name": "b"}], "schedule": OUTAGE}).served
    assert not parse({"schedule": [{"at_ms": 10, "client": {"restart": True}}]}).served


def test_a_served_drill_needs_a_running_emulator():
    with pytest.raises(DrillError, match="--control URL"):
        run({"schedule": OUTAGE})
