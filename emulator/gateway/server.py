"""The gateway: one HTTP endpoint of the account (the global one, a region's, or a region's
read-only one), an adapter between HTTP and the service.

A request gateway/http.py has read whole becomes a service Call (headers, path and body as
sent), the endpoint's Service (service/service.py) runs it, and its Reply goes back to the
connection, which writes it as HTTP (gateway/wire.py). What only HTTP has stays here: the
certificate download (`/_explorer/emulator.pem`, gateway/explorer.py) and the DEBUG request line.
"""
import logging
import time

from regionlab.client.protocol import headers as H

from ..core.errors import CosmosError
from ..service import responses
from ..service.call import Call
from . import explorer

log = logging.getLogger("regionlab.gateway")

REQUEST_PATH_LOGGED_MAX = 512  # characters of a path the DEBUG request line keeps


class Gateway:
    __slots__ = ("service", "trust_pem", "handle")

    def __init__(self, service, trust_pem: bytes | None = None):
        self.service = service
        self.trust_pem = trust_pem            # the certificate clients trust, with --https
        # Decided once, when the endpoint starts: with DEBUG off a request pays nothing for it.
        self.handle = self._handle_logged if log.isEnabledFor(logging.DEBUG) else self._handle

    def _handle(self, req):
        """The coroutine that answers req (gateway/http.py runs it)."""
        path = req.raw_path
        if path.startswith("/_explorer") and path.split("?", 1)[0].strip("/") in explorer.PATHS:
            return self._explorer(req)        # public, like the emulator's: no auth, any region state
        return self.service.handle(Call(self.service, req.method, req.raw_path, req.headers, req.body, req))

    async def _explorer(self, req) -> responses.Reply:
        activity_id = req.headers.get(H.ACTIVITY_ID) or responses.activity_id()
        try:
            return explorer.handle(req.method, req.raw_path.split("?", 1)[0].strip("/"), activity_id, self.trust_pem,
                                   self.service.topology.control_url)
        except CosmosError as e:
            return responses.error(e, activity_id)

    async def _handle_logged(self, req) -> responses.Reply:
        """_handle, then one DEBUG line: method, path, status, serving region, duration."""
        t0 = time.perf_counter()
        resp = await self._handle(req)
        svc = self.service
        log.debug("request", extra={"fields": {
            "method": req.method, "path": req.raw_path[:REQUEST_PATH_LOGGED_MAX], "status": resp.status,
            "substatus": resp.substatus, "endpoint": svc.region or "global",
            "region": svc.region or svc.account.hub_region,
            "duration_ms": round((time.perf_counter() - t0) * 1000, 3)}})
        return resp
