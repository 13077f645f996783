"""Proves each fault of the catalogue, and each kind of failover, does what docs/control-api.md
promises, by running it as a JSON scenario in the deterministic simulator (the real core in
virtual time, clients in every region) and checking both the history checker's verdict (no
violation) and the fault's own observable effect on the recorded history."""
import pytest

from regionlab.emulator.sim import SimConfig, run
from regionlab.emulator.sim.checker import WRITE_FS, final_positions, lineages

EAST, EAST2, WEST = "East US", "East US 2", "West US"


def scenario(schedule, seed=1, **settings):
    """Run a scenario, require a clean history, return (history, t0, lineages)."""
    settings.setdefault("steps", 300)
    settings.setdefault("clients", 6)
    settings.setdefault("consistency", "Session")
    result = run(seed, SimConfig.from_scenario({"schedule": schedule, **settings}))
    assert result.violations == [], result.violations[:5]
    h = result.history
    return h, h["start_ms"], lineages(h)


def ops(h, *, f=None, region=None, outcome=None, invoked=(None, None)):
    lo, hi = invoked
    return [o for o in h["ops"]
            if (f is None or o["f"] in f) and (region is None or o["region"] == region)
            and (outcome is None or o["outcome"] == outcome)
            and (lo is None or o["invoke_ms"] >= lo) and (hi is None or o["invoke_ms"] < hi)]


READS = ("read", "snapshot")


def includes(lins, read, write) -> bool:
    """Did `read` see `write` (is it in the log at the read's position)?"""
    lin = lins[(read["container"], read["partition"])]
    return lin.contains((write["epoch"], write["lsn"]), (read["epoch"], read["lsn"]))


def same_partition(a, b) -> bool:
    return (a["container"], a["partition"]) == (b["container"], b["partition"])


def test_region_outage_refuses_the_region_and_recovery_catches_up():
    h, t0, lins = scenario([{"at_ms": 500, "fault": {"type": "region_outage", "region": WEST}, "as": "out"},
                            {"at_ms": 2500, "heal": "out"}])
    during = ops(h, region=WEST, invoked=(t0 + 500, t0 + 2500))
    assert during and all(o["outcome"] != "ok" and o["status"] == 503 for o in during)
    acked = ops(h, f=WRITE_FS, outcome="ok", invoked=(t0 + 500, t0 + 2500))
    assert acked, "writes go on in the write region during a read region's outage"
    later = ops(h, f=READS, region=WEST, outcome="ok", invoked=(t0 + 2700, None))
    assert later
    for r in later:            # caught up: everything acknowledged during the outage is there
        assert all(includes(lins, r, w) for w in acked if same_partition(r, w))


def test_link_cut_holds_replication_back_and_the_heal_drains_it_in_order():
    h, t0, lins = scenario([{"at_ms": 300, "fault": {"type": "link_cut", "from": EAST, "to": WEST,
                                                      "one_way": True}, "as": "cut"},
                            {"at_ms": 1800, "heal": "cut"}])
    written_during = ops(h, f=WRITE_FS, outcome="ok", invoked=(t0 + 300, t0 + 1800))
    cut_reads = ops(h, f=READS, region=WEST, outcome="ok", invoked=(t0 + 300, t0 + 1800))
    assert written_during and cut_reads
    for r in cut_reads:        # nothing crosses a cut link
        assert not any(includes(lins, r, w) for w in written_during if same_partition(r, w))
    healed_reads = ops(h, f=READS, region=WEST, outcome="ok", invoked=(t0 + 2000, None))
    assert healed_reads
    for r in healed_reads:     # the backlog arrived (the checker saw every read as a prefix)
        assert all(includes(lins, r, w) for w in written_during if same_partition(r, w))


def test_link_lag_delays_exactly_that_link():
    lag_ms = 800
    h, t0, lins = scenario([{"at_ms": 0, "fault": {"type": "link_lag", "from": EAST, "to": WEST,
                                                    "lag_ms": lag_ms, "one_way": True}}], jitter_ms=0)
    writes = [w for w in h["ops"] if w["f"] in WRITE_FS and w.get("fate") == "committed"]
    west = ops(h, f=READS, region=WEST, outcome="ok")
    assert west
    for r in west:
        for w in writes:
            if same_partition(r, w) and includes(lins, r, w):
                assert r["complete_ms"] - w["invoke_ms"] >= lag_ms     # served at completion
    east2 = ops(h, f=READS, region=EAST2, outcome="ok")
    assert any(includes(lins, r, w) and r["complete_ms"] - w["invoke_ms"] < lag_ms
               for r in east2 for w in writes if same_partition(r, w)), "East US 2 is not lagged"


@pytest.mark.parametrize("consistency", ["Session", "Strong"])
def test_primary_crash_fails_writes_until_an_election_and_loses_nothing_acknowledged(consistency):
    election_ms = 300
    h, t0, _ = scenario([{"at_ms": 700, "fault": {"type": "primary_crash", "region": EAST}, "as": "crash"},
                         {"at_ms": 2500, "heal": "crash"}],
                        consistency=consistency, election_ms=election_ms, intra_region_delay_ms=20)
    electing = ops(h, f=WRITE_FS, region=EAST, invoked=(t0 + 700, t0 + 700 + election_ms))
    assert electing and all(o["outcome"] == "fail" and o["status"] == 503 for o in electing)
    assert ops(h, f=WRITE_FS, region=EAST, outcome="ok", invoked=(t0 + 700 + election_ms, t0 + 2500))
    assert h["lost_writes"] == []


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_strong_primary_crash_discarding_a_tail_acknowledges_none_of_it(seed):
    """Three slow secondaries leave an unreplicated tail at the crash: the election discards it,
    and those Strong writes must be told so (they once were acknowledged when a later write
    reused their LSN)."""
    slow = [{"at_ms": 0, "fault": {"type": "replica_slow", "region": EAST, "replica": i, "delay_ms": 400}}
            for i in (1, 2, 3)]
    h, t0, _ = scenario(slow + [{"at_ms": 700, "fault": {"type": "primary_crash", "region": EAST}, "as": "c"},
                                {"at_ms": 2500, "heal": "c"}],
                        seed=seed, consistency="Strong", intra_region_delay_ms=0, election_ms=100, clients=8)
    discarded = [o for o in h["ops"] if o["f"] in WRITE_FS and o.get("fate") == "discarded"]
    assert discarded and all(o["outcome"] != "ok" for o in discarded)


@pytest.mark.parametrize("seed", [9, 10, 11])
def test_strong_reads_under_replication_lag_are_linearizable(seed):
    """Both links out of the write region lag: a write waits ~lag_ms for a majority, and strong
    reads everywhere are served at the global LSN, never above it (the checker's strong and
    prefix checks; seed 9 once read versions the store had already pruned)."""
    lag = [{"at_ms": 0, "fault": {"type": "link_lag", "from": EAST, "to": r, "lag_ms": 400, "one_way": True}}
           for r in (EAST2, WEST)]
    h, t0, lins = scenario(lag, seed=seed, consistency="Strong", clients=9, keys=2, containers=1, partitions=1)
    acked = ops(h, f=WRITE_FS, outcome="ok")
    assert acked and all(o["complete_ms"] - o["invoke_ms"] >= 400 for o in acked)
    strong = [o for o in ops(h, f=READS, outcome="ok") if o["consistency"] == "Strong"]
    assert {o["region"] for o in strong} == {EAST, EAST2, WEST}


def test_replica_crash_fails_writes_only_without_a_quorum():
    h, t0, _ = scenario([{"at_ms": 300, "fault": {"type": "replica_crash", "region": EAST, "replica": 1}},
                         {"at_ms": 1000, "fault": {"type": "replica_crash", "region": EAST, "replica": 2},
                          "as": "second"},
                         {"at_ms": 2000, "heal": "second"}])
    assert ops(h, f=WRITE_FS, outcome="ok", invoked=(t0 + 300, t0 + 1000)), "3 of 4 is a quorum"
    no_quorum = ops(h, f=WRITE_FS, region=EAST, invoked=(t0 + 1000, t0 + 2000))
    assert no_quorum and all(o["outcome"] == "fail" and o["status"] == 503 for o in no_quorum)
    assert ops(h, f=WRITE_FS, outcome="ok", invoked=(t0 + 2000, None))


def test_replica_slow_delays_the_quorum_acknowledgement():
    delay_ms = 300
    slow = [{"at_ms": 0, "fault": {"type": "replica_slow", "region": EAST, "replica": i, "delay_ms": delay_ms}}
            for i in (1, 2)]
    h, t0, _ = scenario(slow, intra_region_delay_ms=0)
    acked = ops(h, f=WRITE_FS, outcome="ok")
    assert acked
    # The quorum is 3 of 4: the primary, the fast secondary and one of the slow ones.
    assert all(o["complete_ms"] - o["invoke_ms"] >= delay_ms for o in acked)


def test_graceful_failover_moves_writes_and_loses_nothing():
    h, t0, _ = scenario([{"at_ms": 800, "failover": {"region": EAST2, "kind": "graceful"}},
                         {"at_ms": 2500, "failover": {"region": EAST, "kind": "graceful"}}])
    assert [(f["to"], f["kind"], f["state"]) for f in h["failovers"]] == \
        [(EAST2, "graceful", "completed"), (EAST, "graceful", "completed")]
    assert h["lost_writes"] == []
    forbidden = ops(h, f=WRITE_FS, outcome="fail", invoked=(t0 + 800, None))
    assert any(o["status"] == 403 and o["substatus"] == 3 for o in forbidden), "old write region refuses: 403/3"
    assert ops(h, f=WRITE_FS, region=EAST2, outcome="ok", invoked=(t0 + 800, t0 + 2500))


def check_losses_exact(h, lins) -> list:
    """Every lost-writes entry names one write, and the writes listed lost are exactly the
    committed writes missing from the final history. Returns the lost ops."""
    lost_events = [e for e in h["events"] if e["kind"] == "lost"]
    assert len(lost_events) == len(h["lost_writes"])
    assert all(e["op"] is not None for e in lost_events)
    by_id = {o["id"]: o for o in h["ops"]}
    for e in lost_events:
        o = by_id[e["op"]]
        assert (o["container"], o["partition"], o["lsn"], o["key"]) == \
            (e["container"], e["partition"], e["lsn"], e["key"])
    finals = final_positions(h["final"])
    vanished = {o["id"] for o in h["ops"] if o["f"] in WRITE_FS and o.get("fate") == "committed"
                and not lins[(o["container"], o["partition"])].contains((o["epoch"], o["lsn"]),
                                                                        finals[(o["container"], o["partition"])])}
    listed = {e["op"] for e in lost_events}
    assert vanished <= listed
    assert {i for i in listed if by_id[i].get("fate") == "committed"} == vanished
    return [by_id[i] for i in sorted(listed)]


def test_forced_failover_loses_what_the_target_lacked_and_lists_it_exactly():
    h, t0, lins = scenario([{"at_ms": 200, "fault": {"type": "link_cut", "from": EAST, "to": EAST2,
                                                      "one_way": True}, "as": "cut"},
                            {"at_ms": 1200, "failover": {"region": EAST2, "kind": "forced"}},
                            {"at_ms": 1500, "heal": "cut"}])
    (f,) = h["failovers"]
    assert (f["kind"], f["to"]) == ("forced", EAST2) and f["lost_writes"] == len(h["lost_writes"]) > 0
    lost = check_losses_exact(h, lins)
    assert any(o["outcome"] == "ok" for o in lost), "acknowledged writes of the window are lost, and listed"
    assert all(t0 + 200 <= o["invoke_ms"] < t0 + 1200 for o in lost)


def test_service_managed_failover_after_the_detection_delay():
    detection_ms = 1500
    h, t0, lins = scenario([{"at_ms": 500, "fault": {"type": "region_outage", "region": EAST}, "as": "out"},
                            {"at_ms": 4000, "heal": "out"}], detection_delay_ms=detection_ms)
    (f,) = h["failovers"]
    assert (f["from"], f["to"], f["kind"]) == (EAST, EAST2, "forced")
    assert f["reason"].startswith("service-managed") and f["started_ms"] == t0 + 500 + detection_ms
    assert not ops(h, f=WRITE_FS, outcome="ok", invoked=(t0 + 500, t0 + 500 + detection_ms))
    assert ops(h, f=WRITE_FS, region=EAST2, outcome="ok", invoked=(t0 + 500 + detection_ms, None))
    check_losses_exact(h, lins)


def test_a_scenario_is_the_same_from_json_text_and_from_data():
    import json
    data = {"partitions": 2, "steps": 120,
            "schedule": [{"at_ms": 100, "fault": {"type": "link_cut", "from": EAST, "to": WEST}, "as": "c"},
                         {"at_ms": 600, "heal": "c"}]}
    a = run(5, SimConfig.from_scenario(data))
    b = run(5, SimConfig.from_scenario(json.dumps(data)))
    assert a.history_json() == b.history_json() and a.ok


@pytest.mark.parametrize("mode", ["refuse", "reset", "unavailable", "blackhole"])
def test_every_region_outage_mode_is_the_same_down_region_to_the_simulator(mode):
    """The simulator has no sockets: each mode is accepted, recorded with the fault, and runs
    exactly as the default mode does."""
    def outage(**extra):
        return [{"at_ms": 500, "fault": {"type": "region_outage", "region": WEST, **extra}, "as": "out"},
                {"at_ms": 2500, "heal": "out"}]
    h, _, _ = scenario(outage(mode=mode))
    faults = [e for e in h["events"] if e.get("kind") == "fault"]
    assert [e["spec"]["mode"] for e in faults] == [mode] and "refused" not in faults[0]
    plain, _, _ = scenario(outage())
    assert h["ops"] == plain["ops"]


def test_a_scenario_with_an_unknown_outage_mode_is_refused_before_it_runs():
    from regionlab.emulator.sim.scenario import ScenarioError, parse
    with pytest.raises(ScenarioError, match="mode 'sideways' is not one of refuse, reset, unavailable, blackhole"):
        parse([{"at_ms": 0, "fault": {"type": "region_outage", "region": WEST, "mode": "sideways"}}])


def test_direct_mode_faults_run_in_the_simulator_and_crashed_nodes_stop_writes():
    """node_crash downs every replica on the node (three of five nodes: every replica set loses
    at least two replicas and its write quorum, so writes in the write region fail until the
    heal); replica_move and blocked direct
    ports change only addresses, so the gateway's clients see nothing; every promise holds."""
    h, t0, _ = scenario([
        {"at_ms": 300, "fault": {"type": "replica_move", "region": EAST, "replica": 1}, "as": "move"},
        {"at_ms": 400, "fault": {"type": "direct_ports_blocked"}, "as": "blocked"},
        {"at_ms": 500, "fault": {"type": "node_crash", "region": EAST, "node": 0}, "as": "n0"},
        {"at_ms": 500, "fault": {"type": "node_crash", "region": EAST, "node": 1}, "as": "n1"},
        {"at_ms": 500, "fault": {"type": "node_crash", "region": EAST, "node": 2}, "as": "n2"},
        {"at_ms": 2000, "heal": "n0"}, {"at_ms": 2000, "heal": "n1"}, {"at_ms": 2000, "heal": "n2"},
        {"at_ms": 2500, "heal": "move"}, {"at_ms": 2500, "heal": "blocked"}],
        nodes_per_region=5, auto_failover=False)
    injected = [e for e in h["events"] if e["kind"] == "fault"]
    assert len(injected) == 5 and all("id" in e for e in injected), injected
    during = ops(h, f=WRITE_FS, region=EAST, invoked=(t0 + 600, t0 + 2000))
    assert during and all(o["outcome"] != "ok" for o in during)
    assert ops(h, f=WRITE_FS, region=EAST, outcome="ok", invoked=(t0 + 2600, None))
