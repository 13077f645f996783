"""Proves the `connections` strategy of read_routing.py in virtual time, on real replica sets: a
connection pins one replica per replica set by the highest weight / (pinned + 1) (fewest pinned
with equal weights; weight 0 and a reluctant primary only when nothing else is up), keeps it
while it may serve, serves only eventual and consistent-prefix reads from it, releases every pin
on close, and loses its pins when the knobs change; a hypothesis state machine checks that each
replica's `pinned` always equals the open connections pinned to it."""
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from core_world import World
from regionlab.emulator.core import limits
from regionlab.emulator.core import read_routing
from regionlab.emulator.core.consistency import EVENTUAL, PREFIX, SESSION, STRONG
from regionlab.emulator.core.documents import choose_replica
from regionlab.emulator.core.read_routing import CONNECTIONS, ConnectionPins, ReadRoutingPolicy
from regionlab.emulator.core.replica import DOWN, PRIMARY, UP
from regionlab.emulator.core.replica_set import ReplicaSet
from regionlab.emulator.core.scheduler import ManualClock, Scheduler
from tiers import examples

EAST = "East US"


def replica_set(weights=(1, 1, 1, 1), primary_reads=False, strategy=CONNECTIONS, region=EAST):
    policy = ReadRoutingPolicy(primary_accepts_reads=primary_reads, strategy=strategy, weights=list(weights))
    return ReplicaSet(region, "0", Scheduler(), ManualClock(), routing=policy)


def pinned(rs) -> list:
    return [r.pinned for r in rs.replicas]


def test_connections_spread_by_fewest_pinned_and_stay_put():
    rs = replica_set()
    conns = [ConnectionPins() for _ in range(6)]
    first = [c.replica_for(rs).index for c in conns]
    assert first == [1, 2, 3, 1, 2, 3]              # primary off; ties to the lowest index
    assert pinned(rs) == [0, 2, 2, 2]
    rs.replicas[1].in_flight = 50                    # in-flight load does not move a pin
    assert [c.replica_for(rs).index for c in conns for _ in range(3)] == [i for i in first for _ in range(3)]
    assert pinned(rs) == [0, 2, 2, 2]


def test_pins_follow_weights():
    rs = replica_set(weights=(1, 1, 2, 3))
    conns = [ConnectionPins() for _ in range(60)]
    for c in conns:
        c.replica_for(rs)
    assert pinned(rs) == [0, 10, 20, 30]


def test_weight_zero_and_reluctant_primary_only_when_nothing_else_is_up():
    rs = replica_set(weights=(1, 0, 1, 1))
    for _ in range(4):
        assert ConnectionPins().replica_for(rs).index in (2, 3)
    assert pinned(rs) == [0, 0, 2, 2]
    rs.replicas[2].state = rs.replicas[3].state = DOWN
    c = ConnectionPins()
    assert c.replica_for(rs).role == PRIMARY         # fallbacks: the primary first
    assert ConnectionPins().replica_for(rs).index == 1     # then the one with fewer pins
    rs.replicas[3].state = UP
    assert c.replica_for(rs).index == 3              # a fallback pin moves once a proper one is up
    assert pinned(rs) == [0, 1, 2, 3]


def test_a_pin_moves_when_its_replica_goes_down_or_becomes_a_primary_without_reads():
    rs = replica_set()
    c = ConnectionPins()
    assert c.replica_for(rs).index == 1
    rs.replicas[1].state = DOWN
    assert c.replica_for(rs).index == 2 and pinned(rs) == [0, 0, 1, 0]
    rs.replicas[1].state = UP
    assert c.replica_for(rs).index == 2              # a pin that holds stays
    rs.replicas[2].role, rs.replicas[0].role = PRIMARY, "secondary"
    assert c.replica_for(rs).index == 0 and pinned(rs) == [1, 0, 0, 0]


def test_a_read_only_endpoint_never_pins_the_primary():
    rs = replica_set(primary_reads=True)
    c = ConnectionPins()
    assert c.replica_for(rs).index == 0
    assert c.replica_for(rs, primary_ok=False).index == 1 and pinned(rs) == [0, 1, 0, 0]
    for r in rs.replicas[1:]:
        r.state = DOWN
    assert c.replica_for(rs, primary_ok=False) is None and pinned(rs) == [0, 0, 0, 0]


def test_release_unpins_everything_once():
    a, b = replica_set(), replica_set(region="West US")
    c = ConnectionPins()
    c.replica_for(a), c.replica_for(b)
    assert c in a.routing.pin_holders and pinned(a) == pinned(b) == [0, 1, 0, 0]
    c.release()
    c.release()
    assert pinned(a) == pinned(b) == [0, 0, 0, 0] and c not in a.routing.pin_holders


def test_pins_per_connection_are_bounded():
    policy = ReadRoutingPolicy(primary_accepts_reads=False, strategy=CONNECTIONS)
    sets = [ReplicaSet(EAST, str(i), Scheduler(), ManualClock(), routing=policy)
            for i in range(limits.PINS_PER_CONNECTION_MAX + 1)]
    c = ConnectionPins()
    for rs in sets:
        c.replica_for(rs)
    assert len(c.by_set) == 1 and sum(r.pinned for rs in sets for r in rs.replicas) == 1


def test_only_eventual_and_consistent_prefix_reads_follow_the_pin():
    rs = replica_set()
    for r in rs.replicas:
        r.applied_lsn = 5
    rs.committed_lsn = rs.lsn = 5
    c = ConnectionPins()
    assert choose_replica(rs, EVENTUAL, None, pins=c)[0].index == 1
    rs.replicas[2].pinned = rs.replicas[3].pinned = 7     # others' pins make 1 the fewest-pinned
    assert choose_replica(rs, PREFIX, None, pins=c)[0].index == 1
    rs.replicas[1].in_flight = 3
    # Session and strong reads are routed per request (active requests), and pin nothing.
    assert choose_replica(rs, SESSION, None, pins=c)[0].index == 2
    other = ConnectionPins()
    assert choose_replica(rs, STRONG, None, pins=other)[0].index == 2 and not other.by_set
    assert choose_replica(rs, EVENTUAL, None, pins=c)[0].index == 1


def test_under_active_requests_pins_are_ignored():
    rs = replica_set(strategy=read_routing.ACTIVE_REQUESTS)
    rs.replicas[1].in_flight = 2
    c = ConnectionPins()
    assert choose_replica(rs, EVENTUAL, None, pins=c)[0].index == 2 and not c.by_set
    rs.routing.overrides[EAST] = {"strategy": CONNECTIONS}       # one region's strategy
    assert choose_replica(rs, EVENTUAL, None, pins=c)[0].index == 1 and c.by_set


def test_changing_the_knobs_drops_every_pin():
    world = World()
    account = world.account
    container = world.container()
    sets = [rs for _, p in account.partitions() for rs in p.replica_sets.values()]
    read_routing.change_settings(account, {"strategy": CONNECTIONS})
    conns = [ConnectionPins() for _ in range(3)]
    for c in conns:
        for rs in sets:
            c.replica_for(rs)
    assert sum(r.pinned for rs in sets for r in rs.replicas) == 3 * len(sets)
    read_routing.change_weights(account, {"weights": [1, 1, 1, 5]})
    assert all(r.pinned == 0 for rs in sets for r in rs.replicas) and not account.routing.pin_holders
    for c in conns:
        assert c.replica_for(sets[0]).index == 3        # pinned again, by the new weights
    read_routing.change_settings(account, {"strategy": "active_requests", "region": EAST})
    assert all(r.pinned == 0 for rs in sets for r in rs.replicas)
    assert container.partitions and account.routing.describe()["regions"] == {EAST: {"strategy": "active_requests"}}


class PinAccounting(RuleBasedStateMachine):
    """Connections open, read, close; replicas go down and up; knobs change. Model: the pins
    each open connection holds (what by_set says) are the only pins anywhere."""

    def __init__(self):
        super().__init__()
        self.policy = ReadRoutingPolicy(primary_accepts_reads=False, strategy=CONNECTIONS)
        self.sets = [ReplicaSet(EAST, str(i), Scheduler(), ManualClock(), routing=self.policy) for i in range(2)]
        self.open: list = []

    @rule()
    def open_connection(self):
        self.open.append(ConnectionPins())

    @precondition(lambda self: self.open)
    @rule(i=st.integers(0, 63), s=st.integers(0, 1), primary_ok=st.booleans())
    def read(self, i, s, primary_ok):
        c = self.open[i % len(self.open)]
        r = c.replica_for(self.sets[s], primary_ok)
        if r is not None:
            assert r.state == UP and c.by_set[self.sets[s]] is r
            assert primary_ok or r.role != PRIMARY

    @precondition(lambda self: self.open)
    @rule(i=st.integers(0, 63))
    def close(self, i):
        self.open.pop(i % len(self.open)).release()

    @rule(s=st.integers(0, 1), index=st.integers(0, 3), up=st.booleans())
    def replica_state(self, s, index, up):
        self.sets[s].replicas[index].state = UP if up else DOWN

    @rule(primary_reads=st.booleans())
    def knobs_change(self, primary_reads):
        self.policy.primary_accepts_reads = primary_reads
        self.policy.drop_pins()

    @invariant()
    def pinned_counts_the_open_connections_pinned_there(self):
        for rs in self.sets:
            for r in rs.replicas:
                assert r.pinned == sum(1 for c in self.open if c.by_set.get(rs) is r)

    @invariant()
    def every_pinned_connection_is_registered_and_no_closed_one_is(self):
        # (a connection whose only pin fell through stays registered until it closes)
        assert {c for c in self.open if c.by_set} <= self.policy.pin_holders <= set(self.open)


PinAccounting.TestCase.settings = settings(max_examples=examples(60), stateful_step_count=40, deadline=None)
test_pin_accounting = PinAccounting.TestCase
