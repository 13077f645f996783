"""Hedged operations (availability_strategy), run so that a healthy read costs a list and a
deque append: no timer, task or object of its own.

Theory of operation. The decisions are `hedging.HedgeRace`'s (client/policies/hedging.py); this
module only runs them, in two parts.

`HedgeWatch` watches the hedged operations in flight that share one strategy (a pipeline has one
per strategy in use, usually just its client's) with one loop timer. An operation's first hedge
is due at its start + the strategy's threshold, so these times rise in start order: the operations
wait in a deque in start order and the timer only ever needs to be armed for the head. A watched
operation is a list (`RUN`, `TASK`, ... below); when its first chain ends, the pipeline
empties it, and emptied entries are dropped lazily from the head: one by each new watch, all of
them when the timer fires. So the timer is armed only when nothing is armed: back-to-back reads
arm it once per threshold, not once per read. When it fires it drops the finished heads, hands
each operation whose time has come to a HedgedRun, and re-arms for the first one still waiting,
or stays unarmed when nothing is in flight.

`HedgedRun` exists only once an operation needs more than its first chain: the timer fired (the
due copies start as tasks, each pinned to its region, and the run arms its own timer for the next
copy), or the first chain ended without a final reply (the next copy starts at once). The first
region's chain runs *inline* in the caller's task (Pipeline._run). A copy whose reply is final
while the inline chain still waits cancels the caller's task; the inline chain unwinds (its
attempt shows as cancelled) and the copy's result is the answer. That cancellation is ours: it
is taken back with `Task.uncancel()`, and if anyone else cancelled the task too (the end-to-end
timeout) the CancelledError goes on up, as asyncio.TaskGroup does. Once the inline chain is over
and no final reply came, the remaining copies are awaited as the race says (the next copy at
once when every running one failed transiently, else on its time).
"""
import asyncio
import sys
from collections import deque

from regionlab.client.policies import hedging

# The caller's task, from its loop, in C: asyncio.current_task() is a Python function on 3.11
# (a frame and 13 bytecodes around this dict's get, a third of what watching an operation costs)
# and C, taking the loop, from 3.12.
task_of = asyncio.tasks._current_tasks.get if sys.version_info < (3, 12) else asyncio.current_task
running_loop = asyncio.get_running_loop

# A watched operation: [RUN, TASK, REQ, DIAG, REGIONS]; [] once its first chain ended.
RUN, TASK, REQ, DIAG, REGIONS = range(5)
# A timer may fire a rounding error before its time (a float sum of start + threshold): a copy
# is due when its time is this close.
TIMER_SLACK_MS = 1e-6


class FirstChainFailed(Exception):
    """A hedged operation's inline chain ended without a success; `result` goes to the race.
    Raised rather than returned, so that after a success Pipeline._run checks nothing."""

    def __init__(self, result):
        super().__init__(result.status)
        self.result = result


class HedgeWatch(deque):
    """The hedged operations of one strategy in flight in a pipeline, oldest first (the deque's
    entries), and the one timer that hedges them (on the pipeline's loop: a pipeline lives on one,
    as its transport's connections do). Times count from each operation's start, its diagnostics'
    t = 0.

    Pipeline._run watches an operation inline, as it is the hot path: it appends
    [None, task_of(running_loop()), req, diag, regions], first dropping the head if that one
    finished, and calls `arm` when no timer is armed (one armed for an earlier start is due no
    later). After the first chain it empties the entry, or hands it to `after_fired` (the timer
    made a HedgedRun for it) or `after_error` (the chain raised)."""
    __slots__ = ("p", "clock", "strategy", "timer")

    def __init__(self, pipeline, clock, strategy: hedging.AvailabilityStrategy):
        super().__init__()
        self.p = pipeline
        self.clock = clock                       # the pipeline's, seconds
        self.strategy = strategy
        self.timer: asyncio.TimerHandle | None = None

    @property
    def armed(self) -> bool:
        return self.timer is not None

    def arm(self, started_s: float) -> None:
        """Arm the timer for the first hedge of an operation that started at `started_s`."""
        delay_ms = self.strategy.threshold_ms - (self.clock() - started_s) * 1000.0
        self.timer = running_loop().call_later(max(delay_ms, 0.0) / 1000.0, self._fire)

    def _fire(self) -> None:
        self.timer = None
        now = self.clock()
        while self:
            entry = self[0]
            if entry:
                started_s = entry[DIAG].started_s
                elapsed_ms = (now - started_s) * 1000.0
                if elapsed_ms + TIMER_SLACK_MS < self.strategy.threshold_ms:
                    return self.arm(started_s)
                entry[RUN] = run = HedgedRun(self, entry, inline=True)
                run.fire(max(elapsed_ms, self.strategy.threshold_ms))
            self.popleft()

    async def after_fired(self, entry: list, first):
        """The first chain returned `first` after the timer had fired for it: the race's answer."""
        run = entry[RUN]
        entry.clear()
        return await run.after_first(first)

    async def after_error(self, entry: list, error: BaseException):
        """The first chain raised `error`: with FirstChainFailed, the race's answer (a final
        failure with no hedge running is the answer as it is); else a winning copy's answer
        when the error is its cancel, or `error` again once every copy is stopped."""
        run = entry[RUN]
        if isinstance(error, FirstChainFailed):
            first = error.result
            if run is None:
                if hedging.is_final(first.status, first.sub_status):
                    entry.clear()
                    return first
                run = HedgedRun(self, entry, inline=False)     # transient: the next copy now
            entry.clear()
            return await run.after_first(first)
        entry.clear()
        if run is None:
            raise error
        return await run.after_inline_error(error)

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class HedgedRun:
    __slots__ = ("p", "req", "diag", "regions", "strategy", "race", "tasks", "results", "inline",
                 "won_by_copy", "started", "loop", "main", "timer")

    def __init__(self, hedges: HedgeWatch, entry: list, inline: bool):
        self.p, self.strategy = hedges.p, hedges.strategy
        _, self.main, self.req, self.diag, self.regions = entry
        self.started = self.diag.started_s
        self.race = hedging.HedgeRace(self.strategy, len(self.regions))
        self.race.due(0)                  # copy 0: the inline chain
        self.tasks: dict[asyncio.Task, int] = {}
        self.results: dict[int, object] = {}
        self.inline = inline              # the first chain is still running in the caller's task
        self.won_by_copy = False          # a copy's final reply cancelled the inline chain
        self.loop = asyncio.get_running_loop()
        self.timer = None

    def elapsed_ms(self) -> float:
        return (self.p.now() - self.started) * 1000.0 + TIMER_SLACK_MS

    # ---- while the first chain runs inline -----------------------------------------------------
    def fire(self, elapsed_ms: float) -> None:
        """The shared timer found the first hedge due: start the due copies, arm for the next."""
        for i in self.race.due(elapsed_ms):
            self._start(i)
        self._arm()

    def _arm(self) -> None:
        due_ms = self.race.next_due_ms()
        if due_ms is not None:
            delay_s = max(due_ms - self.elapsed_ms(), 0.0) / 1000.0
            self.timer = self.loop.call_later(delay_s, self._fire)

    def _fire(self) -> None:
        self.timer = None
        if self.inline:
            self.fire(self.elapsed_ms())

    def _start(self, i: int) -> None:
        self.diag.event(self.p.now(), "hedge", f"copy {i} to {self.regions[i].name}")
        reason = f"hedge after {self.strategy.start_ms(i)} ms"
        task = self.loop.create_task(self.p._chain(self.req, self.diag, self.regions[i], True, True, reason))
        self.tasks[task] = i
        task.add_done_callback(self._copy_done)

    def _copy_done(self, task: asyncio.Task) -> None:
        if not self.inline or task.cancelled() or self.tasks[task] in self.results:
            return                       # after the inline chain, _rest collects the results
        if task.exception() is not None:
            return                       # _rest (or _stop_copies) re-raises it
        i = self.tasks[task]
        self._record(i, task.result())
        if self.race.winner == i:
            self.won_by_copy = True
            self.main.cancel()

    def _record(self, i: int, result) -> None:
        self.results[i] = result
        for j in self.race.on_reply(i, result.status, result.sub_status, result):
            self._start(j)

    # ---- after it -------------------------------------------------------------------------------
    async def after_first(self, first):
        """The inline chain returned `first`: the race's answer."""
        self._end_inline()
        try:
            self._record(0, first)
            return await self._rest()
        finally:
            await self._stop_copies()

    async def after_inline_error(self, error: BaseException):
        """The inline chain raised `error`: a winning copy's answer when the error is our own
        cancel, else `error` again once every copy is stopped."""
        self._end_inline()
        if isinstance(error, GeneratorExit):     # the task is being destroyed: nothing may wait
            for t in self.tasks:
                t.cancel()
            raise error
        try:
            if isinstance(error, asyncio.CancelledError) and self.won_by_copy and self.main.uncancel() == 0:
                return self.results[self.race.winner]
            raise error
        finally:
            await self._stop_copies()

    def _end_inline(self) -> None:
        self.inline = False
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    async def _stop_copies(self) -> None:
        running = [t for t in self.tasks if not t.done()]
        for t in running:
            t.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)

    async def _rest(self):
        while True:
            for t, i in list(self.tasks.items()):
                if t.done() and i not in self.results:
                    self._record(i, t.result())
            if self.race.done:
                return self.results[self.race.result_index()]
            due_ms = self.race.next_due_ms()
            wait_s = None if due_ms is None else max(0.0, (due_ms - self.elapsed_ms()) / 1000.0)
            pending = [t for t in self.tasks if not t.done()]
            if pending:
                await asyncio.wait(pending, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
            elif wait_s is not None:
                await asyncio.sleep(wait_s)
            for i in self.race.due(self.elapsed_ms()):
                self._start(i)
