"""HTTP/1.1 for the gateway endpoints: connections, request framing and replies, on asyncio.

Why our own server (llhttp parses the heads): a point read is a few dozen microseconds of
gateway work, and aiohttp's server spent about twice that on each request (its request handler,
a task per request, header multidicts, URL objects, stream readers) before the gateway saw it.
The gateway needs none of that: every request it serves is small, framed by Content-Length, and
answered in one write.

Theory of operation. A `Connection` is an asyncio.Protocol. Bytes accumulate until a request
head is complete (`\\r\\n\\r\\n`); llhttp parses the head into a `Request` (lower-case header
names, UTF-8 values; gateway/request_head.py), then the body is collected whole (Content-Length
or chunked) before the handler runs, so a client that stalls or vanishes mid-body never reaches
the core. One request runs at a time per connection; pipelined requests wait in the buffer and
are answered in order.

Framing is linear in the bytes received, however a client splits them: the search for a head's
end resumes where the last one stopped, a growing head is appended in place (a bytearray) and
handed to its parser a byte at most once (the method as it comes, then each line once it has
ended, so that llhttp never sees a header line in pieces), a
Content-Length body is a list of pieces joined once, and a chunked body goes through an
incremental decoder (gateway/chunked.py) that keeps its place between reads. A client
trickling a request byte by byte thus costs the shared event loop no more than one sending it
at once.

Each listener holds at most `connections_max` connections by the policy every listener shares
(core/connection_slots.py): silent until a request head is complete, busy until its reply is
written, then idle; at the cap a new connection sheds a silent or idle one (`Connection.shed`)
and is answered 503 only when all are busy (gateway/refusal.py). A new connection must complete
its first head within `header_timeout_s` (less under pressure), so a socket that never sends a
byte is closed by the sweep too (silently: it asked nothing).

The handler is a coroutine. Its first step runs at once, outside any task: a point read never
suspends, so it costs no task and no scheduling. If it does suspend (a write waiting for its
quorum), a task carries it on. So handlers may await only futures and coroutines that
do (not `asyncio.timeout`, which needs a current task).

Bad input never reaches the handler and never takes the server down: a malformed head is 400
saying what llhttp found wrong or what the service requires (one Host, HTTP/1.1 or 1.0, a path
as the target), an oversized head 431, an oversized body 413 (answered before the body is
read), TLS on this plain-HTTP port 400 with a hint; each is answered and the connection closed. `sweep(now)`
(called by the runtime about once a second) answers 408 to a connection that has held an
incomplete request head longer than `header_timeout_s` or body longer than `body_timeout_s`,
and closes keep-alive connections idle longer than `keepalive_timeout_s`.

During a region outage the runtime may put an endpoint's connections into an outage mode
(`begin_outage`): "reset" resets every connection, open or new, as soon as it sends anything;
"blackhole" reads and drops whatever arrives and answers nothing (not even a reply already being
computed), until `end_outage` closes every connection it held. The listener itself stays open in
both (the "refuse" mode is the runtime closing it).
"""
import asyncio
import logging
import socket
import struct

from ..core.connection_slots import ConnectionSlots
from ..core.errors import CosmosError
from ..core.faults import OUTAGE_BLACKHOLE, OUTAGE_RESET
from ..core.request_faults import RESET
from ..service import responses
from ..service.handoff import carry_on
from . import wire
from .chunked import ChunkedBody
from .request_head import CONNECTION_CLOSE, BadRequest, HeadParser, Request
from .refusal import Refusals, TurnedAway
from ..core.limits import (
    BODY_DEADLINE_S, CONNECTIONS_PER_LISTENER_MAX, HEAD_DEADLINE_S, ITEM_MAX_BYTES, KEEPALIVE_TIMEOUT_S,
    REFUSED_BODY_READ_MAX_BYTES, REQUEST_BODY_MAX_BYTES, REQUEST_HEAD_MAX_BYTES,
)

log = logging.getLogger("regionlab.http")

_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_LINGER_RESET = struct.pack("ii", 1, 0)     # SO_LINGER on, 0 s: close() sends RST, not FIN
# What of an incomplete head its parser is fed: the method as it arrives, then whole lines.
_METHOD, _LINES = range(2)


class HttpServer:
    """The protocol factory of one endpoint, and the registry of its open connections."""

    def __init__(self, handler, *, header_timeout_s: float = HEAD_DEADLINE_S,
                 body_timeout_s: float = BODY_DEADLINE_S,
                 keepalive_timeout_s: float = KEEPALIVE_TIMEOUT_S,
                 connections_max: int = CONNECTIONS_PER_LISTENER_MAX):
        self.handler = handler
        self.header_timeout_s = header_timeout_s
        self.body_timeout_s = body_timeout_s
        self.keepalive_timeout_s = keepalive_timeout_s
        self.connections: set = set()
        self.outage: str | None = None    # OUTAGE_RESET or OUTAGE_BLACKHOLE while a region outage is on
        self.slots = ConnectionSlots(connections_max)   # which connections it keeps (core/connection_slots.py)
        self.refusals = Refusals(connections_max)    # connections refused: every slot busy (gateway/refusal.py)
        self._closing = None          # a future set when a connection closes (wait_closed)

    def __call__(self) -> "Connection | TurnedAway":
        conn = self.admit()
        return conn if conn is not None else self.refusals.protocol()

    def admit(self) -> "Connection | None":
        """A new connection holding a slot (another shed for it if the listener is full), or None
        when every slot is busy with a request."""
        conn = Connection(self)
        return conn if self.slots.admit(conn, conn.loop.time()) else None

    def sweep(self, now: float) -> int:
        """Answer 408 to stalled requests, close idle keep-alive connections, and under pressure
        shed connections silent too long; how many closed."""
        closed = self.slots.shed_overdue(now)
        for conn in list(self.connections):
            if conn.expired(now):
                closed += 1
        return closed

    def abort_all(self) -> None:
        for conn in list(self.connections):
            conn.abort()
        self.refusals.abort_all()

    async def wait_all_closed(self) -> None:
        """Until every connection is closed (after abort_all: its sockets are really shut, so a
        client's next request on one is refused, not sent)."""
        await self.wait_closed(None)

    async def wait_closed(self, conns: set | None) -> None:
        """Until none of conns (None: no connection at all) is open any more."""
        while self.connections if conns is None else not conns.isdisjoint(self.connections):
            if self._closing is None or self._closing.done():
                self._closing = asyncio.get_running_loop().create_future()
            await self._closing

    def _closed(self, conn) -> None:
        self.connections.discard(conn)
        if self._closing is not None and not self._closing.done():
            self._closing.set_result(None)

    def begin_outage(self, mode: str) -> set:
        """Put every connection, open or new, into an outage mode (reset or blackhole); returns the
        connections it reset (closing now: wait_closed them)."""
        self.outage = mode
        if mode == OUTAGE_RESET:
            reset = set(self.connections)
            for conn in reset:
                conn.reset()
            return reset
        for conn in self.connections:
            conn.silence()
        return set()

    def end_outage(self) -> set:
        """Serve again. The connections a blackhole held are closed (their clients gave up on
        them, or will); returns them (wait_closed them)."""
        held = set(self.connections) if self.outage == OUTAGE_BLACKHOLE else set()
        self.outage = None
        for conn in held:
            conn.abort()
        return held

    async def shutdown(self, timeout_s: float) -> None:
        """Close idle connections now; give running requests up to timeout_s, then abort."""
        for conn in list(self.connections):
            conn.close_when_idle()
        busy = [conn.task for conn in self.connections if conn.task is not None]
        if busy:
            await asyncio.wait(busy, timeout=timeout_s)
        self.abort_all()
        for task in busy:
            task.cancel()           # still running (a reply a latency fault holds): end it here


class Connection(asyncio.Protocol):
    __slots__ = ("server", "loop", "transport", "buf", "head_scanned", "head", "head_fed", "head_stage",
                 "request", "continued", "chunks", "body_parts", "body_have", "since", "idle_since",
                 "discard", "task", "busy", "closing", "paused_reading", "paused_writing", "running", "pins",
                 "unmade")

    def __init__(self, server: HttpServer):
        self.server = server
        self.loop = asyncio.get_running_loop()
        self.transport = None
        self.buf = b""                 # bytes not yet framed into a request (bytearray while growing)
        self.head_scanned = 0          # how much of buf was searched for the head's end
        self.head = HeadParser()       # llhttp, for the request heads
        self.head_fed = 0              # how much of the head in buf it has seen
        self.head_stage = _METHOD
        self.request: Request | None = None     # head parsed, body still arriving
        self.continued = False         # that request was answered 100 Continue
        self.chunks: ChunkedBody | None = None  # the decoder of the request's chunked body
        self.body_parts: list = []
        self.body_have = 0
        self.since = 0.0               # when the incomplete request in the buffer began, or 0
        self.idle_since = 0.0          # when the sweep first saw this connection idle, or 0
        self.discard = 0               # body bytes of a refused request still to drop
        self.task = None               # the task of a handler that suspended
        self.running = None            # the request whose handler is running
        self.busy = False
        self.closing = False           # answer what is running, then close
        self.paused_reading = False
        self.paused_writing = False
        self.pins = None               # the gateway's read-routing pins (core/read_routing.py), released on close
        self.unmade = None             # before connection_made: what closes it if shed (TLS: its handshake)

    # ---- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        self.unmade = None
        if self.closing:
            transport.close()           # shed before it was made: the listener needed its slot
            return
        self.server.connections.add(self)
        self.since = self.loop.time()  # a socket that never sends a head is reaped like a stalled one

    def connection_lost(self, exc) -> None:
        self.server._closed(self)
        self.server.slots.gone(self)
        self.transport = None
        self.buf = b""
        self._forget_head()
        self.chunks = None
        self.body_parts = []
        if self.pins is not None:
            self.pins.release()
        # A running handler is not cancelled: a write it already applied stays applied (and
        # acknowledged in the core); only its reply has nobody to go to. It is told, so work
        # done only for the reply (a query running in slices) can stop.
        if self.busy and self.running is not None:
            self.running.lost = True

    def pause_writing(self) -> None:
        self.paused_writing = True

    def resume_writing(self) -> None:
        self.paused_writing = False
        self._advance()

    def data_received(self, data: bytes) -> None:
        outage = self.server.outage
        if outage is not None:
            if outage == OUTAGE_RESET:
                self.reset()
            return                      # a blackhole reads and drops what arrives
        if self.discard:
            self.discard -= len(data)
            if self.discard <= 0:
                self.transport.close()
            return
        req = self.request
        if req is None or (req.chunked and self.chunks.done):
            buf = self.buf
            if not buf:
                self.buf = data                 # the common case: a whole request in one read
            elif type(buf) is bytes:
                self.buf = bytearray(buf) + data    # a head arriving in pieces: append, not copy
            else:
                buf += data
        elif req.chunked:
            if not self._feed_chunks(data):
                return
        else:
            self.body_parts.append(data)
            self.body_have += len(data)
        if self.busy or self.paused_writing:
            if len(self.buf) + self.body_have > REQUEST_HEAD_MAX_BYTES + REQUEST_BODY_MAX_BYTES and not self.paused_reading:
                self.paused_reading = True
                self.transport.pause_reading()
            return
        self._advance()

    def eof_received(self) -> bool:
        # A half-closed client still gets the answer to a request it completed and is running;
        # a request it did not complete is dropped unanswered (and nothing of it was applied).
        if not self.busy:
            self.transport.close()
            return False
        self.closing = True
        if self.running is not None:
            # As Go's net/http cancels a request's context on EOF: work done only for the reply
            # (a query running in slices) stops; a write or read that completes is still answered.
            self.running.lost = True
        return True

    # ---- framing ---------------------------------------------------------------------------
    def _advance(self) -> None:
        """Frame and run requests until one suspends, the buffer runs dry, or we must stop."""
        while not self.busy and not self.paused_writing and self.transport is not None:
            req = self.request
            try:
                if req is None:
                    req = self._take_head()
                    if req is None:
                        break               # dry: a half-closed connection closes below
                if not self._take_body(req):
                    break
            except BadRequest as e:
                self._refuse(e.status, e.message, e.discard)
                return
            self.request = None
            self._run(req)
        if self.closing and not self.busy and self.transport is not None:
            self.transport.close()

    def _take_head(self) -> Request | None:
        buf = self.buf
        # Search only the bytes not searched before (less the 3 that may begin the blank line),
        # so a head trickled in byte by byte is still scanned once, not once per byte.
        end = buf.find(b"\r\n\r\n", max(0, self.head_scanned - 3))
        if end < 0:
            if not buf:
                return None
            self._check_partial_head(buf)
            self.head_scanned = len(buf)
            self._waiting()
            return None
        if end > REQUEST_HEAD_MAX_BYTES:
            raise BadRequest(431, f"The request head is larger than {REQUEST_HEAD_MAX_BYTES} bytes.",
                             discard=REFUSED_BODY_READ_MAX_BYTES)
        req = self._parse_head(buf, end + 4)
        rest = bytes(buf[end + 4:])
        self.head_scanned = 0
        if req.length > REQUEST_BODY_MAX_BYTES:
            raise BadRequest(413, f"Request size is too large: {req.length} bytes; the limit is "
                                  f"{REQUEST_BODY_MAX_BYTES} bytes (an item may be at most {ITEM_MAX_BYTES}).",
                             discard=req.length - len(rest))
        self.request = req
        self.server.slots.speaking(self)
        self.continued = False
        self.buf = b""
        if req.chunked:
            self.chunks = ChunkedBody(REQUEST_BODY_MAX_BYTES, BadRequest)
            if rest:
                self._take_chunks(rest)
        else:
            self.body_parts = [rest] if rest else []
            self.body_have = len(rest)
        return req

    def _parse_head(self, buf, end: int) -> Request:
        """The request whose head is buf[:end]: what its parser has not seen yet is fed now (all
        of it when the head arrived at once). Raises BadRequest."""
        fed = self.head_fed
        self.head_fed = 0
        self.head_stage = _METHOD
        self.head.feed(buf if fed == 0 and end == len(buf) else buf[fed:end])
        return self.head.request()

    def _check_partial_head(self, buf) -> None:
        """Refuse an incomplete head as soon as it cannot become a valid one: too large, or what
        its parser has seen is wrong. The parser sees the method as it arrives (TLS or garbage
        is told at once), then every line once it has ended. Every search resumes where the last
        one stopped, so waiting for the rest of a head is linear in its size."""
        if len(buf) > REQUEST_HEAD_MAX_BYTES:
            raise BadRequest(431, f"The request head is larger than {REQUEST_HEAD_MAX_BYTES} bytes.",
                             discard=REFUSED_BODY_READ_MAX_BYTES)
        fed = upto = self.head_fed
        if self.head_stage == _METHOD:
            space = buf.find(b" ", fed)
            if space < 0:
                upto = len(buf)
            else:
                upto = space + 1
                self.head_stage = _LINES
        if self.head_stage == _LINES:
            eol = buf.rfind(b"\n", max(upto, self.head_scanned))
            if eol >= 0:
                upto = eol + 1
        if upto > fed:
            self.head.feed(buf[fed:upto])
            self.head_fed = upto

    def _forget_head(self) -> None:
        self.head.reset()
        self.head_fed = 0
        self.head_stage = _METHOD

    def _take_chunks(self, data: bytes) -> None:
        """Feed body bytes to the chunked decoder; what follows a completed body is the next
        request. Raises BadRequest."""
        end = self.chunks.feed(data)
        if end is not None and end < len(data):
            self.buf = data[end:]

    def _feed_chunks(self, data: bytes) -> bool:
        """_take_chunks from data_received: a refusal is answered here. False if refused."""
        try:
            self._take_chunks(data)
        except BadRequest as e:
            self._refuse(e.status, e.message, e.discard)
            return False
        return True

    def _take_body(self, req: Request) -> bool:
        if req.chunked:
            chunks = self.chunks
            if not chunks.done:
                self._expect_continue(req)
                self._waiting()
                return False
            req.body = chunks.body()
            self.chunks = None
            return True
        need = req.length
        if self.body_have < need:
            self._expect_continue(req)
            self._waiting()
            return False
        parts = self.body_parts
        if parts:
            whole = parts[0] if len(parts) == 1 else b"".join(parts)
            req.body = whole[:need]
            if len(whole) > need:
                self.buf = whole[need:]         # the next pipelined request
                self.head_scanned = 0
        self.body_parts = []
        self.body_have = 0
        return True

    def _expect_continue(self, req: Request) -> None:
        if self.continued:
            return
        expect = req.headers.get("expect")
        if expect is not None and expect.lower() == "100-continue" and req.version == "HTTP/1.1":
            self.continued = True
            self.transport.write(_CONTINUE)

    def _waiting(self) -> None:
        """A request has begun and is incomplete: the clock for its timeout starts now (once)."""
        if self.since <= 0.0:
            self.since = self.loop.time()

    # ---- running a request -----------------------------------------------------------------
    def _run(self, req: Request) -> None:
        self.busy = True
        self.running = req
        req.conn = self
        self.since = 0.0
        coro = self.server.handler(req)
        try:
            waiting = coro.send(None)
        except StopIteration as done:
            self._answer(req, done.value)
            return
        except Exception:
            log.exception("internal error on %s %s", req.method, req.raw_path)
            self._refuse(500, "Internal error in regionlab; see the server log.")
            return
        task = self.task = self.loop.create_task(carry_on(coro, waiting))
        task.add_done_callback(lambda t: self._finished(req, t))

    def _finished(self, req: Request, task) -> None:
        self.task = None
        if task.cancelled():
            self.busy = False
            return
        exc = task.exception()
        if exc is not None:
            log.error("internal error on %s %s", req.method, req.raw_path, exc_info=exc)
            self._refuse(500, "Internal error in regionlab; see the server log.")
            return
        self._answer(req, task.result())
        self._advance()

    def _answer(self, req: Request, reply) -> None:
        self.busy = False
        transport = self.transport
        if transport is None or self.server.outage == OUTAGE_BLACKHOLE:
            return
        if reply.fault is not None:
            self._drop(reply)
            return
        transport.write(wire.encode(reply, req.connection, req.method == "HEAD"))
        if not req.keep_alive:
            transport.close()
            self.transport = None
            return
        self.idle_since = 0.0
        self.server.slots.idle(self)
        if self.paused_reading:
            self.paused_reading = False
            transport.resume_reading()

    def _drop(self, reply) -> None:
        """A request fault's end of a request that ran: close without an answer (the client
        cannot know whether it was applied), or send part of the reply and reset the connection
        (RST: SO_LINGER 0, then close)."""
        transport = self.transport
        self.transport = None
        if reply.fault == RESET:
            data = wire.encode(reply, "", False)
            transport.write(data[:max(1, len(data) // 2)])
            sock = transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
            transport.abort()
            return
        transport.close()

    def _refuse(self, status: int, message: str, discard: int = 0) -> None:
        """Answer a request the gateway never saw, then close: its framing cannot be trusted.
        With `discard`, first read and drop that much more of its body, so that a client still
        sending it gets to read the answer instead of a reset connection."""
        self.busy = False
        self.request = None
        self.chunks = None
        self.buf = b""
        self.head_scanned = 0
        self._forget_head()
        self.body_parts = []
        transport = self.transport
        if transport is None:
            return
        err = responses.error(CosmosError(status, 0, message), responses.activity_id())
        transport.write(wire.encode(err, CONNECTION_CLOSE, False))
        if 0 < discard <= REFUSED_BODY_READ_MAX_BYTES:
            # A lingering close: our side is done (the client sees EOF after the reply), but
            # what it still sends is read and dropped, so its writes don't fail before it reads.
            self.discard = discard
            self.since = self.loop.time()
            if transport.can_write_eof():
                transport.write_eof()
            return
        transport.close()
        self.transport = None

    # ---- housekeeping ----------------------------------------------------------------------
    def expired(self, now: float) -> bool:
        """Called by the sweep: 408 a stalled request, close an idle keep-alive connection."""
        server = self.server
        if self.transport is None or self.busy or server.outage == OUTAGE_BLACKHOLE:
            return False                # a blackhole answers nothing, not even a 408
        if self.discard:
            if now - self.since > server.body_timeout_s:
                self.abort()
                return True
        elif self.request is not None:
            if now - self.since > server.body_timeout_s:
                self._refuse(408, f"The request body did not arrive within {server.body_timeout_s:g} s; "
                                  "send the whole request promptly.")
                return True
        elif self.buf or self.since > 0.0:
            # An incomplete head, or a new connection that has sent nothing yet (since is its
            # connect time): both must finish a head within header_timeout_s.
            if self.since > 0.0 and now - self.since > server.header_timeout_s:
                if not self.buf:
                    self.transport.close()     # nothing was asked, so nothing to answer
                    return True
                self._refuse(408, "The request head was not completed in time; send the whole request promptly.")
                return True
        elif self.idle_since <= 0.0:
            self.idle_since = now       # idle since (about) now: answered requests don't read the clock
        elif now - self.idle_since > server.keepalive_timeout_s:
            self.transport.close()
            return True
        return False

    def shed(self) -> None:
        """The listener's slots gave this silent or idle connection's place to a new one (or it
        stayed silent too long under pressure): close it; nothing was asked, or all was answered."""
        if self.transport is not None:
            self.transport.close()
            self.transport = None
            return
        self.closing = True             # not made yet: connection_made closes it
        unmade, self.unmade = self.unmade, None
        if unmade is not None:
            unmade()

    def close_when_idle(self) -> None:
        self.closing = True
        if not self.busy and self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()
            self.transport = None

    def reset(self) -> None:
        """Close with a TCP reset (RST), as a peer that drops the connection does."""
        transport = self.transport
        if transport is None:
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
            except OSError:
                pass                    # already gone: the abort below is all there is to do
        self.abort()

    def silence(self) -> None:
        """Drop what a blackholed connection had buffered: nothing of it will be answered."""
        self.buf = b""
        self.head_scanned = 0
        self._forget_head()
        self.body_parts = []
        self.body_have = 0
        self.request = None
        self.discard = 0
