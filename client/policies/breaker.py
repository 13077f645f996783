"""Partition-level circuit breaker (multi-write accounts): per (partition, region) health.

Theory of operation. Each (partition, region) pair — a partition is (container link, partition
key range id), which the pipeline finds for a request (client/aio/partition_ranges.py) — is
Healthy, Unavailable or HealthyTentative. Consecutive failures are counted per pair, whatever
keys the requests carried (a success resets them): 10 failed reads or 5 failed writes make it
Unavailable, and requests for that partition, reads and writes alike, then try the other
regions first (the region moves to the end of the order; it is still used when nothing else is
left). After UNAVAILABLE_MS (30 s) it becomes HealthyTentative: the next request to it is a probe;
a success makes it Healthy, a failure Unavailable again for another 30 s. `check(now_ms)` is the
background sweep (every CHECK_INTERVAL_MS, 60 s) that moves Unavailable pairs whose time is up to
HealthyTentative even when no request asks; `order` does the same lazily.

The four numbers are the client's `circuit_breaker={...}` settings (`of`).

Failures are the transient ones that say a region cannot serve: 503, 408, 5xx and transport
errors (not 429, not 4xx answers about the request itself).
"""
from dataclasses import dataclass

READ_FAILURES_TOLERATED = 10
WRITE_FAILURES_TOLERATED = 5
UNAVAILABLE_MS = 30_000
CHECK_INTERVAL_MS = 60_000
HEALTHY, UNAVAILABLE, TENTATIVE = "Healthy", "Unavailable", "HealthyTentative"


@dataclass
class _Health:
    state: str = HEALTHY
    read_failures: int = 0
    write_failures: int = 0
    since_ms: float = 0.0


def is_failure(status: int | None, transport_error: str | None) -> bool:
    return transport_error is not None or (status is not None and (status >= 500 or status == 408))


class PartitionCircuitBreaker:
    def __init__(self, read_failures_tolerated: int = READ_FAILURES_TOLERATED,
                 write_failures_tolerated: int = WRITE_FAILURES_TOLERATED,
                 unavailable_ms: int = UNAVAILABLE_MS, check_interval_ms: int = CHECK_INTERVAL_MS):
        for name, value in (("read_failures_tolerated", read_failures_tolerated),
                            ("write_failures_tolerated", write_failures_tolerated),
                            ("unavailable_ms", unavailable_ms), ("check_interval_ms", check_interval_ms)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"circuit_breaker: {name} must be a positive number, not {value!r}")
        self.read_failures_tolerated = read_failures_tolerated
        self.write_failures_tolerated = write_failures_tolerated
        self.unavailable_ms = unavailable_ms
        self.check_interval_ms = check_interval_ms
        self._health: dict[tuple, _Health] = {}

    @classmethod
    def of(cls, value) -> "PartitionCircuitBreaker | None":
        """The client's `circuit_breaker=`: True (the defaults), False/None (off), a dict of
        the constructor's settings, or a PartitionCircuitBreaker."""
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            unknown = set(value) - {"read_failures_tolerated", "write_failures_tolerated",
                                    "unavailable_ms", "check_interval_ms"}
            if unknown:
                raise ValueError(f"circuit_breaker: unknown setting(s) {sorted(unknown)}; the settings are "
                                 "read_failures_tolerated, write_failures_tolerated, unavailable_ms, check_interval_ms")
            return cls(**value)
        raise ValueError(f"circuit_breaker must be True, False or a dict of settings, not {value!r}")

    @property
    def tracking(self) -> bool:
        """Whether any (partition, region) has a failure counted or is not Healthy: when not, a
        success changes nothing and the region order is the plain one."""
        return bool(self._health)

    def state(self, partition, region: str, now_ms: float) -> str:
        h = self._health.get((partition, region))
        if h is None:
            return HEALTHY
        self._expire(h, now_ms)
        return h.state

    def record(self, partition, region: str, is_write: bool, failed: bool, now_ms: float) -> str | None:
        """Count one outcome; returns the new state when it changed."""
        key = (partition, region)
        h = self._health.get(key)
        if h is None:
            if not failed:
                return None
            h = self._health[key] = _Health()
        before = h.state
        if not failed:
            del self._health[key]
            return HEALTHY if before != HEALTHY else None
        if h.state == TENTATIVE:
            return self._open(h, now_ms)
        if is_write:
            h.write_failures += 1
        else:
            h.read_failures += 1
        if h.state == HEALTHY and (h.write_failures >= self.write_failures_tolerated
                                   or h.read_failures >= self.read_failures_tolerated):
            return self._open(h, now_ms)
        return None

    def order(self, partition, regions: list, now_ms: float, name=lambda r: r) -> list:
        """The regions with this partition's Unavailable ones moved to the end."""
        if not self._health:             # no failure anywhere: the common case costs one check
            return regions
        bad = [r for r in regions if self.state(partition, name(r), now_ms) == UNAVAILABLE]
        if not bad:
            return regions
        return [r for r in regions if r not in bad] + bad

    def check(self, now_ms: float) -> list[tuple]:
        """The background sweep: (partition, region) pairs that became HealthyTentative."""
        moved = []
        for key, h in self._health.items():
            if h.state == UNAVAILABLE and self._expire(h, now_ms):
                moved.append(key)
        return moved

    def _open(self, h: _Health, now_ms: float) -> str:
        h.state, h.since_ms = UNAVAILABLE, now_ms
        h.read_failures = h.write_failures = 0
        return UNAVAILABLE

    def _expire(self, h: _Health, now_ms: float) -> bool:
        if h.state == UNAVAILABLE and now_ms - h.since_ms >= self.unavailable_ms:
            h.state, h.since_ms = TENTATIVE, now_ms
            return True
        return False
