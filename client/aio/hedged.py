"""One hedged operation (availability_strategy), run so that a healthy read costs one timer.

Theory of operation. The decisions are `hedging.HedgeRace`'s (client/policies/hedging.py); this
module only runs them. The first region's retry chain runs *inline* in the caller's task, with
one `loop.call_later` armed for the first hedge's time. When the reply comes first (the healthy
case) the timer is cancelled and nothing else was ever created. When the timer fires, the due
copies start as tasks, each pinned to its region, and the timer is re-armed for the next one.
A copy whose reply is final while the inline chain still waits cancels the caller's task; the
inline chain unwinds (its attempt shows as cancelled) and the copy's result is the answer. That
cancellation is ours: it is taken back with `Task.uncancel()`, and if anyone else cancelled the
task too (the end-to-end timeout) the CancelledError goes on up, as asyncio.TaskGroup does.
Once the inline chain is over and no final reply came, the remaining copies are awaited as the
race says (the next copy at once when every running one failed transiently, else on its time).
"""
import asyncio

from client.policies import hedging


class HedgedRun:
    __slots__ = ("p", "req", "diag", "regions", "strategy", "race", "tasks", "results", "inline",
                 "won_by_copy", "started", "loop", "main", "timer")

    def __init__(self, pipeline, req, diag, regions, strategy):
        self.p, self.req, self.diag, self.regions = pipeline, req, diag, regions
        self.strategy = strategy
        self.race: hedging.HedgeRace | None = None   # made when the first timer fires or copy 0 fails
        self.tasks: dict[asyncio.Task, int] = {}
        self.results: dict[int, object] = {}
        self.inline = True                # the first chain is still running in the caller's task
        self.won_by_copy = False          # a copy's final reply cancelled the inline chain
        self.started = pipeline.now()
        self.loop = asyncio.get_running_loop()
        self.main = None
        self.timer = None

    def elapsed_ms(self) -> float:
        return (self.p.now() - self.started) * 1000.0

    def _decisions(self) -> hedging.HedgeRace:
        if self.race is None:
            self.race = hedging.HedgeRace(self.strategy, len(self.regions))
            self.race.due(0)              # copy 0: the inline chain
        return self.race

    async def run(self):
        self.main = asyncio.current_task()
        self.timer = self.loop.call_later(self.strategy.threshold_ms / 1000.0, self._fire)
        try:
            try:
                first = await self.p._chain(self.req, self.diag, self.regions[0], False, "initial")
            except asyncio.CancelledError:
                self.inline = False
                if self.won_by_copy and self.main.uncancel() == 0:
                    return self.results[self.race.winner]
                raise
            self.inline = False
            self.timer.cancel()
            self.timer = None
            if not self.tasks and hedging.is_final(first.status, first.sub_status):
                return first             # no fault: nothing but the timer was made
            self._record(0, first)
            return await self._rest()
        finally:
            if self.timer is not None:
                self.timer.cancel()
            if self.tasks:
                running = [t for t in self.tasks if not t.done()]     # usually none
                for t in running:
                    t.cancel()
                if running:
                    await asyncio.gather(*running, return_exceptions=True)

    # ---- while the first chain runs inline -----------------------------------------------------
    def _arm(self) -> None:
        due_ms = self._decisions().next_due_ms()
        if due_ms is not None:
            delay_s = max(due_ms - self.elapsed_ms(), 0.0) / 1000.0
            self.timer = self.loop.call_later(delay_s, self._fire)

    def _fire(self) -> None:
        self.timer = None
        if not self.inline:
            return
        for i in self._decisions().due(self.elapsed_ms()):
            self._start(i)
        self._arm()

    def _start(self, i: int) -> None:
        self.diag.event(self.p.now(), "hedge", f"copy {i} to {self.regions[i].name}")
        reason = f"hedge after {self.strategy.start_ms(i)} ms"
        task = self.loop.create_task(self.p._chain(self.req, self.diag, self.regions[i], True, reason))
        self.tasks[task] = i
        task.add_done_callback(self._copy_done)

    def _copy_done(self, task: asyncio.Task) -> None:
        if not self.inline or task.cancelled() or self.tasks[task] in self.results:
            return                       # after the inline chain, _rest collects the results
        if task.exception() is not None:
            return                       # _rest (or the finally) re-raises it
        i = self.tasks[task]
        self._record(i, task.result())
        if self.race.winner == i:
            self.won_by_copy = True
            self.main.cancel()

    def _record(self, i: int, result) -> None:
        self.results[i] = result
        for j in self._decisions().on_reply(i, result.status, result.sub_status, result):
            self._start(j)

    # ---- after it -------------------------------------------------------------------------------
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
