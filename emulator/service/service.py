"""The service: what one endpoint of the account does with a request, for every surface.

Theory of operation: a surface (the HTTP gateway, direct mode, the simulator) turns what its
client sent into a Call (service/call.py) and runs `Service.handle(call)`, a coroutine, to get a
Reply (service/responses.py), which it turns back into bytes, a frame, or a history entry. Every
request is checked against its region's state (503 while the region is out), authenticated
(master key or the emulator's AAD token, and its date within max_clock_skew_s of the region's
clock: cosmos-wire §3; or a user's resource token, within its grant: service/resource_tokens.py), put
through the region's request faults, and dispatched on its path segments to the handler of its
resource family (service/routes.py), or run on the route its surface resolved it to (call.route:
direct mode's point reads and writes). A CosmosError anywhere
becomes the service's error reply; anything else is logged and answered with 500.

A request waits only through `self.waits` (service/waits.py), never on a loop or a clock of its
own: writes until a quorum of their region acknowledged them (and under Strong a majority of
regions), reads until their region caught up with the LSN their consistency level needs. The
global endpoint serves from the account's current (first) write region, a regional endpoint
from its own region, a read-only endpoint from its region's secondaries.
"""
import logging

from regionlab.client.protocol import headers as H
from regionlab.client.protocol.auth import CLOCK_SKEW_MAX_S, AuthError, MasterKeyVerifier, check_clock_skew, \
    check_token_window, date_epoch_s, is_resource_token

from ..core.cache import Cache, text_bytes
from ..core.consistency import SESSION, STRONG
from ..core.documents import min_lsn_for
from ..core.errors import SUB_WRITE_FORBIDDEN, CosmosError
from ..core.tally import Tally
from . import request_faults, resource_tokens, responses, routes
from .paths import resource_kind
from ..core.limits import DATES_CACHE_MAX_BYTES, SCRIPT_TIMEOUT_MS, SESSION_WAIT_MS, STRONG_WAIT_MS, \
    WRITE_ACK_DEADLINE_MS

log = logging.getLogger("regionlab.service")



class Service:
    def __init__(self, account, topology, region: str | None, key: str | None, waits, read_only: bool = False):
        self.account = account
        self.waits = waits
        # A region's read-only endpoint: serves reads and queries from secondaries only (never
        # the primary) and refuses writes with 403/3.
        self.read_only = read_only
        self.primary_ok = not read_only
        self.topology = topology
        self.clock = account.clock
        self._skews = account.faults.requests.skews     # region -> its clock_skew faults (the same dict always)
        self.region = region
        self.verifier = MasterKeyVerifier(key) if key else None
        self.tokens = resource_tokens.ResourceTokens(key)     # users' resource tokens (service/users.py)
        self._dates_s = Cache(DATES_CACHE_MAX_BYTES)     # x-ms-date text -> epoch seconds (parsed once)
        self.max_clock_skew_s = CLOCK_SKEW_MAX_S    # ServerConfig may change it; 0 = off
        # (method, resource kind, status, substatus) -> replies sent: which region really served
        # what, for tests and the control port's topology. A call counted_as otherwise (call.py)
        # is counted under its own first two fields.
        self.requests_served = Tally()
        self.write_ack_timeout_ms = WRITE_ACK_DEADLINE_MS  # ServerConfig may shorten it (tests)
        self.query_mode = "whole"               # or "service" (service/queries.py)
        # Server-side JavaScript (service/script_engine.py): the runtime's engine, None where
        # scripts cannot run (the simulator); their time bound, which ServerConfig may change.
        self.script_engine = None
        self.script_timeout_ms = SCRIPT_TIMEOUT_MS
        # Query execution (service/queries.py): work units spent, slices run (a streaming page is
        # one), and queries stopped because their client went away between slices.
        self.query_work = Tally()
        self.persistence = None                 # with --data-dir: runtime/persistence.py (make_durable)
        self.on_commit = None                   # f(call, rs, lsn) after each write's commit (the simulator's)
        # Every reply with its time, region, operation, status and latency (request_log.py),
        # shared by the account's endpoints; None: not recorded (the composition root sets it).
        self.request_log = None

    async def handle(self, call) -> responses.Reply:
        effect = None
        started_ms = self.clock.now_ms()        # its date's judge, and where its latency starts
        try:
            if (call.segs or self.region is not None) and self.account.region_state(call.region) != "up":
                raise CosmosError(503, 0, f"Region {call.region} is unavailable (a region outage, "
                                          "or it was removed from the account).")
            self._authenticate(call, started_ms)
            if self.read_only and call.method not in ("GET", "HEAD") and call.segs \
                    and request_faults.op_of(call) != "query":
                raise CosmosError(403, SUB_WRITE_FORBIDDEN, f"This is {call.region}'s read-only endpoint: it "
                                  "serves reads and queries only. Send writes to the region's endpoint.")
            # Request faults (latency, error, drops); the global endpoint's GET / is spared, as
            # by an outage, so that clients can always discover the account.
            if self.account.faults.requests.by_region and (call.segs or self.region is not None):
                effect = request_faults.decide(call)
                if effect is not None and effect.error is not None:
                    raise effect.error          # answered instead of running: nothing applied
            route = call.route
            resp = await (routes.dispatch(call) if route is None else route(call))
        except CosmosError as e:
            resp = responses.error(e, call.activity_id)
        except AuthError as e:
            resp = responses.error(CosmosError(401, 0, str(e)), call.activity_id)
        except Exception:
            log.exception("internal error on %s %s", call.method, call.path)
            resp = responses.error(CosmosError(500, 0, "Internal error in regionlab; see the server log.",
                                               definite=False), call.activity_id)
        except BaseException:                   # cancelled (the surface stopped): nothing to answer
            release(call)
            raise
        if effect is not None:
            resp = await self._faulted(call, effect, resp)
        elif call.serving:
            release(call)
        # A reply a request fault lost is counted as such ("POST docs 201/drop_after_apply").
        counted = call.counted_as
        if counted is None:
            counted = (call.method, resource_kind(call.segs))
        self.requests_served[(*counted, resp.status, resp.fault or resp.substatus)] += 1
        log_ = self.request_log
        if log_ is not None:
            log_.add(started_ms, self.clock.now_ms(), call.region, request_faults.op_of(call) if call.segs else "account",
                     resp.status, resp.fault or resp.substatus)
        return resp

    async def _faulted(self, call, effect, resp) -> responses.Reply:
        """Hold the reply for a latency fault (its replicas stay in flight meanwhile) and mark
        it for a drop or a reset; the request itself already ran."""
        try:
            if effect.delay_ms:
                await self.waits.hold(effect.delay_ms)
        finally:
            release(call)
        resp.fault = effect.drop
        return resp

    def now_ms(self, region: str, account_ms: int | None = None) -> int:
        """The region's clock: the account's (account_ms if the caller read it already), plus
        any clock_skew fault on the region."""
        if account_ms is None:
            account_ms = self.clock.now_ms()
        if self._skews:                      # nearly always empty: no call to ask the faults
            return self.account.region_now_ms(region, account_ms)
        return account_ms

    def _authenticate(self, call, account_ms: int) -> None:
        if self.verifier is None:
            return
        authorization = call.header(H.AUTHORIZATION)
        if authorization is not None and is_resource_token(authorization):
            claims = self.tokens.claims(authorization)
            resource_tokens.check(call, claims, self.now_ms(call.region) / 1000)
            return
        date = call.header(H.X_MS_DATE) or call.header(H.HTTP_DATE)
        date_s = None
        if date:
            date_s = self._dates_s.get(date)
            if date_s is None:
                date_s = self._dates_s.put(date, date_epoch_s(date), text_bytes(date))
        window = self.verifier.verify(call.method, call.path.split("?", 1)[0], authorization, date)
        # After the signature: a request signed with another key is told that, not its date.
        # The region's clock judges the date: a clock_skew fault moves it (core/request_faults.py).
        now_s = self.now_ms(call.region, account_ms) / 1000
        check_clock_skew(date, date_s, now_s, self.max_clock_skew_s)
        if window is not None:
            check_token_window(window, now_s, self.max_clock_skew_s)

    # ---- waits ---------------------------------------------------------------------------------
    def acknowledged(self, writer, lsn: int) -> bool:
        """Whether the commit at lsn (0: nothing committed) needs no waiting: a quorum of its
        region has it, and under Strong a majority of regions."""
        if not lsn:
            return True
        rs = writer.rs
        partition = rs.partition
        strong = self.account.consistency == STRONG and partition is not None
        return (partition.global_lsn if strong else rs.committed_lsn) >= lsn

    async def write_acknowledged(self, call, writer, lsn: int) -> None:
        """Wait until call's commit at lsn is acknowledged: a quorum of its region, and under
        Strong also a majority of regions. A commit discarded first (its primary crashed before a
        quorum had it) is reported as not applied. With a data dir, then until it is on disk."""
        waiting = self.acknowledging(call, writer, lsn)
        if waiting is not None:
            await waiting

    def acknowledging(self, call, writer, lsn: int):
        """write_acknowledged for a surface that answers at once when it can: None if call's
        commit at lsn needs no waiting (nearly always: a quorum has it, and no data dir);
        otherwise a coroutine that waits for it, as `readable` does for reads."""
        if self.on_commit is not None and lsn:
            self.on_commit(call, writer.rs, lsn)
        if lsn and (self.persistence is not None or not self.acknowledged(writer, lsn)):
            return self._acknowledgement(writer, lsn)
        return None

    async def _acknowledgement(self, writer, lsn: int) -> None:
        if not self.acknowledged(writer, lsn):
            rs = writer.rs
            partition = rs.partition
            strong = self.account.consistency == STRONG and partition is not None
            ok = await self.waits.until(lambda done: (partition.when_globally_committed(lsn, done) if strong
                                                      else rs.when_committed(lsn, done)), self.write_ack_timeout_ms)
            if ok is None:
                raise CosmosError(408, 0, f"The write (LSN {lsn}) was not acknowledged within "
                                          f"{self.write_ack_timeout_ms / 1000:g} s; it may or may not be applied.",
                                  definite=False)
            if not ok:
                raise CosmosError(503, 0, f"The write (LSN {lsn}) was discarded before a quorum acknowledged "
                                          "it (its primary failed); it was not applied. Retry it.")
        if self.persistence is not None:
            await self.durable()

    def make_durable(self, persistence) -> None:
        """Acknowledge writes only once they are on disk (runtime/persistence.py): item writes
        after their commit's quorum (write_acknowledged), metadata writes (databases, containers,
        offers) after their reply is made (durable_reply)."""
        self.persistence = persistence

    async def durable(self) -> None:
        fut = self.persistence.barrier()
        if fut is not None:
            failed = await fut
            if failed is not None:
                raise CosmosError(503, 0, f"The write could not be made durable ({failed}); it may or may not "
                                          "survive a restart.", definite=False)

    async def durable_reply(self, call, running) -> responses.Reply:
        """A metadata request's reply; with a data dir, a change is answered once it is on disk."""
        resp = await running
        if self.persistence is not None and call.method not in ("GET", "HEAD") and resp.status < 300:
            await self.durable()
        return resp

    def readable(self, rs, consistency: str, session):
        """None if rs can serve a read at this consistency now (nearly always); otherwise a
        coroutine that waits briefly for it to catch up (a lagging region). After that wait the
        core answers 404/1002 (session) or 503 (strong) if it still cannot."""
        need = min_lsn_for(rs, consistency, session)
        if rs.committed_lsn >= need:
            return None
        return self._catch_up(rs, consistency, need)

    async def _catch_up(self, rs, consistency: str, need: int) -> None:
        wait_ms = SESSION_WAIT_MS if consistency == SESSION else STRONG_WAIT_MS
        ok = await self.waits.until(lambda done: rs.when_committed(need, done), wait_ms)
        if not ok and consistency != SESSION:
            raise CosmosError(503, 0, f"{rs.region} has not caught up with LSN {need} of partition "
                                      f"{rs.range_id} needed for a {consistency} read; try another region.")


def release(call) -> None:
    """The call's reply is going out: the replicas that served it are no longer in flight."""
    for replica in call.serving:
        replica.in_flight -= 1
    call.serving = ()
