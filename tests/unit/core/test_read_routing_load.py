"""Proves, in virtual time, the direction of live read routing: reads that stay in flight for a
while (as under a latency fault) spread over the secondaries in proportion to their weights
(1:2:3, primary not taking reads), and a weight-0 replica serves only when nothing else can.
Each read is routed by the real policy on a real ReplicaSet, holds its replica for HOLD_MS, and
the scheduler jumps from timer to timer."""
from regionlab.emulator.core import read_routing
from regionlab.emulator.core.read_routing import ReadRoutingPolicy
from regionlab.emulator.core.replica_set import ReplicaSet
from regionlab.emulator.core.scheduler import ManualClock, Scheduler

HOLD_MS = 100
ARRIVAL_MS = 5          # a read every 5 ms, each held 100 ms: about 20 in flight at once


def drive(weights, reads=3000, on_choice=None):
    clock, scheduler = ManualClock(), Scheduler()
    rs = ReplicaSet("East US", "0", scheduler, clock,
                    routing=ReadRoutingPolicy(primary_accepts_reads=False, weights=weights))

    def release(r):
        r.in_flight -= 1

    def arrive(left):
        r = rs.readable_replica(0)
        if on_choice is not None:
            on_choice(rs, r)
        r.in_flight += 1
        r.reads_served += 1
        scheduler.call_at(clock.now_ms() + HOLD_MS, release, r)
        if left > 1:
            scheduler.call_at(clock.now_ms() + ARRIVAL_MS, arrive, left - 1)
    scheduler.call_at(0, arrive, reads)
    while (due := scheduler.next_due_ms()) is not None:
        clock.advance_to(max(due, clock.now_ms()))
        scheduler.run_due(clock.now_ms())
    return [r.reads_served for r in rs.replicas]


def test_served_shares_follow_weights_1_2_3():
    served = drive([1, 1, 2, 3])
    assert served[0] == 0                                # the primary takes no reads
    assert served[1] < served[2] < served[3]
    share = [n / sum(served[1:]) for n in served[1:]]
    for got, want in zip(share, (1 / 6, 2 / 6, 3 / 6)):
        assert abs(got - want) < 0.05, served


def test_equal_weights_balance_by_active_requests():
    def fewest(rs, chosen):
        assert chosen.in_flight == min(r.in_flight for r in rs.replicas[1:])
    served = drive([1, 1, 1, 1], on_choice=fewest)
    assert served[0] == 0
    assert all(abs(n / sum(served) - 1 / 3) < 0.05 for n in served[1:]), served


def test_weight_zero_only_when_nothing_else_can_serve():
    served = drive([1, 0, 1, 1])
    assert served[1] == 0 and served[2] > 0 and served[3] > 0


def test_check_weights_refuses_what_it_cannot_use():
    for bad in ([1, 2, 3], [1, 2, 3, 101], [1, 2, 3, -1], [1, 2, 3, True], "1,2,3,4"):
        try:
            read_routing.check_weights(bad)
        except ValueError as e:
            assert "4 integers from 0 to 100" in str(e)
        else:
            raise AssertionError(f"{bad!r} accepted")
