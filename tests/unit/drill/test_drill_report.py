"""Proves the drill report's arithmetic on hand-made operations: percentiles (nearest rank),
phases cut at the steps, fault windows (heal, duration_ms, failover window clipped at the next
step), availability outside the windows, RTO, RPO attributed to the causing step, retries by
reason, hedged charge, breaker openings, throttle steps' windows, client steps' before/after, the
side-by-side comparison of setups, and the assertions' verdicts."""
from regionlab.emulator.drill.runner import as_run
from regionlab.emulator.drill.report import (LostWrites, build, fault_windows, percentile, phases, recovery,
                                             summarize, timeline)
from regionlab.emulator.drill.scenario import parse
from regionlab.emulator.drill.workload import Op, reason_class

SCHEDULE = [{"at_ms": 1000, "fault": {"type": "region_outage", "region": "East US"}, "as": "o"},
            {"at_ms": 3000, "heal": "o"},
            {"at_ms": 5000, "failover": {"region": "East US 2", "kind": "forced"}, "window_ms": 4000},
            {"at_ms": 7000, "fault": {"type": "latency", "region": "East US", "delay_ms": 9, "duration_ms": 500}}]


def op(t, ok=True, latency=10.0, kind="read", region="East US", retries=(), charge=1.0, hedged=0.0, item=None):
    return Op(t, kind, 200 if ok else 503, 0, latency, region if ok else None, list(retries), charge, hedged, item)


def test_percentile_is_nearest_rank():
    values = list(range(1, 101))
    assert percentile(values, 50) == 50 and percentile(values, 99) == 99 and percentile(values, 100) == 100
    assert percentile([7], 99) == 7 and percentile([], 99) == 0


def test_windows_end_at_heal_duration_or_next_step():
    w = fault_windows(SCHEDULE, 10000)
    assert [(x["start_ms"], x["end_ms"]) for x in w] == [(1000, 3000), (5000, 7000), (7000, 7500)]


def test_phases_cut_at_every_step():
    p = phases(SCHEDULE, 10000)
    assert [(x["start_ms"], x["end_ms"]) for x in p] == [(0, 1000), (1000, 3000), (3000, 5000), (5000, 7000),
                                                         (7000, 10000)]
    assert p[0]["name"] == "steady state" and p[2]["name"] == "heal o"


def test_summary_counts_errors_retries_regions_and_charge():
    ops = [op(0, retries=["429/3200 throttled"], charge=2, hedged=1), op(10, ok=False), op(20, region="West US"),
           Op(30, "read", 404, 0, 1.0, "East US")]              # an absent key is a served read
    s = summarize(ops, 1000)
    assert s["ops"] == 4 and s["errors"] == 1 and s["errors_by_status"] == {"503/0": 1}
    assert s["availability"] == 0.75 and s["ops_per_s"] == 4.0
    assert s["retries_by_reason"] == {"429/3200 throttled": 1}
    assert s["served_by"] == {"East US": 2, "West US": 1}
    assert s["request_charge"] == 4.0 and s["hedged_extra_charge"] == 1.0


def test_reason_class_drops_the_details():
    assert reason_class("429/3200 throttled: retry-after 100 ms (retry 1/9)") == "429/3200 throttled"
    assert reason_class("hedge after 500 ms") == "hedge after 500 ms"


RULE = {"availability_min": 0.95, "hold_ms": 500, "stall_ms": 300}


def steady(t0, t1, ok=True, every=20):
    return [op(t, ok=ok, latency=5.0) for t in range(t0, t1, every)]


def test_rto_counts_a_stall_with_no_completions_as_down():
    # Every operation from 1000 ms is held until 1800 ms and then succeeds: nothing failed, but
    # nothing completed for 800 ms (a graceful failover's drain).
    held = [op(t, latency=1800.0 - t) for t in range(1000, 1800, 20)]
    assert recovery(steady(0, 1000) + held + steady(1800, 4000), 1000, 4000, RULE, 100) == 800.0


def test_rto_waits_until_the_success_rate_holds():
    ops = steady(0, 1000) + steady(1000, 1500, ok=False) + steady(1500, 4000)
    assert recovery(ops, 1000, 4000, RULE, 100) == 500.0
    dotted = steady(0, 1000) + [op(t, ok=t % 200 == 0, latency=5.0) for t in range(1000, 2000, 20)] + steady(2000, 4000)
    assert recovery(dotted, 1000, 4000, RULE, 100) == 1000.0    # a success now and then is not recovery


def test_rto_is_zero_when_nothing_changed_and_none_when_never_back_within_the_drill():
    assert recovery(steady(0, 4000), 1000, 4000, RULE, 100) == 0.0
    assert recovery(steady(0, 1000) + steady(1000, 4000, ok=False), 1000, 4000, RULE, 100) is None
    late = steady(0, 1000) + steady(1000, 3700, ok=False) + steady(3700, 4000)
    assert recovery(late, 1000, 4000, RULE, 100) is None        # back for 300 ms < hold_ms at the end


def test_an_idle_workload_between_operations_is_no_stall():
    # One operation a second (a rate-limited workload): long gaps, but nothing was waiting.
    idle = [op(t) for t in range(0, 6000, 1000)]
    assert recovery(idle, 1000, 6000, RULE, 100) == 0.0
    held = idle[:1] + [op(1000, latency=900.0)] + idle[2:]       # one waits 900 ms for its answer
    assert recovery(held, 1000, 6000, RULE, 100) == 900.0


def test_slow_but_steady_completions_are_no_stall():
    # Four workers, each operation 250 ms (under stall_ms) and successful: bins without a
    # completion, but no gap longer than stall_ms, so nothing is down.
    slow = [op(t + w * 60, latency=250.0) for t in range(1000, 4000, 250) for w in range(4)]
    assert recovery(steady(0, 1000) + slow, 1000, 4000, RULE, 100) == 0.0


def test_timeline_rates_per_second():
    t = timeline([op(0), op(50, ok=False), op(150)], 1000)
    assert t[0]["ops"] == 2 and t[0]["errors"] == 1 and t[0]["ops_per_s"] == 20.0 and t[1]["ops"] == 1


def test_build_availability_outside_windows_rpo_and_assertions():
    drill = parse({"duration_ms": 10000, "schedule": SCHEDULE,
                   "account": {"regions": ["East US", "East US 2"]},
                   "assertions": {"availability_min": 0.9, "lost_writes_max": 1, "p99_ms_max": 50,
                                  "lost_writes_match": True}})
    ops = [op(t) for t in range(0, 10000, 100)] + [op(1500, ok=False), op(5500, ok=False)]
    lost = LostWrites(listed=[{"id": "w-1"}, {"id": "w-2"}], acked=10, acked_unreadable=["w-1"], listed_acked=["w-1"])
    start = 1_000_000.0
    failovers = [{"started_ms": start + 5002, "lost_writes": 2}]
    r = build(drill, ops, lost, failovers, start)
    assert r["outside_fault_windows"]["errors"] == 0 and r["outside_fault_windows"]["availability"] == 1.0
    assert [w["rpo_writes"] for w in r["faults"]] == [0, 2, 0]
    verdicts = {a["name"]: a["held"] for a in r["assertions"]}
    assert verdicts == {"availability outside fault windows": True, "p99 latency outside fault windows (ms)": True,
                        "lost writes (listed)": False, "every acknowledged unreadable write is listed": True}
    assert r["passed"] is False and r["total"]["errors"] == 2


def test_an_unreadable_write_that_is_not_listed_breaks_the_match():
    lost = LostWrites(listed=[], acked=3, acked_unreadable=["w-9"]).to_dict()
    assert lost["match"] is False and lost["unreadable_not_listed"] == ["w-9"]


def test_a_throttle_step_is_a_window_until_its_heal_and_a_client_step_is_none():
    schedule = [{"at_ms": 1000, "throttle": {"credits_per_s": 100}, "as": "c"}, {"at_ms": 2000, "heal": "c"},
                {"at_ms": 3000, "client": {"excluded_locations": []}}]
    w = fault_windows(schedule, 5000)
    assert [(x["start_ms"], x["end_ms"], x["label"]) for x in w] == [(1000, 2000, "throttle credits_per_s=100")]
    assert [p["name"] for p in phases(schedule, 5000)][-1] == "client: excluded_locations []"


def test_client_changes_compare_the_phases_around_the_step():
    drill = parse({"duration_ms": 6000, "account": {"regions": ["East US", "East US 2"]},
                   "schedule": [{"at_ms": 1000, "fault": {"type": "region_outage", "region": "East US"}, "as": "o"},
                                {"at_ms": 3000, "client": {"excluded_locations": []}, "label": "open"},
                                {"at_ms": 5000, "heal": "o"}]})
    ops = [op(t, ok=not 1000 <= t < 3000 or t % 400 == 0) for t in range(0, 6000, 100)]
    r = build(drill, ops, LostWrites([], 0, []), [], 0.0)
    [change] = r["client_changes"]
    assert change["label"] == "open" and change["at_ms"] == 3000
    assert change["availability_before"] == 0.25 and change["availability_after"] == 1.0
    assert r["in_fault_windows"]["ops"] == 40 and r["outside_fault_windows"]["ops"] == 20


def test_a_step_that_ran_late_cuts_its_phase_where_it_ran_to_the_fraction_of_a_millisecond():
    # The client step at 3000 ran at 3000.4: the operation started at 3000.2 went out with the old
    # options and is in the phase before it (rounded to 3000, it was counted after: a CI flake).
    drill = parse({"duration_ms": 6000, "account": {"regions": ["East US", "East US 2"]},
                   "schedule": [{"at_ms": 3000, "client": {"excluded_locations": ["East US 2"]}, "label": "x"},
                                {"at_ms": 3000, "client": {"restart": True}}]})
    run = as_run(drill, [3000.4, 3000.9])
    assert [s["at_ms"] for s in run.schedule] == [3000.4, 3000.4]
    ops = [op(0), op(3000.2, region="East US 2"), op(3000.6), op(4000)]
    r = build(run, ops, LostWrites([], 0, []), [], 0.0)
    assert [p["served_by"] for p in r["phases"]] == [{"East US": 1, "East US 2": 1}, {"East US": 2}]


def test_breaker_openings_are_counted():
    ops = [Op(0, "read", 200, 0, 1.0, "East US", breaker_opened=1), op(5)]
    assert summarize(ops, 1000)["breaker_opened"] == 1


def test_comparison_puts_each_setup_side_by_side():
    from regionlab.emulator.drill.comparison import combine
    drill = parse({"duration_ms": 4000, "account": {"regions": ["East US", "East US 2"]},
                   "setups": [{"name": "plain"}, {"name": "hedged", "client_options": {"availability_strategy": True}}],
                   "schedule": [{"at_ms": 1000, "fault": {"type": "latency", "region": "East US", "delay_ms": 5},
                                 "as": "s"}, {"at_ms": 3000, "heal": "s"}],
                   "assertions": {"availability_min": 0.9}})
    runs = []
    for setup, slow, hedged in ((drill.setups[0], 900.0, 0.0), (drill.setups[1], 510.0, 1.0)):
        ops = [op(t, latency=slow if 1000 <= t < 3000 else 5.0, hedged=hedged if 1000 <= t < 3000 else 0.0,
                  charge=1.0 + (hedged if 1000 <= t < 3000 else 0.0), ok=t != 1500 or not hedged)
               for t in range(0, 4000, 100)]
        one = drill.for_setup(setup)
        runs.append((setup, build(one, ops, LostWrites([], 3, []), [], 0.0), ops))
    r = combine(drill, runs)
    plain, hedged = r["comparison"]
    assert (plain["setup"], hedged["setup"]) == ("plain", "hedged")
    assert plain["p99_ms_in_fault_windows"] == 900.0 and hedged["p99_ms_in_fault_windows"] == 510.0
    assert plain["hedged_extra_charge"] == 0 and hedged["hedged_extra_charge"] == 20.0
    assert hedged["extra_ru_share"] == round(20 / 60, 4) and hedged["availability_in_fault_windows"] == 0.95
    assert r["total"]["ops"] == 80 and r["in_fault_windows"]["ops"] == 40
    assert [p["name"] for p in r["phases"]][:2] == ["[plain] steady state", "[plain] latency East US"]
    assert r["setups"][1]["client_options"] == {"availability_strategy": True}
    assert [a["name"] for a in r["assertions"]] == ["[plain] availability outside fault windows",
                                                    "[hedged] availability outside fault windows"]
    assert r["passed"] and r["lost_writes"]["acknowledged_writes"] == 6 and "timeline" not in r


def test_each_fault_window_has_its_own_figures_and_verdicts_and_a_step_expect_overrides():
    drill = parse({"duration_ms": 6000, "account": {"regions": ["East US", "East US 2"]},
                   "schedule": [{"at_ms": 1000, "fault": {"type": "region_outage", "region": "East US"}, "as": "o",
                                 "expect": {"availability_min": 0.1}},
                                {"at_ms": 3000, "heal": "o"},
                                {"at_ms": 4000, "failover": {"region": "East US 2"}, "window_ms": 1000}],
                   "assertions": {"faults": {"availability_min": 0.9, "rto_ms_max": 1500, "p99_ms_max": 100},
                                  "recovery": {"availability_min": 0.95, "hold_ms": 300, "stall_ms": 300},
                                  "steady_state": {"availability_min": 0.99}, "error_rate_max": 0.5}})
    ops = steady(0, 1000) + steady(1000, 3000, ok=False) + steady(3000, 6000)
    ops.append(op(900, latency=300.0))          # in flight when the outage began: counted in its window
    r = build(drill, ops, LostWrites([], 0, []), [], 0.0)
    outage, failover = r["faults"]
    assert outage["ops"] == 101 and outage["errors"] == 100 and outage["availability"] == round(1 / 101, 6)
    assert outage["rto_ms"] == 2000.0 and outage["rto_bin_ms"] == 100 and outage["p99_ms"] == 5.0
    assert failover["availability"] == 1.0 and failover["rto_ms"] == 0.0
    v = {a["name"]: a for a in r["assertions"]}
    assert v["availability in [region_outage East US]"]["limit"] == 0.1          # the step's own expect
    assert v["availability in [region_outage East US]"]["held"] is False
    assert v["RTO of [region_outage East US] (ms)"]["held"] is False
    assert v["availability in [graceful failover -> East US 2]"]["held"] is True
    assert v["availability before the first fault"]["held"] is True
    assert v["availability after the last fault window"]["held"] is True
    assert r["steady_state"]["after_last_fault"]["ops"] == 50                     # from 5000 ms
    assert v["error rate of the whole run"]["value"] == round(1 - r["total"]["availability"], 6)
    assert r["passed"] is False and r["ended"] == {"kind": "completed"}


def test_nothing_to_judge_is_not_judged_never_a_pass():
    drill = parse({"duration_ms": 2000, "account": {"regions": ["East US", "East US 2"]},
                   "schedule": [{"at_ms": 1000, "fault": {"type": "region_outage", "region": "East US"}}],
                   "assertions": {"lost_writes_max": 0, "lost_writes_match": True, "consistency_valid": True,
                                  "steady_state": {"availability_min": 0.99}}})
    reads = steady(0, 2000)
    checked = {"level": "Session", "valid": True, "writes": {}, "violation_count": 0, "violations": [],
               "unknown_writes": 0, "unknown_applied": 0}
    r = build(drill, reads, LostWrites([], 0, []), [], 0.0, checked)
    v = {a["name"]: a["held"] for a in r["assertions"]}
    assert v == {"lost writes (listed)": None, "every acknowledged unreadable write is listed": None,
                 "history checker (Session): no violation": None, "availability before the first fault": True,
                 "availability after the last fault window": None}    # the outage lasts to the end
    assert r["passed"] is True
    from regionlab.emulator.drill.table import render
    text = render(r)
    assert "n/a   lost writes (listed): not judged" in text and "PASS  lost writes" not in text
    assert "result: passed (4 not judged)" in text


def test_a_run_that_ended_early_does_not_pass():
    drill = parse({"duration_ms": 2000, "account": {"regions": ["East US", "East US 2"]}})
    ended = {"kind": "aborted", "reason": "stop condition: ...", "at_ms": 1500.0}
    r = build(drill, steady(0, 1500), LostWrites([], 0, []), [], 0.0, None, ended)
    assert r["passed"] is False and r["ended"] == ended


def test_recovered_in_window_means_back_before_the_fault_ended():
    drill = parse({"duration_ms": 6000, "account": {"regions": ["East US", "East US 2"]},
                   "schedule": [{"at_ms": 1000, "fault": {"type": "region_outage", "region": "East US"}, "as": "o",
                                 "expect": {"recovered_in_window": True, "rto_ms_max": 8000}},
                                {"at_ms": 3000, "heal": "o"}],
                   "assertions": {"recovery": {"availability_min": 0.95, "hold_ms": 300, "stall_ms": 300}}})
    outlasted = steady(0, 1000) + steady(1000, 3000, ok=False) + steady(3000, 6000)     # back only at the heal
    survived = steady(0, 1000) + steady(1000, 1500, ok=False) + steady(1500, 6000)      # back 500 ms in
    for ops, held in ((outlasted, False), (survived, True)):
        v = {a["name"]: a for a in build(drill, ops, LostWrites([], 0, []), [], 0.0)["assertions"]}
        assert v["[region_outage East US] recovered before its window ended"]["held"] is held
        assert v["RTO of [region_outage East US] (ms)"]["held"] is True


def test_a_run_interrupted_just_after_a_step_lasts_whole_milliseconds_past_it():
    # SIGINT at 300 ms, the step planned for 300 having run at 300.4: the report's timeline needs
    # an integer duration (a float one raised TypeError and lost the report of an interrupted run).
    drill = parse({"duration_ms": 60000, "account": {"regions": ["East US", "East US 2"]},
                   "schedule": [{"at_ms": 300, "fault": {"type": "region_outage", "region": "East US 2"}, "as": "out"},
                                {"at_ms": 50000, "heal": "out"}]})
    run = as_run(drill, [300.4], {"kind": "interrupted", "at_ms": 300.0, "reason": "SIGINT received"})
    assert run.duration_ms == 301 and isinstance(run.duration_ms, int)
    r = build(run, [op(0), op(300.6)], LostWrites([], 0, []), [], 0.0, ended={"kind": "interrupted", "at_ms": 300.0,
                                                                              "reason": "SIGINT received"})
    assert [p["name"] for p in r["phases"]] == ["steady state", "region_outage East US 2"]
