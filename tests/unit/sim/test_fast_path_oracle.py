"""Proves the replication fast paths change nothing observable: the same seeded workload and
fault schedule runs twice, once as the code is and once with every fast path replaced, from this
file, by the plain computation it stands for (ReplicaSet.lockstep kept False; the partition's
global LSN recomputed in full on every commit instead of counted; VersionStore.put as add; each
link asking its regions' states instead of keeping a flag), through the simulator (clients,
random faults and failovers in virtual time) and through the core driven directly by
hypothesis-drawn actions (batches, regions joining and leaving, node crashes, reads at every
level). The full core state after every step (every replica's state, role and applied LSN,
committed LSNs, epochs, the global LSN, every store's versions and change feed, the conflicts
feed, logs, links and waiters) and every answer (each write's outcome and acknowledgement, each
read's value, lost writes, failovers) must be identical; the fast run also checks each flag
against a fresh computation after every step."""
import hashlib
import importlib
import os
import random
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from regionlab.emulator.core.account import Account, AccountConfig
from regionlab.emulator.core.container import canonical_pk_json
from regionlab.emulator.core.documents import Writer, read_in
from regionlab.emulator.core.errors import CosmosError
from regionlab.emulator.core.link import ACTIVE, Link
from regionlab.emulator.core.partition import Partition, _committed_in
from regionlab.emulator.core.replica import UP
from regionlab.emulator.core.replica_set import LOG_RETAINED_COMMITS_MAX, ReplicaSet
from regionlab.emulator.core.scheduler import ManualClock, Scheduler, run_until_idle
from regionlab.emulator.core.store import VersionStore, versions_of
from regionlab.emulator.sim import SimConfig, run as sim_run
from regionlab.emulator.sim.world import World
from tiers import examples

run_mod = importlib.import_module("regionlab.emulator.sim.run")    # the module (emulator.sim.run is also the function)


# ---- the plain computations the fast paths stand for (the oracle) --------------------------
def _plain_refresh_lockstep(self) -> None:
    self.lockstep = False                    # every commit takes the per-replica path


def _plain_recompute_global(self) -> None:
    """The definition: the majority-th highest of what each region committed of the newest
    epoch's history; it only moves up (fail_global_waiters_above is what lowers it)."""
    sets = list(self.replica_sets.values())
    newest = max(sets, key=lambda rs: rs.epoch)      # the first of the newest epoch
    committed = sorted((_committed_in(rs, newest) for rs in sets), reverse=True)
    g = committed[len(committed) // 2]
    if g <= self.global_lsn:
        return
    self.global_lsn = g
    waiters = self._global_waiters
    while waiters and waiters[0][0] <= g:
        waiters.pop(0)[1](True)


def _plain_on_commit(self, rs, old: int, new: int) -> None:
    if rs.region in self.write_regions or rs.region == self.draining_from:
        self._ship(rs, old, new)
    if self.durable is not None:
        self.durable(self, rs, old, new)
    self._recompute_global()


def _plain_put(self, version, floor_of) -> None:
    self.add(version, floor_of() if self.has(version.key) else 0)


class _AskingLink(Link):
    """A link whose receiver_up asks both regions every time, and whose `_open` (what moves
    commits: the link active and its receiver up) asks its state and both regions every time
    (sets of either are ignored)."""
    __slots__ = ("_ends",)

    @property
    def receiver_up(self) -> bool:
        a, b = self._ends
        return a.state == "up" and b.state == "up"

    @receiver_up.setter
    def receiver_up(self, value) -> None:
        pass

    @property
    def _open(self) -> bool:
        return self.state == ACTIVE and self.receiver_up

    @_open.setter
    def _open(self, value) -> None:
        pass


def _asking_link(self, a: str, b: str, lag: int) -> Link:
    link = _AskingLink(a, b, lag, self.scheduler, self.clock, self.rng, self.config.jitter_ms)
    link._ends = (self.region(a), self.region(b))
    link.on_state = self._link_state_changed
    return link


@contextmanager
def fast_paths_off():
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(ReplicaSet, "_refresh_lockstep", _plain_refresh_lockstep)
        mp.setattr(Partition, "_recompute_global", _plain_recompute_global)
        mp.setattr(Partition, "_on_commit", _plain_on_commit)
        mp.setattr(Partition, "_advance_global", _unreachable)
        mp.setattr(VersionStore, "put", _plain_put)
        mp.setattr(Account, "_link", _asking_link)
        yield
    finally:
        mp.undo()


def _unreachable(self):
    raise AssertionError("the oracle run must not take the counted global-LSN path")


# ---- what is compared at every step ----------------------------------------------------------
def _version(v) -> tuple:
    return (v.lsn, v.key, v.deleted, v.origin, v.oseq, None if v.deleted else v.doc.get("w"))


def _replica_set_state(rs: ReplicaSet) -> tuple:
    store = rs.store
    return (rs.lsn, rs.committed_lsn, rs.epoch, tuple(rs.epoch_starts), rs.electing, rs.primary.index,
            tuple((r.state, r.role, r.applied_lsn, r.extra_delay_ms, r.next_apply_ms) for r in rs.replicas),
            rs.log_first_lsn(), tuple(_version(v) for e in rs.log for v in versions_of(e)),
            tuple(sorted(rs._early)), tuple(w for w, _ in rs._waiters),
            tuple(sorted(rs.progress.items())), rs.own_seq, store.count_live, tuple(store.changes),
            tuple((k, tuple(map(_version, vs))) for k, vs in store.keys_with_versions()))


def _state(world) -> str:
    """The full core state of a world (the simulator's or this file's), as text."""
    acct = world.account
    parts = []
    for c, p in acct.partitions():
        parts.append((c.id, p.range_id, p.global_lsn, tuple(p.write_regions), p.draining_from,
                      tuple(w for w, _ in p._global_waiters),
                      tuple((region, _replica_set_state(rs)) for region, rs in p.replica_sets.items())))
    links = tuple((pair, l.state, l.lag_ms, l.jitter_ms, len(l._queue), l._armed_ms, l.delivered)
                  for pair, l in sorted(acct.links.items()))
    regions = tuple((r.name, r.state) for r in acct.regions)
    conflicts = tuple((c.id, tuple(map(repr, c.conflicts.entries))) for db in acct.databases.values()
                      for c in db.containers.values() if c.conflicts is not None)
    return repr((world.clock.now_ms(), regions, tuple(acct.write_regions), links, parts, conflicts,
                 tuple(map(repr, acct.lost_writes)), len(acct.failovers)))


def _check_flags(world) -> None:
    """The fast run's flags against a fresh computation (a stale lockstep would commit without
    a quorum; a stale receiver_up would deliver to a region that is down)."""
    acct = world.account
    for (a, b), link in acct.links.items():
        assert link.receiver_up == (acct.region(a).state == "up" and acct.region(b).state == "up"), (a, b)
        assert link._open == (link.state == ACTIVE and link.receiver_up), (a, b)
    for _, p in acct.partitions():
        for region, rs in p.replica_sets.items():
            fresh = not rs.electing and all(
                r.state == UP and (r is rs.primary or (rs.delay_ms + r.extra_delay_ms <= 0
                                                       and r.next_apply_ms == 0))
                for r in rs.replicas)
            assert rs.lockstep == fresh, (world.clock.now_ms(), region, p.range_id, rs.describe())
        short = p._global_short
        if short is not None:
            # How many more regions above the global LSN a majority needs: the count of those
            # above may be high after a cut (partition.py's docstring), so this may be low,
            # never high, and at least 1 (else the global LSN would have moved); and it is kept
            # only while every region is in one epoch.
            real = sum(1 for rs in p.replica_sets.values() if rs.committed_lsn > p.global_lsn)
            assert 1 <= short <= p.majority() - real, (world.clock.now_ms(), p.range_id, real, short)
            assert len({rs.epoch for rs in p.replica_sets.values()}) == 1, (world.clock.now_ms(), p.range_id)


@dataclass
class Trace:
    steps: list               # (now_ms, sha of the state) after each scheduler step
    history: str
    states: dict              # step index -> the state's text, for the steps asked for


def _traced(seed: int, config: SimConfig, *, fast: bool, multi_write: bool, keep=()) -> Trace:
    steps, states = [], {}
    plain_step = World.step

    def step(world):
        more = plain_step(world)
        if fast:
            _check_flags(world)
        text = _state(world)
        if len(steps) in keep:
            states[len(steps)] = text
        steps.append((world.now_ms, hashlib.blake2b(text.encode(), digest_size=16).digest()))
        return more

    plain_start = run_mod.Workload.start

    def start(workload):                     # each client writes in its home region
        for c in workload.clients:
            c.write_region = c.regions[0]
        plain_start(workload)

    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(World, "step", step)
        if multi_write:
            mp.setattr(run_mod, "AccountConfig", lambda **kw: AccountConfig(multi_write=True, **kw))
            mp.setattr(run_mod.Workload, "start", start)
        result = sim_run(seed, config)
    finally:
        mp.undo()
    return Trace(steps, result.history_json(), states)


def assert_same(seed: int, config: SimConfig, multi_write: bool = False) -> int:
    """Run seed both ways; returns the number of steps compared."""
    fast = _traced(seed, config, fast=True, multi_write=multi_write)
    with fast_paths_off():
        plain = _traced(seed, config, fast=False, multi_write=multi_write)
    first = next((i for i, (a, b) in enumerate(zip(fast.steps, plain.steps)) if a != b), None)
    if first is None and len(fast.steps) == len(plain.steps) and fast.history == plain.history:
        return len(fast.steps)
    where = first if first is not None else min(len(fast.steps), len(plain.steps)) - 1
    a = _traced(seed, config, fast=True, multi_write=multi_write, keep={where}).states.get(where)
    with fast_paths_off():
        b = _traced(seed, config, fast=False, multi_write=multi_write, keep={where}).states.get(where)
    pytest.fail(f"seed {seed} {config} multi_write={multi_write}: the fast paths diverge at step {where} "
                f"(of {len(fast.steps)} / {len(plain.steps)}; histories equal: {fast.history == plain.history})\n"
                + _difference(a or "", b or ""))


def _difference(fast: str, plain: str) -> str:
    """Where two state texts first differ, with some context either side."""
    i = next((i for i, (x, y) in enumerate(zip(fast, plain)) if x != y), min(len(fast), len(plain)))
    lo = max(0, i - 400)
    return f"first difference at char {i}:\nfast:  ...{fast[lo:i + 200]}\nplain: ...{plain[lo:i + 200]}"


# ---- the runs ----------------------------------------------------------------------------------
STEPS = 150
# Lockstep engages only with no intra-region delay, so most runs have none; short retained logs
# make regions lag past them (snapshots); small K makes bounded staleness throttle.
CONFIGS = {
    "session": dict(consistency="Session", intra_region_delay_ms=0),
    "strong": dict(consistency="Strong", intra_region_delay_ms=0),
    "strong-short-log": dict(consistency="Strong", intra_region_delay_ms=0, log_retained_commits=4),
    "bounded": dict(consistency="BoundedStaleness", intra_region_delay_ms=0, max_staleness_prefix=5,
                    log_retained_commits=16),
    "eventual-delayed": dict(consistency="Eventual", intra_region_delay_ms=2),
    "drawn": dict(),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("seed", range(3))
def test_fast_paths_match_the_plain_computation(name, seed):
    assert assert_same(seed, SimConfig(steps=STEPS, **CONFIGS[name])) > 0


@pytest.mark.parametrize("seed", range(3))
def test_fast_paths_match_in_multi_write_accounts(seed):
    config = SimConfig(steps=STEPS, consistency="Session", intra_region_delay_ms=0)
    assert assert_same(seed, config, multi_write=True) > 0


@settings(max_examples=examples(12), deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 20), level=st.sampled_from(["Session", "Strong", "BoundedStaleness"]),
       delay=st.sampled_from([0, 0, 0, 1]), retained=st.sampled_from([2, 4, LOG_RETAINED_COMMITS_MAX]),
       partitions=st.integers(1, 3))
def test_fast_paths_match_over_drawn_settings(seed, level, delay, retained, partitions):
    assert_same(seed, SimConfig(steps=100, consistency=level, intra_region_delay_ms=delay,
                                log_retained_commits=retained, partitions=partitions,
                                max_staleness_prefix=8))


def test_the_runs_exercise_the_fast_paths():
    """Not vacuous: a run above commits in lockstep, leaves it (faults, slow replicas) and comes
    back, and moves the global LSN by the counted path."""
    seen = {"lockstep_commits": 0, "non_lockstep_commits": 0, "advances": 0, "counted": 0}
    plain_add, plain_advance, plain_on_commit = ReplicaSet._add, Partition._advance_global, Partition._on_commit

    def add(self, lsn, versions):
        seen["lockstep_commits" if self.lockstep else "non_lockstep_commits"] += 1
        plain_add(self, lsn, versions)

    def advance(self):
        seen["advances"] += 1
        plain_advance(self)

    def on_commit(self, rs, old, new):
        seen["counted"] += self._global_short is not None
        plain_on_commit(self, rs, old, new)

    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(ReplicaSet, "_add", add)
        mp.setattr(Partition, "_advance_global", advance)
        mp.setattr(Partition, "_on_commit", on_commit)
        result = sim_run(0, SimConfig(steps=STEPS, **CONFIGS["strong"]))
    finally:
        mp.undo()
    kinds = {e["spec"]["type"] for e in result.history["events"] if e["kind"] == "fault" and "id" in e}
    assert {"replica_slow", "primary_crash", "replica_crash"} & kinds
    assert seen["lockstep_commits"] > 50 and seen["non_lockstep_commits"] > 10, seen
    assert seen["advances"] > 10 and seen["counted"] > 50, seen


# ---- the core driven directly: what the simulator does not do --------------------------------
# Batches (multi-version commits), regions joining and leaving, node crashes, reads at every
# level, and strong and bounded-staleness accounts, from a hypothesis-drawn list of actions.
REGIONS = ("East US", "West US", "North Europe")
NEW_REGIONS = ("Japan East", "Brazil South")
LEVELS = ("Strong", "BoundedStaleness", "Session", "ConsistentPrefix", "Eventual")
KEYS = ("a", "b", "c", "d")


class CoreWorld:
    def __init__(self, seed: int, **config):
        self.clock = ManualClock()
        self.scheduler = Scheduler()
        self.account = Account(AccountConfig(regions=REGIONS, jitter_ms=3, **config), self.clock, self.scheduler,
                               random.Random(seed))
        db = self.account.create_database({"id": "db"})
        self.container = self.account.create_container(db, {"id": "c", "partitionKey": {
            "paths": ["/pk"], "kind": "Hash", "version": 2}})
        self.faults: list = []
        self.n = 0

    def names(self) -> list:
        return [r.name for r in self.account.regions]


def _act(w: CoreWorld, action: tuple, log: list) -> None:
    """One drawn action; what it answered goes to log (a refusal is an answer too)."""
    kind, a, b, c = action
    acct = w.account
    names = w.names()
    region = names[a % len(names)]
    try:
        if kind == "write":
            w.n += 1
            key = KEYS[b % len(KEYS)]
            region = region if a % 4 == 0 or acct.config.multi_write else acct.hub_region   # some 403s
            writer = Writer(w.container, region, canonical_pk_json([key]), [key], w.clock.now_ms())
            for i in range(1 + c % 3):                   # 2-3 operations: one commit of several versions
                item = f"{key}{(c + i) % 3}"
                if (c + i) % 4 == 3:
                    writer.delete(item) if writer.current(item) is not None else writer.upsert(
                        {"id": item, "pk": key, "w": w.n})
                else:
                    writer.upsert({"id": item, "pk": key, "w": w.n})
            lsn = writer.commit()
            rs = writer.rs
            log.append(("write", region, key, lsn, rs.epoch))
            rs.when_committed(lsn, lambda ok, n=w.n: log.append(("committed", n, ok)))
            rs.partition.when_globally_committed(lsn, lambda ok, n=w.n: log.append(("global", n, ok)))
        elif kind == "read":
            key = KEYS[b % len(KEYS)]
            level = LEVELS[c % len(LEVELS)]
            rs = w.container.partition_for_epk(w.container.epk_of(canonical_pk_json([key]), [key])).for_read(region)
            v, lsn = read_in(rs, canonical_pk_json([key]), f"{key}0", level, None)
            log.append(("read", region, key, level, lsn, None if v is None else v.doc.get("w")))
        elif kind == "advance":
            run_until_idle(w.clock, w.scheduler, limit_ms=w.clock.now_ms() + (b % 8) * 40 + c % 40)
        elif kind == "fault":
            specs = [{"type": "region_outage", "region": region},
                     {"type": "link_cut", "from": region, "to": names[b % len(names)], "one_way": c % 2 == 0},
                     {"type": "link_lag", "from": region, "to": names[b % len(names)], "lag_ms": 20 + c * 7},
                     {"type": "primary_crash", "region": region},
                     {"type": "replica_crash", "region": region, "replica": 1 + c % 3},
                     {"type": "replica_slow", "region": region, "replica": c % 4, "delay_ms": (b % 3) * 50},
                     {"type": "node_crash", "region": region, "node": c % acct.placement.nodes_per_region}]
            spec = dict(specs[b % len(specs)])
            if c % 3:
                spec["duration_ms"] = 30 + 60 * (c % 7)
            w.faults.append(acct.faults.inject(spec))
            log.append(("fault", spec))
        elif kind == "heal":
            active = sorted(acct.faults.active)
            if active:
                fid = active[b % len(active)]
                acct.faults.heal(fid)
                log.append(("heal", fid))
        elif kind == "failover":
            f = acct.failover(region, forced=b % 2 == 0)
            log.append(("failover", region, f.state, f.lost))
        elif kind == "add_region":
            name = NEW_REGIONS[b % len(NEW_REGIONS)]
            acct.add_region(name)
            log.append(("added", name))
        elif kind == "remove_region":
            acct.remove_region(region)
            log.append(("removed", region))
    except CosmosError as e:
        log.append(("refused", kind, e.status, e.substatus))


# Examples per CI run (a few seconds); ORACLE_EXAMPLES=2000 for a longer search by hand.
CORE_EXAMPLES = int(os.environ.get("ORACLE_EXAMPLES", examples(60)))
ACTION = st.tuples(st.sampled_from(["write"] * 6 + ["read"] * 3 + ["advance"] * 4 + ["fault"] * 3
                                   + ["heal", "failover", "add_region", "remove_region"]),
                   st.integers(0, 15), st.integers(0, 15), st.integers(0, 15))
ACCOUNTS = st.sampled_from([
    dict(consistency="Strong"), dict(consistency="Strong", log_retained_commits=2),
    dict(consistency="Strong", intra_region_delay_ms=2),       # elections discard unacknowledged tails
    dict(consistency="BoundedStaleness", staleness_ops=4, log_retained_commits=3),
    dict(consistency="Session", log_retained_commits=2), dict(consistency="Session", multi_write=True),
    dict(consistency="Eventual", intra_region_delay_ms=1),
])


def _core_trace(seed: int, account: dict, actions: list, *, fast: bool) -> list:
    w = CoreWorld(seed, auto_failover=True, detection_delay_ms=200, election_ms=50, **account)
    trace, log = [], []                      # log: every answer, callbacks' too, in order
    for action in actions + [("heal", 0, 0, 0)] * 8 + [("advance", 0, 7, 39)] * 20:
        seen = len(log)
        _act(w, action, log)
        if fast:
            _check_flags(w)
        trace.append((repr(log[seen:]), _state(w)))
    return trace


@settings(max_examples=CORE_EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.integers(0, 1000), account=ACCOUNTS, actions=st.lists(ACTION, min_size=5, max_size=100))
def test_fast_paths_match_when_the_core_is_driven_directly(seed, account, actions):
    fast = _core_trace(seed, account, actions, fast=True)
    with fast_paths_off():
        plain = _core_trace(seed, account, actions, fast=False)
    for i, (a, b) in enumerate(zip(fast, plain)):
        assert a[0] == b[0], f"action {i} {actions[i] if i < len(actions) else 'final'} answered differently"
        if a[1] != b[1]:
            pytest.fail(f"action {i} {actions[i] if i < len(actions) else 'final'}: states diverge\n"
                        + _difference(a[1], b[1]))
