"""Retries: what to do after one attempt's outcome, as a pure decision.

Theory of operation. The pipeline keeps one `RetryState` per operation (per hedged copy) and,
after every attempt, calls `decide(options, state, outcome, request)`. The answer says whether
to retry, after how long, where (`same` region, `next` region in the applicable order, the
`write` region), whether to refresh the account first and whether to mark the endpoint
unavailable, and gives the reason that diagnostics record. The rules, with their defaults:

* 429/3200 (and any 429 but 50009): wait the server's retry-after; at most 9 retries and 30 s
  of waiting in all: a wait that would take the total past 30 s is not made (as the Java SDK's
  ResourceThrottleRetryPolicy; azure-cosmos checks before adding, so it may wait longer);
* 429/50009 (the account's credit window is spent): wait 2 s, then twice as long each time up to
  8 s (or the server's retry-after when longer), at most 30 s in all, the same way;
* 403/3: the region no longer takes writes: refresh the account and retry in the new write
  region (at once the first time, then every second, as the SDK; bounded);
* 403/1008: the region no longer serves the account: mark it unavailable, refresh, next region;
* 404/1002: the replica is behind the session: single-write → once in the write region (and
  when the write region does not answer that retry, the account's other read regions not yet
  tried, once each: one of them may have the session); multi-write → the next preferred region,
  once per region;
* 503: the next region at once while regions are left (as the SDKs: the service said this
  region cannot serve it), refreshing the account; in the last region (or a single one) the
  local retry below;
* 408, connection refused/reset/timeout (and a 503 with no region left): retry in the same
  region LOCAL_RETRIES_MAX times after LOCAL_RETRY_WAIT_MS, then the next region, while regions
  are left, marking the region unavailable after a transport error. Reads always; writes only when they cannot have happened (not sent), or on a
  multi-write account when the write is idempotent or the caller opted in with
  `non_idempotent_write_retry`.
* everything else (400, 401, 404/0, 409, 412, 413, 449, 410 in gateway mode) is raised.

A region that did not answer — a transport error of any request, or a 503 to a write of a
single-write account — is reported with `write_region_down`, retried or not: if it is the write
region, the router re-reads the account every second until the service has failed over
(client/policies/regions.py), so the writes after it go to the new write region.
"""
from dataclasses import dataclass, replace

from regionlab.client.protocol import status as S

THROTTLE_RETRIES_MAX = 9
THROTTLE_WAIT_MS_MAX = 30_000
CREDITS_FIRST_WAIT_MS = 2_000
CREDITS_WAIT_STEP_MS_MAX = 8_000
CREDITS_WAIT_MS_MAX = 30_000
WRITE_FORBIDDEN_RETRIES_MAX = 120
WRITE_FORBIDDEN_WAIT_MS = 1_000
LOCAL_RETRIES_MAX = 1
LOCAL_RETRY_WAIT_MS = 100
CONNECT_ERROR, RESPONSE_ERROR, TIMEOUT_ERROR = "connect", "response", "timeout"


@dataclass(frozen=True)
class RetryOptions:
    throttle_retries_max: int = THROTTLE_RETRIES_MAX
    throttle_wait_ms_max: int = THROTTLE_WAIT_MS_MAX
    credits_first_wait_ms: int = CREDITS_FIRST_WAIT_MS
    credits_wait_step_ms_max: int = CREDITS_WAIT_STEP_MS_MAX
    credits_wait_ms_max: int = CREDITS_WAIT_MS_MAX
    write_forbidden_retries_max: int = WRITE_FORBIDDEN_RETRIES_MAX
    local_retries_max: int = LOCAL_RETRIES_MAX
    local_retry_wait_ms: int = LOCAL_RETRY_WAIT_MS
    non_idempotent_write_retry: bool = False


@dataclass(frozen=True)
class Outcome:
    """One attempt's result: a reply's status/substatus, or a transport error (status None)."""
    status: int | None
    sub_status: int = 0
    retry_after_ms: int | None = None
    transport_error: str | None = None   # CONNECT_ERROR (never sent), RESPONSE_ERROR, TIMEOUT_ERROR

    @property
    def sent(self) -> bool:
        return self.transport_error != CONNECT_ERROR


@dataclass(frozen=True)
class RequestKind:
    is_write: bool
    idempotent: bool = True              # reads, upserts and replaces; not creates, deletes, patches
    multi_write: bool = False
    regions: int = 1                     # how many applicable regions the request has
    read_regions: int = 1                # how many read regions the account has


@dataclass(frozen=True)
class Decision:
    retry: bool
    reason: str = ""
    delay_ms: int = 0
    route: str = "same"                  # "same", "next", "write", "session" (a read region not tried)
    refresh_account: bool = False
    mark_unavailable: bool = False
    write_region_down: bool = False      # the region did not answer: if a write region, follow the account


RAISE = Decision(False)


@dataclass
class RetryState:
    throttle_retries: int = 0
    throttle_waited_ms: int = 0
    credits_retries: int = 0
    credits_waited_ms: int = 0
    forbidden_retries: int = 0
    session_retries: int = 0
    session_rescues: int = 0
    local_retries: int = 0
    region_moves: int = 0


def decide(options: RetryOptions, state: RetryState, outcome: Outcome, kind: RequestKind) -> Decision:
    status, sub = outcome.status, outcome.sub_status
    if status == S.TOO_MANY_REQUESTS:
        if sub == S.SUB_CREDITS_THROTTLED:
            return _credits(options, state, outcome)
        return _throttled(options, state, outcome)
    if status == S.FORBIDDEN and sub == S.SUB_WRITE_FORBIDDEN:
        return _write_forbidden(options, state)
    if status == S.FORBIDDEN and sub == S.SUB_DATABASE_ACCOUNT_NOT_FOUND:
        return _next_region(state, kind, "403/1008 the region no longer serves the account",
                            refresh=True, mark=True)
    if status == S.NOT_FOUND and sub == S.SUB_READ_SESSION_NOT_AVAILABLE:
        return _session(state, kind)
    if outcome.transport_error or status in (S.SERVICE_UNAVAILABLE, S.REQUEST_TIMEOUT):
        return _unavailable(options, state, outcome, kind)
    return RAISE


def _throttled(options, state, outcome) -> Decision:
    wait = max(outcome.retry_after_ms or 0, 0)
    if state.throttle_retries >= options.throttle_retries_max:
        return RAISE
    if state.throttle_waited_ms + wait > options.throttle_wait_ms_max:
        return RAISE
    state.throttle_retries += 1
    state.throttle_waited_ms += wait
    return Decision(True, f"429/{outcome.sub_status} throttled: retry-after {wait} ms "
                          f"(retry {state.throttle_retries}/{options.throttle_retries_max})", wait)


def _credits(options, state, outcome) -> Decision:
    step = min(options.credits_first_wait_ms * 2 ** state.credits_retries, options.credits_wait_step_ms_max)
    wait = max(step, outcome.retry_after_ms or 0)
    if state.credits_waited_ms + wait > options.credits_wait_ms_max:
        return RAISE
    state.credits_retries += 1
    state.credits_waited_ms += wait
    return Decision(True, f"429/50009 credits spent: back off {wait} ms (retry {state.credits_retries})", wait)


def _write_forbidden(options, state) -> Decision:
    if state.forbidden_retries >= options.write_forbidden_retries_max:
        return RAISE
    wait = 0 if state.forbidden_retries == 0 else WRITE_FORBIDDEN_WAIT_MS
    state.forbidden_retries += 1
    return Decision(True, "403/3 write forbidden: refresh the account, retry in the write region",
                    wait, "write", refresh_account=True)


def _session(state, kind) -> Decision:
    allowed = max(kind.regions, 1) if kind.multi_write else 1
    if state.session_retries >= allowed:
        return RAISE
    state.session_retries += 1
    if kind.multi_write:
        return Decision(True, "404/1002 session not yet readable: next preferred region", 0, "next")
    return Decision(True, "404/1002 session not yet readable: retry in the write region", 0, "write")


def _may_retry_unavailable(options, outcome, kind) -> bool:
    if not kind.is_write or not outcome.sent:
        return True
    return kind.multi_write and (kind.idempotent or options.non_idempotent_write_retry)


def _unavailable(options, state, outcome, kind) -> Decision:
    down = outcome.transport_error is not None or (
        outcome.status == S.SERVICE_UNAVAILABLE and kind.is_write and not kind.multi_write)
    decision = _unavailable_retry(options, state, outcome, kind)
    return replace(decision, write_region_down=True) if down else decision


def _unavailable_retry(options, state, outcome, kind) -> Decision:
    if not _may_retry_unavailable(options, outcome, kind):
        return RAISE
    what = outcome.transport_error or f"{outcome.status}/{outcome.sub_status}"
    regional = outcome.status == S.SERVICE_UNAVAILABLE or outcome.transport_error == CONNECT_ERROR
    crosses = not kind.is_write or kind.multi_write
    if state.session_retries and not kind.multi_write and state.session_rescues < kind.read_regions - 2:
        # The write region did not answer the session retry (404/1002 elsewhere before it): the
        # session may still be readable in a read region this request has not tried.
        state.session_rescues += 1
        return Decision(True, f"{what} in the write region: the session from a read region not tried",
                        0, "session", refresh_account=regional)
    if outcome.status == S.SERVICE_UNAVAILABLE and crosses and state.region_moves < kind.regions - 1:
        # The service said it cannot serve here: as the SDKs (Java's ClientRetryPolicy, Python's
        # _ServiceUnavailableRetryPolicy), the next preferred region at once, no local retry.
        return _next_region(state, kind, f"{what}: next region", refresh=True)
    if state.local_retries < options.local_retries_max:
        state.local_retries += 1
        return Decision(True, f"{what}: retry in the same region ({state.local_retries}/"
                              f"{options.local_retries_max})", options.local_retry_wait_ms,
                        refresh_account=regional)
    if not crosses:
        return RAISE
    # Twice no answer at the transport level (refused, reset, timed out): the endpoint is down,
    # not one partition; later requests go elsewhere first (as the SDKs mark it on connection
    # errors) instead of each paying the failed attempts again.
    return _next_region(state, kind, f"{what}: next region", refresh=regional,
                        mark=outcome.transport_error is not None)


def _next_region(state, kind, reason, refresh=False, mark=False) -> Decision:
    if state.region_moves >= max(kind.regions - 1, 0) and not (refresh and state.region_moves == 0):
        return RAISE
    state.region_moves += 1
    state.local_retries = 0
    return Decision(True, reason, 0, "next", refresh_account=refresh, mark_unavailable=mark)
