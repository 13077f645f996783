"""Proves the partition's counted global LSN (partition.py, `_global_short`) is the one a full
recompute on every commit of every region gives: a hypothesis state machine drives two identical
accounts (Strong, or multi-write) in virtual time, one whose partitions forget the count (so every commit
recomputes in full, as before the count existed), through writes, deliveries, region outages,
link cuts, replica crashes and recoveries, forced and graceful failovers and region adds and
removes, and compares every partition's global LSN, every region's committed LSN and every
write's outcome after each step; plus pinned examples of what forgets the count."""
import random
from unittest import mock

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from regionlab.emulator.core import account as account_module
from regionlab.emulator.core.account import Account, AccountConfig
from regionlab.emulator.core.container import canonical_pk_json
from regionlab.emulator.core.documents import Writer
from regionlab.emulator.core.errors import CosmosError
from regionlab.emulator.core.link import ACTIVE, CUT, PAUSED
from regionlab.emulator.core.partition import Partition
from regionlab.emulator.core.replica_set import DOWN, UP
from regionlab.emulator.core.scheduler import ManualClock, Scheduler, run_until_idle
from tiers import examples

PK_DEF = {"paths": ["/pk"], "kind": "Hash", "version": 2}
REGIONS = ("East US", "East US 2", "West US")
EXTRA_REGIONS = ("North Europe", "Japan East")
PKS = ["a", "b", "c", "d"]


class FullRecompute(Partition):
    """A partition that never knows the count: every commit recomputes the global LSN in full."""
    __slots__ = ()
    _global_short = property(lambda self: None, lambda self, value: None)


def build(full: bool, lag_ms: dict, partitions: int, multi_write: bool = False):
    clock, scheduler = ManualClock(), Scheduler()
    config = AccountConfig(regions=REGIONS, consistency="Session" if multi_write else "Strong",
                           multi_write=multi_write, partition_count=partitions,
                           lag_ms=lag_ms, detection_delay_ms=50, election_ms=20)
    account = Account(config, clock, scheduler, random.Random(7))
    db = account.create_database({"id": "db"})
    if full:
        with mock.patch.object(account_module, "Partition", FullRecompute):
            c = account.create_container(db, {"id": "c", "partitionKey": PK_DEF})
    else:
        c = account.create_container(db, {"id": "c", "partitionKey": PK_DEF})
    assert all(type(p) is (FullRecompute if full else Partition) for p in c.partitions)
    return clock, scheduler, account, c


def outcome(fn):
    """What an action did: its value, or the status and substatus it was refused with."""
    try:
        return ("ok", fn())
    except CosmosError as e:
        return ("refused", e.status, e.substatus)
    except (KeyError, ValueError) as e:         # an action the account's state rules out
        return ("refused", type(e).__name__, str(e))


class GlobalLsnMachine(RuleBasedStateMachine):
    @initialize(lags=st.lists(st.sampled_from([0, 1, 3, 20]), min_size=6, max_size=6),
                partitions=st.sampled_from([1, 2]), multi_write=st.sampled_from([False, False, True]))
    def build(self, lags, partitions, multi_write):
        pairs = [(a, b) for a in REGIONS for b in REGIONS if a != b]
        lag_ms = dict(zip(pairs, lags))
        self.worlds = [build(full, lag_ms, partitions, multi_write) for full in (False, True)]
        self.acks = [[], []]                 # strong acknowledgements heard, in order, per world
        self.n = 0

    def both(self, fn):
        """Run fn(world index, clock, scheduler, account, container) on both; the same outcome."""
        got = [outcome(lambda i=i, w=w: fn(i, *w)) for i, w in enumerate(self.worlds)]
        assert got[0] == got[1]
        return got[0]

    @rule(pk=st.sampled_from(PKS), region=st.sampled_from(REGIONS))
    def write(self, pk, region):
        self.n += 1
        doc = {"id": f"i{self.n}", "pk": pk}

        def write(i, clock, scheduler, account, c):
            if account.region_state(region) != "up":
                return "region down"
            w = Writer(c, region, canonical_pk_json([pk]), [pk], clock.now_ms())
            w.upsert(doc)
            lsn = w.commit()
            w.rs.partition.when_globally_committed(lsn, lambda ok, i=i, lsn=lsn: self.acks[i].append((lsn, ok)))
            return lsn
        self.both(write)

    @rule(ms=st.sampled_from([0, 1, 2, 5, 30, 200]))
    def advance(self, ms):
        self.both(lambda i, clock, scheduler, *_: run_until_idle(clock, scheduler, clock.now_ms() + ms))

    @rule(region=st.sampled_from(REGIONS + EXTRA_REGIONS), up=st.booleans())
    def region_state(self, region, up):
        self.both(lambda i, clock, scheduler, account, c:
                  account.set_region_state(region, "up" if up else "down")
                  if account.region_state(region) is not None else None)

    @rule(a=st.sampled_from(REGIONS), b=st.sampled_from(REGIONS), state=st.sampled_from([ACTIVE, PAUSED, CUT]))
    def link(self, a, b, state):
        self.both(lambda i, clock, scheduler, account, c:
                  account.links[(a, b)].set_state(state) if (a, b) in account.links else None)

    @rule(region=st.sampled_from(REGIONS), index=st.integers(0, 3), up=st.booleans(), p=st.integers(0, 1))
    def replica(self, region, index, up, p):
        def change(i, clock, scheduler, account, c):
            rs = c.partitions[p % len(c.partitions)].replica_sets.get(region)
            if rs is None:
                return None
            if not up and rs.replicas[index] is rs.primary:
                account.crash_primary(rs)
            else:
                rs.set_replica_state(index, UP if up else DOWN)
        self.both(change)

    @rule(to=st.sampled_from(REGIONS + EXTRA_REGIONS), forced=st.booleans())
    def failover(self, to, forced):
        self.both(lambda i, clock, scheduler, account, c: account.failover(to, forced=forced) and None)

    @rule(region=st.sampled_from(EXTRA_REGIONS))
    def add_region(self, region):
        self.both(lambda i, clock, scheduler, account, c: account.add_region(region) and None)

    @rule(region=st.sampled_from(REGIONS + EXTRA_REGIONS))
    def remove_region(self, region):
        self.both(lambda i, clock, scheduler, account, c: account.remove_region(region))

    @invariant()
    def the_same_global_lsn_as_a_full_recompute(self):
        if not hasattr(self, "worlds"):
            return
        (_, _, _, c0), (_, _, _, c1) = self.worlds
        for p0, p1 in zip(c0.partitions, c1.partitions):
            assert {r: rs.committed_lsn for r, rs in p0.replica_sets.items()} == \
                   {r: rs.committed_lsn for r, rs in p1.replica_sets.items()}
            assert p0.global_lsn == p1.global_lsn
        assert self.acks[0] == self.acks[1]

    @invariant()
    def a_known_count_is_short_of_a_majority_above_the_global_lsn_in_one_epoch(self):
        if not hasattr(self, "worlds"):
            return
        for p in self.worlds[0][3].partitions:
            if p._global_short is not None:
                above = sum(rs.committed_lsn > p.global_lsn for rs in p.replica_sets.values())
                assert 1 <= p._global_short <= p.majority() - above
                assert len({rs.epoch for rs in p.replica_sets.values()}) == 1, "a count in mixed epochs"


GlobalLsnMachine.TestCase.settings = settings(max_examples=examples(150), stateful_step_count=50, deadline=None)
TestGlobalLsn = GlobalLsnMachine.TestCase


# ---- pinned examples ---------------------------------------------------------------------------
def test_a_commit_that_cannot_move_the_global_lsn_keeps_the_count_and_the_majority_moves_it():
    clock, scheduler, account, c = build(False, {}, 1)
    p = c.partitions[0]
    w = Writer(c, REGIONS[0], canonical_pk_json(["a"]), ["a"], clock.now_ms())
    w.upsert({"id": "x", "pk": "a"})
    lsn = w.commit()
    assert p.global_lsn == 0 and p._global_short == 1      # the write region alone is above it
    run_until_idle(clock, scheduler)
    assert p.global_lsn == lsn and p._global_short == 2    # all three reached it: none above


def test_lowering_the_global_lsn_or_adding_a_region_forgets_the_count():
    clock, scheduler, account, c = build(False, {}, 1)
    p = c.partitions[0]
    w = Writer(c, REGIONS[0], canonical_pk_json(["a"]), ["a"], clock.now_ms())
    w.upsert({"id": "x", "pk": "a"})
    w.commit()
    run_until_idle(clock, scheduler)
    assert p._global_short is not None
    p.fail_global_waiters_above(0)
    assert p._global_short is None
    w = Writer(c, REGIONS[0], canonical_pk_json(["a"]), ["a"], clock.now_ms())
    w.upsert({"id": "y", "pk": "a"})
    lsn = w.commit()                                      # a full recompute: a majority was above 0
    assert p.global_lsn == lsn - 1 and p._global_short is not None
    account.add_region(EXTRA_REGIONS[0])
    assert p._global_short is None
