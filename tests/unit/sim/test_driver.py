"""Proves the simulator's driver (emulator/sim/driver.py) keeps the Waits protocol
(service/waits.py) in virtual time: a request's first step runs inside start; a wait settled by a
callback resumes its request through the scheduler at the same virtual millisecond, never inside
that callback; the first settle wins over the timeout and the timeout gives None; holds end after
their delay; turn lets every request ready now go first; and a request awaiting anything but the
driver's waits is a clear error. Driven by hand on a ManualClock and the core Scheduler."""
import pytest

from regionlab.emulator.core.scheduler import ManualClock, Scheduler, run_until_idle
from regionlab.emulator.sim.driver import Driver


def driver():
    clock, scheduler = ManualClock(0), Scheduler()
    return Driver(clock, scheduler), clock, scheduler


def test_a_request_that_never_waits_is_answered_inside_start():
    d, _, scheduler = driver()
    got = []

    async def request():
        return "reply"

    d.start(request(), got.append)
    assert got == ["reply"] and len(scheduler) == 0


def test_a_settled_wait_resumes_its_request_through_the_scheduler_at_the_same_time():
    d, clock, scheduler = driver()
    settles, log = [], []

    async def request():
        log.append("waiting")
        value = await d.until(settles.append, 1_000)
        log.append(("resumed", value, clock.now_ms()))
        return value

    d.start(request(), lambda v: log.append(("done", v)))
    assert log == ["waiting"] and len(settles) == 1
    run_until_idle(clock, scheduler, limit_ms=200)
    settles[0](True)                         # a core callback, at 200 ms
    log.append("callback returned")
    settles[0](False)                        # the first settle wins
    run_until_idle(clock, scheduler, limit_ms=200)
    assert log == ["waiting", "callback returned", ("resumed", True, 200), ("done", True)]
    run_until_idle(clock, scheduler)         # the timeout finds its wait settled: nothing happens
    assert log[-1] == ("done", True) and clock.now_ms() == 1_000


def test_a_wait_that_nobody_settles_times_out_with_none():
    d, clock, scheduler = driver()
    got = []

    async def request():
        return await d.until(lambda settle: None, 300), clock.now_ms()

    d.start(request(), got.append)
    run_until_idle(clock, scheduler)
    assert got == [(None, 300)]


def test_a_wait_settled_while_registering_does_not_suspend():
    d, _, scheduler = driver()
    got = []

    async def request():
        return await d.until(lambda settle: settle("at once"), 300)

    d.start(request(), got.append)
    assert got == ["at once"]


def test_on_wake_runs_inside_the_settling_callback_before_the_request_resumes():
    d, clock, scheduler = driver()
    settles, log = [], []

    async def request():
        await d.until(settles.append, 1_000)
        log.append("resumed")

    d.start(request(), lambda _: None, on_wake=lambda v: log.append(("woken", v)))
    settles[0](7)
    assert log == [("woken", 7)]
    run_until_idle(clock, scheduler, limit_ms=0)
    assert log == [("woken", 7), "resumed"]


def test_hold_turn_and_soon_in_virtual_time():
    d, clock, scheduler = driver()
    log = []

    async def held():
        await d.hold(250)
        log.append(("held", clock.now_ms()))

    async def turning():
        await d.turn()
        log.append(("turned", clock.now_ms()))

    d.start(held(), lambda _: None)
    d.start(turning(), lambda _: None)
    d.soon(lambda: log.append(("soon", clock.now_ms())))
    run_until_idle(clock, scheduler)
    assert log == [("soon", 0), ("turned", 0), ("held", 250)]


def test_awaiting_anything_else_is_a_clear_error():
    d, _, _ = driver()

    class Foreign:
        def __await__(self):
            yield self

    async def request():
        await Foreign()

    with pytest.raises(TypeError, match="only the simulator's waits"):
        d.start(request(), lambda _: None)
