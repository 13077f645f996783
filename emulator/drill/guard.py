"""What ends a drill early, while it runs: the scenario's stop condition, a steady state that does
not hold before the first fault, and SIGINT/SIGTERM (docs/drills.md, "Ending early").

The schedule asks the guard between steps and waits on its event instead of sleeping, so a run
ends at the next step boundary or at once while it waits, never in the middle of a control-port
call (a fault the call injected is always known, and healed). The runner then heals what the
drill injected, builds the report of what ran and marks it `aborted` or `interrupted`.

    stop: {"error_rate_above": 0.5, "over_ms": 2000}: every TICK_S, the operations that ended in
    the last over_ms; more than that share failed, or none ended while one waited that long (a
    stall), and the run aborts.
"""
import asyncio
import signal

from . import judge, report

TICK_S = 0.1
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupt:
    """The first SIGINT or SIGTERM during a drill, caught on the event loop; a second one is the
    default's again (a second Ctrl-C stops at once)."""

    def __init__(self):
        self.signum: int | None = None
        self.event = asyncio.Event()
        self._loop = None

    def install(self) -> None:
        self._loop = asyncio.get_running_loop()
        try:
            for s in SIGNALS:
                self._loop.add_signal_handler(s, self._caught, s)
        except (RuntimeError, ValueError, NotImplementedError):   # not the main thread, or no signals here
            self._loop = None

    def _caught(self, signum: int) -> None:
        self.signum = signum
        self.event.set()
        self.uninstall()

    def uninstall(self) -> None:
        if self._loop is not None:
            for s in SIGNALS:
                self._loop.remove_signal_handler(s)
            self._loop = None


class Guard:
    """One run's early end: `ended` is None, or {"kind": "aborted"|"interrupted", "reason", "at_ms"}."""

    def __init__(self, drill, workload, interrupt: Interrupt | None = None):
        self.drill, self.workload = drill, workload
        self.interrupt = interrupt or Interrupt()
        self.ended: dict | None = None
        self.event = asyncio.Event()

    def _end(self, kind: str, reason: str, **more) -> None:
        if self.ended is None:
            self.ended = {"kind": kind, "reason": reason, "at_ms": round(self.workload.now_ms(), 1), **more}
            self.event.set()

    def refused(self, i: int, label: str, message: str) -> None:
        """The control port refused step i: the run stops there (exit 2 on the command line)."""
        self._end("aborted", f"the control port refused step {i} ({label}): {message}", refused=True)

    async def wait(self, wait_s: float) -> None:
        """Sleep wait_s, or less if the run ends meanwhile."""
        if wait_s > 0 and self.ended is None:
            try:
                await asyncio.wait_for(self.event.wait(), wait_s)
            except asyncio.TimeoutError:
                pass

    async def watch(self) -> None:
        """Until the run ends: the stop condition every TICK_S, and the interrupt."""
        waiter = asyncio.ensure_future(self.interrupt.event.wait())
        try:
            while self.ended is None:
                await asyncio.wait([waiter], timeout=TICK_S)
                if self.interrupt.signum is not None:
                    self._end("interrupted", f"{signal.Signals(self.interrupt.signum).name} received",
                              signal=self.interrupt.signum)
                elif self.drill.stop is not None:
                    self._check_stop()
        finally:
            waiter.cancel()

    def _check_stop(self) -> None:
        over_ms, cap = self.drill.stop["over_ms"], self.drill.stop["error_rate_above"]
        now = self.workload.now_ms()
        if now < over_ms:
            return
        ok = total = 0
        for op in reversed(self.workload.ops):        # appended as they end: the latest last
            if op.start_ms + op.latency_ms < now - over_ms:
                break
            total += 1
            ok += op.ok
        if not total:
            waiting_since = min(self.workload.in_flight.values(), default=now)
            if now - waiting_since > over_ms:          # waiting, not idle between paced operations
                self._end("aborted", f"stop condition: no operation ended in the last {over_ms} ms while one "
                                     f"waited (a stall counts as all failed; error_rate_above {cap})")
        elif 1 - ok / total > cap:
            self._end("aborted", f"stop condition: {total - ok} of the {total} operations that ended in the last "
                                 f"{over_ms} ms failed ({1 - ok / total:.1%}, error_rate_above {cap})")

    def steady_state_holds(self, first_step_ms: float) -> bool:
        """Before the first step: the steady-state assertions on what ran so far. A miss aborts the
        run before anything is injected (nothing to judge is no miss)."""
        limits = self.drill.assertions.get("steady_state")
        if not limits or self.ended is not None:
            return self.ended is None
        ops = [op for op in self.workload.ops if op.start_ms < first_step_ms]
        failed = [v for v in judge.span_verdicts("before the first fault", report.summarize(ops, first_step_ms), limits)
                  if v["held"] is False]
        if failed:
            self._end("aborted", "the steady state did not hold before the first fault, so nothing was injected: "
                      + "; ".join(f"{v['name']} {v['value']} (limit {v['op']} {v['limit']})" for v in failed))
        return not failed
