"""The live progress line while a drill runs: per phase, ops/s, errors and the current fault.
On a terminal one line is rewritten in place (\\r) every TICK_S; otherwise a plain line is
printed as each phase ends, so a CI log reads top to bottom."""
import asyncio
import time

TICK_S = 0.5


class Progress:
    def __init__(self, out, drill):
        self.out = out
        self.drill = drill
        self.tty = bool(getattr(out, "isatty", lambda: False)())
        self.current = "steady state"
        self.phase_start_ms = 0.0
        self.phase_first_op = 0

    def _line(self, workload) -> str:
        ops = workload.ops[self.phase_first_op:]
        span_s = max((workload.now_ms() - self.phase_start_ms) / 1000.0, 1e-3)
        errors = sum(1 for op in ops if not op.ok)
        now_ms = workload.now_ms()
        faults = "; ".join(label for label, ends_ms in workload.active_faults.values()
                           if ends_ms is None or ends_ms > now_ms) or "none"
        return (f"[{workload.now_ms() / 1000:6.1f}s/{self.drill.duration_ms / 1000:.0f}s] {self.current}: "
                f"{len(ops) / span_s:7.1f} ops/s, {len(ops)} ops, {errors} errors; active faults: {faults}")

    def _write(self, text: str, final: bool) -> None:
        if self.tty:
            self.out.write("\r\x1b[2K" + text + ("\n" if final else ""))
        elif final:
            self.out.write(text + "\n")
        self.out.flush()

    def phase(self, workload, name: str) -> None:
        self._write(self._line(workload), final=True)
        self.current = name
        self.phase_start_ms = workload.now_ms()
        self.phase_first_op = len(workload.ops)

    async def tick_forever(self, workload) -> None:
        while self.tty:
            self._write(self._line(workload), final=False)
            await asyncio.sleep(TICK_S)

    def finish(self, workload) -> None:
        self._write(self._line(workload), final=True)


class Stage:
    """One line per stage of building the report (reading writes back, the history check, the
    plots), with how long it took: the seconds after the run are not silent."""

    def __init__(self, out, text: str):
        self.out, self.text = out, text

    def __enter__(self):
        self.began = time.monotonic()
        self.out.write(f"report: {self.text} ...\n")
        self.out.flush()
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            self.out.write(f"report: {self.text}: {time.monotonic() - self.began:.1f} s\n")
            self.out.flush()
