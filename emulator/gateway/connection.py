"""HTTP connections that cannot hold the server hostage.

aiohttp's server has no timeout for a client that opens a connection and dribbles a request
line and headers forever. `GuardedServer` makes connections that remember since when they have
held an incomplete request head; `sweep` (called by the runtime about once a second) answers
such a connection with 408 and closes it once it has waited longer than `header_timeout_s`.
Body reads have their own timeout in the request handler.
"""
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler

HEADER_TIMEOUT_S_DEFAULT = 10.0

_TIMEOUT_REPLY = (b"HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
                  b"Connection: close\r\nContent-Length: 114\r\n\r\n"
                  b'{"code":"RequestTimeout","message":"The request head was not completed in time; '
                  b'send the whole request promptly."}')


class _GuardedHandler(RequestHandler):
    partial_since: float | None = None
    _last_payload = None

    def data_received(self, data: bytes) -> None:
        before = self._request_count
        super().data_received(data)
        if self._request_count != before:
            self.partial_since = None
            if self._messages:
                self._last_payload = self._messages[-1][1]
            return
        in_body = self._last_payload is not None and not self._last_payload.is_eof()
        if not in_body and self.partial_since is None and data:
            self.partial_since = self._loop.time()

    def log_exception(self, *args, **kwargs) -> None:
        # A malformed request is the client's doing and is answered with 400; aiohttp would log
        # it as a server error with a traceback (it only spares non-HTTP first bytes).
        if isinstance(kwargs.get("exc_info"), HttpProcessingError):
            self.logger.debug(*args, **kwargs)
        else:
            super().log_exception(*args, **kwargs)


class GuardedServer(web.Server):
    def __init__(self, handler, *, header_timeout_s: float = HEADER_TIMEOUT_S_DEFAULT, **kwargs):
        super().__init__(handler, **kwargs)
        self.header_timeout_s = header_timeout_s

    def __call__(self) -> RequestHandler:
        return _GuardedHandler(self, loop=self._loop, **self._kwargs)

    def sweep(self, now: float) -> int:
        closed = 0
        for conn in list(self.connections):
            since = getattr(conn, "partial_since", None)
            if since is not None and now - since > self.header_timeout_s and conn.transport is not None:
                try:
                    conn.transport.write(_TIMEOUT_REPLY)
                finally:
                    conn.transport.close()
                conn.partial_since = None
                closed += 1
        return closed
