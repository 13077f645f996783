"""Timers in the core's time, whatever drives it.

Theory of operation: core components never sleep; they ask the scheduler to call them back at
a due time (integer milliseconds on the account's clock). A shell owns the loop: the asyncio
runtime arms one event-loop timer for `next_due_ms()` and calls `run_due(now)` when it fires
(`run_due_then_next`, which also answers the next due time);
the simulator jumps virtual time straight to `next_due_ms()`. Callbacks due at the same
millisecond run in the order they were scheduled (a sequence number breaks ties), so a run is
deterministic. A callback may schedule more callbacks, including for `now` itself: `run_due`
keeps going until nothing at or before `now` is left (bounded by RUN_DUE_CALLBACKS_MAX).
While it runs them, `now_ms` is that `now`, so a callback need not read the clock again.
"""
from heapq import heappop, heappush

RUN_DUE_CALLBACKS_MAX = 1_000_000


class Scheduler:
    __slots__ = ("_heap", "_seq", "on_earlier", "now_ms")

    def __init__(self):
        self._heap: list = []
        self._seq = 0
        # Called with the new earliest due time whenever a timer lands before every other one;
        # the asyncio runtime uses it to re-arm its single loop timer.
        self.on_earlier = None
        self.now_ms = None          # the `now` of the run_due under way (None before the first)

    def call_at(self, due_ms: int, fn, *args) -> None:
        heap = self._heap
        self._seq = seq = self._seq + 1
        if heap and heap[0][0] <= due_ms:
            heappush(heap, (due_ms, seq, fn, args))
            return
        heappush(heap, (due_ms, seq, fn, args))
        if self.on_earlier is not None:      # before every other timer
            self.on_earlier(due_ms)

    def next_due_ms(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def run_due(self, now_ms: int) -> int:
        self.now_ms = now_ms
        ran = 0
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            _, _, fn, args = heappop(heap)
            fn(*args)
            ran += 1
            if ran >= RUN_DUE_CALLBACKS_MAX:
                raise RuntimeError("scheduler: callbacks keep rescheduling themselves at the same time")
        return ran

    def run_due_then_next(self, now_ms: int) -> int | None:
        """run_due(now_ms), then next_due_ms(): what the asyncio shell does on every wake-up, in
        one call (one loop that stops at the first entry not yet due and returns its time)."""
        self.now_ms = now_ms
        ran = 0
        heap = self._heap
        while heap:
            due, _, fn, args = heap[0]
            if due > now_ms:
                return due
            heappop(heap)
            fn(*args)
            ran += 1
            if ran >= RUN_DUE_CALLBACKS_MAX:
                raise RuntimeError("scheduler: callbacks keep rescheduling themselves at the same time")
        return None

    def __len__(self):
        return len(self._heap)


class ManualClock:
    """A clock that moves only when told: the simulator's and the core tests' time."""
    __slots__ = ("_now_ms",)

    def __init__(self, start_ms: int = 1_700_000_000_000):
        self._now_ms = start_ms

    def now_ms(self) -> int:
        return self._now_ms

    def advance_to(self, now_ms: int) -> None:
        if now_ms < self._now_ms:
            raise ValueError("time does not run backwards")
        self._now_ms = now_ms


def run_until_idle(clock: ManualClock, scheduler: Scheduler, limit_ms: int | None = None) -> None:
    """Jump virtual time from timer to timer until none is left (or the next is past limit_ms)."""
    while True:
        due = scheduler.next_due_ms()
        if due is None or (limit_ms is not None and due > limit_ms):
            break
        clock.advance_to(max(due, clock.now_ms()))
        scheduler.run_due(clock.now_ms())
    if limit_ms is not None and limit_ms > clock.now_ms():
        clock.advance_to(limit_ms)
