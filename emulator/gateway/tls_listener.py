"""A gateway port that speaks HTTPS (--https), and tells a plain-HTTP client so in plain HTTP.

Why not `loop.create_server(ssl=...)`: it meets a plain-HTTP request with a failed handshake, so
the client sees a reset connection or an SSL error that does not say what to change. This
listener accepts connections itself and peeks at each one's first byte without consuming it
(MSG_PEEK): a TLS handshake record (0x16) hands the socket to the event loop's TLS transport
with the gateway's own protocol (gateway/http.py, the same as on a plain port); anything else
gets `PlainHttpRefusal`, a 400 whose message names the https:// URL to use, then a close.

Limits: a connection holds one of the endpoint's slots from the moment it is accepted
(HttpServer.admit, the shedding policy of core/connection_slots.py): while it has not sent its
first byte or finished its handshake it is silent, so a new connection at the cap sheds the
oldest such one, and under pressure it must begin a request within
SILENT_DEADLINE_UNDER_PRESSURE_S. Otherwise it must send its first byte within
`first_byte_timeout_s` (the gateway's header timeout) and finish its handshake within
TLS_HANDSHAKE_DEADLINE_S. When every slot is busy with a request, a new connection is closed at
once (before a handshake nothing can be said to it). A plain-HTTP refusal holds its slot while
it lingers, too.

The object stands in for the asyncio.Server the runtime keeps per listener: close(),
wait_closed(), is_serving().
"""
import asyncio
import functools
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
    def __init__(self, sock: socket.socket, http, context: ssl.SSLContext, https_url: str,
                 *, first_byte_timeout_s: float):
        self.loop = asyncio.get_running_loop()
        self.sock = sock
        self.http = http                  # the endpoint's HttpServer: its slots and connections
        self.context = context
        self.https_url = https_url
        self.first_byte_timeout_s = first_byte_timeout_s
        self._waiting: dict = {}          # socket still to send its first byte -> (its timer, its Connection)
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
        for sock in list(self._waiting):
            self._drop(sock)
        for task in list(self._handshakes):
            task.cancel()

    async def wait_closed(self) -> None:
        await asyncio.gather(self._accepting, *self._handshakes, return_exceptions=True)

    # ---- accepting and sniffing ------------------------------------------------------------
    async def _accept(self) -> None:
        while True:
            try:
                sock, _addr = await self.loop.sock_accept(self.sock)
            except (ConnectionError, OSError) as e:
                if self.sock.fileno() < 0:
                    return
                log.warning("accept failed on %s: %s", self.https_url, e)
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            conn = self.http.admit()
            if conn is None:
                sock.close()                 # every slot has a request in progress
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            timer = self.loop.call_later(self.first_byte_timeout_s, self._drop, sock)
            self._waiting[sock] = (timer, conn)
            conn.unmade = functools.partial(self._drop, sock)
            self.loop.add_reader(sock.fileno(), self._readable, sock)

    def _drop(self, sock) -> None:
        """Close a socket that has not sent its first byte (its timeout, or it was shed):
        nothing was asked, so nothing to answer."""
        conn = self._release(sock)
        if conn is not None:
            self.http.slots.gone(conn)
        sock.close()

    def _release(self, sock):
        """Stop waiting for sock's first byte; the Connection holding its slot (None if it was
        not waiting)."""
        timer, conn = self._waiting.pop(sock, (None, None))
        if timer is None:
            return None
        timer.cancel()
        try:
            self.loop.remove_reader(sock.fileno())
        except (ValueError, OSError):
            pass
        return conn

    def _readable(self, sock) -> None:
        if sock not in self._waiting:
            return
        try:
            first = sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return
        except OSError:
            self._drop(sock)
            return
        if not first:
            self._drop(sock)                 # closed before asking anything
            return
        conn = self._release(sock)
        if first[0] == TLS_HANDSHAKE_RECORD:
            task = self.loop.create_task(self._start_tls(sock, conn))
            conn.unmade = task.cancel        # shed during its handshake
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)
        else:
            message = (f"This port speaks HTTPS: use {self.https_url} (regionlab runs with --https; "
                       "trust its certificate, served at /_explorer/emulator.pem and named in the "
                       "ready line).")
            self.loop.create_task(self._refuse_plain(sock, conn, message))

    async def _start_tls(self, sock, conn) -> None:
        """Run the TLS handshake, then conn serves HTTP on it (its connection_made)."""
        try:
            await self.loop.connect_accepted_socket(lambda: conn, sock, ssl=self.context,
                                                    ssl_handshake_timeout=TLS_HANDSHAKE_DEADLINE_S)
        except asyncio.CancelledError:
            self.http.slots.gone(conn)       # shed (or the listener closed) during the handshake
            sock.close()
        except (ssl.SSLError, ConnectionError, OSError, asyncio.TimeoutError) as e:
            log.debug("TLS handshake failed: %s", e)        # e.g. the client does not trust us
            self.http.slots.gone(conn)
            sock.close()

    async def _refuse_plain(self, sock, conn, message: str) -> None:
        """Answer plain HTTP with the URL to use; the refusal holds conn's slot while it lingers."""
        slots = self.http.slots
        refusal = PlainHttpRefusal(message, functools.partial(slots.gone, conn))
        conn.unmade = refusal.close
        try:
            await self.loop.connect_accepted_socket(lambda: refusal, sock)
        except (ConnectionError, OSError) as e:
            log.debug("plain-HTTP refusal failed: %s", e)
            slots.gone(conn)
            sock.close()


class PlainHttpRefusal(asyncio.Protocol):
    """A plain-HTTP request on an HTTPS port: read its head (so closing does not reset the
    connection under the reply), answer 400 with `message`, and close."""

    def __init__(self, message: str, on_lost):
        self.message = message
        self.on_lost = on_lost                  # frees the slot it held
        self.transport = None
        self.shed = False                       # closed before it was made
        self.seen = bytearray()
        self.answered = False
        self.timer = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        if self.shed:
            transport.close()
            return
        self.timer = asyncio.get_running_loop().call_later(PLAIN_ON_TLS_LINGER_S * 5, self.close)

    def data_received(self, data: bytes) -> None:
        if self.answered:
            return                              # lingering: drop the rest of the request
        self.seen += data
        if b"\r\n\r\n" in self.seen or len(self.seen) > REQUEST_HEAD_MAX_BYTES:
            self._answer()

    def eof_received(self) -> bool:
        if not self.answered:
            self._answer()
        self.close()
        return False

    def connection_lost(self, exc) -> None:
        self.transport = None
        if self.timer is not None:
            self.timer.cancel()
        self.on_lost()

    def _answer(self) -> None:
        self.answered = True
        err = responses.error(CosmosError(400, 0, self.message), responses.activity_id())
        self.transport.write(wire.encode(err, _CLOSE, False))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.timer.cancel()
        self.timer = asyncio.get_running_loop().call_later(PLAIN_ON_TLS_LINGER_S, self.close)

    def close(self) -> None:
        if self.transport is None:
            self.shed = True
        else:
            self.transport.close()
