"""One direct-mode client connection on the asyncio loop: the thin shell around a Session.

Theory of operation: bytes that arrive go (after TLS, when the client started it: tls.py) into
the connection's Session (session.py), whose frames it takes in order: each request the session
accepts is served (adapter.py: through the service, its first step inline); nearly every
request finishes in that step and is answered at once, and one that waits (a write's quorum, a
latency fault's hold) is handed to a task (service/handoff.py) and answered when it finishes. Replies made while one buffer is handled go out in one write; those
made later, on the next loop turn. What the shell owns is what the session cannot:
the transport and its flow control (a peer that does not read its replies is not read either,
and the frames left of its last read wait until it drains: `_serve`),
TLS, the tasks of requests in flight (cancelled when the connection ends, so none is left
behind), the grace a closing connection gets to drain, and a region outage's modes on this
node (node.py: `reset` resets a connection that sends anything, `blackhole` reads and answers
nothing).

Request faults reach direct requests through the service: an `error` is answered instead of
running, a `latency` holds the reply in the service (the request stays in flight on its
connection and replica meanwhile), and a reply a fault lost closes the connection without it
(`timeout_after_apply`: one reply cannot go missing on a multiplexed connection without its
client waiting forever, so the other requests in flight on it end unanswered too) or sends part
of it and resets the connection (`tcp_reset`).
"""
import asyncio
import functools
import logging
import os
import socket
import ssl
import struct

from regionlab.client.protocol import direct as D

from ..core.faults import OUTAGE_RESET
from ..core.request_faults import DROP_AFTER_APPLY
from ..service import responses
from ..service.handoff import carry_on
from . import adapter, replies
from .session import CLOSED, HANDSHAKE_STATES, Session
from .tls import HANDSHAKE_FAILURE_ALERT, TLS_HANDSHAKE_RECORD, TlsSession
from ..core.limits import DIRECT_CLOSE_GRACE_S, DIRECT_WRITE_BUFFER_HIGH_BYTES

log = logging.getLogger("regionlab.direct")

_LINGER_RESET = struct.pack("ii", 1, 0)    # SO_LINGER on, 0 s: abort sends RST, not FIN
# No replica key equals this, not even a request's nil 'replica' (None would match a None here
# and reuse a target never resolved).
_NO_KEY = object()


class DirectConnection(asyncio.Protocol):
    def __init__(self, node):
        self.node = node
        self.session = None                  # made when the connection is (its clock starts then)
        self.transport = None
        self.loop = None
        self.closed = False
        self.silenced = False                # a region outage's blackhole: nothing more is sent, ever
        self.tls = None                      # a TlsSession once the client started TLS
        self._plain = False                  # the first bytes were looked at, and were not TLS
        self._flush_scheduled = False        # a flush is due on the next loop turn
        self.writing_paused = False          # the transport is past its write buffer mark
        self._held = None                    # the frames left unserved while it is (an iterator)
        # [key, target] of the replica the last read of the bytes being handled resolved to
        # (adapter.serve): the reads after it in the same bytes reuse it.
        self._last = [_NO_KEY, None]
        self.faults = node.plane.account.faults.requests   # its by_region is empty without faults

    # ---- asyncio.Protocol ---------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        loop = self.loop = asyncio.get_running_loop()
        node = self.node
        self.session = Session(node.limits, os.urandom(D.NONCE_BYTES), loop.time())
        transport.set_write_buffer_limits(high=DIRECT_WRITE_BUFFER_HIGH_BYTES)
        if not node.slots.admit(self, loop.time()):      # the node's slots shed one for it if they can
            cap = node.plane.max_connections
            self.session.fail(503, D.SUB_BUSY, f"Node {node.index} of {node.region} has {cap} connections, its "
                                               "limit, and every one has requests in flight; retry later.")
            self._close()
            return
        node.connections.add(self)

    def connection_lost(self, exc) -> None:
        self.closed = True
        self._held = None
        self.node.connections.discard(self)
        self.node.slots.gone(self)
        self._cancel_in_flight()

    def pause_writing(self) -> None:
        self.writing_paused = True
        self.transport.pause_reading()       # a peer that does not read gets no more served

    def resume_writing(self) -> None:
        self.writing_paused = False
        if self.closed:
            return
        held = self._held
        if held is not None:
            self._held = None
            if not self.node.silent:         # a region outage that answers nothing: dropped
                self._serve(held)
            if self._held is not None or self.closed:
                return                       # paused again, or closed by what it served
        self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        if self.node.silent:                 # its region is out in the reset or blackhole mode
            self._outage_received()
            return
        if not self._plain:                  # the first bytes (TLS or not?), or TLS records
            data = self._unwrap(data)
            if not data:
                return
        self._serve(iter(self.session.receive(data)))

    def _serve(self, frames) -> None:
        """Take the frames in order and answer them. Once the replies queued pass
        DIRECT_WRITE_BUFFER_HIGH_BYTES they are written, and if that fills the transport past its mark
        (the peer does not read), the frames left are held, unread, until it drains
        (resume_writing): one read of pipelined requests cannot queue more than about one mark
        of replies beyond the transport's."""
        session = self.session
        node = self.node
        fast = not self.faults.by_region      # no request fault is on: point reads and creates take point.py
        last = self._last
        try:
            for f in frames:
                got = session.frame(f)
                if type(got) is list:             # a request: its reply now, or later
                    got = adapter.serve(node, got, fast, last)
                if type(got) is list:
                    session.send_reply(got)
                elif got is not None:
                    self._other(got)
                    if self.closed:               # a lost reply closed it: what follows is not served
                        break
                if session.out_bytes > DIRECT_WRITE_BUFFER_HIGH_BYTES:
                    self._flush()
                    if self.writing_paused:
                        self._held = frames
                        break
        finally:
            if last[1] is not None:             # a read of these bytes resolved one
                last[0] = _NO_KEY
                last[1] = None
            self._flush()
        if session.state == CLOSED:
            self._close()
        else:
            self._in_slots()

    def _in_slots(self) -> None:
        """Where it stands in its node's slots (core/connection_slots.py): silent until its
        handshake is done, then busy while requests wait in flight, else idle (and, being just
        active, the newest idle)."""
        session = self.session
        if self.closed or session.state in HANDSHAKE_STATES:
            return
        if session.in_flight:
            self.node.slots.speaking(self)
        else:
            self.node.slots.idle(self)

    def shed(self) -> None:
        """Its node's slots gave its place to a new connection (or, under pressure, it did not
        finish its handshake in time): close it; a ready one is told goodbye first."""
        if self.session.state in HANDSHAKE_STATES:
            self._close()
        else:
            self.goodbye()

    # ---- requests ---------------------------------------------------------------------------
    def _other(self, got) -> None:
        """A request that was refused, waits, or whose reply a request fault lost."""
        kind = type(got)
        if kind is replies.Refusal:
            self._refuse(got)
        elif kind is replies.Waiting:
            task = self.loop.create_task(carry_on(got.coro, got.waiting))
            got.coro = got.waiting = None
            self.session.begin(got.rid, task)
            task.add_done_callback(functools.partial(self._finished, got))
        else:
            self._lose(got)

    def _finished(self, w, task) -> None:
        w.target.replica.in_flight -= 1
        if task.cancelled():                 # the connection ended: nothing to answer
            self.session.end(w.rid)
            return
        exc = task.exception()
        if exc is None:
            got = adapter.finish(w, task.result())
        else:                                # the service answers every error; a last resort
            log.error("internal error in direct %s", w.call.method, exc_info=exc)
            got = adapter.finish(w, responses.error(replies.INTERNAL, w.call.activity_id))
        if type(got) is list:
            if not self.closed:
                self.session.send_reply(got)
                self._flush_soon()
        else:
            self._lose(got)
        self.session.end(w.rid)
        if self.session.state == CLOSED:     # that was the last in flight after a bye
            self._close()
        else:
            self._in_slots()

    def _refuse(self, refusal) -> None:
        """Answer a request refused before it reached a replica (while the bytes it came in are
        handled: its reply goes out with theirs)."""
        session = self.session
        session.send_reply(adapter.refused(self.node.svc, refusal))
        session.refused(refusal)

    def _lose(self, lost) -> None:
        """A request fault lost this reply: the request ran, its client never gets the answer."""
        if self.closed:
            return
        if lost.fault == DROP_AFTER_APPLY:
            # One reply cannot be lost on a multiplexed connection without the client waiting
            # forever, so the connection closes, as the service's channel does: the other
            # requests in flight on it end unanswered too.
            self._close()
            return
        data = self.session.reply_bytes(lost.res)     # tcp_reset: part of the reply, then RST
        self.session.out.append(data[:max(1, len(data) // 2)])
        self._flush()
        self.reset_now()

    # ---- output, closing ----------------------------------------------------------------------
    def _flush_soon(self) -> None:
        """A reply made outside the handling of received bytes goes out on the next loop turn,
        with the others made by then."""
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out = self.session.out
        if out:
            if not self.closed and not self.silenced:
                if self.tls is None:
                    # Joined, not writelines(out): uvloop writes one buffer with one write(), but
                    # several (a reply is two: its length prefix and its body) through a writev
                    # context made per call, which costs more than copying a few replies.
                    self.transport.write(b"".join(out))
                elif self.tls.handshaken:    # before the TLS handshake, nothing can be sent
                    self.transport.write(self.tls.send(b"".join(out)))
            self.session.sent()

    def _close(self) -> None:
        """Send what is queued (the session's last frame among it), then close; abort if it does
        not drain within DIRECT_CLOSE_GRACE_S."""
        if self.closed:
            return
        self._flush()
        self.closed = True
        self.node.connections.discard(self)
        self.node.slots.gone(self)
        transport = self.transport
        if self.tls is not None and self.tls.handshaken and not self.silenced:
            transport.write(self.tls.close())
        transport.close()
        self.loop.call_later(DIRECT_CLOSE_GRACE_S, transport.abort)
        self._cancel_in_flight()

    def _cancel_in_flight(self) -> None:
        for task in list(self.session.in_flight.values()) if self.session is not None else ():
            task.cancel()

    def goodbye(self) -> None:
        """The node shuts down: a bye, then close."""
        if not self.closed:
            self.session.goodbye()
            self._close()

    def abort(self) -> None:
        """The node stopped listening (crash, outage, blocked ports): drop at once, no goodbye."""
        self.closed = True
        self.node.connections.discard(self)
        self.node.slots.gone(self)
        self.transport.abort()

    def check_deadlines(self, now: float) -> None:
        """The plane's sweeper: the session's timeouts, or a region outage's on this node."""
        if self.closed:
            return
        session = self.session
        session.tick(now)
        node = self.node
        if node.silent:                      # a region outage that answers nothing, not even a 408
            if node.outage == OUTAGE_RESET and now - session.last_rx > session.limits.handshake_timeout_s:
                self.reset_now()             # a peer that says nothing is reset once it had its time
            return
        if session.expire(now):
            self._close()

    # ---- region outages (node.py set_outage) --------------------------------------------------
    def _outage_received(self) -> None:
        """Bytes from a peer while the region is out in a mode that listens but does not serve:
        `reset` resets the connection, `blackhole` reads and drops them (and answers nothing,
        not even the requests already running)."""
        if self.node.outage == OUTAGE_RESET:
            self.reset_now()
        else:
            self.silence()

    def silence(self) -> None:
        """A blackhole: drop what was queued and send nothing more; the heal closes it."""
        self.silenced = True
        self.session.sent()

    def reset_now(self) -> None:
        """Reset the connection (RST: SO_LINGER 0, then abort); whatever was in flight on it is lost."""
        if self.closed:
            return
        self.closed = True
        self.node.connections.discard(self)
        self.node.slots.gone(self)
        self.session.sent()
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
            except OSError:
                pass                         # already gone: the abort below is all there is to do
        self.transport.abort()
        self._cancel_in_flight()

    # ---- TLS (tls.py) ---------------------------------------------------------------------------
    def _unwrap(self, data: bytes) -> bytes:
        """The plain bytes of what arrived while the connection is not known to be plain: the
        first bytes say whether the client starts TLS; under TLS, records are decrypted (b"":
        nothing to handle, or the connection ended)."""
        if self.tls is None:
            if data[0] != TLS_HANDSHAKE_RECORD:
                self._plain = True
                return data
            if not self._start_tls():
                return b""
        self.session.received = True         # TLS records are arrivals too (the idle timer)
        return self._tls_receive(data)

    def _start_tls(self) -> bool:
        """A TLS ClientHello arrived: run TLS if the node has a certificate, else refuse it."""
        ctx = self.node.plane.tls_context
        if ctx is None:
            log.info("a TLS connection to node %s of %s, which has no certificate (--direct-tls-cert): refused",
                     self.node.index, self.node.region)
            self.transport.write(HANDSHAKE_FAILURE_ALERT)
            self._close()
            return False
        self.tls = TlsSession(ctx)
        return True

    def _tls_receive(self, data: bytes) -> bytes:
        tls = self.tls
        try:
            plain = tls.receive(data)
        except ssl.SSLError as e:
            log.info("a TLS handshake or record on node %s of %s failed: %s", self.node.index, self.node.region, e)
            out = tls.outgoing()
            if out:
                self.transport.write(out)    # the alert that tells the client why
            self.tls = None                  # nothing more can be sent in TLS
            self._close()
            return b""
        out = tls.outgoing()
        if out:
            self.transport.write(out)
        return plain
