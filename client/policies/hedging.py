"""Hedging (`availability_strategy`): when to send copies of a request to other regions, and which
reply wins.

Theory of operation. A hedged request starts in the first applicable region at t = 0; if no final
reply has come by `threshold_ms` (500 ms) a copy goes to the second region, by
`threshold_ms + threshold_steps_ms` (600 ms) to the third, and so on. Each copy stays in its own
region. The first *final* reply wins and the other copies are cancelled: a success, or a
non-transient error (400, 401, 403 but 403/3 and 403/1008, 404/0, 405, 409, 412, 413) — so no
copy is sent after a non-transient error. A transient failure (429, 503, 408, 404/1002, a
transport error, ...) of every running copy starts the next copy at once instead of waiting for
its time. When every copy failed transiently, the first region's error is the answer.

Hedging applies to document operations: reads always; writes only on multi-write accounts with
the non-idempotent-write opt-in (a copy of a write may apply twice otherwise).

`HedgeRace` is the decision state of one hedged request; the pipeline feeds it the replies and
the clock and does what it says.
"""
from dataclasses import dataclass

from regionlab.client.protocol import status as S

THRESHOLD_MS = 500
THRESHOLD_STEPS_MS = 100
_NON_TRANSIENT = {S.BAD_REQUEST, S.UNAUTHORIZED, S.METHOD_NOT_ALLOWED, S.CONFLICT,
                  S.PRECONDITION_FAILED, S.REQUEST_ENTITY_TOO_LARGE}


@dataclass(frozen=True)
class AvailabilityStrategy:
    threshold_ms: int = THRESHOLD_MS
    threshold_steps_ms: int = THRESHOLD_STEPS_MS

    def __post_init__(self):
        if self.threshold_ms <= 0 or self.threshold_steps_ms <= 0:
            raise ValueError("availability_strategy: threshold_ms and threshold_steps_ms must be > 0")

    def start_ms(self, index: int) -> int:
        """When copy `index` (0 = the first region) is due, from the request's start."""
        if index == 0:
            return 0
        return self.threshold_ms + (index - 1) * self.threshold_steps_ms

    @classmethod
    def of(cls, value) -> "AvailabilityStrategy | None":
        """The client's or a request's `availability_strategy=`: True, False/None, a dict of
        threshold_ms/threshold_steps_ms, or an AvailabilityStrategy."""
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, cls):
            return value
        return cls(**value)


def is_final(status: int | None, sub_status: int = 0) -> bool:
    """A reply that ends the race: a success or a non-transient error."""
    if status is None:
        return False
    if status < 400:
        return True
    if status == S.NOT_FOUND:
        return sub_status == 0
    if status == S.FORBIDDEN:
        return sub_status not in (S.SUB_WRITE_FORBIDDEN, S.SUB_DATABASE_ACCOUNT_NOT_FOUND)
    return status in _NON_TRANSIENT


def applies(strategy, is_document: bool, is_write: bool, multi_write: bool, non_idempotent_opt_in: bool) -> bool:
    if strategy is None or not is_document:
        return False
    return not is_write or writes_hedge(multi_write, non_idempotent_opt_in)


def writes_hedge(multi_write: bool, non_idempotent_opt_in: bool) -> bool:
    """A copy of a write may apply twice: only where every region takes writes, and opted in."""
    return multi_write and non_idempotent_opt_in


class HedgeRace:
    """The decisions of one hedged request over `regions` copies."""

    def __init__(self, strategy: AvailabilityStrategy, regions: int):
        self.strategy = strategy
        self.regions = regions
        self.started = 0                 # copies started so far
        self.failed: dict[int, object] = {}
        self.winner: int | None = None

    def due(self, elapsed_ms: float) -> list[int]:
        """Copies to start now (call at the start and whenever a timer fires)."""
        out = []
        while (self.winner is None and self.started < self.regions
               and self.strategy.start_ms(self.started) <= elapsed_ms):
            out.append(self.started)
            self.started += 1
        return out

    def next_due_ms(self) -> float | None:
        if self.winner is not None or self.started >= self.regions:
            return None
        return self.strategy.start_ms(self.started)

    def on_reply(self, index: int, status: int | None, sub_status: int, result) -> list[int]:
        """Record copy `index`'s final outcome (after its own retries); returns copies to start
        at once (when every running copy has failed transiently)."""
        if self.winner is not None:
            return []
        if is_final(status, sub_status):
            self.winner = index
            return []
        self.failed[index] = result
        if len(self.failed) == self.started and self.started < self.regions:
            self.started += 1
            return [self.started - 1]
        return []

    @property
    def done(self) -> bool:
        return self.winner is not None or len(self.failed) == self.regions

    def result_index(self) -> int:
        """The copy whose result is the answer: the winner, else the first region's."""
        return self.winner if self.winner is not None else min(self.failed)
