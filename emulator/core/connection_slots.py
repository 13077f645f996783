"""Which connections a listener keeps when it is full: the shedding policy every listener shares
(each gateway port, plain or TLS, the control port, and every direct-mode node).

Theory of operation. A listener serves at most `connections_max` connections at once, because
every endpoint shares one process and its file limit. Each connection it holds is in one state:

* SILENT: accepted, and it has not begun a request yet: nothing sent, part of a request head,
  a TLS handshake under way, or (direct mode) a handshake not yet done;
* IDLE: it has been served and waits between requests (a keep-alive connection);
* BUSY: a request is in progress on it (its head is complete and its reply not yet written;
  direct mode: requests in flight).

A new connection is always taken in while there is room. At the cap it is still taken in, and
one connection is shed for it, as servers that face the internet do: the SILENT connection that
arrived first, else the connection IDLE the longest. A flood of sockets that never speak thus
sheds its own sockets (at most one idle client connection is closed when it begins), and clients
that leave their connections open without using them (one SDK client per test, never closed)
give way to the ones that arrive after them. Only when every slot is BUSY is the new connection
refused (the listener answers what the service would: 503, retry later).

Under pressure (at least PRESSURE_OCCUPANCY_FRACTION of the cap taken), a SILENT connection
must begin a request within SILENT_DEADLINE_UNDER_PRESSURE_S of connecting (first byte, any
TLS handshake and the first request head together), instead of the listener's usual header or
handshake timeout: `overdue(now)` names the ones past it, for the listener's sweep to shed.

Invariants: every connection held is in exactly one state; SILENT connections are ordered by
when they connected (their `since`), IDLE ones by when they became idle, oldest first (dicts keep
insertion order, so every step is O(1)); `len(self)` never exceeds `connections_max`. A held
connection has a `shed()` method that closes it now; shedding removes it from the slots first,
so its later close (and `gone`) changes nothing.

Who changes it: only the listener's own connections, through `admit`, `speaking`, `idle` and
`gone`; the caller supplies `now` (seconds, its loop's clock): this module reads
no clock.
"""

from .limits import PRESSURE_OCCUPANCY_FRACTION, SILENT_DEADLINE_UNDER_PRESSURE_S

_MISSING = object()


class ConnectionSlots:
    __slots__ = ("connections_max", "_silent", "_idle", "_busy", "shed", "_pressure_count")

    def __init__(self, connections_max: int):
        if connections_max < 1:
            raise ValueError(f"connections_max must be at least 1, got {connections_max}")
        self.connections_max = connections_max
        self._silent: dict = {}        # connection -> when it connected; oldest first
        self._idle: dict = {}          # connection -> None; idle longest first
        self._busy: set = set()
        self.shed = 0                  # connections closed to admit others, or overdue under pressure
        self._pressure_count = max(1, int(connections_max * PRESSURE_OCCUPANCY_FRACTION))

    def __len__(self) -> int:
        return len(self._silent) + len(self._idle) + len(self._busy)

    def __contains__(self, conn) -> bool:
        return conn in self._silent or conn in self._idle or conn in self._busy

    def state(self, conn) -> str | None:
        """"silent", "idle", "busy", or None for a connection not held (for tests and reports)."""
        if conn in self._silent:
            return "silent"
        if conn in self._idle:
            return "idle"
        return "busy" if conn in self._busy else None

    def counts(self) -> dict:
        return {"silent": len(self._silent), "idle": len(self._idle), "busy": len(self._busy)}

    @property
    def under_pressure(self) -> bool:
        return len(self) >= self._pressure_count

    def admit(self, conn, now: float) -> bool:
        """Take conn in as SILENT, shedding one connection first if the listener is full.
        False (conn not taken in) only when every slot is busy."""
        if len(self) >= self.connections_max and not self._shed_one():
            return False
        self._silent[conn] = now
        return True

    def _shed_one(self) -> bool:
        victims = self._silent if self._silent else self._idle
        if not victims:
            return False
        victim = next(iter(victims))
        del victims[victim]
        self.shed += 1
        victim.shed()
        return True

    def speaking(self, conn) -> None:
        """conn began a request (its head is complete; direct mode: a request is in flight)."""
        if self._idle.pop(conn, _MISSING) is _MISSING and self._silent.pop(conn, _MISSING) is _MISSING:
            return                     # shed already, or busy already
        self._busy.add(conn)

    def idle(self, conn) -> None:
        """conn was answered and waits for its next request: the newest idle connection. A
        connection idle already moves to the end (direct mode: it was just active)."""
        if self._idle.pop(conn, _MISSING) is _MISSING:
            if conn not in self._busy:
                if self._silent.pop(conn, _MISSING) is _MISSING:
                    return             # shed already
            else:
                self._busy.discard(conn)
        self._idle[conn] = None

    def gone(self, conn) -> None:
        """conn closed (any way): its slot is free."""
        if self._silent.pop(conn, _MISSING) is _MISSING and self._idle.pop(conn, _MISSING) is _MISSING:
            self._busy.discard(conn)

    def overdue(self, now: float) -> list:
        """Under pressure, the SILENT connections that connected more than
        SILENT_DEADLINE_UNDER_PRESSURE_S before now (oldest first); none otherwise."""
        if not self.under_pressure:
            return []
        out = []
        for conn, since in self._silent.items():
            if now - since <= SILENT_DEADLINE_UNDER_PRESSURE_S:
                break
            out.append(conn)
        return out

    def shed_overdue(self, now: float) -> int:
        """Shed every connection `overdue(now)` names; how many."""
        shed = 0
        for conn in self.overdue(now):
            if self._silent.pop(conn, _MISSING) is not _MISSING:    # (another's shed may have closed it)
                shed += 1
                conn.shed()
        self.shed += shed
        return shed
