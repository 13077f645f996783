"""The runtime's clock and timer driver: a core timer fires once, when it is due, not in a spin
(checked on ms-granular loop times like uvloop's, and on a real uvloop loop by counting wake-ups);
a wake-up arms one loop timer, for the earliest timer left, however many its callbacks scheduled;
a callback that raises does not strand the timers after it (a real uvloop loop)."""
import asyncio
import random

import uvloop

from regionlab.emulator.core.scheduler import Scheduler
from regionlab.emulator.runtime.clock import LoopClock, SchedulerDriver


class MsLoop:
    """A loop whose time() counts whole milliseconds, as uvloop's does (uv_now / 1000)."""

    def __init__(self, now_ms: int):
        self.now_ms = now_ms

    def time(self) -> float:
        return self.now_ms / 1000


class CountingScheduler(Scheduler):
    """The core scheduler, recording how many callbacks each wake-up ran."""
    __slots__ = ("runs",)

    def __init__(self):
        super().__init__()
        self.runs = []

    def run_due(self, now_ms: int) -> int:
        ran = super().run_due(now_ms)
        self.runs.append(ran)
        return ran


def test_a_timer_armed_for_a_millisecond_sees_that_millisecond():
    rng = random.Random(12)
    for _ in range(20_000):
        loop = MsLoop(rng.randint(10 ** 6, 10 ** 9))
        clock = LoopClock(loop)
        due_ms = clock.now_ms() + rng.randint(1, 10 ** 6)
        # uvloop fires a timer at uv_now + round(delay * 1000), in whole milliseconds.
        loop.now_ms += round((clock.loop_time_at(due_ms) - loop.time()) * 1000)
        assert clock.now_ms() == due_ms


def test_each_core_timer_wakes_the_driver_once():
    async def main() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        clock = LoopClock(loop)
        scheduler = CountingScheduler()
        driver = SchedulerDriver(loop, clock, scheduler)
        done = asyncio.Event()
        timers = 40
        fired = []

        def one(i: int) -> None:
            fired.append(i)
            if len(fired) == timers:
                done.set()
        start = clock.now_ms()
        for i in range(timers):
            scheduler.call_at(start + 1 + i, one, i)   # one per millisecond: a fire runs each
        await asyncio.wait_for(done.wait(), 10)
        driver.close()
        return len(fired), scheduler.runs.count(0)

    fired, empty_wakeups = uvloop.run(main())
    assert fired == 40
    assert empty_wakeups == 0, f"{empty_wakeups} driver wake-ups found nothing due (a spin)"


class RecordingLoop(MsLoop):
    """A loop of whole-millisecond time that records the timers armed on it and fires them when
    told (the driver uses only time() and call_later(); the driver is what is under test)."""

    class Handle:
        def __init__(self, when, fn):
            self.when, self.fn, self.cancelled = when, fn, False

        def cancel(self):
            self.cancelled = True

    def __init__(self, now_ms: int):
        super().__init__(now_ms)
        self.armed = []

    def call_later(self, delay, fn, context=None):
        handle = self.Handle(self.time() + delay, fn)
        self.armed.append(handle)
        return handle

    def live(self):
        return [h for h in self.armed if not h.cancelled]

    def fire(self, handle):
        self.now_ms = max(self.now_ms, round(handle.when * 1000))
        self.armed.remove(handle)
        handle.fn()


def test_timers_scheduled_during_a_wake_up_arm_one_loop_timer_for_the_earliest_left():
    loop = RecordingLoop(5_000_000)
    clock = LoopClock(loop)
    scheduler = Scheduler()
    SchedulerDriver(loop, clock, scheduler)
    t = clock.now_ms()
    ran = []

    def first():
        ran.append("first")
        scheduler.call_at(t + 7, ran.append, "t+7")
        scheduler.call_at(t + 6, ran.append, "t+6")
        scheduler.call_at(t + 5, ran.append, "now")     # due at once: runs in this wake-up
    scheduler.call_at(t + 5, first)
    (handle,) = loop.live()
    loop.fire(handle)
    assert ran == ["first", "now"]
    # One timer, for t+6 (not one per earlier timer scheduled while the wake-up ran, nor one for
    # the t+5 timer already run, which would wake the loop for nothing).
    assert [round(clock.loop_time_at(t + 6), 6)] == [round(h.when, 6) for h in loop.live()]
    loop.fire(loop.live()[0])
    loop.fire(loop.live()[0])
    assert ran == ["first", "now", "t+6", "t+7"] and loop.live() == []


def test_a_callback_that_raises_leaves_the_later_timers_armed():
    async def main() -> list:
        loop = asyncio.get_running_loop()
        errors = []
        loop.set_exception_handler(lambda loop, context: errors.append(context["exception"]))
        clock = LoopClock(loop)
        scheduler = Scheduler()
        driver = SchedulerDriver(loop, clock, scheduler)
        done = asyncio.Event()

        def bad():
            raise ValueError("a core callback failed")
        start = clock.now_ms()
        scheduler.call_at(start + 1, bad)
        scheduler.call_at(start + 3, done.set)
        await asyncio.wait_for(done.wait(), 10)
        driver.close()
        return errors

    errors = uvloop.run(main())
    assert [type(e) for e in errors] == [ValueError]
