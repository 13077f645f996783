"""Proves throttle.py admits exactly what fits each partition's per-region RU budget (split from
manual, autoscale and shared offers; burst capacity; serverless ceilings), the account-wide credit
window (1000/s, 50009 after), and throttle storms, and that a refused request changes nothing:
pinned examples in virtual time, plus a hypothesis state machine that drives real writes, reads
and queries through Writer -> charge -> admit -> commit with random budgets, sizes and clock
jumps and checks every invariant of the module docstring against a dict model of the items."""
import pytest

from emulator.core import throttle as th
from emulator.core.errors import CosmosError
from emulator.core.throttle import ThrottleConfig

from core_world import World

EAST, WEST = "East US", "West US"


def world(**throttle) -> World:
    return World(throttle=ThrottleConfig(**throttle))


def refused(fn, *args) -> CosmosError:
    with pytest.raises(CosmosError) as e:
        fn(*args)
    assert e.value.status == 429
    return e.value


def at_window_start(w: World, plus_ms: int = 0) -> None:
    """Move the clock to the start of the next window (plus plus_ms)."""
    w.advance(th.WINDOW_MS - w.now_ms % th.WINDOW_MS + plus_ms)


# ---- budgets ---------------------------------------------------------------------------------
def test_budget_is_the_offer_split_across_partitions():
    w = World(partition_count=4)
    t = w.account.throttle
    assert t.partition_budget(w.container(coll_id="manual", throughput=1200)) == 300
    assert t.partition_budget(w.container(coll_id="auto", autoscale_max=4000)) == 1000
    assert t.partition_budget(w.container(coll_id="none")) is None       # unmetered


def test_shared_database_throughput_is_split_between_the_containers_sharing_it():
    w = World()
    db = w.account.create_database({"id": "shared"}, throughput=1200)
    cs = [w.container("shared", f"c{i}") for i in range(3)]
    own = w.container("shared", "own", throughput=400)
    t = w.account.throttle
    assert [t.partition_budget(c) for c in cs] == [400, 400, 400]
    assert t.partition_budget(own) == 400
    w.account.delete_container(cs[2])
    assert t.partition_budget(cs[0]) == 600
    w.account.set_throughput(db, throughput=2000)
    assert t.partition_budget(cs[0]) == 1000


def test_set_throughput_provisions_replaces_and_removes_an_offer():
    w = World()
    c = w.container()
    t = w.account.throttle
    offer = w.account.set_throughput(c, throughput=500)
    assert c.offer_rid == offer.rid and t.partition_budget(c) == 500
    w.account.set_throughput(c, autoscale_max=6000)
    assert t.partition_budget(c) == 6000 and w.account.offers[c.offer_rid].autoscale_max == 6000
    w.account.set_throughput(c)
    assert c.offer_rid is None and t.partition_budget(c) is None


def test_a_partition_accepts_its_budget_per_window_then_429_3200_until_the_next():
    w = world()
    c = w.container(throughput=400)
    t = w.account.throttle
    at_window_start(w, 250)
    for _ in range(4):
        t.admit(EAST, c, "0", 100.0, 1, th.CREATE)
    err = refused(t.admit, EAST, c, "0", 0.5, 1, th.CREATE)
    assert err.substatus == th.SUB_RU_THROTTLED
    assert err.retry_after_ms == 750 and isinstance(err.retry_after_ms, int)
    w.advance(749)
    refused(t.admit, EAST, c, "0", 0.5, 1, th.CREATE)
    w.advance(1)
    t.admit(EAST, c, "0", 400.0, 1, th.CREATE)
    assert t.throttled == {(EAST, c.rid, "0", "ru"): 2}


def test_regions_and_partitions_have_separate_budgets():
    w = World(partition_count=2)
    c = w.container(throughput=800)
    t = w.account.throttle
    at_window_start(w)
    t.admit(EAST, c, "0", 400.0, 1, th.CREATE)
    refused(t.admit, EAST, c, "0", 1.0, 1, th.READ)
    t.admit(WEST, c, "0", 400.0, 1, th.READ)       # a throttled region does not throttle others
    t.admit(EAST, c, "1", 400.0, 1, th.READ)


def test_a_request_dearer_than_a_window_goes_alone_and_its_debt_delays_the_next():
    w = world()
    c = w.container(throughput=400)
    t = w.account.throttle
    at_window_start(w, 100)
    t.admit(EAST, c, "0", 1.0, 1, th.CREATE)
    err = refused(t.admit, EAST, c, "0", 1000.0, 1, th.CREATE)    # not alone: wait for an idle window
    assert err.retry_after_ms == 900
    w.advance(900)
    t.admit(EAST, c, "0", 1000.0, 1, th.CREATE)                 # alone: 600 RU of debt
    # The debt is paid 400 RU a second: 600 left after this window, 200 after the next.
    assert refused(t.admit, EAST, c, "0", 200.0, 1, th.CREATE).retry_after_ms == 2000
    assert refused(t.admit, EAST, c, "0", 250.0, 1, th.CREATE).retry_after_ms == 3000
    w.advance(1999)
    refused(t.admit, EAST, c, "0", 200.0, 1, th.CREATE)
    w.advance(1)
    t.admit(EAST, c, "0", 200.0, 1, th.CREATE)
    refused(t.admit, EAST, c, "0", 1.0, 1, th.CREATE)
    w.advance(1000)
    t.admit(EAST, c, "0", 400.0, 1, th.CREATE)


def test_burst_capacity_accrues_unused_budget_and_spends_it_at_most_3000_per_second():
    w = world(burst=True)
    c = w.container(throughput=400)
    t = w.account.throttle
    at_window_start(w)
    t.admit(EAST, c, "0", 100.0, 1, th.CREATE)          # starts the bucket: nothing accrued yet
    refused(t.admit, EAST, c, "0", 301.0, 1, th.CREATE)
    w.advance(3 * th.WINDOW_MS)                          # 300 unused + 2 idle windows of 400
    t.admit(EAST, c, "0", 400.0 + 1100.0, 1, th.CREATE)
    refused(t.admit, EAST, c, "0", 1.0, 1, th.CREATE)
    w.advance(400 * th.WINDOW_MS)                         # accrual stops at 300 s of budget
    b = t.buckets[(EAST, c.rid, "0")]
    for _ in range(3):
        t.admit(EAST, c, "0", 1000.0, 1, th.CREATE)     # 3000 RU in one second, not more
    refused(t.admit, EAST, c, "0", 1.0, 1, th.CREATE)
    assert b.reserve_ru == th.BURST_ACCRUAL_S * 400
    at_window_start(w)
    assert th.advance(b.state(), w.now_ms // th.WINDOW_MS, 400, True)[2] == 300 * 400 - 2600


def test_burst_off_never_spends_more_than_the_budget_however_long_idle():
    w = world()
    c = w.container(throughput=400)
    t = w.account.throttle
    t.admit(EAST, c, "0", 1.0, 1, th.CREATE)
    w.advance(600 * th.WINDOW_MS)
    at_window_start(w)
    t.admit(EAST, c, "0", 400.0, 1, th.CREATE)
    refused(t.admit, EAST, c, "0", 1.0, 1, th.CREATE)


def test_serverless_has_a_per_partition_ceiling_and_refuses_provisioned_throughput():
    w = World(partition_count=2, throttle=ThrottleConfig(serverless=True, serverless_ru_per_s=1000))
    c = w.container()
    t = w.account.throttle
    assert t.partition_budget(c) == 1000
    at_window_start(w)
    t.admit(EAST, c, "0", 1000.0, 1, th.CREATE)
    refused(t.admit, EAST, c, "0", 1.0, 1, th.CREATE)
    t.admit(EAST, c, "1", 1000.0, 1, th.CREATE)
    with pytest.raises(CosmosError) as e:
        w.container(coll_id="provisioned", throughput=400)
    assert e.value.status == 400 and "serverless" in e.value.message


def test_unmetered_containers_admit_anything_and_still_count_charges():
    w = world()
    c = w.container()
    t = w.account.throttle
    for _ in range(100):
        t.admit(EAST, c, "0", 10_000.0, 1, th.CREATE)
    b = t.buckets[(EAST, c.rid, "0")]
    assert (b.accepted, b.charged_ru, t.throttled) == (100, 1_000_000.0, {})


def test_a_query_over_several_partitions_must_fit_each_of_them():
    w = World(partition_count=2)
    c = w.container(throughput=800)
    t = w.account.throttle
    at_window_start(w)
    t.admit(EAST, c, "1", 350.0, 1, th.CREATE)
    refused(t.admit_many, EAST, c, ["0", "1"], 120.0, 2, th.QUERY)    # 60 each: partition 1 is full
    assert t.buckets[(EAST, c.rid, "0")].used_ru == 0
    t.admit_many(EAST, c, ["0", "1"], 100.0, 2, th.QUERY)


# ---- credits ---------------------------------------------------------------------------------
def test_credits_1000_data_operations_per_window_then_50009_then_the_next_window_accepts():
    w = world(credits_per_s=th.CREDITS_PER_S_DEFAULT)
    c = w.container()
    t = w.account.throttle
    at_window_start(w)
    for _ in range(1000):
        t.admit(EAST, c, "0", 5.0, 1, th.CREATE)
    err = refused(t.admit, EAST, c, "0", 5.0, 1, th.CREATE)
    assert (err.substatus, err.retry_after_ms, err.message) == (
        50009, 2000, "The request was terminated because the entity is being throttled. Error code: 50009. "
                     "Please wait 2 seconds and try again.")
    refused(t.admit_management, EAST)
    at_window_start(w)
    t.admit(EAST, c, "0", 5.0, 1, th.CREATE)
    state = t.credits_now()
    assert state["used"] == 1 and state["recent_windows"][-1] == {"window": state["window"] - 1,
                                                                  "used": 1000, "throttled": 2}


def test_management_operations_cost_10_credits_and_filters_1_each():
    w = world(credits_per_s=100)
    c = w.container()
    t = w.account.throttle
    at_window_start(w)
    for _ in range(9):
        t.admit_management(EAST)
    t.admit(EAST, c, "0", 3.0, 2, th.QUERY, filters=8)    # 2 returned + 8 filter evaluations
    refused(t.admit, EAST, c, "0", 1.0, 1, th.READ)
    assert t.credits_now()["spent"] == {"data": 2, "management": 90, "filter": 8}


def test_with_both_models_on_the_stricter_refusal_wins():
    w = world(credits_per_s=3)
    c = w.container(throughput=400)
    t = w.account.throttle
    at_window_start(w, 500)
    t.admit(EAST, c, "0", 400.0, 1, th.CREATE)
    assert refused(t.admit, EAST, c, "0", 1.0, 1, th.CREATE).substatus == 3200    # RU only
    t.admit(WEST, c, "0", 1.0, 2, th.READ)
    assert refused(t.admit, WEST, c, "0", 1.0, 1, th.READ).substatus == 50009     # credits only
    err = refused(t.admit, EAST, c, "0", 1.0, 1, th.CREATE)                       # both: longer wait
    assert (err.substatus, err.retry_after_ms) == (50009, 2000)
    at_window_start(w)
    t.admit(EAST, c, "0", 1400.0, 1, th.CREATE)          # 1000 RU of debt: RU now waits longest
    at_window_start(w)
    t.admit(WEST, c, "0", 1.0, 3, th.READ)
    err = refused(t.admit, EAST, c, "0", 300.0, 1, th.CREATE)
    assert (err.substatus, err.retry_after_ms) == (3200, 3000)
    assert t.throttled[(EAST, c.rid, None, "credits")] == 1


def test_a_request_dearer_than_a_credit_window_goes_alone():
    w = world(credits_per_s=10)
    c = w.container()
    t = w.account.throttle
    at_window_start(w)
    t.admit(EAST, c, "0", 1.0, 50, th.QUERY)
    refused(t.admit, EAST, c, "0", 1.0, 1, th.READ)


# ---- storms ----------------------------------------------------------------------------------
def test_a_storm_throttles_a_seeded_share_of_one_region_and_one_kind():
    def decisions(seed):
        w = world()
        c = w.container()
        t = w.account.throttle
        t.set_storm(EAST, 0.3, op="write", retry_after_ms=25, seed=seed)
        out = []
        for _ in range(200):
            try:
                t.admit(EAST, c, "0", 5.0, 1, th.CREATE)
                out.append(True)
            except CosmosError as e:
                assert (e.status, e.substatus, e.retry_after_ms) == (429, 3200, 25)
                out.append(False)
            t.admit(EAST, c, "0", 1.0, 1, th.READ)       # another kind: never stormed
            t.admit(WEST, c, "0", 5.0, 1, th.CREATE)     # another region: never stormed
        return out, t
    a, t = decisions(7)
    assert a == decisions(7)[0] and a != decisions(8)[0]
    assert 40 <= a.count(False) <= 80
    assert t.throttled == {(EAST, t.account.databases["db"].containers["c"].rid, "0", "storm"): a.count(False)}
    assert t.storms[EAST].describe()["requests_seen"] == 200
    t.clear_storm(EAST)
    assert not t.storms


def test_storm_arguments_are_checked():
    t = world().account.throttle
    with pytest.raises(ValueError):
        t.set_storm(EAST, 1.5)
    with pytest.raises(ValueError):
        t.set_storm(EAST, 0.5, op="sideways")
    with pytest.raises(KeyError):
        t.set_storm("Mars", 0.5)
