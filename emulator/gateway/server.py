"""The gateway: one HTTP endpoint of the account (the global one, or one region's).

Theory of operation: every request is authenticated (master key, and its date within
max_clock_skew_s of the account clock: cosmos-wire §3), parsed once
into a Call, and dispatched on its path segments to the handler of its resource family. A
CosmosError anywhere becomes the service's error reply; anything else is logged and answered
with 500 without taking the server down. The global endpoint serves from the account's
current (first) write region, a regional endpoint from its own region. While the region an
endpoint serves from is out, it answers 503 (the global endpoint still answers `GET /`, so
clients can discover the other regions).
"""
import asyncio
import logging
import time

from regionlab.client.protocol import headers as H
from regionlab.client.protocol.auth import (CLOCK_SKEW_S_MAX_DEFAULT, AuthError, MasterKeyVerifier, check_clock_skew,
                                  date_epoch_s, is_name_based)

from ..core.consistency import STRONG, SESSION
from ..core.documents import min_lsn_for
from ..core.errors import SUB_WRITE_FORBIDDEN, CosmosError, not_found
from ..core.tally import Tally
from . import account as account_doc
from . import addresses, admission, documents, explorer, metadata, request_faults, responses
from .call import Call

log = logging.getLogger("regionlab.gateway")

WRITE_ACK_TIMEOUT_S = 30.0
SESSION_WAIT_S = 0.2          # how long a read waits for its region to catch up with a session token
STRONG_WAIT_S = 2.0
REQUEST_PATH_LOGGED_MAX = 512  # characters of a path the DEBUG request line keeps
DATES_CACHED_MAX = 4096       # parsed x-ms-date values kept (clients send each for about a second)
# Resource kinds counted in `requests_served`; anything else (a garbage path) counts as "other",
# so a client cannot grow the counter without bound.
COUNTED_KINDS = frozenset(("account", "dbs", "colls", "docs", "pkranges", "offers", "conflicts", "operations",
                           "addresses"))
UNSUPPORTED_CHILDREN = ("sprocs", "udfs", "triggers", "users", "permissions", "attachments",
                        "clientencryptionkeys", "schemas")


class Gateway:
    def __init__(self, account, topology, region: str | None, key: str | None, read_only: bool = False):
        self.account = account
        # A region's read-only endpoint: serves reads and queries from secondaries only (never
        # the primary) and refuses writes with 403/3.
        self.read_only = read_only
        self.primary_ok = not read_only
        self.topology = topology
        self.clock = account.clock
        self._skews = account.faults.requests.skews     # region -> its clock_skew faults (the same dict always)
        self.region = region
        self.verifier = MasterKeyVerifier(key) if key else None
        self._dates_s: dict = {}            # x-ms-date text -> epoch seconds (parsed once)
        self.max_clock_skew_s = CLOCK_SKEW_S_MAX_DEFAULT    # ServerConfig may change it; 0 = off
        # (method, resource kind, status, substatus) -> replies sent: which region really served
        # what, for tests and the control port's topology.
        self.requests_served = Tally()
        self.write_ack_timeout_s = WRITE_ACK_TIMEOUT_S     # ServerConfig may shorten it (tests)
        self.trust_pem: bytes | None = None     # the certificate clients trust, with --https
        self.query_mode = "whole"               # or "service" (gateway/queries.py)
        # Query execution (gateway/queries.py): work units spent, slices run (a streaming page is
        # one), and queries stopped because their client went away between slices.
        self.query_work = Tally()
        self.persistence = None                 # with --data-dir: runtime/persistence.py (make_durable)
        # Decided once, when the endpoint starts: with DEBUG off a request pays nothing for it.
        if log.isEnabledFor(logging.DEBUG):
            self.handle = self._handle_logged

    async def _handle_logged(self, req) -> responses.Reply:
        """handle, then one DEBUG line: method, path, status, serving region, duration."""
        t0 = time.perf_counter()
        resp = await Gateway.handle(self, req)
        log.debug("request", extra={"fields": {
            "method": req.method, "path": req.raw_path[:REQUEST_PATH_LOGGED_MAX], "status": resp.status,
            "substatus": resp.substatus, "endpoint": self.region or "global",
            "region": self.region or self.account.hub_region,
            "duration_ms": round((time.perf_counter() - t0) * 1000, 3)}})
        return resp

    async def handle(self, req) -> responses.Reply:
        call = Call(self, req)
        effect = None
        try:
            if len(call.segs) == 2 and tuple(call.segs) == explorer.PATH:
                return explorer.handle(call)        # public, like the emulator's: no auth, any region state
            if (call.segs or self.region is not None) and self.account.region_state(call.region) != "up":
                raise CosmosError(503, 0, f"Region {call.region} is unavailable (a region outage, "
                                          "or it was removed from the account).")
            self._authenticate(call)
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
            resp = await self._dispatch(call)
        except CosmosError as e:
            resp = responses.error(e, call.activity_id)
        except AuthError as e:
            resp = responses.error(CosmosError(401, 0, str(e)), call.activity_id)
        except asyncio.CancelledError:
            release(call)
            raise
        except Exception:
            log.exception("internal error on %s %s", call.method, call.req.raw_path)
            resp = responses.error(CosmosError(500, 0, "Internal error in regionlab; see the server log.",
                                               definite=False), call.activity_id)
        if effect is not None:
            resp = await self._faulted(call, effect, resp)
        elif call.serving:
            release(call)
        # A reply a request fault lost is counted as such ("POST docs 201/drop_after_apply").
        kind = _resource_kind(call.segs)
        self.requests_served[(call.method, kind, resp.status, resp.fault or resp.substatus)] += 1
        return resp

    async def _faulted(self, call: Call, effect, resp) -> responses.Reply:
        """Hold the reply for a latency fault (its replicas stay in flight meanwhile) and mark
        it for a drop or a reset; the request itself already ran."""
        try:
            if effect.delay_ms:
                await request_faults.hold(effect.delay_ms)
        finally:
            release(call)
        resp.fault = effect.drop
        return resp

    def now_ms(self, region: str) -> int:
        """The region's clock: the account's, plus any clock_skew fault on the region."""
        if self._skews:                      # nearly always empty: no call to ask the faults
            return self.clock.now_ms() + self.account.faults.requests.skew_ms(region)
        return self.clock.now_ms()

    def _authenticate(self, call: Call) -> None:
        if self.verifier is None:
            return
        date = call.header(H.X_MS_DATE) or call.header(H.HTTP_DATE)
        date_s = None
        if date:
            date_s = self._dates_s.get(date)
            if date_s is None:
                date_s = date_epoch_s(date)
                if len(self._dates_s) >= DATES_CACHED_MAX:
                    self._dates_s.clear()
                self._dates_s[date] = date_s
        path = call.req.raw_path.split("?", 1)[0]
        self.verifier.verify(call.method, path, call.header(H.AUTHORIZATION), date)
        # After the signature: a request signed with another key is told that, not its date.
        # The region's clock judges the date: a clock_skew fault moves it (core/request_faults.py).
        check_clock_skew(date, date_s, self.now_ms(call.region) / 1000, self.max_clock_skew_s)

    def acknowledged(self, writer, lsn: int) -> bool:
        """Whether the commit at lsn (0: nothing committed) needs no waiting: a quorum of its
        region has it, and under Strong a majority of regions."""
        if not lsn:
            return True
        rs = writer.rs
        partition = rs.partition
        strong = self.account.consistency == STRONG and partition is not None
        return (partition.global_lsn if strong else rs.committed_lsn) >= lsn

    async def write_acknowledged(self, writer, lsn: int) -> None:
        """Wait until the commit at lsn is acknowledged: a quorum of its region, and under Strong
        also a majority of regions. A commit discarded first (its primary crashed before a quorum
        had it) is reported as not applied."""
        if self.acknowledged(writer, lsn):
            return
        rs = writer.rs
        partition = rs.partition
        strong = self.account.consistency == STRONG and partition is not None
        ok = await self._wait(lambda done: (partition.when_globally_committed(lsn, done) if strong
                                            else rs.when_committed(lsn, done)), self.write_ack_timeout_s)
        if ok is None:
            raise CosmosError(408, 0, f"The write (LSN {lsn}) was not acknowledged within "
                                      f"{self.write_ack_timeout_s:g} s; it may or may not be applied.",
                              definite=False)
        if not ok:
            raise CosmosError(503, 0, f"The write (LSN {lsn}) was discarded before a quorum acknowledged "
                                      "it (its primary failed); it was not applied. Retry it.")

    def make_durable(self, persistence) -> None:
        """Acknowledge writes only once they are on disk (runtime/persistence.py): item writes
        after their commit's quorum, metadata writes (databases, containers, offers) after their
        reply is made. Replaces two methods on this instance, so a gateway without a data dir
        pays nothing for it."""
        self.persistence = persistence
        committed, handle = self.write_acknowledged, self.handle

        async def write_acknowledged(writer, lsn: int) -> None:
            await committed(writer, lsn)
            if lsn:
                await self._durable()

        async def durable_handle(req) -> responses.Reply:
            resp = await handle(req)
            if req.method not in ("GET", "HEAD") and "/docs" not in req.raw_path and resp.status < 300:
                try:
                    await self._durable()
                except CosmosError as e:
                    return responses.error(e, responses.activity_id())
            return resp
        self.write_acknowledged, self.handle = write_acknowledged, durable_handle

    async def _durable(self) -> None:
        fut = self.persistence.barrier()
        if fut is not None:
            failed = await fut
            if failed is not None:
                raise CosmosError(503, 0, f"The write could not be made durable ({failed}); it may or may not "
                                          "survive a restart.", definite=False)

    def readable(self, rs, consistency: str, session):
        """None if rs can serve a read at this consistency now (nearly always); otherwise a
        coroutine that waits briefly for it to catch up (a lagging region). After that wait the
        core answers 404/1002 (session) or 503 (strong) if it still cannot."""
        need = min_lsn_for(rs, consistency, session)
        if rs.committed_lsn >= need:
            return None
        return self._catch_up(rs, consistency, need)

    async def _catch_up(self, rs, consistency: str, need: int) -> None:
        wait_s = SESSION_WAIT_S if consistency == SESSION else STRONG_WAIT_S
        ok = await self._wait(lambda done: rs.when_committed(need, done), wait_s)
        if not ok and consistency != SESSION:
            raise CosmosError(503, 0, f"{rs.region} has not caught up with LSN {need} of partition "
                                      f"{rs.range_id} needed for a {consistency} read; try another region.")

    @staticmethod
    async def _wait(register, timeout_s: float):
        """What register's callback reports, or None after timeout_s. A plain future and a timer,
        not asyncio.wait_for: handlers start outside a task (gateway/http.py)."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def settle(ok) -> None:
            if not fut.done():
                fut.set_result(ok)
        timer = loop.call_later(timeout_s, settle, None)
        register(settle)
        try:
            return await fut
        finally:
            timer.cancel()

    # ---- dispatch ----------------------------------------------------------------------
    async def _dispatch(self, call: Call):
        segs = call.segs
        n = len(segs)
        if n == 0:
            return account_doc.handle(call)
        if n <= 4 and segs[0] in ("dbs", "offers"):
            admission.management(call)          # databases, containers, offers: before they run
        if segs[0] == "offers" and n <= 2:
            return await (metadata.offers(call) if n == 1 else metadata.offer(call, segs[1]))
        if segs[0] == "addresses" and n == 1:
            return addresses.handle(call)        # direct mode's address feed
        if segs[0] != "dbs":
            raise _unknown(call)
        if n == 1:
            return await metadata.databases(call)
        by_rid = _rid_based(segs[1])
        db = self.account.database(segs[1], by_rid)
        if n == 2:
            return await metadata.database(call, db)
        if segs[2] != "colls":
            raise _unsupported_or_unknown(call, segs[2])
        if n == 3:
            return await metadata.containers(call, db)
        c = self.account.container(db, segs[3], by_rid)
        if n == 4:
            return await metadata.container(call, db, c)
        sub = segs[4]
        if sub == "docs":
            if n == 5:
                return await documents.feed(call, c)
            if n == 6:
                return await documents.item(call, c, segs[5], by_rid)
        elif sub == "pkranges" and n == 5:
            return await metadata.pkranges(call, c)
        elif sub == "conflicts" and n == 5:
            return await metadata.conflicts(call, c)
        elif sub == "operations" and n == 6 and segs[5].lower() == "partitionkeydelete":
            return await documents.delete_by_partition_key(call, c)
        raise _unsupported_or_unknown(call, sub)


def release(call: Call) -> None:
    """The call's reply is going out: the replicas that served it are no longer in flight."""
    for replica in call.serving:
        replica.in_flight -= 1
    call.serving = ()


def _resource_kind(segs: list) -> str:
    """The resource family a path addresses: the last collection segment ('docs' for both
    /dbs/d/colls/c/docs and /dbs/d/colls/c/docs/x), 'account' for /."""
    kind = segs[(len(segs) - 1) & ~1] if segs else "account"
    return kind if kind in COUNTED_KINDS else "other"


_RID_BASED: dict = {}
RID_BASED_CACHE_MAX = 4096


def _rid_based(db_segment: str) -> bool:
    """Whether a path addresses resources by _rid (cosmos-wire §3: decided by the db segment)."""
    hit = _RID_BASED.get(db_segment)
    if hit is None:
        if len(_RID_BASED) >= RID_BASED_CACHE_MAX:
            _RID_BASED.clear()
        hit = _RID_BASED[db_segment] = not is_name_based("dbs/" + db_segment)
    return hit


def _unknown(call: Call) -> CosmosError:
    return not_found(f"Unknown resource path '/{'/'.join(call.segs)}'. regionlab serves /, /dbs/..., "
                     "/dbs/{db}/colls/{coll}/docs/..., .../pkranges, .../operations/partitionkeydelete and /offers.")


def _unsupported_or_unknown(call: Call, segment: str) -> CosmosError:
    if segment in UNSUPPORTED_CHILDREN:
        return CosmosError(501, 0, f"'{segment}' resources (stored procedures, UDFs, triggers, users, "
                                   "permissions, ...) are not implemented by regionlab.")
    return _unknown(call)
