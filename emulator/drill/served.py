"""A drill without a `workload` section: your own application drives the emulator, the drill
runs only the timeline, and the report is built from what the emulator served (GET /requests,
emulator/service/request_log.py), not from what a client saw (docs/drills.md, "Your own
application as the workload").

Theory of operation. `ServedWorkload` stands where the drill's workload stands in runner.py: it
sends nothing, and while the run lasts it reads GET /requests every POLL_S, turning each window's
counts into one `ServedOp` per request, so the guard (stop condition, steady state), the
progress line and report.py's arithmetic (phases, fault windows, RTO, assertions) judge the
requests the emulator served with the same rules as a workload's operations. A request's times
come from its window: it ended in the middle of the window in which it was answered and began
its latency class's upper bound earlier (an upper bound: request_log.py). The emulator's clock is
read once before the run (the reply's now_ms), so the drill's time 0 is the emulator's, wherever
it runs (another host, a container).

Server-side figures count requests, an SDK's retries included: a failed attempt that the
application's SDK retried elsewhere counts as failed here, so availability is the share of
requests the service served, a lower bound of what the application saw. A request counts as
failed when the service did not serve it: 5xx, 408, 410, 429, 449, 403/3 (write forbidden),
404/1002 (session not available), or a reply a fault dropped or reset. Everything else is
served: 2xx/304, a read of an absent item (404/0), and the application's own mistakes
(400, 401, 409, 412, 413), which no outage causes. A region that refuses or drops connections
(outage modes `refuse`, `blackhole`) serves nothing, so it is not seen at all: what shows is
the requests the application sends elsewhere, or none. RTO counts a 100 ms bin with no
request as down when requests are *expected*: when the application sent at least
EXPECTED_PER_BIN_MIN requests per bin on average before the first step (the report's
`recovery.expected_per_bin`); a sparser application's empty bins are idle, not down.
"""
import asyncio
import time
from dataclasses import dataclass

from ..service.request_log import WINDOW_MS

from .report import window_ops
from .workload import Op

POLL_S = 0.25
EXPECTED_PER_BIN_MIN = 1.0
FAILED_STATUSES = frozenset({408, 410, 429, 449})
FAILED_SUBSTATUS = frozenset({(403, 3), (404, 1002)})
KINDS = {"read": "read", "write": "write", "query": "query"}     # else "metadata" (and "account")


@dataclass
class ServedOp(Op):
    """A request the emulator answered (the fields of Op; retries and charge are the client's).
    region is the region that served it, as a workload's Op has it (None when it failed);
    answered_by the region that answered, whatever the status."""
    answered_by: str | None = None

    @property
    def ok(self) -> bool:
        return served_ok(self.status, self.sub_status)


def served_ok(status: int, sub) -> bool:
    if not isinstance(sub, int):           # a reply a request fault dropped or reset
        return False
    return status < 500 and status not in FAILED_STATUSES and (status, sub) not in FAILED_SUBSTATUS


def ops_of(windows: list, offset_ms: float) -> list[ServedOp]:
    """GET /requests windows as ServedOps on the drill's time (offset_ms: the emulator's time at
    the drill's 0), in the order they were answered."""
    out = []
    for w in windows:
        ended = w["start_ms"] + WINDOW_MS / 2 - offset_ms
        for r in w["requests"]:
            latency = float(r["latency_ms_max"])
            op = ServedOp(start_ms=ended - latency, kind=r["op"], status=r["status"], sub_status=r["substatus"],
                          latency_ms=latency, region=None, answered_by=r["region"])
            op.region = r["region"] if op.ok else None
            out.extend([op] * r["count"])        # one object per distinct record: ops are read, never changed
    return out


def expected_per_bin(ops: list, first_step_ms: float, bin_ms: int) -> float:
    """Requests per bin before the first step, when that is enough for an empty bin to mean
    down (EXPECTED_PER_BIN_MIN); 0: empty bins are idle."""
    if first_step_ms <= 0:
        return 0.0
    rate = sum(1 for op in ops if op.start_ms + op.latency_ms < first_step_ms) * bin_ms / first_step_ms
    return round(rate, 2) if rate >= EXPECTED_PER_BIN_MIN else 0.0


def by_region(ops: list) -> dict:
    """{region: {op: {"status/substatus": requests}}}: what each region answered."""
    out: dict = {}
    for op in ops:
        ops_of_region = out.setdefault(op.answered_by or "global", {})
        statuses = ops_of_region.setdefault(op.kind, {})
        key = f"{op.status}/{op.sub_status}"
        statuses[key] = statuses.get(key, 0) + 1
    return out


def annotate(report: dict, ops: list) -> dict:
    """Each phase's and fault window's requests by region, operation and status (report.py
    chose their ops: a phase's by start, a window's in flight during it)."""
    for p in report["phases"]:
        p["requests_by_region"] = by_region([op for op in ops if p["start_ms"] <= op.start_ms < p["end_ms"]])
    for w in report["faults"]:
        w["requests_by_region"] = by_region(window_ops(ops, w))
    report["requests_by_region"] = by_region(ops)
    return report


class ServedWorkload:
    """runner.py's workload for a drill without one: watches GET /requests instead of sending."""

    def __init__(self, drill, target):
        self.drill, self.target = drill, target
        self.ops: list = []
        self.injected: list = []
        self.step_started_ms: list = []
        self.active_faults: dict = {}
        self.knobs_changed: dict = {}
        self.in_flight: dict = {}            # nothing is in flight on the drill's side
        self.started_s = 0.0
        self.offset_ms = 0.0                 # the emulator's clock at the drill's 0
        self._synced = (0.0, 0.0)            # (the emulator's now_ms, time.monotonic()) read together
        self._since_ms = 0
        self._stop = asyncio.Event()

    async def setup(self) -> None:
        reply = await asyncio.to_thread(self.target.call, "GET", "/requests?since_ms=" + str(2 ** 53))
        self._synced = (reply["now_ms"], time.monotonic())

    def start_clock(self) -> None:
        """The drill's 0 is the start of the emulator's window the run begins in, so each
        window is one of the drill's 100 ms bins (RTO's too)."""
        now_s = time.monotonic()
        now_ms, at_s = self._synced
        server_now_ms = now_ms + (now_s - at_s) * 1000.0
        self.offset_ms = float(int(server_now_ms) - int(server_now_ms) % WINDOW_MS)
        self.started_s = now_s - (server_now_ms - self.offset_ms) / 1000.0
        self._since_ms = int(self.offset_ms)

    def now_ms(self) -> float:
        return (time.monotonic() - self.started_s) * 1000.0

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        while not self._stop.is_set():
            try:
                await asyncio.wait_for(self._stop.wait(), POLL_S)
            except asyncio.TimeoutError:
                pass
            await self.poll(final=self._stop.is_set())

    async def poll(self, final: bool = False) -> None:
        """The windows answered since the last poll; the newest one only once it is over (or at
        the end), so none is read half full."""
        reply = await asyncio.to_thread(self.target.call, "GET", f"/requests?since_ms={self._since_ms}")
        windows = reply["windows"]
        if not final and windows and windows[-1]["start_ms"] + WINDOW_MS > reply["now_ms"]:
            windows = windows[:-1]
        if windows:
            self.ops.extend(ops_of(windows, self.offset_ms))
            self._since_ms = windows[-1]["start_ms"] + WINDOW_MS
        if reply["more"]:
            await self.poll(final)               # a reply is capped in entries: the rest

    async def change_client(self, options: dict) -> None:      # refused when the scenario is read
        raise AssertionError("a drill without a workload has no client to change")

    async def read_back(self, write_region: str) -> set:
        return set()                          # no acknowledged writes are known on this side

    async def close(self) -> None:
        pass
