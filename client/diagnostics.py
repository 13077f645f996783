"""What one operation did on the way to its answer: every attempt (region, endpoint,
status/substatus, latency, charge, why it was made), hedges, circuit-breaker and session
decisions, and the totals. Responses and errors both carry one (`.diagnostics`).

Times are milliseconds from the operation's start, on the monotonic clock the pipeline injects,
so a test in virtual time gets exact numbers. `to_dict()` is plain JSON-able data; `maybe_log`
logs it as one JSON line when the operation took longer than the client's threshold.
"""
import json
import logging
from dataclasses import asdict, dataclass, field

LOG = logging.getLogger("regionlab.client.diagnostics")
POINT_LATENCY_THRESHOLD_MS = 1_000       # as the Java SDK's point-operation default
FEED_LATENCY_THRESHOLD_MS = 3_000        # queries, read-feed and change feed


@dataclass
class Attempt:
    region: str
    endpoint: str
    started_ms: float
    reason: str = "initial"              # why this attempt was made (a retry's or hedge's reason)
    hedge: bool = False
    status: int | None = None            # None: no reply (transport error or cancelled)
    sub_status: int = 0
    latency_ms: float = 0.0
    request_charge: float = 0.0
    error: str | None = None             # transport error or "cancelled"
    outcome_unknown: bool = False        # a write sent and not answered (broken or timed out): it may have been applied
    direct: dict | None = None           # direct mode: replicas contacted, 410 refreshes, quorum, fallback


def _attempt_dict(a: Attempt) -> dict:
    d = asdict(a)
    d["latency_ms"] = round(a.latency_ms, 3)         # microseconds are all a reader can use
    return d


@dataclass
class Event:
    at_ms: float
    kind: str                            # "breaker", "session", "regions", "hedge", "account"
    detail: str


@dataclass
class Diagnostics:
    operation: str
    resource: str
    started_s: float                     # the pipeline clock's reading at the start
    attempts: list[Attempt] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    latency_ms: float = 0.0
    status: int | None = None
    sub_status: int = 0

    def elapsed_ms(self, now_s: float) -> float:
        return (now_s - self.started_s) * 1000.0

    def event(self, now_s: float, kind: str, detail: str) -> None:
        self.events.append(Event(round(self.elapsed_ms(now_s), 3), kind, detail))

    @property
    def request_charge(self) -> float:
        return sum(a.request_charge for a in self.attempts)

    @property
    def regions_contacted(self) -> list[str]:
        seen: list[str] = []
        for a in self.attempts:
            if a.region not in seen:
                seen.append(a.region)
        return seen

    @property
    def hedges(self) -> int:
        return sum(1 for a in self.attempts if a.hedge)

    @property
    def retries(self) -> int:
        return sum(1 for a in self.attempts if not a.hedge) - 1

    @property
    def replicas_contacted(self) -> list[dict]:
        return [r for a in self.attempts if a.direct for r in a.direct["replicas"]]

    def to_dict(self) -> dict:
        return {"operation": self.operation, "resource": self.resource,
                "status": self.status, "sub_status": self.sub_status,
                "latency_ms": round(self.latency_ms, 3), "request_charge": self.request_charge,
                "regions_contacted": self.regions_contacted,
                "replicas_contacted": self.replicas_contacted, "retries": max(self.retries, 0),
                "hedges": self.hedges, "attempts": [_attempt_dict(a) for a in self.attempts],
                "events": [asdict(e) for e in self.events]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    def __str__(self) -> str:
        return self.to_json()

    def maybe_log(self, threshold_ms: float | None) -> None:
        if threshold_ms is not None and self.latency_ms > threshold_ms:
            LOG.warning("slow operation %s", self.to_json())
