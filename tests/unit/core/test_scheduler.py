"""Proves scheduler.py runs timers in due order with ties in insertion order, runs callbacks
scheduled for `now` within the same run_due, tells the shell when an earlier timer appears, and
that run_until_idle jumps virtual time from timer to timer (and stops at a limit)."""
import pytest

from regionlab.emulator.core import scheduler as scheduler_module
from regionlab.emulator.core.scheduler import ManualClock, Scheduler, run_until_idle


def test_due_order_then_insertion_order_on_ties():
    s = Scheduler()
    ran = []
    for due, name in [(30, "c"), (10, "a1"), (20, "b"), (10, "a2"), (10, "a3")]:
        s.call_at(due, ran.append, name)
    assert s.run_due(100) == 5
    assert ran == ["a1", "a2", "a3", "b", "c"]


def test_run_due_runs_only_what_is_due():
    s = Scheduler()
    ran = []
    s.call_at(10, ran.append, 10)
    s.call_at(11, ran.append, 11)
    assert s.run_due(9) == 0 and ran == []
    assert s.run_due(10) == 1 and ran == [10]
    assert s.next_due_ms() == 11 and len(s) == 1
    s.run_due(11)
    assert s.next_due_ms() is None and len(s) == 0


def test_callbacks_scheduled_for_now_run_in_the_same_pass():
    s = Scheduler()
    ran = []

    def chain(n):
        ran.append(n)
        if n < 3:
            s.call_at(5, chain, n + 1)       # due "now" (even in the past): still this pass
        s.call_at(6, ran.append, f"later{n}")

    s.call_at(5, chain, 0)
    assert s.run_due(5) == 4
    assert ran == [0, 1, 2, 3]
    s.run_due(6)
    assert ran[4:] == ["later0", "later1", "later2", "later3"]


def test_a_runaway_callback_is_stopped(monkeypatch):
    monkeypatch.setattr(scheduler_module, "RUN_DUE_CALLBACKS_MAX", 50)
    s = Scheduler()

    def again():
        s.call_at(0, again)

    s.call_at(0, again)
    with pytest.raises(RuntimeError):
        s.run_due(0)


def test_on_earlier_fires_only_for_a_new_earliest_timer():
    s = Scheduler()
    heard = []
    s.on_earlier = heard.append
    s.call_at(50, lambda: None)
    s.call_at(60, lambda: None)
    s.call_at(50, lambda: None)          # a tie is not earlier
    s.call_at(40, lambda: None)
    assert heard == [50, 40]


def test_manual_clock_moves_only_forward():
    clock = ManualClock(1000)
    clock.advance_to(1000)
    clock.advance_to(1500)
    assert clock.now_ms() == 1500
    with pytest.raises(ValueError):
        clock.advance_to(1499)


def test_run_until_idle_jumps_from_timer_to_timer():
    clock, s = ManualClock(0), Scheduler()
    seen = []

    def tick(n):
        seen.append((n, clock.now_ms()))
        if n < 3:
            s.call_at(clock.now_ms() + 100, tick, n + 1)

    s.call_at(7, tick, 0)
    run_until_idle(clock, s)
    assert seen == [(0, 7), (1, 107), (2, 207), (3, 307)]
    assert clock.now_ms() == 307 and len(s) == 0


def test_run_until_idle_stops_at_the_limit_and_moves_the_clock_there():
    clock, s = ManualClock(0), Scheduler()
    ran = []
    for due in (10, 20, 30):
        s.call_at(due, ran.append, due)
    run_until_idle(clock, s, limit_ms=25)
    assert ran == [10, 20] and clock.now_ms() == 25 and s.next_due_ms() == 30
    run_until_idle(clock, s, limit_ms=30)
    assert ran == [10, 20, 30] and clock.now_ms() == 30


def test_a_timer_in_the_past_runs_without_moving_time_back():
    clock, s = ManualClock(100), Scheduler()
    ran = []
    s.call_at(40, ran.append, "late")
    run_until_idle(clock, s)
    assert ran == ["late"] and clock.now_ms() == 100
