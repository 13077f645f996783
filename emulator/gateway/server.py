"""The gateway: one HTTP endpoint of the account (the global one, or one region's).

Theory of operation: every request is authenticated (master key, cosmos-wire §3), parsed once
into a Call, and dispatched on its path segments to the handler of its resource family. A
CosmosError anywhere becomes the service's error reply; anything else is logged and answered
with 500 without taking the server down. The global endpoint serves from the account's
current (first) write region, a regional endpoint from its own region.
"""
import asyncio
import logging
from email.utils import parsedate_to_datetime

from aiohttp import web

from client.protocol import headers as H
from client.protocol.auth import AuthError, MasterKeyVerifier, is_name_based

from ..core.errors import CosmosError, not_found
from . import account as account_doc
from . import documents, metadata, responses
from .call import Call

log = logging.getLogger("regionlab.gateway")

WRITE_ACK_TIMEOUT_S = 30.0
CLIENT_CLOSED_REQUEST = 499         # never delivered: the status nginx logs for a vanished client
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

    def serving_region(self) -> str:
        return self.region or self.account.write_regions[0]

    async def handle(self, req) -> web.StreamResponse:
        call = Call(self, req)
        try:
            self._authenticate(call)
            return await self._dispatch(call)
        except CosmosError as e:
            return responses.error(e, call.activity_id)
        except AuthError as e:
            return responses.error(CosmosError(401, 0, str(e)), call.activity_id)
        except asyncio.CancelledError:
            raise
        except ConnectionResetError:
            # The client went away mid-request (e.g. mid-body): nothing was applied and nobody is
            # left to answer. Re-raised, aiohttp would log it as a server error with a traceback.
            log.debug("client disconnected during %s %s", call.method, req.raw_path)
            return web.Response(status=CLIENT_CLOSED_REQUEST)
        except Exception:
            log.exception("internal error on %s %s", call.method, req.raw_path)
            return responses.error(CosmosError(500, 0, "Internal error in regionlab; see the server log.",
                                               definite=False), call.activity_id)

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

    async def acknowledged(self, rs, lsn: int) -> None:
        """Wait until lsn is committed by a quorum of rs (at once when it already is)."""
        if lsn <= rs.committed_lsn:
            return
        fut = asyncio.get_running_loop().create_future()
        rs.when_committed(lsn, lambda: fut.done() or fut.set_result(None))
        try:
            await asyncio.wait_for(fut, WRITE_ACK_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise CosmosError(408, 0, f"The write (LSN {lsn}) was not acknowledged by a quorum within "
                                      f"{WRITE_ACK_TIMEOUT_S:.0f} s; it may or may not be applied.",
                              definite=False) from None

    # ---- dispatch ----------------------------------------------------------------------
    async def _dispatch(self, call: Call):
        segs = call.segs
        n = len(segs)
        if n == 0:
            return account_doc.handle(call)
        if segs[0] == "offers" and n <= 2:
            return await (metadata.offers(call) if n == 1 else metadata.offer(call, segs[1]))
        if segs[0] != "dbs":
            raise _unknown(call)
        if n == 1:
            return await metadata.databases(call)
        by_rid = not is_name_based("/".join(segs))
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


def _unknown(call: Call) -> CosmosError:
    return not_found(f"Unknown resource path '/{'/'.join(call.segs)}'. regionlab serves /, /dbs/..., "
                     "/dbs/{db}/colls/{coll}/docs/..., .../pkranges, .../operations/partitionkeydelete and /offers.")


def _unsupported_or_unknown(call: Call, segment: str) -> CosmosError:
    if segment in UNSUPPORTED_CHILDREN:
        return CosmosError(501, 0, f"'{segment}' resources (stored procedures, UDFs, triggers, users, "
                                   "permissions, ...) are not implemented by regionlab.")
    return _unknown(call)
