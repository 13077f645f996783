"""The request pipeline: runs one operation through the policies over a transport.

Theory of operation. `execute(request)` refreshes the account when the region router asks, then
either runs one *retry chain* (attempt → retry decision → maybe another region → ...) or, when
hedging applies, a race of chains, one pinned to each region, started on the hedge schedule
(client/aio/hedged.py: the first chain runs inline, watched by the pipeline's one hedge timer;
copies exist only once it fires). The region order is computed once per operation and both
paths start from its first region. The whole operation runs under the end-to-end timeout, which
cancels every attempt still in flight.
Every attempt, decision and hedge lands in the operation's Diagnostics; the answer is the reply,
or the error for it, both carrying the diagnostics and the total charge.

The policies are sans-IO (client/policies/); this module only sends, sleeps and keeps time
(`clock`, seconds, injected: time.perf_counter by default; virtual-time tests pass the loop's).
"""
import asyncio
import json
import logging
import time

from regionlab.client.diagnostics import Attempt, Diagnostics, FEED_LATENCY_THRESHOLD_MS, POINT_LATENCY_THRESHOLD_MS
from regionlab.client.exceptions import CosmosClientTimeoutError, CosmosHttpResponseError, error_for
from regionlab.client.policies import breaker as cb
from regionlab.client.policies import hedging, retry
from regionlab.client.policies.regions import parse_account
from regionlab.client.policies.session import SessionContainer
from regionlab.client.protocol import headers as H, status as S

from .hedged import RUN, FirstChainFailed, HedgeWatch, running_loop, task_of
from .partition_ranges import PartitionRanges
from .request import API_VERSION, USE_CLIENT_DEFAULT, Request, http_date
from .transport import TransportError

LOG = logging.getLogger("regionlab.client")
ACCOUNT_FETCH_ATTEMPTS_MAX = 3
WAIT_SLEEPS_MAX = 4                  # sleeps of one wait_ms, the first included
LOOP_TICK_MS = 1.0                   # uvloop's timer resolution


class Result:
    """What a chain ended with: a reply, or the last transport error."""
    __slots__ = ("reply", "error", "region")

    def __init__(self, reply, error, region):
        self.reply, self.error, self.region = reply, error, region

    @property
    def status(self):
        return None if self.reply is None else self.reply.status

    @property
    def sub_status(self) -> int:
        return 0 if self.reply is None else int(self.reply.headers.get(H.SUBSTATUS) or 0)


class Pipeline:
    def __init__(self, global_endpoint: str, signer, transport, router, *, retry_options,
                 consistency_level=None, availability_strategy=None, timeout_s=None,
                 breaker=None, sessions=None, latency_threshold_ms=None, clock=None):
        self.global_endpoint = global_endpoint
        self.signer = signer              # auth.MasterKeySigner, or ResourceTokenSigner (gateway mode)
        self.transport = transport
        self.router = router
        self.retry_options = retry_options
        self.consistency_level = consistency_level
        self.availability_strategy = hedging.AvailabilityStrategy.of(availability_strategy)
        self.timeout_s = timeout_s
        self.breaker = breaker            # None: no circuit breaker (the client's circuit_breaker=False)
        self.ranges = PartitionRanges(self)   # the breaker's key: a request's partition key range
        self.sessions = sessions or SessionContainer()
        self.latency_threshold_ms = latency_threshold_ms
        # perf_counter, not the loop's clock: uvloop's ticks in whole milliseconds
        self._clock = clock or time.perf_counter
        self._refreshing: asyncio.Task | None = None      # the account fetch in flight
        self.account_document: dict | None = None          # the latest GET / answer
        self._breaker_task: asyncio.Task | None = None
        self._background: asyncio.Task | None = None
        self._hedges: dict[hedging.AvailabilityStrategy, HedgeWatch] = {}   # per strategy in use
        self._client_hedges = self._hedge_watch(self.availability_strategy)  # None: no hedging

    def now(self) -> float:
        return self._clock()

    def now_ms(self) -> float:
        return self.now() * 1000.0

    async def wait_ms(self, delay_ms: float) -> None:
        """Sleep until this pipeline's clock shows delay_ms gone by. A retry-after is a floor, and
        one loop timer can end a fraction of a millisecond early by that clock: uvloop counts a
        timer's whole milliseconds from the loop time cached at its last wake-up. So when it is
        short, sleep what is missing plus one tick (a few times at most: a clock that does not
        move must not hold the request for ever)."""
        until = self.now_ms() + delay_ms
        for _ in range(WAIT_SLEEPS_MAX):
            await asyncio.sleep(delay_ms / 1000.0)
            short = until - self.now_ms()
            if short <= 0:
                return
            delay_ms = short + LOOP_TICK_MS

    # ---- the account ---------------------------------------------------------------------
    async def ensure_account(self, diag: Diagnostics | None = None, write: bool = False) -> None:
        """The account must be known before a request; a periodic refresh of a known one runs in
        the background (as the SDKs'), so no request waits for it — but a write waits for the
        refresh that is due while the write region does not answer: the answer says where it
        goes. An account that cannot be read raises its error with `diag` (a fresh one when not
        given) saying so."""
        if not self.router.needs_refresh(self.now_ms()):
            return
        if self.router.account is None or self.router.refresh_reason is not None or \
                (write and self.router.write_down):
            own = diag is None
            diag = diag or Diagnostics("account_discovery", self.global_endpoint, self.now())
            try:
                return await self.refresh_account(diag)
            except CosmosHttpResponseError as e:
                # Concurrent callers share one fetch and so one exception: each raises its own,
                # carrying its own diagnostics (no attempt of the operation was made).
                diag.event(self.now(), "account", f"discovery failed: {e}")
                if own:
                    self._finish(diag, None, e.status_code, e.sub_status)
                raise error_for(e.status_code, e.message, sub_status=e.sub_status, headers=e.headers,
                                diagnostics=diag, body=e.body) from e
        if self._refreshing is None and (self._background is None or self._background.done()):
            self._background = asyncio.get_running_loop().create_task(self._refresh_in_background())

    async def _refresh_in_background(self) -> None:
        try:
            await self.refresh_account()
        except CosmosHttpResponseError as e:       # keep the known account; the next request tries again
            LOG.warning("periodic account refresh failed: %s", e)

    async def refresh_account(self, diag: Diagnostics | None = None) -> None:
        """Re-read the account document; concurrent callers share one fetch. The fetch runs in a
        task of its own, so a caller cancelled while it runs (its end-to-end timeout, a hedge
        that lost) neither stops it nor hands the other callers its CancelledError."""
        first = self._refreshing is None
        if first:
            self._refreshing = asyncio.ensure_future(self._refresh())
            self._refreshing.add_done_callback(self._refreshed)
        reason = await asyncio.shield(self._refreshing)
        if first and diag is not None:
            diag.event(self.now(), "account", f"refreshed ({reason}): write regions "
                       f"{[r.name for r in self.router.account.write_regions]}")

    async def _refresh(self) -> str:
        reason = self.router.refresh_reason or ("the write region is not answering" if self.router.write_down
                                                else "periodic")
        doc = await self._fetch_account()
        self.router.update(parse_account(doc), self.now_ms())
        self.account_document = doc
        return reason

    def _refreshed(self, task: asyncio.Task) -> None:
        self._refreshing = None
        if not task.cancelled():
            task.exception()                 # retrieved: every caller re-raises it

    async def _fetch_account(self) -> dict:
        endpoints = [self.global_endpoint]
        if self.router.account is not None:
            endpoints += [r.endpoint for r in self.router.account.read_regions]
        last = None
        for endpoint in endpoints[:ACCOUNT_FETCH_ATTEMPTS_MAX + 1]:
            date = http_date()
            headers = {"x-ms-date": date, "x-ms-version": API_VERSION,
                       "authorization": self.signer.header("GET", "", "", date)}
            try:
                reply = await self.transport.send(endpoint, "GET", "/", headers, None)
            except TransportError as e:
                last = CosmosHttpResponseError(S.SERVICE_UNAVAILABLE, f"account discovery: {e}")
                continue
            if reply.status == 200:
                return json.loads(reply.body)
            last = error_for(reply.status, f"account discovery at {endpoint}: {reply.body[:300]!r}",
                             sub_status=int(reply.headers.get(H.SUBSTATUS) or 0))
        raise last

    # ---- one operation -----------------------------------------------------------------
    async def execute(self, req: Request):
        """(reply, diagnostics) of a successful operation; raises the error for a failed one."""
        diag = Diagnostics(req.operation, req.path, self.now())
        timeout_s = self.timeout_s if req.timeout_s is USE_CLIENT_DEFAULT else req.timeout_s
        try:
            if timeout_s:
                async with asyncio.timeout(timeout_s):
                    result = await self._run(req, diag)
            else:
                result = await self._run(req, diag)
        except CosmosHttpResponseError as e:
            if e.diagnostics is diag:                # the account could not be read
                self._finish(diag, req, e.status_code, e.sub_status)
            raise
        except TimeoutError:
            self._timed_out(req, diag)
            self._finish(diag, req, S.REQUEST_TIMEOUT, 0)
            raise CosmosClientTimeoutError(
                f"the end-to-end timeout of {timeout_s} s passed; every attempt was cancelled",
                diagnostics=diag, request_charge=diag.request_charge) from None
        self._finish(diag, req, result.status, result.sub_status)
        if result.reply is None:
            self._forget_lost_session(req, diag, result)
            unknown = any(a.outcome_unknown for a in diag.attempts)
            raise CosmosHttpResponseError(S.SERVICE_UNAVAILABLE, f"no region answered: {result.error}" + (
                "; the write was sent and not answered: it may have been applied (outcome unknown)"
                if unknown else ""),
                                          diagnostics=diag, request_charge=diag.request_charge)
        if result.reply.status >= 400:
            self._forget_lost_session(req, diag, result)
            raise self._error(result.reply, diag)
        return result.reply, diag

    def _forget_lost_session(self, req, diag, result) -> None:
        """A read that ended in 404/1002, or (single-write) failed after a 404/1002 sent it to a
        write region that did not serve it either: the session names writes no reachable region
        has (a forced failover lost them, or their region is out). As the SDKs do (Python's
        should_clear_session_token_on_session_read_failure), forget the container's tokens so
        the next read is served again."""
        if not req.collection:
            return
        lost = (S.NOT_FOUND, S.SUB_READ_SESSION_NOT_AVAILABLE)
        if (result.status, result.sub_status) != lost and (
                req.is_write or self.router.multi_write
                or not any((a.status, a.sub_status) == lost for a in diag.attempts)):
            return
        self.sessions.clear(req.collection)
        diag.event(self.now(), "session", f"404/1002 after every retry: {req.collection}'s tokens dropped")

    def _timed_out(self, req, diag) -> None:
        """The end-to-end timeout cut a write off with no reply from its region: a write region
        that does not answer (a blackhole) is followed as one that refuses (see regions.py)."""
        last = diag.attempts[-1] if diag.attempts else None
        if req.is_write and last is not None and last.status is None:
            self.router.mark_write_unavailable(last.endpoint, self.now_ms())

    def _finish(self, diag, req, status, sub_status) -> None:
        diag.latency_ms = diag.elapsed_ms(self.now())
        diag.status, diag.sub_status = status, sub_status
        threshold = self.latency_threshold_ms
        if threshold is None:
            threshold = FEED_LATENCY_THRESHOLD_MS if req is not None and req.is_feed else POINT_LATENCY_THRESHOLD_MS
        diag.maybe_log(threshold)

    @staticmethod
    def _error(reply, diag) -> CosmosHttpResponseError:
        try:
            body = json.loads(reply.body) if reply.body else {}
            message = body.get("message", "") if isinstance(body, dict) else str(body)
        except ValueError:
            body, message = None, reply.body[:500].decode("utf-8", "replace")
        return error_for(reply.status, message, sub_status=int(reply.headers.get(H.SUBSTATUS) or 0),
                         headers=reply.headers, diagnostics=diag, request_charge=diag.request_charge,
                         body=body)

    async def _run(self, req: Request, diag: Diagnostics) -> Result:
        await self.ensure_account(diag, req.is_write)
        if self.breaker is not None and self.breaker.tracking:
            await self._place(req)               # the breaker's order for its range
        regions = self._regions(req)             # once: the first region of either path
        hedges = (self._client_hedges if req.availability_strategy is USE_CLIENT_DEFAULT
                  else self._hedge_watch(hedging.AvailabilityStrategy.of(req.availability_strategy)))
        # hedging.applies, unrolled as this runs for every request: the write rule only for writes
        if hedges is None or not req.is_document or len(regions) < 2 or req.is_write and not \
                hedging.writes_hedge(self.router.multi_write,
                                     self.retry_options.non_idempotent_write_retry):
            return await self._chain(req, diag, regions[0])
        # Hedged: the first region's chain runs inline, watched by its strategy's HedgeWatch (done
        # here, not in a method of it, as this runs for every hedged request; see HedgeWatch).
        entry = [None, task_of(running_loop()), req, diag, regions]
        if hedges and not hedges[0]:
            hedges.popleft()                     # one finished head per new operation keeps it short
        hedges.append(entry)
        if not hedges.timer:
            hedges.arm(diag.started_s)
        try:
            first = await self._chain(req, diag, regions[0], True)
        except BaseException as e:               # FirstChainFailed, a cancel (a copy won, the timeout)
            return await hedges.after_error(entry, e)
        if entry[RUN] is None:
            entry.clear()                        # the healthy case: nothing else was made
            return first
        return await hedges.after_fired(entry, first)

    def _hedge_watch(self, strategy) -> HedgeWatch | None:
        if strategy is None:
            return None
        hedges = self._hedges.get(strategy)
        if hedges is None:
            hedges = self._hedges[strategy] = HedgeWatch(self, self._clock, strategy)
        return hedges

    # ---- routing ---------------------------------------------------------------------------
    def _breaker_applies(self, req) -> bool:
        return self.breaker is not None and req.is_document and req.collection is not None and \
            self.router.multi_write and (req.partition_key is not None or H.PK_RANGE_ID in req.headers)

    async def _place(self, req) -> None:
        """Find the request's partition key range for the breaker, once per request."""
        if req.range_id is None and self._breaker_applies(req):
            req.range_id = await self.ranges.range_of(req)

    def _partition(self, req):
        """The breaker's key of a request, (container, partition key range id), or None when the
        breaker does not apply to it or its range is not known."""
        if req.range_id is None or not self._breaker_applies(req):
            return None
        return req.collection, req.range_id

    def _regions(self, req) -> list:
        regions = self.router.applicable(req.is_write, self.now_ms(), req.excluded_locations)
        if self.breaker is None or not self.breaker.tracking:    # off, or no failure anywhere: the order stands
            return regions
        partition = self._partition(req)
        if partition is not None:
            regions = self.breaker.order(partition, regions, self.now_ms(), name=lambda r: r.name)
        return regions

    # ---- a retry chain -------------------------------------------------------------------
    async def _chain(self, req, diag, region, pinned=False, hedge=False, reason="initial") -> Result:
        """Attempts from `region` on, as the retry policy decides; a `pinned` chain (a hedged
        copy, or the inline chain of a hedged operation) stays in its region. The inline chain
        raises FirstChainFailed with a failed result, which the hedge race then weighs."""
        state = retry.RetryState()
        tried = [region.name]
        while True:
            result, outcome = await self._attempt(req, diag, region, reason, hedge)
            if outcome.status is not None and outcome.status < 400:
                return result
            kind = retry.RequestKind(req.is_write, req.idempotent, self.router.multi_write,
                                     len(self._regions(req)), len(self.router.account.read_regions))
            decision = retry.decide(self.retry_options, state, outcome, kind)
            # What the attempt said about its region holds whether or not this chain goes on.
            if decision.write_region_down and not self.router.multi_write:
                self.router.mark_write_unavailable(region.endpoint, self.now_ms())
            if decision.mark_unavailable:
                self.router.mark_unavailable(region.endpoint, self.now_ms())
            if decision.refresh_account:
                self.router.request_refresh(decision.reason)
            # A pinned chain keeps to its region, but a session goes where it can be served.
            target = self._session_region(req, tried) if decision.route == "session" else region
            if not decision.retry or (pinned and decision.route == "next") or target is None:
                if pinned and not hedge:         # a hedged operation's inline chain: the race decides
                    raise FirstChainFailed(result)
                return result
            reason = decision.reason
            if decision.delay_ms:
                await self.wait_ms(decision.delay_ms)
            if decision.refresh_account:
                await self._refresh_quietly(diag)
            if decision.route == "write":
                region = self.router.primary()
            elif decision.route == "session":
                region = target
            elif not pinned:
                region = self._pick(req, None if decision.route == "next" else region, tried)
            if region.name not in tried:
                tried.append(region.name)

    def _pick(self, req, current, tried):
        """The region for the next attempt: `current` again (a local retry), or, after a move
        (current None, or its partition's breaker just opened), the best region in the current
        order this chain has not tried yet."""
        regions = self._regions(req)
        if current is not None and current in regions and not self._breaker_open(req, current):
            return current
        for r in regions:
            if r.name not in tried:
                return r
        return regions[0]

    def _session_region(self, req, tried):
        """A read region of the account this chain has not tried (preferred ones first), or None."""
        for r in self.router.every_read_region(self.now_ms(), req.excluded_locations):
            if r.name not in tried:
                return r
        return None

    async def _refresh_quietly(self, diag) -> None:
        try:
            await self.refresh_account(diag)
        except CosmosHttpResponseError as e:       # keep the known regions; retry routes anyway
            diag.event(self.now(), "account", f"refresh failed: {e}")

    async def _attempt(self, req, diag, region, reason, hedge):
        attempt = Attempt(region.name, region.endpoint, round(diag.elapsed_ms(self.now()), 3), reason, hedge)
        diag.attempts.append(attempt)
        headers = req.signed_headers(self.signer)
        self._add_consistency(req, headers, diag)
        started = self.now()
        try:
            reply = await self.transport.send(region.endpoint, req.method, req.path, headers, req.body)
        except TransportError as e:
            attempt.latency_ms = (self.now() - started) * 1000.0
            attempt.error = str(e)
            attempt.outcome_unknown = req.is_write and e.kind != retry.CONNECT_ERROR
            if self.breaker is not None:
                await self._record_breaker(req, diag, region, True)
            return Result(None, str(e), region), retry.Outcome(None, transport_error=e.kind)
        except asyncio.CancelledError:
            attempt.latency_ms = (self.now() - started) * 1000.0
            attempt.error = "cancelled"
            raise
        attempt.latency_ms = (self.now() - started) * 1000.0
        if self.router.write_down and reply.status != S.SERVICE_UNAVAILABLE:
            self.router.mark_write_available(region.endpoint)
        attempt.direct = getattr(reply, "direct", None)
        h = reply.headers
        attempt.status = reply.status
        attempt.sub_status = int(h.get(H.SUBSTATUS) or 0)
        attempt.request_charge = float(h.get(H.REQUEST_CHARGE) or 0.0)
        self._capture_session(req, region, reply)
        if reply.status == S.GONE and attempt.sub_status == S.SUB_PARTITION_KEY_RANGE_GONE and req.collection:
            self.ranges.forget(req.collection)   # a split or merge: the ranges are read again
            req.range_id = None
        if self.breaker is not None:
            failed = cb.is_failure(reply.status, None)
            # a 429 says nothing of the region's health
            if (failed or self.breaker.tracking) and reply.status != S.TOO_MANY_REQUESTS:
                await self._record_breaker(req, diag, region, failed)
        retry_after = h.get(H.RETRY_AFTER_MS)
        return (Result(reply, None, region),
                retry.Outcome(reply.status, attempt.sub_status, int(retry_after) if retry_after else None))

    # ---- sessions --------------------------------------------------------------------------
    def _session_consistency(self) -> bool:
        level = self.consistency_level or (self.router.account and self.router.account.consistency)
        return level == "Session"

    def _add_consistency(self, req, headers, diag) -> None:
        if self.consistency_level:
            headers[H.CONSISTENCY_LEVEL] = self.consistency_level
        if not (req.is_document and req.collection and self._session_consistency()):
            return
        if req.is_write and not self.router.multi_write and req.operation != "batch":
            return
        if H.SESSION_TOKEN in headers:          # the caller's session_token=
            return
        token, decision = self.sessions.token_for(req.collection, req.partition_key)
        diag.event(self.now(), "session", decision)
        if token:
            headers[H.SESSION_TOKEN] = token

    def _capture_session(self, req, region, reply) -> None:
        if req.collection is None:
            return
        token = reply.headers.get(H.SESSION_TOKEN)
        if token:
            self.sessions.capture(req.collection, token, req.partition_key, region.name,
                                  req.is_write and reply.status < 400)

    # ---- the circuit breaker -----------------------------------------------------------------
    def _breaker_open(self, req, region) -> bool:
        partition = self._partition(req)
        return partition is not None and \
            self.breaker.state(partition, region.name, self.now_ms()) == cb.UNAVAILABLE

    async def _record_breaker(self, req, diag, region, failed: bool) -> None:
        """Count an attempt's outcome. Called for every failure and, while the breaker tracks
        something, every success (with nothing counted anywhere a success has nothing to reset)."""
        await self._place(req)
        partition = self._partition(req)
        if partition is None:
            return
        changed = self.breaker.record(partition, region.name, req.is_write, failed, self.now_ms())
        if changed is not None:
            diag.event(self.now(), "breaker", f"partition key range {partition[1]} of {partition[0]} "
                       f"in {region.name}: {changed}")
        if failed and self._breaker_task is None:
            self._breaker_task = asyncio.get_running_loop().create_task(self._breaker_sweep())

    async def _breaker_sweep(self) -> None:
        while True:
            await asyncio.sleep(self.breaker.check_interval_ms / 1000.0)
            for partition, region in self.breaker.check(self.now_ms()):
                LOG.info("circuit breaker: partition %s in %s is HealthyTentative", partition, region)

    async def close(self) -> None:
        for timer in self._hedges.values():
            timer.close()
        for task in (self._breaker_task, self._background, self._refreshing):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await self.ranges.close()
        await self.transport.close()
