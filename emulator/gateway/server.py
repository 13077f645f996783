"""The gateway: one HTTP endpoint of the account (the global one, or one region's).

Theory of operation: every request is authenticated (master key, cosmos-wire §3), parsed once
into a Call, and dispatched on its path segments to the handler of its resource family. A
CosmosError anywhere becomes the service's error reply; anything else is logged and answered
with 500 without taking the server down. The global endpoint serves from the account's
current (first) write region, a regional endpoint from its own region. While the region an
endpoint serves from is out, it answers 503 (the global endpoint still answers `GET /`, so
clients can discover the other regions).
"""
import asyncio
import collections
import logging
import time
from email.utils import parsedate_to_datetime

from client.protocol import headers as H
from client.protocol.auth import AuthError, MasterKeyVerifier, is_name_based

from ..core.consistency import STRONG, SESSION
from ..core.documents import min_lsn_for
from ..core.errors import CosmosError, not_found
from . import account as account_doc
from . import addresses, admission, documents, metadata, responses
from .call import Call

log = logging.getLogger("regionlab.gateway")

WRITE_ACK_TIMEOUT_S = 30.0
SESSION_WAIT_S = 0.2          # how long a read waits for its region to catch up with a session token
STRONG_WAIT_S = 2.0
REQUEST_PATH_LOGGED_MAX = 512  # characters of a path the DEBUG request line keeps
# Resource kinds counted in `requests_served`; anything else (a garbage path) counts as "other",
# so a client cannot grow the counter without bound.
COUNTED_KINDS = frozenset(("account", "dbs", "colls", "docs", "pkranges", "offers", "conflicts", "operations",
                           "addresses"))
UNSUPPORTED_CHILDREN = ("sprocs", "udfs", "triggers", "users", "permissions", "attachments",
                        "clientencryptionkeys", "schemas")


class Gateway:
    def __init__(self, account, topology, region: str | None, key: str | None):
        self.account = account
        self.topology = topology
        self.clock = account.clock
        self.region = region
        self.verifier = MasterKeyVerifier(key) if key else None
        self._dates_ok: dict = {}
        # (method, resource kind, status, substatus) -> replies sent: which region really served
        # what, for tests and the control port's topology.
        self.requests_served: collections.Counter = collections.Counter()
        self.write_ack_timeout_s = WRITE_ACK_TIMEOUT_S     # ServerConfig may shorten it (tests)
        # Query execution (gateway/queries.py): work units spent, slices run (a streaming page is
        # one), and queries stopped because their client went away between slices.
        self.query_work: collections.Counter = collections.Counter()
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
        try:
            if (call.segs or self.region is not None) and self.account.region_state(call.region) != "up":
                raise CosmosError(503, 0, f"Region {call.region} is unavailable (a region outage, "
                                          "or it was removed from the account).")
            self._authenticate(call)
            resp = await self._dispatch(call)
        except CosmosError as e:
            resp = responses.error(e, call.activity_id)
        except AuthError as e:
            resp = responses.error(CosmosError(401, 0, str(e)), call.activity_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("internal error on %s %s", call.method, call.req.raw_path)
            resp = responses.error(CosmosError(500, 0, "Internal error in regionlab; see the server log.",
                                               definite=False), call.activity_id)
        self.requests_served[(call.method, _resource_kind(call.segs), resp.status, resp.substatus)] += 1
        return resp

    def _authenticate(self, call: Call) -> None:
        if self.verifier is None:
            return
        date = call.header(H.X_MS_DATE) or call.header(H.HTTP_DATE)
        if date and date not in self._dates_ok:
            try:
                parsedate_to_datetime(date)
            except (TypeError, ValueError, IndexError):
                raise AuthError(f"The x-ms-date header '{date[:60]}' is not a valid RFC 1123 date, "
                                "e.g. 'Tue, 01 Jul 2025 12:00:00 GMT'.") from None
            if len(self._dates_ok) > 4096:
                self._dates_ok.clear()
            self._dates_ok[date] = True
        path = call.req.raw_path.split("?", 1)[0]
        self.verifier.verify(call.method, path, call.header(H.AUTHORIZATION), date)

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
