"""What the endpoints served, request by request, in compact buckets: `GET /requests` on the
control port (docs/control-api.md), the server-side report of a drill without a workload
(emulator/drill/served.py).

Theory of operation. Every reply a Service sends is counted once, by the WINDOW_MS window of
the account clock in which it was *answered*, under (region, operation, status, substatus,
latency class). The latency is the account clock's from the start of Service.handle to its
reply (whole milliseconds: the clock's resolution), put in the first class of LATENCY_CLASSES_MS
at or above it, so a figure read back is an upper bound within about a quarter of the truth.
Windows are kept oldest first; the log holds at most ENTRIES_MAX keys over all its windows
(~ENTRY_BYTES each) and WINDOWS_MAX windows (~WINDOW_BYTES each, ten minutes of them), and drops the
oldest windows past either, so it is bounded in bytes however many distinct keys clients provoke (regions, operations, statuses and classes are few anyway:
the service names them, not the client). The clock only moves forward, so a reply always lands
in the newest window or a new one.

Sans-I/O: `add` takes the times it is given (the service reads its injected clock).
"""
import bisect
from collections import deque

WINDOW_MS = 100
# Upper bounds of the latency classes (ms), about 25 % apart; the last catches the rest.
LATENCY_CLASSES_MS = (0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 120, 150, 200, 250,
                      300, 400, 500, 600, 800, 1000, 1200, 1500, 2000, 2500, 3000, 4000, 5000, 6000, 8000,
                      10000, 12000, 15000, 20000, 25000, 30000, 40000, 50000, 60000, 80000, 100000, 120000)
ENTRY_BYTES = 200                  # a key tuple and its count in a window's dict (tracemalloc: ~110)
WINDOW_BYTES = 400                 # a window's tuple, its dict's own size and its place in the deque
REQUEST_LOG_MAX_BYTES = 32 * 1024 * 1024
WINDOWS_MAX = 600 * 1000 // WINDOW_MS       # ten minutes
ENTRIES_MAX = (REQUEST_LOG_MAX_BYTES - WINDOWS_MAX * WINDOW_BYTES) // ENTRY_BYTES
REPLY_ENTRIES_MAX = 20_000         # entries one GET /requests answers (ask again from its next_since_ms)


def latency_class_ms(ms: int) -> int:
    """The upper bound of ms's class (the last class for anything longer)."""
    i = bisect.bisect_left(LATENCY_CLASSES_MS, ms)
    return LATENCY_CLASSES_MS[min(i, len(LATENCY_CLASSES_MS) - 1)]


# latency_class_ms of each latency under a second (nearly every reply's), looked up by `add`.
_CLASS_TABLE_MS = 1000
_CLASS_OF_MS = tuple(latency_class_ms(ms) for ms in range(_CLASS_TABLE_MS))


class RequestLog:
    __slots__ = ("windows", "entries", "dropped_before_ms", "recording_since_ms", "_next_start", "_last")

    def __init__(self):
        self.windows: deque = deque()      # (window start ms, {(region, op, status, sub, latency class): n})
        self.entries = 0
        self.dropped_before_ms = None      # windows before this were dropped for room
        self.recording_since_ms = None     # when the services began adding to it (None: not yet)
        self._next_start = -1              # where the newest window ends (-1: there is none yet)
        self._last = None                  # the newest window's counts

    def add(self, started_ms: int, answered_ms: int, region: str | None, op: str, status: int, sub) -> None:
        # Every reply passes here: one comparison for the window, one tuple index for the class
        # (a bisect of the classes costs more than the rest of the step), one dict update.
        if answered_ms >= self._next_start:
            self._open(answered_ms)
        ms = answered_ms - started_ms
        key = (region, op, status, sub, _CLASS_OF_MS[ms] if 0 <= ms < _CLASS_TABLE_MS else latency_class_ms(ms))
        counts = self._last
        n = counts.get(key)
        if n is None:
            counts[key] = 1
            self.entries += 1
            if self.entries > ENTRIES_MAX:
                self._drop_oldest()
        else:
            counts[key] = n + 1

    def _open(self, answered_ms: int) -> None:
        """Begin the window answered_ms falls in (the clock only moves forward: after the last)."""
        start = answered_ms - answered_ms % WINDOW_MS
        self._next_start = start + WINDOW_MS
        self._last = {}
        self.windows.append((start, self._last))
        if len(self.windows) > WINDOWS_MAX:
            self._drop_oldest(windows_max=WINDOWS_MAX)

    def _drop_oldest(self, windows_max: int | None = None) -> None:
        while len(self.windows) > 1 and (self.entries > ENTRIES_MAX or
                                         windows_max is not None and len(self.windows) > windows_max):
            start, counts = self.windows.popleft()
            self.entries -= len(counts)
            self.dropped_before_ms = start + WINDOW_MS

    def since(self, since_ms: int, entries_max: int = REPLY_ENTRIES_MAX) -> dict:
        """The windows that began at or after since_ms, as GET /requests answers: at most about
        entries_max entries (whole windows), and where to ask next."""
        out, n, next_since, more = [], 0, since_ms, False
        for start, counts in self.windows:
            if start < since_ms:
                continue
            if n and n + len(counts) > entries_max:
                more = True
                break
            out.append({"start_ms": start, "requests": [
                {"region": r, "op": op, "status": st, "substatus": sub, "latency_ms_max": lat, "count": c}
                for (r, op, st, sub, lat), c in counts.items()]})
            n += len(counts)
            next_since = start + WINDOW_MS
        return {"window_ms": WINDOW_MS, "windows": out, "next_since_ms": next_since, "more": more,
                "dropped_before_ms": self.dropped_before_ms, "entries": self.entries, "entries_max": ENTRIES_MAX}
