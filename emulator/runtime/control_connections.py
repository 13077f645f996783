"""The control port's connections, kept by the same shedding policy as every listener
(core/connection_slots.py), so that /health, the dashboard and the CLI always get in.

aiohttp serves the control port. Each connection is its aiohttp RequestHandler behind a thin
`ControlConnection` protocol that holds the connection's slot: asyncio talks to it, it passes
everything on to aiohttp, and frees the slot when the connection is lost. `middleware` marks a
connection busy while aiohttp runs one of its requests and idle after it, so at the cap a new
connection sheds the oldest one that has not begun a request, else the one idle longest; only
when every slot has a request in progress is a new connection refused (`refuse`: the gateway's
503, which the composition root hands in).
"""
import asyncio

from aiohttp import web

from ..core.connection_slots import ConnectionSlots


class ControlConnections:
    """The control port's protocol factory (pass it to create_server) and its slots."""

    def __init__(self, server, connections_max: int, refuse):
        self.server = server               # aiohttp's web.Server: makes a RequestHandler per connection
        self.slots = ConnectionSlots(connections_max)
        self.refuse = refuse               # () -> the protocol that answers 503 (every slot is busy)
        self.by_handler: dict = {}         # RequestHandler -> its ControlConnection

    def __call__(self) -> asyncio.Protocol:
        conn = ControlConnection(self, self.server())
        if not self.slots.admit(conn, asyncio.get_running_loop().time()):
            return self.refuse()
        self.by_handler[conn.handler] = conn
        return conn

    @web.middleware
    async def middleware(self, request, handler):
        conn = self.by_handler.get(request.protocol)
        if conn is None:                   # lost already: nothing holds a slot
            return await handler(request)
        self.slots.speaking(conn)
        try:
            return await handler(request)
        finally:
            self.slots.idle(conn)

    def sweep(self, now: float) -> int:
        """Under pressure, shed the connections silent too long; how many."""
        return self.slots.shed_overdue(now)

    def gone(self, conn: "ControlConnection") -> None:
        self.slots.gone(conn)
        self.by_handler.pop(conn.handler, None)


class ControlConnection(asyncio.Protocol):
    """One control connection: aiohttp's handler, and the slot it holds."""
    __slots__ = ("owner", "handler", "made", "shed_early")

    def __init__(self, owner: ControlConnections, handler):
        self.owner = owner
        self.handler = handler
        self.made = False
        self.shed_early = False

    def connection_made(self, transport) -> None:
        self.made = True
        self.handler.connection_made(transport)
        if self.shed_early:
            self.handler.force_close()

    def connection_lost(self, exc) -> None:
        self.owner.gone(self)
        self.handler.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self.handler.data_received(data)

    def eof_received(self):
        return self.handler.eof_received()

    def pause_writing(self) -> None:
        self.handler.pause_writing()

    def resume_writing(self) -> None:
        self.handler.resume_writing()

    def shed(self) -> None:
        """Close it: it has not begun a request, or it is idle (the slots need its place)."""
        self.owner.by_handler.pop(self.handler, None)
        if self.made:
            self.handler.force_close()
        else:
            self.shed_early = True
