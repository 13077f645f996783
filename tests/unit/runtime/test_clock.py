"""The runtime's clock and timer driver: a core timer fires once, when it is due, not in a spin
(checked on ms-granular loop times like uvloop's, and on a real uvloop loop by counting wake-ups)."""
import asyncio
import random

import uvloop

from emulator.core.scheduler import Scheduler
from emulator.runtime.clock import LoopClock, SchedulerDriver


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
