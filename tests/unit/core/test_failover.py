"""Proves the failover promises in virtual time (the real core, ManualClock + Scheduler): a forced
failover lists every acknowledged write it discards, exactly, however far the target lagged
(acknowledged - readable - listed = {} and listed & readable = {}), each under the region that
accepted it; a region that lagged past the retained log is backfilled by a snapshot and
converges; under Strong a forced failover loses no acknowledged write (the target is first
brought up to the global LSN, or a manual one is refused and a service-managed one waits); and a
service-managed failover needs the write region down for the detection delay without a break."""
import pytest

from regionlab.emulator.core.changefeed import all_versions
from regionlab.emulator.core.errors import CosmosError
from regionlab.emulator.core.link import ACTIVE, CUT
from regionlab.emulator.core.replica_set import LOG_RETAINED_COMMITS_MAX

from core_world import World

EAST, EAST2, WEST = "East US", "East US 2", "West US"
NO_LAG = {(a, b): 0 for a in (EAST, EAST2, WEST) for b in (EAST, EAST2, WEST) if a != b}
SMALL_LOG = 50                      # a retained log short enough for a test to write past it quickly


def world(**config):
    config.setdefault("lag_ms", NO_LAG)
    config.setdefault("partition_count", 1)
    w = World(**config)
    return w, w.container()


def acked_write(w, c, op, id, *args, region=None):
    """One write that its region's quorum acknowledged: (id, LSN) names it."""
    status, version, lsn, rs = w.write(c, "p", op, *args, region=region)
    assert lsn <= rs.committed_lsn
    return id, lsn


def readable(c, region: str) -> set:
    """(id, LSN of the write it shows) of every item a reader in region sees now."""
    rs = c.partitions[0].replica_sets[region]
    return {(v.key[1], v.lsn) for v in rs.store.scan(rs.committed_lsn)}


def listed(w) -> set:
    return {(e["id"], e["lsn"]) for e in w.account.lost_writes}


def cut(w, a: str, b: str) -> None:
    w.account.links[(a, b)].set_state(CUT)


def converged(c) -> None:
    """Every region holds the same history and state, and every replica applied all of it."""
    sets = list(c.partitions[0].replica_sets.values())
    for rs in sets:
        assert {r.applied_lsn for r in rs.replicas} == {rs.lsn} == {rs.committed_lsn}
        assert (rs.lsn, rs.epoch, readable(c, rs.region)) == \
               (sets[0].lsn, sets[0].epoch, readable(c, sets[0].region))


# ---- every discarded acknowledged write is listed, exactly --------------------------------------
def _lose_writes_past_the_log(w, c, lagged: int) -> tuple[set, set]:
    """Writes East2 has, then `lagged` acknowledged writes it lacks (creates, and replaces and
    deletes of what it has), then a forced failover to East2: (acknowledged, readable after)."""
    acked = {acked_write(w, c, "create", f"kept{i}", {"id": f"kept{i}", "pk": "p"}) for i in range(20)}
    w.settle()
    cut(w, EAST, EAST2)
    acked.add(acked_write(w, c, "replace", "kept0", "kept0", {"id": "kept0", "pk": "p", "v": 1}))
    acked.add(acked_write(w, c, "delete", "kept1", "kept1"))
    for i in range(lagged - 2):
        acked.add(acked_write(w, c, "create", f"lost{i}", {"id": f"lost{i}", "pk": "p"}))
    f = w.account.failover(EAST2, forced=True)
    w.settle()
    assert f.lost == len(w.account.lost_writes)
    return acked, readable(c, EAST2)


def test_a_forced_failover_lists_every_write_the_target_lagged_past_the_real_retained_log():
    w, c = world()
    lagged = LOG_RETAINED_COMMITS_MAX + 2_000
    acked, after = _lose_writes_past_the_log(w, c, lagged)
    lost = listed(w)
    assert len(lost) == len(w.account.lost_writes) == lagged      # each listed once
    assert acked - after - lost == set()
    assert lost & after == set()
    assert all(readable(c, region) == after for region in (EAST, WEST))


def test_the_listing_is_exact_with_a_short_retained_log_and_names_each_operation():
    w, c = world(log_retained_commits=SMALL_LOG)
    acked, after = _lose_writes_past_the_log(w, c, SMALL_LOG * 3)
    lost = listed(w)
    assert acked - after - lost == set() and lost & after == set() and len(lost) == SMALL_LOG * 3
    ops = {e["id"]: e["operation"] for e in w.account.lost_writes}
    assert (ops["kept0"], ops["kept1"], ops["lost0"]) == ("replace", "delete", "create")
    assert [e["lsn"] for e in w.account.lost_writes] == sorted(e["lsn"] for e in w.account.lost_writes)
    assert ("kept0", 1) in after and ("kept1", 2) in after         # the versions before the lost writes
    converged(c)


def test_a_region_down_at_the_failover_is_cut_on_recovery_and_its_copies_are_listed_once():
    w, c = world(log_retained_commits=SMALL_LOG)
    cut(w, EAST, EAST2)
    acked = {acked_write(w, c, "create", f"x{i}", {"id": f"x{i}", "pk": "p"}) for i in range(SMALL_LOG * 2)}
    w.settle()
    w.account.set_region_state(WEST, "down")      # holds every write, and is cut only when it returns
    w.account.failover(EAST2, forced=True)
    assert listed(w) == acked and len(w.account.lost_writes) == len(acked)
    w.account.set_region_state(WEST, "up")
    w.account.links[(EAST, EAST2)].set_state(ACTIVE)
    w.settle()
    assert len(w.account.lost_writes) == len(acked)
    converged(c)


def test_lost_writes_name_the_region_that_accepted_them():
    w, c = world()
    acked_write(w, c, "create", "a", {"id": "a", "pk": "p"})
    w.account.failover(EAST2)                     # graceful: East US 2 takes the writes
    w.settle()
    cut(w, EAST2, WEST)
    lost = {acked_write(w, c, "create", f"b{i}", {"id": f"b{i}", "pk": "p"}, region=EAST2) for i in range(3)}
    w.settle()                                    # East US has them too (its link is active)
    w.account.failover(WEST, forced=True)
    assert listed(w) == lost
    assert {e["region"] for e in w.account.lost_writes} == {EAST2}


# ---- a region that lagged past the retained log still catches up --------------------------------
@pytest.mark.parametrize("kind", ["graceful", "forced"])
def test_a_region_that_lagged_past_the_retained_log_is_backfilled_by_a_snapshot(kind):
    w, c = world(log_retained_commits=SMALL_LOG)
    for i in range(10):
        w.write(c, "p", "create", {"id": f"old{i}", "pk": "p"})
    w.settle()
    cut(w, EAST, WEST)                            # and it stays cut: West US hears only from East US 2
    w.write(c, "p", "delete", "old0")             # a key West US holds is deleted across the gap,
    w.write(c, "p", "replace", "old1", {"id": "old1", "pk": "p", "v": 2})   # another replaced
    for i in range(SMALL_LOG * 3):
        w.write(c, "p", "create", {"id": f"new{i}", "pk": "p"})
    w.settle()
    if kind == "forced":
        w.account.set_region_state(EAST, "down")  # and never comes back
    w.account.failover(EAST2, forced=kind == "forced")
    w.settle()
    w.write(c, "p", "create", {"id": "after", "pk": "p"}, region=EAST2)
    w.settle()
    west, east2 = (c.partitions[0].replica_sets[r] for r in (WEST, EAST2))
    assert west.lsn == east2.lsn == west.committed_lsn and west.store.count_live == SMALL_LOG * 3 + 10
    assert readable(c, WEST) == readable(c, EAST2)
    assert w.read(c, WEST, "p", "old0")[0] is None and w.read(c, WEST, "p", "old1")[0]["v"] == 2
    assert w.account.lost_writes == []


def test_after_a_snapshot_the_all_versions_feed_refuses_positions_it_no_longer_has():
    w, c = world(log_retained_commits=SMALL_LOG)
    cut(w, EAST, WEST)
    for i in range(SMALL_LOG * 2):
        w.write(c, "p", "create", {"id": f"i{i}", "pk": "p"})
    w.settle()
    w.account.failover(EAST2)
    w.settle()
    west = c.partitions[0].replica_sets[WEST]
    assert west.lsn == SMALL_LOG * 2 and len(west.log) == 0     # installed by snapshot: no commits retained
    with pytest.raises(CosmosError) as e:
        all_versions(west, 0, west.committed_lsn, 100)
    assert e.value.status == 400 and "older than the retained log" in e.value.message
    assert all_versions(west, west.lsn, west.lsn, 100) == ([], west.lsn)


@pytest.mark.slow
def test_the_real_retained_log_backfills_fifteen_thousand_items():
    w, c = world()
    cut(w, EAST, WEST)
    for i in range(15_000):
        w.write(c, "p", "create", {"id": f"i{i}", "pk": "p"})
    w.settle()
    w.account.set_region_state(EAST, "down")
    w.account.failover(EAST2, forced=True)
    w.settle()
    assert c.partitions[0].replica_sets[WEST].store.count_live == 15_000
    assert readable(c, WEST) == readable(c, EAST2)


def test_a_snapshot_waits_for_a_cut_link_and_keeps_its_place_before_later_commits():
    w, c = world(log_retained_commits=SMALL_LOG)
    cut(w, EAST, WEST)
    for i in range(SMALL_LOG * 2):
        w.write(c, "p", "create", {"id": f"i{i}", "pk": "p"})
    w.settle()
    cut(w, EAST2, WEST)
    w.account.failover(EAST2)
    w.settle()
    for i in range(5):
        w.write(c, "p", "create", {"id": f"later{i}", "pk": "p"}, region=EAST2)
    w.settle()
    assert c.partitions[0].replica_sets[WEST].lsn == 0
    w.account.links[(EAST2, WEST)].set_state(ACTIVE)
    w.settle()
    assert readable(c, WEST) == readable(c, EAST2) and len(readable(c, WEST)) == SMALL_LOG * 2 + 5


# ---- Strong loses nothing ----------------------------------------------------------------------
def strong_world(**config):
    return world(consistency="Strong", **config)


def strong_write(w, c, id: str, region: str = EAST):
    """A Strong write, acknowledged once a majority of regions committed it: (id, LSN)."""
    status, version, lsn, rs = w.write(c, "p", "create", {"id": id, "pk": "p"}, region=region)
    w.settle()
    assert lsn <= rs.partition.global_lsn, "not acknowledged"
    return id, lsn


def test_strong_forced_failover_first_brings_the_target_up_to_the_global_lsn():
    w, c = strong_world(log_retained_commits=SMALL_LOG)
    cut(w, EAST, EAST2)                           # acknowledged by East US + West US, not East US 2
    acked = {strong_write(w, c, f"s{i}") for i in range(SMALL_LOG * 2)}
    w.account.set_region_state(EAST, "down")
    f = w.account.failover(EAST2, forced=True)
    w.settle()
    assert f.lost == 0 and w.account.lost_writes == []
    assert acked <= readable(c, EAST2)
    assert strong_write(w, c, "after", region=EAST2)


def test_strong_manual_forced_failover_is_refused_when_no_reachable_region_holds_the_global_lsn():
    w, c = strong_world()
    cut(w, EAST, EAST2)
    acked = {strong_write(w, c, f"s{i}") for i in range(5)}
    cut(w, WEST, EAST2)
    rs = c.partitions[0].replica_sets
    before = (w.account.write_regions, {r: s.lsn for r, s in rs.items()}, len(w.account.failovers))
    with pytest.raises(CosmosError) as e:
        w.account.failover(EAST2, forced=True)
    assert e.value.status == 400
    assert "losing acknowledged writes" in e.value.message and "West US (its link to East US 2 is cut)" in e.value.message
    assert before == (w.account.write_regions, {r: s.lsn for r, s in rs.items()}, len(w.account.failovers))
    w.account.links[(WEST, EAST2)].set_state(ACTIVE)
    assert w.account.failover(EAST2, forced=True).lost == 0
    assert acked <= readable(c, EAST2)


def test_strong_service_managed_failover_waits_until_a_region_holding_the_global_lsn_is_back():
    w, c = strong_world(detection_delay_ms=1_000)
    cut(w, EAST, EAST2)
    acked = {strong_write(w, c, f"s{i}") for i in range(5)}
    w.account.set_region_state(WEST, "down")
    w.account.set_region_state(EAST, "down")
    w.advance(60_000)
    assert w.account.failovers == [] and w.account.write_regions == (EAST,)
    assert w.account.describe_waiting_failover()["region"] == EAST
    w.account.set_region_state(WEST, "up")        # holds the global LSN: now it can go ahead
    w.settle()
    assert w.account.describe_waiting_failover() is None
    [f] = w.account.failovers
    assert (f.target, f.lost, f.reason) == (EAST2, 0, "service-managed: East US down for 1000 ms")
    assert w.account.lost_writes == [] and acked <= readable(c, EAST2)


def test_strong_service_managed_failover_that_waits_is_called_off_when_the_write_region_recovers():
    w, c = strong_world(detection_delay_ms=1_000)
    cut(w, EAST, EAST2)
    acked = {strong_write(w, c, f"s{i}") for i in range(3)}
    w.account.set_region_state(WEST, "down")
    w.account.set_region_state(EAST, "down")
    w.advance(5_000)
    w.account.set_region_state(EAST, "up")
    w.account.set_region_state(WEST, "up")
    w.settle()
    assert w.account.failovers == [] and w.account.describe_waiting_failover() is None
    assert w.account.write_regions == (EAST,) and acked <= readable(c, EAST)


def test_strong_service_managed_failover_promotes_a_region_that_holds_the_global_lsn():
    w, c = strong_world(detection_delay_ms=1_000)
    cut(w, EAST, EAST2)
    cut(w, WEST, EAST2)                           # East US 2 cannot be brought up: West US is next
    acked = {strong_write(w, c, f"s{i}") for i in range(5)}
    w.account.set_region_state(EAST, "down")
    w.advance(1_000)
    [f] = w.account.failovers
    assert (f.target, f.lost) == (WEST, 0) and acked <= readable(c, WEST)


# ---- service-managed failover needs one continuous outage ----------------------------------------
def test_interrupted_outages_do_not_add_up_to_the_detection_delay():
    w, c = world(detection_delay_ms=10_000)
    t0 = w.now_ms
    w.account.set_region_state(EAST, "down")      # a 3 s outage
    w.until(t0 + 3_000)
    w.account.set_region_state(EAST, "up")
    w.until(t0 + 7_000)
    w.account.set_region_state(EAST, "down")      # and another one 7 s after the first began
    w.until(t0 + 16_999)
    assert w.account.failovers == [] and w.account.write_regions == (EAST,)
    w.until(t0 + 17_000)                          # 10 s of this outage without a break
    [f] = w.account.failovers
    assert (f.source, f.target, f.forced, f.started_ms) == (EAST, EAST2, True, t0 + 17_000)


def test_a_removed_write_region_s_pending_detection_does_nothing_and_timers_keep_running():
    """The write region goes down (its service-managed failover's detection starts), a manual
    forced failover moves writes away, and the old write region is removed before the detection
    delay ends: the detection timer finds no such region and does nothing. (It raised KeyError
    from inside the scheduler, which in the runtime leaves every later timer unrun; found by
    test_fast_path_oracle's core driver.)"""
    w, c = world(detection_delay_ms=1_000)
    t0 = w.now_ms
    w.account.set_region_state(EAST, "down")
    w.account.failover(EAST2, forced=True)
    w.account.remove_region(EAST)
    status, _, lsn, rs = w.write(c, "p", "create", {"id": "after", "pk": "p"})
    w.until(t0 + 2_000)                           # past the detection delay: the timer ran
    assert [r.name for r in w.account.regions] == [EAST2, WEST] and w.account.write_regions == (EAST2,)
    assert len(w.account.failovers) == 1         # the manual one only
    assert c.partitions[0].replica_sets[WEST].committed_lsn >= lsn     # replication went on
