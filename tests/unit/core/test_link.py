"""Proves link.py delivers shipped commits after the one-way lag, never reordered by jitter,
keeps its backlog while paused, cut or facing a down receiver and drains it in order on heal,
and is deterministic per seed: real ReplicaSets on both ends, virtual time, no sleeps."""
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from regionlab.emulator.core.link import ACTIVE, CUT, PAUSED, Link, ship
from regionlab.emulator.core.replica_set import ReplicaSet
from regionlab.emulator.core.scheduler import ManualClock, Scheduler, run_until_idle
from regionlab.emulator.core.store import Version
from tiers import examples

KEY = ('["p"]', "a")


class RecordingReplicaSet(ReplicaSet):
    """A real read-region replica set that notes each delivery as the link makes it (a replica
    set may buffer a commit that arrives ahead of a gap, which would hide a reordering)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.deliveries = []

    def apply_replicated(self, lsn, versions):
        self.deliveries.append((lsn, self.clock.now_ms()))
        super().apply_replicated(lsn, versions)


class Receiving:
    """A link into a real read-region replica set, with what arrived there and when."""

    def __init__(self, lag_ms=10, jitter_ms=0, seed=0):
        self.clock = ManualClock(0)
        self.scheduler = Scheduler()
        self.link = Link("East US", "West US", lag_ms, self.scheduler, self.clock, random.Random(seed),
                         jitter_ms)
        self.rs = RecordingReplicaSet("West US", "0", self.scheduler, self.clock)
        self.sent = 0

    @property
    def arrivals(self):
        """(lsn, ms) of every delivery; each must also have committed at the receiver."""
        assert self.rs.committed_lsn == len(self.rs.deliveries)
        return self.rs.deliveries

    def send(self):
        self.sent += 1
        lsn = self.sent
        self.link.send(self.rs, lsn, [Version(lsn, KEY, {"id": "a", "v": lsn}, b"", f'"{lsn}"', 0, "r")])

    def until(self, ms):
        run_until_idle(self.clock, self.scheduler, limit_ms=ms)


def test_delivery_after_the_lag_not_before():
    r = Receiving(lag_ms=30)
    r.until(100)
    r.send()
    r.until(129)
    assert r.arrivals == [] and r.link.backlog == 1
    r.until(130)
    assert r.arrivals == [(1, 130)] and r.link.backlog == 0 and r.link.delivered == 1


def test_one_timer_covers_a_burst():
    r = Receiving(lag_ms=5)
    for _ in range(50):
        r.send()
    assert len(r.scheduler) == 1
    r.until(5)
    assert [lsn for lsn, _ in r.arrivals] == list(range(1, 51))


@settings(max_examples=examples(100), deadline=None)
@given(seed=st.integers(0, 2**32), lag_ms=st.integers(0, 50), jitter_ms=st.integers(1, 100),
       gaps=st.lists(st.integers(0, 40), min_size=1, max_size=40))
def test_jitter_never_reorders(seed, lag_ms, jitter_ms, gaps):
    r = Receiving(lag_ms, jitter_ms, seed)
    sent_at = {}
    for gap in gaps:
        r.until(r.clock.now_ms() + gap)
        r.send()
        sent_at[r.sent] = r.clock.now_ms()
    run_until_idle(r.clock, r.scheduler)
    assert [lsn for lsn, _ in r.arrivals] == list(sent_at)
    previous = 0
    for lsn, at in r.arrivals:
        assert at >= sent_at[lsn] + lag_ms
        assert at <= max(sent_at[lsn] + lag_ms + jitter_ms, previous)
        previous = at


def test_seeded_jitter_is_replayable():
    def run(seed):
        r = Receiving(lag_ms=10, jitter_ms=40, seed=seed)
        for i in range(30):
            r.until(i * 3)
            r.send()
        run_until_idle(r.clock, r.scheduler)
        return r.arrivals
    assert run(3) == run(3)
    assert run(3) != run(4)


def test_pause_keeps_the_backlog_and_heal_drains_it_in_order():
    for stalled in (PAUSED, CUT):
        r = Receiving(lag_ms=10)
        r.send()
        r.link.set_state(stalled)
        r.send()
        r.until(5)
        r.send()
        r.until(500)
        assert r.arrivals == [] and r.link.backlog == 3
        assert r.link.describe()["state"] == stalled
        r.link.set_state(ACTIVE)
        r.until(500)
        assert r.arrivals == [(1, 500), (2, 500), (3, 500)] and r.link.backlog == 0


def test_a_short_pause_does_not_deliver_early():
    r = Receiving(lag_ms=100)
    r.send()
    r.until(10)
    r.link.set_state(PAUSED)
    r.until(20)
    r.link.set_state(ACTIVE)
    r.until(99)
    assert r.arrivals == []
    r.until(100)
    assert r.arrivals == [(1, 100)]


def test_sends_after_heal_follow_the_backlog():
    r = Receiving(lag_ms=10)
    r.link.set_state(CUT)
    r.send()
    r.send()
    r.until(50)
    r.link.set_state(ACTIVE)
    r.send()                               # due at 60, after the drained backlog
    run_until_idle(r.clock, r.scheduler)
    assert r.arrivals == [(1, 50), (2, 50), (3, 60)]


def test_a_down_receiver_stalls_delivery_until_kicked():
    r = Receiving(lag_ms=10)
    r.link.receiver_up = False
    r.send()
    r.until(100)
    r.send()
    r.until(200)
    assert r.arrivals == [] and r.link.backlog == 2
    r.link.receiver_up = True
    r.link.kick()
    r.until(200)
    assert r.arrivals == [(1, 200), (2, 200)]


def test_receiver_going_down_while_a_timer_is_armed():
    r = Receiving(lag_ms=10)
    r.send()
    r.link.receiver_up = False
    r.until(50)
    assert r.arrivals == [] and r.link.backlog == 1
    r.link.receiver_up = True
    r.link.kick()
    r.until(50)
    assert r.arrivals == [(1, 50)]


def test_lowering_the_lag_brings_commits_in_flight_forward_in_order():
    r = Receiving(lag_ms=10_000)
    r.send()
    r.until(100)
    r.send()
    r.until(1000)
    assert r.arrivals == []
    r.link.set_lag(5)                      # a lag spike healed: the backlog drains within 5 ms
    r.send()
    r.until(1005)
    assert r.arrivals == [(1, 1005), (2, 1005), (3, 1005)] and r.link.backlog == 0


def test_a_healed_lag_spike_does_not_hold_later_commits_after_its_backlog_was_dropped():
    for drop in ("forget", "purge"):
        r = Receiving(lag_ms=10)
        r.link.set_lag(10_000)
        r.send()                           # due at 10,000
        if drop == "forget":
            r.link.forget({id(r.rs)})      # its container was deleted
        else:
            assert r.link.purge(r.rs, 0) == 1      # a forced failover rewrote its history
        r.until(100)
        r.link.set_lag(10)                 # healed with nothing left in flight
        r.send()
        r.until(110)
        assert r.rs.deliveries == [(2, 110)] and r.link.backlog == 0, drop


def test_raising_the_lag_leaves_commits_in_flight_alone():
    r = Receiving(lag_ms=10)
    r.send()
    r.link.set_lag(1000)
    r.send()
    r.until(999)
    assert r.arrivals == [(1, 10)]
    r.until(1000)
    assert r.arrivals == [(1, 10), (2, 1000)]


class Fanout:
    """Three links out of one region (different lags and jitter) into real replica sets, on one
    scheduler and clock: how a write region's commits leave it."""

    def __init__(self, seed):
        self.clock = ManualClock(0)
        self.scheduler = Scheduler()
        rng = random.Random(seed)
        self.targets = []
        for dst, lag, jitter in (("West US", 2, 0), ("North Europe", 30, 0), ("Japan East", 11, 7)):
            link = Link("East US", dst, lag, self.scheduler, self.clock, rng, jitter)
            self.targets.append((link, RecordingReplicaSet(dst, "0", self.scheduler, self.clock)))
        self.sent = 0

    def commit(self, one_call: bool):
        self.sent += 1
        lsn = self.sent
        versions = [Version(lsn, KEY, {"id": "a", "v": lsn}, b"", f'"{lsn}"', 0, "r")]
        if one_call:
            ship(self.targets, lsn, versions, self.clock.now_ms())
        else:
            for link, rs in self.targets:
                link.send(rs, lsn, versions)

    def seen(self):
        return [(link.describe(), rs.deliveries, rs.committed_lsn) for link, rs in self.targets]


@settings(max_examples=examples(60), deadline=None)
@given(seed=st.integers(0, 2**32),
       steps=st.lists(st.tuples(st.sampled_from(["commit", "commit", "commit", "pause", "cut", "heal",
                                                 "down", "up", "lag", "wait"]),
                                st.integers(0, 2), st.integers(0, 40)), max_size=60))
def test_ship_is_send_on_every_link(seed, steps):
    """One ship() call per commit delivers exactly what a send() per link does: the same times,
    order and link states, through pauses, cuts, receivers going down and lag changes."""
    runs = []
    for one_call in (True, False):
        f = Fanout(seed)
        for op, which, n in steps:
            link = f.targets[which][0]
            if op == "commit":
                f.commit(one_call)
            elif op in ("pause", "cut", "heal"):
                link.set_state({"pause": PAUSED, "cut": CUT, "heal": ACTIVE}[op])
            elif op in ("down", "up"):
                link.receiver_up = op == "up"
                if op == "up":
                    link.kick()
            elif op == "lag":
                link.set_lag(n, n // 4)
            run_until_idle(f.clock, f.scheduler, limit_ms=f.clock.now_ms() + (n if op == "wait" else 1))
        for link, _ in f.targets:
            link.receiver_up = True
            link.set_state(ACTIVE)
        run_until_idle(f.clock, f.scheduler)
        runs.append(f.seen())
    assert runs[0] == runs[1]
    assert all(committed == f.sent for _, _, committed in runs[0])    # everything arrived in the end
