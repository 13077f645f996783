"""Proves throttle.py admits exactly what fits each partition's per-region RU budget (split from
manual, autoscale and shared offers; burst capacity; serverless ceilings), the account-wide credit
window (1000/s, 50009 after), and throttle storms, and that a refused request changes nothing:
pinned examples in virtual time, plus a hypothesis state machine that drives real writes, reads
and queries through Writer -> charge -> admit -> commit with random budgets, sizes and clock
jumps and checks every invariant of the module docstring against a dict model of the items."""
import pytest

from regionlab.emulator.core import throttle as th
from regionlab.emulator.core.errors import CosmosError
from regionlab.emulator.core.throttle import ThrottleConfig

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


def test_shared_database_throughput_is_one_pool_for_the_containers_sharing_it():
    w = World()
    db = w.account.create_database({"id": "shared"}, throughput=1200)
    cs = [w.container("shared", f"c{i}") for i in range(3)]
    own = w.container("shared", "own", throughput=400)
    t = w.account.throttle
    assert [t.partition_budget(c) for c in cs] == [1200, 1200, 1200]
    assert t.partition_budget(own) == 400
    t.admit(EAST, cs[0], "0", 1.0, 1, th.READ)
    t.admit(WEST, cs[1], "0", 1.0, 1, th.READ)
    assert t.shared_pool(EAST, cs[0]) is t.shared_pool(EAST, cs[2]) is not t.shared_pool(WEST, cs[0])
    assert t.shared_pool(EAST, own) is None and len(t.pools) == 2
    w.account.delete_container(cs[2])
    assert t.partition_budget(cs[0]) == 1200
    w.account.set_throughput(db, throughput=2000)
    assert t.partition_budget(cs[0]) == 2000
    w.account.delete_database(db)
    assert t.pools == {}


def test_one_busy_container_of_eight_uses_the_whole_shared_offer_in_virtual_time():
    """400 RU/s shared by 8 containers: one container alone takes all 400 RU of a window (not
    400 / 8 = 50), the next RU is 429 until the next window, and there the 8 share it."""
    w = world()
    w.account.create_database({"id": "shared"}, throughput=400)
    cs = [w.container("shared", f"c{i}") for i in range(8)]
    t = w.account.throttle
    at_window_start(w, 100)
    for _ in range(40):
        t.admit(EAST, cs[0], "0", 10.0, 1, th.CREATE)
    e = refused(t.admit, EAST, cs[0], "0", 1.0, 1, th.CREATE)
    assert e.substatus == th.SUB_RU_THROTTLED and e.retry_after_ms == 900
    refused(t.admit, EAST, cs[5], "0", 1.0, 1, th.CREATE)       # the pool is spent for all
    t.admit(WEST, cs[5], "0", 400.0, 1, th.READ)                 # another region: its own pool
    at_window_start(w)
    t.admit(EAST, cs[0], "0", 250.0, 1, th.CREATE)
    t.admit(EAST, cs[1], "0", 150.0, 1, th.CREATE)
    refused(t.admit, EAST, cs[2], "0", 1.0, 1, th.CREATE)
    # A query over a sharing container's partitions charges the pool once, whole.
    at_window_start(w)
    t.admit_many(EAST, cs[3], ["0"], 400.0, 1, th.QUERY)
    refused(t.admit, EAST, cs[4], "0", 1.0, 1, th.READ)


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
    assert (EAST, c.rid, "0") not in t.buckets          # nothing was kept of the refused query
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


# ---- the state machine -----------------------------------------------------------------------
from collections import defaultdict  # noqa: E402

from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule  # noqa: E402

from regionlab.emulator.core import charge  # noqa: E402
from regionlab.emulator.core.container import canonical_pk_json  # noqa: E402
from regionlab.emulator.core.documents import read_item  # noqa: E402
from tiers import examples  # noqa: E402

PKS = list(range(6))
IDS = ["a", "b", "c", "h"]
SIZES = [0, 300, 3000, 20_000]
EPS = 1e-6


class ThrottleMachine(RuleBasedStateMachine):
    """Real writes, reads and queries go Writer -> charge -> admit -> commit in virtual time.
    The model is a dict of the items every accepted write produced; the ledger lists every
    accepted charge by (region, partition, window) and every credit spend by window."""

    @initialize(partitions=st.sampled_from([1, 2, 4]), ru=st.sampled_from([400, 1000, 2400]),
                shared=st.booleans(), burst=st.booleans(), credits=st.sampled_from([None, 8, 60]),
                start_ms=st.integers(0, 999))
    def build(self, partitions, ru, shared, burst, credits, start_ms):
        self.w = World(partition_count=partitions, throttle=ThrottleConfig(burst=burst, credits_per_s=credits))
        self.w.advance(start_ms)
        account = self.w.account
        db = account.create_database({"id": "db"}, throughput=ru if shared else None)
        self.c = self.w.container("db", "c", throughput=None if shared else ru)
        self.t = account.throttle
        self.model: dict = {}
        self.ru_log = defaultdict(float)        # (region, range id, window) -> RU accepted
        self.budget_log = defaultdict(float)    # (region, range id, window) -> highest budget in force
        self.first_window: dict = {}            # (region, range id) -> first window it accepted in
        self.credit_log = defaultdict(list)     # window -> [credits of each accepted request]
        self.refusals = 0

    # ---- helpers ---------------------------------------------------------------------------
    @property
    def window(self) -> int:
        return self.w.now_ms // th.WINDOW_MS

    def snapshot(self):
        """Everything a request could change, normalised to now (a window rolling over is time,
        not a change): every bucket moved to now, the credit window, every store, the rid counter."""
        budget, burst, now = self.t.partition_budget(self.c), self.t.config.burst, self.window
        buckets = {k: th.advance(b.state(), now, budget, burst) if budget else b.state()
                   for k, b in [*self.t.buckets.items(), *self.t.pools.items()]}
        credits = (self.t.credits_used if self.t.credit_window == now else 0, dict(self.t.credits_spent))
        stores = {(p.range_id, r): (rs.lsn, rs.store.count_live, [(k, [v.lsn for v in vs])
                                                                  for k, vs in rs.store.keys_with_versions()])
                  for p in self.c.partitions for r, rs in p.replica_sets.items()}
        return buckets, credits, stores, self.c.doc_seq

    def admitted(self, fn, region, range_ids, ru, credits, before=None) -> bool:
        before = before or self.snapshot()
        budget = self.t.partition_budget(self.c)
        for r in range_ids:
            key = (region, r, self.window)
            self.budget_log[key] = max(self.budget_log[key], budget)
        try:
            fn()
        except CosmosError as e:
            assert e.status == 429 and e.substatus in (3200, 50009)
            assert isinstance(e.retry_after_ms, int) and e.retry_after_ms >= 1
            assert self.snapshot() == before, "a throttled request changed state"
            self.refusals += 1
            return False
        for r in range_ids:
            self.ru_log[(region, r, self.window)] += ru / len(range_ids)
            self.first_window.setdefault((region, r), self.window)
        if self.t.config.credits_per_s is not None:
            self.credit_log[self.window].append(credits)
        return True

    # ---- rules -----------------------------------------------------------------------------
    @rule(pk=st.sampled_from(PKS), id=st.sampled_from(IDS), size=st.sampled_from(SIZES),
          op=st.sampled_from(["create", "upsert", "replace", "delete"]), times=st.integers(1, 12))
    def write(self, pk, id, size, op, times):
        self._write(pk, id, size, op, times)

    def _write(self, pk, id, size, op, times):
        for _ in range(times):
            before = self.snapshot()              # before staging: a refusal must undo it all
            writer = self.w.writer(self.c, pk)
            doc = {"id": id, "pk": pk, "payload": "x" * size}
            try:
                {"create": lambda: writer.create(doc), "upsert": lambda: writer.upsert(doc),
                 "replace": lambda: writer.replace(id, doc), "delete": lambda: writer.delete(id)}[op]()
            except CosmosError as e:
                assert e.status in (404, 409)
                continue
            ru = charge.staged(writer)
            if not self.admitted(lambda: self.t.admit_writer(writer, op), writer.region,
                                 [writer.rs.range_id], ru, 1, before):
                continue
            writer.commit()
            if op == "delete":
                del self.model[(pk, id)]
            else:
                self.model[(pk, id)] = size

    @rule(pk=st.sampled_from(PKS), size=st.sampled_from(SIZES[2:]))
    def hammer(self, pk, size):
        """Enough writes to one partition in one window to spend any budget (and burst)."""
        self._write(pk, "h", size, "upsert", 60)

    @rule(pk=st.sampled_from(PKS), id=st.sampled_from(IDS), region=st.sampled_from([EAST, WEST]))
    def read(self, pk, id, region):
        v, rs, _ = read_item(self.c, region, canonical_pk_json([pk]), [pk], id, "Eventual", None)
        ru = charge.read(len(v.body) if v is not None else 0)
        self.admitted(lambda: self.t.admit(region, self.c, rs.range_id, ru, 1, th.READ), region,
                      [rs.range_id], ru, 1)

    @rule(region=st.sampled_from([EAST, WEST]))
    def query(self, region):
        rss = [p.for_read(region) for p in self.c.partitions]
        loaded = sum(rs.store.count_live for rs in rss)
        ru = charge.query(loaded, loaded // 2, 100 * loaded)
        returned = max(1, loaded // 2)
        self.admitted(lambda: self.t.admit_many(region, self.c, [rs.range_id for rs in rss], ru, returned,
                                                th.QUERY, filters=loaded),
                      region, [rs.range_id for rs in rss], ru, returned + loaded)

    @rule(ms=st.sampled_from([1, 37, 250, 999, 1000, 4500, 400_000]))
    def advance(self, ms):
        self.w.advance(ms)

    @rule(ru=st.sampled_from([400, 700, 3000]))
    def reprovision(self, ru):
        target = self.c if self.c.offer_rid is not None else self.c.db
        self.w.account.set_throughput(target, throughput=ru)

    # ---- invariants --------------------------------------------------------------------------
    @invariant()
    def store_matches_the_model(self):
        if not hasattr(self, "c"):
            return
        live = {}
        for p in self.c.partitions:
            for v in p.replica_sets[EAST].store.scan(p.replica_sets[EAST].lsn):
                live[(v.doc["pk"], v.doc["id"])] = len(v.doc["payload"])
        assert live == self.model

    @invariant()
    def every_window_stays_within_its_partitions_budget(self):
        if not hasattr(self, "c"):
            return
        burst = self.t.config.burst
        spent = defaultdict(float)
        for (region, r, w), ru in sorted(self.ru_log.items(), key=lambda kv: kv[0][2]):
            budget = self.budget_log[(region, r, w)]
            if not burst:
                assert ru <= budget + EPS
            else:
                assert ru <= max(budget, th.BURST_RU_PER_S_MAX) + EPS
            spent[(region, r)] += ru
            # Burst only lends what earlier windows of this bucket left unused: over its life a
            # bucket never spends more than the highest budget times the windows it has lived.
            # A shared offer's partitions draw on one pool, whose reserve accrues from the first
            # window any of them spent in (a partition may burst on what the pool left unused
            # before it first spent: 401.02 RU of a 400 RU offer in its first window).
            lived = w - self._born(region, r) + 1
            highest = max(b for (rg, rr, _), b in self.budget_log.items() if (rg, rr) == (region, r))
            assert spent[(region, r)] <= highest * lived + EPS

    def _born(self, region, r) -> int:
        """The first window the bucket's burst reserve could accrue from: its own first, or with a
        shared offer the pool's (its partitions' earliest)."""
        if self.c.offer_rid is not None:
            return self.first_window[(region, r)]
        return min(w for (rg, _), w in self.first_window.items() if rg == region)

    @invariant()
    def a_shared_pool_stays_within_the_whole_offer(self):
        """The partitions of a container sharing its database's offer spend one pool: their sum
        in a window is within the offer (the per-partition invariant alone would allow more)."""
        if not hasattr(self, "c") or self.c.offer_rid is not None or self.t.config.burst:
            return
        total = defaultdict(float)
        for (region, r, w), ru in self.ru_log.items():
            total[(region, w)] = total[(region, w)] + ru
        for (region, w), ru in total.items():
            highest = max(self.budget_log[(region, r, w)] for (rg, r, ww) in self.ru_log if (rg, ww) == (region, w))
            assert ru <= highest + EPS

    @invariant()
    def credits_per_window_stay_within_the_limit(self):
        if not hasattr(self, "c") or self.t.config.credits_per_s is None:
            return
        for w, spends in self.credit_log.items():
            assert sum(spends) <= self.t.config.credits_per_s or len(spends) == 1


ThrottleMachine.TestCase.settings = settings(max_examples=examples(100), stateful_step_count=30, deadline=None)
test_throttle_machine = ThrottleMachine.TestCase


# ---- admit's current-window path against the general one ---------------------------------------
class PlainAdmit(th.Throttle):
    """admit as the general path computes it: the budget from partition_budget, every metered
    request through _admit_ru, with _bucket and _accepted (what admit_many does for each of its
    partitions)."""

    def admit(self, region, container, range_id, ru, credits, op, filters=0):
        if self.storms:
            self._storm(region, op, container.rid, range_id)
        budget = self.partition_budget(container)
        b = self._bucket(region, container, range_id)
        if budget is not None:
            self._admit_ru(region, container, ((b, range_id),), ru, credits, filters, op, budget)
        elif self.config.credits_per_s is not None:
            self._admit_credits(region, container.rid, credits, filters, op)
        self._accepted(region, container, range_id, b, ru)


def _answer(t: th.Throttle, *args):
    try:
        t.admit(*args)
    except CosmosError as e:
        return e.status, e.substatus, e.retry_after_ms, str(e)
    return "admitted"


def _throttle_state(t: th.Throttle):
    return ({k: (b.window, b.used_ru, b.reserve_ru, b.accepted, b.charged_ru) for k, b in t.buckets.items()},
            dict(t.throttled), t.credit_window, t.credits_used, dict(t.credits_spent), t.credit_history)


EDGE = [(0, EAST, 0, 100.0, 1, th.READ)] * 4 + [(0, EAST, 0, 0.5, 1, th.READ)]     # the window's budget, then a bit


@settings(max_examples=200, deadline=None)
@given(burst=st.booleans(), credits=st.sampled_from([None, None, None, 5, 40]),
       serverless=st.sampled_from([False, False, True]), ru=st.sampled_from([True, True, False]),
       metered=st.sampled_from([True, True, False]), steps=st.lists(st.tuples(
           st.sampled_from([0, 0, 0, 0, 1, 7, 300, 999, 1000, 2600]), st.sampled_from([EAST, EAST, WEST]),
           st.sampled_from([0, 0, 1]), st.sampled_from([0.5, 1.0, 100.0, 100.0, 200.0, 399.5, 400.0, 900.0]),
           st.integers(1, 3), st.sampled_from([th.READ, "write"])), max_size=80))
@example(burst=False, credits=None, serverless=False, ru=True, metered=True, steps=EDGE)
@example(burst=True, credits=None, serverless=False, ru=True, metered=True,   # spends a burst reserve
         steps=[(0, EAST, 0, 100.0, 1, th.READ), (2600, EAST, 0, 100.0, 1, th.READ)] + EDGE * 4)
def test_admit_answers_as_the_general_path_does(burst, credits, serverless, ru, metered, steps):
    """admit's path for a bucket already in the current window (no credit limit) and its test
    for an unmetered account answer, and leave every bucket and counter, exactly as the general
    path does: same admissions, same 429s with the same retry-after, same state after every
    request (budgets of 400 RU a partition and charges that meet them exactly)."""
    w = World(partition_count=2, throttle=ThrottleConfig(ru=ru, burst=burst, credits_per_s=credits,
                                                        serverless=serverless))
    c = w.container(throughput=None if serverless or not metered else 800)
    fast = th.Throttle(w.account, w.account.throttle.config)
    plain = PlainAdmit(w.account, w.account.throttle.config)
    for dt_ms, region, p, ru, n, op in steps:
        w.advance(dt_ms)
        args = (region, c, c.partitions[p].range_id, ru, n, op)
        assert _answer(fast, *args) == _answer(plain, *args)
        assert _throttle_state(fast) == _throttle_state(plain)
