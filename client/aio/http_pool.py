"""Keep-alive HTTP/1.1 connections to one endpoint, on asyncio Protocols: the gateway transport's
connection pool.

Theory of operation. An `EndpointPool` owns the connections to one scheme://host:port. A request
takes an idle connection (the most recently used first, so a quiet pool lets the others age
out), or opens one while fewer than `connections_max` are open or opening, or else waits for one
to come back. A connection carries one request at a time: `HttpConnection.request` writes the
request in one write and returns a future that the protocol's `data_received` completes with
the parsed reply (client/aio/http_reply.py). A connection goes back to the idle list only when
its reply was complete and the server kept it alive; otherwise it is closed. Idle connections
are closed `idle_timeout_s` after their last use (one timer per pool, re-armed only while
something is idle), and a connection the server closes leaves the pool at once.

Failures raise `ConnectionFailed(kind, message)` with the retry policy's kinds
(client/policies/retry.py): `connect` when the request was never sent (refused, unreachable, a
TLS handshake that failed, no connection within the connect timeout), `response` when the
connection broke or the reply was unreadable after the request went out (it may have been
applied), `timeout` when no complete reply came within the request timeout.
"""
import asyncio
import ssl
from collections import deque

from regionlab.client.policies.retry import CONNECT_ERROR as CONNECT, RESPONSE_ERROR as RESPONSE, TIMEOUT_ERROR as TIMEOUT

from .http_reply import ReplyError, ReplyParser

BODY_INLINE_BYTES_MAX = 64 * 1024        # a larger body is written after the head, not copied into it


class ConnectionFailed(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def request_head(method: str, path: str, host: str, headers: dict, body_len: int | None) -> bytes:
    parts = [f"{method} {path} HTTP/1.1\r\n", f"host: {host}\r\n"]
    parts += [f"{k}: {v}\r\n" for k, v in headers.items()]
    if body_len is not None:
        parts.append(f"content-length: {body_len}\r\n")
    parts.append("\r\n")
    text = "".join(parts)
    # A CR or LF inside a name or value would start a header of its own (request smuggling).
    if text.count("\n") != len(parts) or text.count("\r") != len(parts):
        raise ValueError(f"a header of the {method} {path} request has a CR or LF in it")
    return text.encode("utf-8")


class HttpConnection(asyncio.Protocol):
    __slots__ = ("pool", "transport", "closed", "idle_since", "_waiter", "_parser", "_timer", "_gone", "_gone_waiter")

    def __init__(self, pool: "EndpointPool"):
        self.pool = pool
        self.transport = None
        self.closed = False
        self.idle_since = 0.0
        self._waiter: asyncio.Future | None = None
        self._parser: ReplyParser | None = None
        self._timer = None
        self._gone = False               # connection_lost has run: the socket is shut
        self._gone_waiter: asyncio.Future | None = None     # for close(): set by connection_lost

    # ---- the request ---------------------------------------------------------------------------
    def request(self, head: bytes, body: bytes | None, head_request: bool, timeout_s: float) -> asyncio.Future:
        loop = self.pool.loop
        waiter = self._waiter = loop.create_future()
        self._parser = ReplyParser(head_request)
        if body and len(body) > BODY_INLINE_BYTES_MAX:
            self.transport.writelines((head, body))
        else:
            self.transport.write(head + body if body else head)
        self._timer = loop.call_later(timeout_s, self._timed_out, timeout_s)
        return waiter

    def _complete(self, result=None, error: ConnectionFailed | None = None) -> None:
        waiter, self._waiter, self._parser = self._waiter, None, None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if waiter is None or waiter.done():
            return
        if error is None:
            waiter.set_result(result)
        else:
            waiter.set_exception(error)

    def _timed_out(self, timeout_s: float) -> None:
        self._timer = None
        self._complete(error=ConnectionFailed(
            TIMEOUT, f"{self.pool.endpoint} sent no complete reply within {timeout_s} s"))
        self.abort()

    # ---- asyncio.Protocol ----------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        parser = self._parser
        if parser is None:               # nothing was asked: the server is not speaking HTTP to us
            self.abort()
            return
        try:
            reply = parser.feed(data)
        except ReplyError as e:
            self._complete(error=ConnectionFailed(RESPONSE, f"{self.pool.endpoint} sent a bad reply: {e}"))
            self.abort()
            return
        if reply is not None:
            self._complete(reply)

    def eof_received(self) -> bool:
        parser = self._parser
        if parser is not None:
            try:
                reply = parser.feed_eof()
            except ReplyError as e:
                what = "broke in the middle of the reply" if parser.started else "closed before replying"
                self._complete(error=ConnectionFailed(RESPONSE, f"the connection to {self.pool.endpoint} {what}: {e}"))
            else:
                self._complete(reply)
        return False                     # close our side too

    def connection_lost(self, exc) -> None:
        self.closed = self._gone = True
        if self._waiter is not None:
            parser = self._parser
            what = "broke in the middle of the reply" if parser is not None and parser.started \
                else "closed before replying"
            self._complete(error=ConnectionFailed(
                RESPONSE, f"the connection to {self.pool.endpoint} {what}" + (f": {exc!r}" if exc else "")))
        if self._gone_waiter is not None and not self._gone_waiter.done():
            self._gone_waiter.set_result(None)
        self.pool._lost(self)

    # ---- closing -------------------------------------------------------------------------------
    def abort(self) -> None:
        if not self.closed and self.transport is not None:
            self.closed = True
            self.transport.abort()

    async def wait_lost(self) -> None:
        if self._gone or self.transport is None:
            return
        if self._gone_waiter is None:
            self._gone_waiter = self.pool.loop.create_future()
        await self._gone_waiter


class EndpointPool:
    def __init__(self, endpoint: str, *, connections_max: int, idle_timeout_s: float,
                 connect_timeout_s: float, request_timeout_s: float, ssl_context: ssl.SSLContext | None):
        scheme, _, rest = endpoint.partition("://")
        authority = rest.split("/", 1)[0]
        host, sep, port = authority.rpartition(":")
        if not sep or not port.isdigit():
            host, port = authority, "443" if scheme == "https" else "80"
        self.endpoint = endpoint
        self.host, self.port = host.strip("[]"), int(port)
        self.host_header = authority
        self.ssl_context = ssl_context if scheme == "https" else None
        self.connections_max = connections_max
        self.idle_timeout_s = idle_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        self.loop = asyncio.get_running_loop()
        self._idle: list[HttpConnection] = []
        self._all: set[HttpConnection] = set()
        self._opening = 0
        self._waiters: deque[asyncio.Future] = deque()
        self._sweep = None

    @property
    def size(self) -> int:
        return len(self._all) + self._opening

    async def send(self, method: str, path: str, headers: dict, body: bytes | None):
        """(status, headers, body) of one request; raises ConnectionFailed."""
        body_len = len(body) if body is not None else (0 if method in ("POST", "PUT", "PATCH") else None)
        head = request_head(method, path, self.host_header, headers, body_len)
        conn = self._idle.pop() if self._idle else None
        if conn is None or conn.closed:  # the common case above takes an idle one without a wait
            conn = await self._acquire()
        try:
            status, reply_headers, reply_body, keep_alive = await conn.request(
                head, body, method == "HEAD", self.request_timeout_s)
        except BaseException:            # a failure, or the caller gave up: the connection's state is unknown
            conn.abort()
            self._release(conn, False)
            raise
        self._release(conn, keep_alive)
        return status, reply_headers, reply_body

    # ---- taking and giving back --------------------------------------------------------------
    async def _acquire(self) -> HttpConnection:
        idle = self._idle
        while idle:
            conn = idle.pop()
            if not conn.closed:
                return conn
        if self.size < self.connections_max:
            return await self._open()
        return await self._wait_for_connection()

    async def _wait_for_connection(self) -> HttpConnection:
        """Every connection is busy: wait (within the connect timeout, as aiohttp counts it) for
        one to come back or close."""
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                while True:
                    waiter = self.loop.create_future()
                    self._waiters.append(waiter)
                    try:
                        await waiter
                    except BaseException:
                        self._pass_wake_on(waiter)
                        raise
                    while self._idle:
                        conn = self._idle.pop()
                        if not conn.closed:
                            return conn
                    if self.size < self.connections_max:
                        return await self._open()
        except TimeoutError:
            raise ConnectionFailed(CONNECT, f"no connection to {self.endpoint} came free within "
                                            f"{self.connect_timeout_s} s ({self.connections_max} busy)") from None

    def _pass_wake_on(self, waiter) -> None:
        if waiter in self._waiters:
            self._waiters.remove(waiter)
        elif waiter.done() and not waiter.cancelled():
            self._wake()                 # it was woken as it gave up: wake the next one instead

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def _open(self) -> HttpConnection:
        self._opening += 1
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                _, conn = await self.loop.create_connection(
                    lambda: HttpConnection(self), self.host, self.port, ssl=self.ssl_context,
                    server_hostname=self.host if self.ssl_context is not None else None)
        except TimeoutError:
            raise ConnectionFailed(CONNECT, f"cannot connect to {self.endpoint}: no connection within "
                                            f"{self.connect_timeout_s} s") from None
        except OSError as e:             # refused, unreachable, DNS, TLS handshake or certificate
            raise ConnectionFailed(CONNECT, f"cannot connect to {self.endpoint}: {e}") from None
        finally:
            self._opening -= 1
            if self._waiters and self.size < self.connections_max:
                self._wake()
        if conn.closed:                  # closed by the server during the handshake
            raise ConnectionFailed(CONNECT, f"cannot connect to {self.endpoint}: closed at once")
        self._all.add(conn)
        return conn

    def _release(self, conn: HttpConnection, reusable: bool) -> None:
        if reusable and not conn.closed:
            conn.idle_since = self.loop.time()
            self._idle.append(conn)
            if self._sweep is None:
                self._sweep = self.loop.call_later(self.idle_timeout_s, self._close_idle)
        else:
            conn.abort()
        if self._waiters:
            self._wake()

    def _lost(self, conn: HttpConnection) -> None:
        self._all.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)
        if self._waiters:
            self._wake()

    def _close_idle(self) -> None:
        self._sweep = None
        expired_before = self.loop.time() - self.idle_timeout_s
        for conn in [c for c in self._idle if c.idle_since <= expired_before]:
            self._idle.remove(conn)
            conn.transport.close()
            conn.closed = True
        if self._idle:
            oldest = min(c.idle_since for c in self._idle)
            self._sweep = self.loop.call_later(max(oldest + self.idle_timeout_s - self.loop.time(), 0.0),
                                               self._close_idle)

    @property
    def idle_count(self) -> int:
        return len(self._idle)

    async def close(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        conns = list(self._all)
        self._idle.clear()
        for conn in conns:
            conn.abort()
        for conn in conns:
            await conn.wait_lost()
