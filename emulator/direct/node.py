"""One backend node of a region: its port, its listener, its connections, and what it serves.

Theory of operation: a node is one TCP listener (docs/direct.md, "Topology") serving every
replica placed on it; a request names its replica, which the node resolves (targets.py) and
refuses when the replica is not here, is down, or is a secondary asked to write. Its requests run
through its region's Service (`svc`, the plane's, one per region, made without a key: frames are
authenticated once, in the handshake). The plane (plane.py) decides whether the node listens
(`set_listening`: while the node is up, its region's ports are not blocked and its region is not
out in the `refuse` mode) and in which outage mode it fails (`set_outage`): `unavailable` answers
every request 503, `reset` resets every connection as soon as it sends anything, `blackhole`
reads and never answers, and its heal closes every connection the blackhole held. A node that
stops listening drops its connections and keeps its port (a hold: the runtime's port_hold.py),
so it comes back on the same address.
"""
import asyncio
import os

from ..core.connection_slots import ConnectionSlots
from ..core.errors import CosmosError
from ..core.faults import OUTAGE_BLACKHOLE, OUTAGE_RESET, OUTAGE_UNAVAILABLE
from .connection import DirectConnection
from .session import Limits
from .targets import Targets


class DirectNode:
    def __init__(self, plane, region: str, index: int, port: int, svc):
        self.plane = plane
        self.region = region
        self.index = index
        self.port = port
        self.svc = svc                       # its region's Service
        self.limits = Limits(index, region, plane.instance, plane.key, **plane.limits)
        self.targets = Targets(svc, region, index)
        self.server = None
        self._sock = None
        self._hold = None                    # a port hold while a fault keeps the node from listening
        self.connections: set = set()
        self.slots = ConnectionSlots(plane.max_connections)   # which connections it keeps at its cap
        self.outage = None                   # the outage mode of its region while it is out and listening
        self.unavailable = False             # outage UNAVAILABLE: every request is answered 503
        self.silent = False                  # outage RESET or BLACKHOLE: connections are not served

    def __call__(self) -> DirectConnection:
        return DirectConnection(self)

    def unavailable_error(self) -> CosmosError:
        """What a node of a region out in the `unavailable` mode answers every request with."""
        return CosmosError(503, 0, f"Region {self.region} is unavailable (a region outage); its direct "
                                   "nodes answer nothing else until it is back.")

    # ---- listening ----------------------------------------------------------------------------
    def bind(self) -> None:
        try:
            self._sock = self.plane.listen(self.plane.host, self.port)
        except OSError as e:             # name the flag that picks this port, not the gateway's
            raise OSError(e.errno, f"node {self.index} of {self.region} (direct mode) cannot listen on "
                                   f"{self.plane.host}:{self.port}: {os.strerror(e.errno) if e.errno else e}; "
                                   "choose another range with --direct-ports, or --direct-ports 0 for free "
                                   "ports") from None
        self.port = self._sock.getsockname()[1]

    async def serve(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            self.server = await asyncio.get_running_loop().create_server(self, sock=sock)

    def set_listening(self, want: bool, hold: bool = True) -> asyncio.Task | None:
        """Listen or not; a node that stops listening keeps its port unless `hold` is False (the
        node goes away), so it comes back on the same address."""
        if want and self.server is None and self._sock is None:
            self.bind()
            self._release_hold()
            return asyncio.get_running_loop().create_task(self.serve())
        if not want:
            was_listening = self.server is not None or self._sock is not None
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            if self.server is not None:
                self.server.close()
                self.server = None
            for conn in list(self.connections):
                conn.abort()
            if not hold:
                self._release_hold()
            elif was_listening and self._hold is None:
                self._hold = self.plane.hold(self.plane.host, self.port)
        return None

    def set_outage(self, mode: str | None) -> None:
        """Fail in a region outage mode that keeps the node listening (UNAVAILABLE, RESET,
        BLACKHOLE), or serve again (None), as the region's gateway fails."""
        was = self.outage
        if mode == was:
            return
        self.outage = mode
        self.unavailable = mode == OUTAGE_UNAVAILABLE
        self.silent = mode in (OUTAGE_RESET, OUTAGE_BLACKHOLE)
        if was == OUTAGE_BLACKHOLE:
            for conn in list(self.connections):
                conn.abort()                 # the connections a blackhole held: their clients gave up
        if mode == OUTAGE_RESET:
            for conn in list(self.connections):
                conn.reset_now()
        elif mode == OUTAGE_BLACKHOLE:
            for conn in self.connections:
                conn.silence()

    def _release_hold(self) -> None:
        if self._hold is not None:
            self._hold.release()
            self._hold = None

    def describe(self) -> dict:
        return {"region": self.region, "node": self.index, "port": self.port,
                "listening": self.server is not None or self._sock is not None,
                "state": self.plane.account.placement.node(self.region, self.index).state,
                "outage_mode": self.outage, "connections": len(self.connections)}
