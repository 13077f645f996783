"""The running drill on the emulator's dashboard: the runner sends its state to the control port
(`PUT /drill`, runtime/drill_api.py) at every step and every PUBLISH_S, and when it ends: the
drill's name, the phase, the steps (which ran, which is next and when) and the timeline so far
(operations and errors per bucket of the operations' start times).

The timeline is counted incrementally (each tick looks only at the operations completed since
the last), so a long drill's ticks cost what its last second did, not its whole history. A
control port that refuses the state (an older emulator without the route) ends the publishing
with one line; the drill itself goes on.
"""
import asyncio
import math

from ..control_client import ControlError
from ..runtime.drill_api import DRILL_LABEL_MAX_CHARS as LABEL_MAX, DRILL_STEPS_MAX, DRILL_TEXT_MAX_CHARS
from . import report as reports

PUBLISH_S = 1.0
TIMELINE_POINTS_MAX = 300          # the control port keeps at most 600
BUCKET_MS_MIN = 100


class Live:
    def __init__(self, target, drill, workload, progress, out):
        self.target, self.drill, self.workload, self.progress, self.out = target, drill, workload, progress, out
        self.bucket_ms = max(BUCKET_MS_MIN, math.ceil(drill.duration_ms / TIMELINE_POINTS_MAX / BUCKET_MS_MIN) * BUCKET_MS_MIN)
        self.counts: dict[int, list] = {}        # bucket -> [ops, errors]
        self.seen = 0                            # workload.ops counted so far
        self.on = True
        self._sending = asyncio.Lock()          # one PUT at a time: a late one must not undo a newer state

    def _timeline(self) -> list:
        ops = self.workload.ops
        for op in ops[self.seen:]:
            c = self.counts.setdefault(int(op.start_ms // self.bucket_ms), [0, 0])
            c[0] += 1
            c[1] += 0 if op.ok else 1
        self.seen = len(ops)
        return [{"t_s": b * self.bucket_ms / 1000, "ops": n, "errors": e} for b, (n, e) in sorted(self.counts.items())]

    def state(self, ended: str | None = None) -> dict:
        ran = len(self.workload.step_started_ms)
        # The control port keeps bounded labels and lists: a longer one is shown cut (the report is whole).
        steps = [{"label": reports.describe(s)[:LABEL_MAX], "at_ms": s["at_ms"], "ran": i < ran}
                 for i, s in enumerate(self.drill.schedule)][:DRILL_STEPS_MAX]
        following = next((s for s in steps if not s["ran"]), None) if ended is None else None
        timeline = self._timeline()
        return {"name": self.drill.name[:LABEL_MAX], "description": self.drill.description[:DRILL_TEXT_MAX_CHARS],
                "elapsed_ms": round(max(self.workload.now_ms(), 0.0), 1), "duration_ms": self.drill.duration_ms,
                "bucket_s": self.bucket_ms / 1000,
                "phase": self.progress.current[:LABEL_MAX], "steps": steps, "timeline": timeline,
                "next": {"label": following["label"], "at_ms": following["at_ms"]} if following else None,
                "ops": sum(p["ops"] for p in timeline), "errors": sum(p["errors"] for p in timeline),
                "ended": ended}

    async def publish(self, ended: str | None = None) -> None:
        async with self._sending:
            if not self.on:
                return
            try:
                await asyncio.to_thread(self.target.call, "PUT", "/drill", self.state(ended))
            except ControlError as e:
                self.on = False
                self.out.write(f"dashboard: the control port does not show this drill ({e})\n")

    async def publish_forever(self) -> None:
        while True:
            await self.publish()
            await asyncio.sleep(PUBLISH_S)
