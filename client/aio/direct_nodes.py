"""The direct transport's connections: one handshaken connection to a node, requests
multiplexed on it by id, with heartbeats (`Connection`), and the connections to one node under
the pool policy (`Endpoint`). client/aio/direct.py routes operations to them."""
import asyncio
from collections import deque

from regionlab.client.policies import direct_pool as pool
from regionlab.client.protocol import direct as D

AGENT = "regionlab-client"
PROTOCOL_VERSION = max(D.PROTOCOL_VERSIONS)   # the compact frames (docs/direct-protocol.md)


class InstanceMismatch(Exception):
    """The node refused the hello: it belongs to another emulator instance than the address
    named (a stale address). Not a refused connection: the addresses are refreshed, as on 410."""


class Connection:
    """One handshaken connection to a node; requests multiplexed by id."""

    def __init__(self, endpoint, reader, writer, clock):
        self.endpoint = endpoint
        self.reader, self.writer = reader, writer
        self.decoder = D.FrameDecoder()
        self.waiting: dict[int, asyncio.Future] = {}
        self.next_id = 0
        self.in_flight = 0
        self.clock = clock
        self.last_used = self.last_sent = clock()
        self.heartbeat_s = D.HEARTBEAT_INTERVAL_S
        self.closed = False
        self.reader_task = None
        self.on_slot = None              # called when a request finished (the pool wakes a waiter)
        self._out: list[bytes] = []      # frames to send at the end of this loop iteration
        self.pings = 0
        self._ping_waiters: list = []    # (count, future) of pinged() callers

    @classmethod
    async def open(cls, host, port, key, connect_timeout_s, clock, instance=None):
        """A handshaken connection to the node at host:port, which must belong to `instance`
        (the address's; None: not checked), else InstanceMismatch."""
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), connect_timeout_s)
        conn = cls((host, port), reader, writer, clock)
        try:
            await asyncio.wait_for(conn._handshake(key, instance), connect_timeout_s)
        except D.ProtocolError as e:
            writer.close()
            # Not a direct node: a dead node's port reused by another listener (an HTTP server
            # answers the hello "HTTP/1.1 400 ..."): an endpoint that refuses connections.
            raise ConnectionRefusedError(f"not a direct node at {host}:{port}: {e}") from None
        except BaseException:
            writer.close()
            raise
        conn.reader_task = asyncio.get_running_loop().create_task(conn._read_loop())
        return conn

    async def _handshake(self, key, instance) -> None:
        self.writer.write(D.encode(D.hello(versions=(PROTOCOL_VERSION,), agent=AGENT, instance=instance)))
        frames: deque = deque()
        challenge = await self._next(frames)
        if D.instance_refused(challenge):
            raise InstanceMismatch(D.error_fields(challenge)[2])
        if D.frame_type(challenge) != D.CHALLENGE:
            raise ConnectionRefusedError(f"handshake refused: {D.error_fields(challenge)}")
        fields = D.challenge_fields(challenge)
        self.heartbeat_s = pool.heartbeat_interval_s(fields["heartbeat_ms"], fields["idle_timeout_ms"])
        self.writer.write(D.encode(D.auth(D.handshake_mac(key, fields["nonce"]))))
        ready = await self._next(frames)
        if D.frame_type(ready) != D.READY:
            raise ConnectionRefusedError(f"handshake refused: {D.error_fields(ready)}")

    async def _next(self, frames: deque) -> dict:
        while not frames:
            data = await self.reader.read(65536)
            if not data:
                raise ConnectionResetError("closed by the node during the handshake")
            frames.extend(self.decoder.feed(data))
        return frames.popleft()

    async def _read_loop(self) -> None:
        error: Exception = ConnectionResetError("closed by the node")
        try:
            while True:
                data = await self.reader.read(262144)
                if not data:
                    break
                for frame in self.decoder.feed(data):
                    t = D.frame_type(frame)
                    if t == D.RESPONSE:
                        fut = self.waiting.pop(D.reply_id(frame), None)
                        if fut is not None and not fut.done():
                            fut.set_result(frame)
                    elif t in (D.ERROR, D.BYE):
                        error = ConnectionResetError(f"the node ended the connection: {D.error_fields(frame)}")
        except (OSError, D.ProtocolError) as e:
            error = ConnectionResetError(f"the connection broke: {e}")
        finally:
            self.closed = True
            for fut in self.waiting.values():
                if not fut.done():
                    fut.set_exception(error)
            self.waiting.clear()
            self._wake_ping_waiters(error)
            self.writer.close()

    async def call(self, frame_of, timeout_s) -> dict:
        """Send the request frame_of(id) and wait for its reply."""
        if self.closed:                  # the read loop ended: nothing would ever answer
            raise ConnectionResetError("the connection is closed")
        self.next_id = self.next_id % D.REQUEST_ID_MAX + 1
        rid = self.next_id
        fut = asyncio.get_running_loop().create_future()
        self.waiting[rid] = fut
        self.in_flight += 1
        self.last_used = self.last_sent = self.clock()
        try:
            self._queue(D.encode(frame_of(rid)))
            return await asyncio.wait_for(fut, timeout_s)
        finally:
            self.waiting.pop(rid, None)
            self.in_flight -= 1
            self.last_used = self.clock()
            if self.on_slot is not None:
                self.on_slot()

    def _queue(self, data: bytes) -> None:
        """Requests made in one loop iteration leave in one write (one syscall, not one each)."""
        if not self._out:
            asyncio.get_running_loop().call_soon(self._flush)
        self._out.append(data)

    def _flush(self) -> None:
        out, self._out = self._out, []
        if not self.closed:
            self.writer.write(out[0] if len(out) == 1 else b"".join(out))

    def ping(self) -> None:
        self.pings += 1
        self.last_sent = self.clock()
        self._queue(D.encode(D.ping()))
        if self._ping_waiters:
            self._wake_ping_waiters(None)

    async def pinged(self, count: int) -> None:
        """Return once this connection has sent `count` heartbeats; raise ConnectionResetError
        if it closes first. Lets a caller (tests, diagnostics) wait for heartbeats, not poll."""
        if self.pings >= count:
            return
        if self.closed:
            raise ConnectionResetError("the connection is closed")
        fut = asyncio.get_running_loop().create_future()
        self._ping_waiters.append((count, fut))
        await fut

    def _wake_ping_waiters(self, error: Exception | None) -> None:
        waiting = []
        for count, fut in self._ping_waiters:
            if fut.done():
                continue
            if error is not None:
                fut.set_exception(error)
            elif self.pings >= count:
                fut.set_result(None)
            else:
                waiting.append((count, fut))
        self._ping_waiters = waiting

    async def close(self) -> None:
        if not self.closed:
            try:
                self.writer.write(D.encode(D.bye()))
            except (OSError, RuntimeError):
                pass
        self.writer.close()
        if self.reader_task is not None:
            self.reader_task.cancel()
            await asyncio.gather(self.reader_task, return_exceptions=True)


class Endpoint:
    """The connections to one node (host, port) of one emulator instance, under the pool policy."""

    def __init__(self, address, key, options: pool.PoolOptions, clock, on_open=None, instance=None):
        self.address, self.key, self.options, self.clock = address, key, options, clock
        self.instance = instance         # the hello names it; the node refuses another's
        self.on_open = on_open           # the housekeeper re-reads the heartbeat intervals
        self.connections: list[Connection] = []
        self.opening = 0
        self.waiters: deque = deque()
        self.last_used = clock()
        self.opened = 0                  # connections ever opened (diagnostics, tests)

    async def acquire(self) -> Connection:
        self.last_used = self.clock()
        while True:
            self.connections = [c for c in self.connections if not c.closed]
            action, i = pool.choose(self.options, [c.in_flight for c in self.connections], self.opening,
                                    len(self.waiters))
            if action == pool.USE:
                return self.connections[i]
            if action == pool.OPEN:
                return await self._open()
            fut = asyncio.get_running_loop().create_future()
            self.waiters.append(fut)
            try:
                await fut
            finally:
                if fut in self.waiters:
                    self.waiters.remove(fut)

    async def _open(self) -> Connection:
        self.opening += 1
        try:
            conn = await Connection.open(*self.address, self.key, self.options.connect_timeout_s, self.clock,
                                         self.instance)
        finally:
            self.opening -= 1
            self._wake_all()
        conn.on_slot = self._wake_one
        self.connections.append(conn)
        self.opened += 1
        if self.on_open is not None:
            self.on_open()
        return conn

    def _wake_one(self) -> None:
        while self.waiters:
            fut = self.waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    def _wake_all(self) -> None:
        while self.waiters:
            fut = self.waiters.popleft()
            if not fut.done():
                fut.set_result(None)

    def housekeeping(self, now_s) -> list[Connection]:
        """Ping connections idle for the heartbeat interval; the connections to close."""
        closing = []
        for c in self.connections:
            if c.closed:
                continue
            if pool.connection_expired(self.options, c.in_flight, c.last_used, now_s):
                closing.append(c)
            elif pool.needs_ping(c.heartbeat_s, c.last_sent, now_s):
                c.ping()
        self.connections = [c for c in self.connections if c not in closing and not c.closed]
        return closing
