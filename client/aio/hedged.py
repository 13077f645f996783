"""Hedged operations (availability_strategy), run so that a healthy read costs a list and a
deque append: no timer, task or object of its own.

Theory of operation. The decisions are `hedging.HedgeRace`'s (client/policies/hedging.py); this
module only runs them, in two parts.

`HedgeTimer` watches the hedged operations in flight that share one strategy (a pipeline has one
per strategy in use, usually just its client's) with one loop timer. An operation's first hedge
is due at its start + the strategy's threshold, so these times rise in start order: the operations
wait in a deque in start order and the timer only ever needs to be armed for the head. A watched
operation is a list (`RUN`, `STARTED_S`, ... below); when its first chain ends, the pipeline
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
from collections import deque

from client.policies import hedging

# A watched operation: [RUN, TASK, REQ, DIAG, REGIONS]; [] once its first chain ended.
RUN, TASK, REQ, DIAG, REGIONS = range(5)
# A timer may fire a rounding error before its time (a float sum of start + threshold): a copy
# is due when its time is this close.
TIMER_SLACK_MS = 1e-6


class HedgeTimer:
    """The hedged operations of one strategy in flight in a pipeline, and their one timer (on the
    pipeline's loop: a pipeline lives on one, as its transport's connections do). Times count from
    each operation's start, its diagnostics' t = 0."""

    def __init__(self, pipeline, clock, strategy: hedging.AvailabilityStrategy):
        self.p = pipeline
        self._clock = clock                      # the pipeline's, seconds
        self.strategy = strategy
        self.waiting: deque[list] = deque()      # watched operations, in start order
        self._timer: asyncio.TimerHandle | None = None

    @property
    def armed(self) -> bool:
        return self._timer is not None

    def watch(self, req, diag, regions) -> list:
        """Start watching an operation whose first chain is about to run in the current task."""
        entry = [None, asyncio.current_task(), req, diag, regions]
        q = self.waiting
        if q and not q[0]:
            q.popleft()                  # one finished head per new operation keeps q short
        q.append(entry)
        if self._timer is None:          # else armed for an earlier start: due no later than this
            self._arm(diag.started_s)
        return entry

    def finish(self, entry: list, first=None):
        """The first chain ended with `first` (None: it raised): the HedgedRun that takes the
        operation on, or None when nothing more is needed (the timer never fired for it, and
        `first` is final or the chain raised)."""
        run = entry[RUN]
        if run is None and first is not None and not hedging.is_final(first.status, first.sub_status):
            run = HedgedRun(self, entry, inline=False)     # a transient failure: the next copy now
        entry.clear()
        return run

    def _arm(self, started_s: float) -> None:
        delay_ms = self.strategy.threshold_ms - (self._clock() - started_s) * 1000.0
        self._timer = asyncio.get_running_loop().call_later(max(delay_ms, 0.0) / 1000.0, self._fire)

    def _fire(self) -> None:
        self._timer = None
        now = self._clock()
        q = self.waiting
        while q:
            entry = q[0]
            if entry:
                started_s = entry[DIAG].started_s
                elapsed_ms = (now - started_s) * 1000.0
                if elapsed_ms + TIMER_SLACK_MS < self.strategy.threshold_ms:
                    return self._arm(started_s)
                entry[RUN] = run = HedgedRun(self, entry, inline=True)
                run.fire(max(elapsed_ms, self.strategy.threshold_ms))
            q.popleft()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class HedgedRun:
    __slots__ = ("p", "req", "diag", "regions", "strategy", "race", "tasks", "results", "inline",
                 "won_by_copy", "started", "loop", "main", "timer")

    def __init__(self, hedges: HedgeTimer, entry: list, inline: bool):
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
