"""Connections turned away because every slot of their listener is busy with a request.

Every endpoint (the gateways and the control port) shares one process and its file limit, so
each listener holds at most CONNECTIONS_PER_LISTENER_MAX connections at once (five listeners at
the cap, plus the few lingering refusals each may hold, stay well below 1,024 descriptors; the
runtime also raises the soft file limit to the hard one at start-up). Which connections it keeps
is the shedding policy of core/connection_slots.py: a new connection sheds a silent or idle one,
so this refusal happens only when all of them have a request in progress.

Such a connection is answered at once, before it sends anything: 503 with a message saying why,
`Connection: close`, then a half-close. What the client still sends (its request) is read and
dropped for up to TURNED_AWAY_LINGER_S, so its kernel does not reset the connection before it
has read the answer (a close with unread bytes sends a reset). Only TURNED_AWAY_LINGERING_MAX
such refusals linger per listener; past that a refusal is closed at once (the answer is still
sent, but may be lost to a reset): a flood cannot use the descriptors it was refused.
"""
import asyncio

from ..core.errors import CosmosError
from ..service import responses
from . import wire
from ..core.limits import TURNED_AWAY_LINGERING_MAX, TURNED_AWAY_LINGER_S, TURNED_AWAY_RETRY_AFTER_MS

_CLOSE = "Connection: close\r\n"


def too_many_connections(connections_max: int) -> CosmosError:
    return CosmosError(503, 0, f"Too many connections to this endpoint: it serves at most {connections_max} "
                               "at once, and every one has a request in progress. Retry after the delay, "
                               "or send fewer requests at once.",
                       retry_after_ms=TURNED_AWAY_RETRY_AFTER_MS)


class Refusals:
    """The connections one listener turned away and that still linger; `turned_away` counts all."""

    def __init__(self, connections_max: int):
        self.connections_max = connections_max
        self.lingering: set = set()
        self.turned_away = 0

    def protocol(self) -> "TurnedAway":
        self.turned_away += 1
        return TurnedAway(self)

    def abort_all(self) -> None:
        for conn in list(self.lingering):
            conn.abort()


class TurnedAway(asyncio.Protocol):
    __slots__ = ("refusals", "transport", "timer")

    def __init__(self, refusals: Refusals):
        self.refusals = refusals
        self.transport = None
        self.timer = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        err = too_many_connections(self.refusals.connections_max)
        transport.write(wire.encode(responses.error(err, responses.activity_id()), _CLOSE, False))
        lingering = self.refusals.lingering
        if len(lingering) >= TURNED_AWAY_LINGERING_MAX or not transport.can_write_eof():
            transport.close()
            return
        lingering.add(self)
        transport.write_eof()
        self.timer = asyncio.get_running_loop().call_later(TURNED_AWAY_LINGER_S, self.abort)

    def data_received(self, data: bytes) -> None:
        pass                            # the request of a refused connection: dropped

    def eof_received(self) -> bool:
        self.transport.close()          # the client is done too
        return False

    def connection_lost(self, exc) -> None:
        self.refusals.lingering.discard(self)
        if self.timer is not None:
            self.timer.cancel()
        self.transport = None

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()
