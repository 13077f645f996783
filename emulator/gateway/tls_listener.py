"""A gateway port that speaks HTTPS (--https), and tells a plain-HTTP client so in plain HTTP.

Why not `loop.create_server(ssl=...)`: it meets a plain-HTTP request with a failed handshake, so
the client sees a reset connection or an SSL error that does not say what to change. This
listener accepts connections itself and peeks at each one's first byte without consuming it
(MSG_PEEK): a TLS handshake record (0x16) hands the socket to the event loop's TLS transport
with the gateway's own protocol (gateway/http.py, the same as on a plain port); anything else
gets `PlainHttpRefusal`, a 400 whose message names the https:// URL to use, then a close.

Limits: a connection must send its first byte within `first_byte_timeout_s` (the gateway's
header timeout) and finish its handshake within TLS_HANDSHAKE_DEADLINE_S; at most
`connections_max` connections wait for either at once (more are closed at once). The
connection cap of the endpoint itself still applies (HttpServer's factory).

The object stands in for the asyncio.Server the runtime keeps per listener: close(),
wait_closed(), is_serving().
"""
import asyncio
import logging
import socket
import ssl

from ..core.errors import CosmosError
from ..gateway import wire
from ..service import responses
from ..core.limits import PLAIN_ON_TLS_LINGER_S, REQUEST_HEAD_MAX_BYTES, TLS_HANDSHAKE_DEADLINE_S

log = logging.getLogger("regionlab.tls")

TLS_HANDSHAKE_RECORD = 0x16
ACCEPT_RETRY_S = 0.05     # after a failed accept (e.g. out of file descriptors), before the next
_CLOSE = "Connection: close\r\n"


class TlsListener:
    def __init__(self, sock: socket.socket, protocol_factory, context: ssl.SSLContext, https_url: str,
                 *, first_byte_timeout_s: float, connections_max: int):
        self.loop = asyncio.get_running_loop()
        self.sock = sock
        self.factory = protocol_factory
        self.context = context
        self.https_url = https_url
        self.first_byte_timeout_s = first_byte_timeout_s
        self.connections_max = connections_max
        self._waiting: dict = {}          # socket still to send its first byte -> its timer
        self._handshakes: set = set()     # tasks of TLS handshakes under way
        self._accepting = self.loop.create_task(self._accept())
        self._closed = asyncio.Event()

    def is_serving(self) -> bool:
        return not self._accepting.done()

    def close(self) -> None:
        if self._accepting.done() and self.sock.fileno() < 0:
            return
        self._accepting.cancel()
        self.sock.close()
        for conn, timer in list(self._waiting.items()):
            self._drop(conn, timer)
        for task in list(self._handshakes):
            task.cancel()

    async def wait_closed(self) -> None:
        await asyncio.gather(self._accepting, *self._handshakes, return_exceptions=True)

    # ---- accepting and sniffing ------------------------------------------------------------
    async def _accept(self) -> None:
        while True:
            try:
                conn, _addr = await self.loop.sock_accept(self.sock)
            except (ConnectionError, OSError) as e:
                if self.sock.fileno() < 0:
                    return
                log.warning("accept failed on %s: %s", self.https_url, e)
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            if len(self._waiting) + len(self._handshakes) >= self.connections_max:
                conn.close()
                continue
            conn.setblocking(False)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            timer = self.loop.call_later(self.first_byte_timeout_s, self._expire, conn)
            self._waiting[conn] = timer
            self.loop.add_reader(conn.fileno(), self._readable, conn)

    def _expire(self, conn) -> None:
        timer = self._waiting.get(conn)
        if timer is not None:
            self._drop(conn, timer)          # nothing was asked, so nothing to answer

    def _drop(self, conn, timer) -> None:
        self._release(conn, timer)
        conn.close()

    def _release(self, conn, timer) -> None:
        timer.cancel()
        self._waiting.pop(conn, None)
        try:
            self.loop.remove_reader(conn.fileno())
        except (ValueError, OSError):
            pass

    def _readable(self, conn) -> None:
        timer = self._waiting.get(conn)
        if timer is None:
            return
        try:
            first = conn.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return
        except OSError:
            self._drop(conn, timer)
            return
        if not first:
            self._drop(conn, timer)          # closed before asking anything
            return
        self._release(conn, timer)
        if first[0] == TLS_HANDSHAKE_RECORD:
            task = self.loop.create_task(self._start_tls(conn))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)
        else:
            message = (f"This port speaks HTTPS: use {self.https_url} (regionlab runs with --https; "
                       "trust its certificate, served at /_explorer/emulator.pem and named in the "
                       "ready line).")
            self.loop.create_task(self._refuse_plain(conn, message))

    async def _start_tls(self, conn) -> None:
        try:
            await self.loop.connect_accepted_socket(self.factory, conn, ssl=self.context,
                                                    ssl_handshake_timeout=TLS_HANDSHAKE_DEADLINE_S)
        except (ssl.SSLError, ConnectionError, OSError, asyncio.TimeoutError) as e:
            log.debug("TLS handshake failed: %s", e)        # e.g. the client does not trust us
            conn.close()

    async def _refuse_plain(self, conn, message: str) -> None:
        try:
            await self.loop.connect_accepted_socket(lambda: PlainHttpRefusal(message), conn)
        except (ConnectionError, OSError) as e:
            log.debug("plain-HTTP refusal failed: %s", e)
            conn.close()


class PlainHttpRefusal(asyncio.Protocol):
    """A plain-HTTP request on an HTTPS port: read its head (so closing does not reset the
    connection under the reply), answer 400 with `message`, and close."""

    def __init__(self, message: str):
        self.message = message
        self.transport = None
        self.seen = bytearray()
        self.answered = False
        self.timer = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.timer = asyncio.get_running_loop().call_later(PLAIN_ON_TLS_LINGER_S * 5, self._close)

    def data_received(self, data: bytes) -> None:
        if self.answered:
            return                              # lingering: drop the rest of the request
        self.seen += data
        if b"\r\n\r\n" in self.seen or len(self.seen) > REQUEST_HEAD_MAX_BYTES:
            self._answer()

    def eof_received(self) -> bool:
        if not self.answered:
            self._answer()
        self._close()
        return False

    def connection_lost(self, exc) -> None:
        self.transport = None
        if self.timer is not None:
            self.timer.cancel()

    def _answer(self) -> None:
        self.answered = True
        err = responses.error(CosmosError(400, 0, self.message), responses.activity_id())
        self.transport.write(wire.encode(err, _CLOSE, False))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.timer.cancel()
        self.timer = asyncio.get_running_loop().call_later(PLAIN_ON_TLS_LINGER_S, self._close)

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()
