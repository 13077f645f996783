"""The asyncio runtime's clock and timer driver for the core.

`LoopClock` gives the core epoch milliseconds: the wall clock is read once at start, and time
then advances with the event loop's monotonic clock, so it never jumps backwards.
`SchedulerDriver` keeps one event-loop timer armed for the core scheduler's earliest due time; a
wake-up runs what is due and then arms one timer for the earliest left, however many its callbacks
scheduled.

A timer armed at `loop_time_at(ms)` must see `now_ms() >= ms` when it fires. uvloop's clock
counts whole milliseconds, but the float arithmetic between the two can land a hair below
`ms`: truncated, the core would see nothing due and re-arm for the same instant, and the loop
would spin until the next millisecond ticked over.
FLOAT_SLACK_MS absorbs that rounding error and nothing more.
"""
import contextvars
import time
from math import floor

FLOAT_SLACK_MS = 0.001         # far above float error at any uptime, far below a millisecond
ARMED_BY_FIRE = float("-inf")  # SchedulerDriver._armed_ms while a wake-up runs the due callbacks


class LoopClock:
    __slots__ = ("_loop", "_origin_ms", "_origin_loop")

    def __init__(self, loop):
        self._loop = loop
        self._origin_ms = int(time.time() * 1000)
        self._origin_loop = loop.time()

    def now_ms(self) -> int:
        # floor, not int(): the same for the never negative time since the origin, and int() is
        # a class call (about 0.5 k instructions more, and a create reads the clock 2-3 times).
        return self._origin_ms + floor((self._loop.time() - self._origin_loop) * 1000 + FLOAT_SLACK_MS)

    def loop_time_at(self, ms: int) -> float:
        return self._origin_loop + (ms - self._origin_ms) / 1000


class SchedulerDriver:
    def __init__(self, loop, clock: LoopClock, scheduler):
        self._loop = loop
        self._clock = clock
        self._scheduler = scheduler
        self._handle = None
        self._armed_ms = None
        self._fire_cb = self._fire            # bound once: every timer arms it
        self._run = scheduler.run_due_then_next
        # uvloop's call_at(when) is call_later(when - time()) through two more Python-level
        # method calls and a keyword dict, about twice the cost: the driver calls call_later
        # itself (_start), with the loop's time read as call_at reads it.
        self._call_later = loop.call_later
        self._loop_time = loop.time
        # The core's callbacks read no context variables: handing the loop one context saves it
        # copying the current one for every timer.
        self._context = contextvars.copy_context()
        scheduler.on_earlier = self._arm

    def _arm(self, due_ms: int) -> None:
        armed = self._armed_ms
        if armed is not None:                  # None: no loop timer is armed (nor a handle kept)
            if armed <= due_ms:
                return
            self._handle.cancel()
        self._start(due_ms)

    def _start(self, due_ms: int) -> None:
        """Arm the loop timer for due_ms (no other may be armed)."""
        self._armed_ms = due_ms
        self._handle = self._call_later(self._clock.loop_time_at(due_ms) - self._loop_time(),
                                        self._fire_cb, context=self._context)

    def _fire(self) -> None:
        self._handle = None
        # While the due callbacks run, the timers they schedule need no loop timer of their own:
        # the one armed below, for the earliest left, covers them (an armed time at or before
        # every due time makes _arm return at once).
        self._armed_ms = ARMED_BY_FIRE
        try:
            nxt = self._run(self._clock.now_ms())
        except BaseException:
            self._armed_ms = None              # a callback raised: the others still run when due
            nxt = self._scheduler.next_due_ms()
            if nxt is not None:
                self._start(nxt)
            raise
        if nxt is None:
            self._armed_ms = None
        else:
            self._start(nxt)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._scheduler.on_earlier = None
