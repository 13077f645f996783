"""A one-way replication link between two regions.

Theory of operation: the write region's replica set of every partition hands its newly
committed entries to the link towards each other region. The link delivers them after its
one-way lag (plus seeded jitter), strictly in the order it received them: a due time is never
earlier than the one before it, so jitter cannot reorder a partition's log. One scheduler
timer per link covers its whole backlog. A paused or cut link keeps its whole backlog (it grows with
the writes made while the link is down) and drains it in order once healed; a receiver that is down (a region outage)
stalls delivery the same way. A snapshot (snapshot.py) for a receiver that lagged past the
sender's retained log travels in the same queue, in order with the commits after it.
"""
from collections import deque

from .snapshot import Snapshot

ACTIVE = "active"
PAUSED = "paused"     # nothing moves; the backlog grows
CUT = "cut"           # like paused, but reported as a network partition


class Link:
    __slots__ = ("src", "dst", "lag_ms", "jitter_ms", "state", "scheduler", "clock", "rng",
                 "_queue", "_armed_ms", "_last_due_ms", "delivered", "_receiver_up", "_open", "on_state",
                 "_fire_cb")

    def __init__(self, src: str, dst: str, lag_ms: int, scheduler, clock, rng, jitter_ms: int = 0):
        self.src = src
        self.dst = dst
        self.lag_ms = lag_ms
        self.jitter_ms = jitter_ms
        self.state = ACTIVE
        self.scheduler = scheduler
        self.clock = clock
        self.rng = rng
        self._queue: deque = deque()      # (due_ms, replica_set, lsn, versions)
        self._armed_ms = None
        self._last_due_ms = 0
        self.delivered = 0
        # Both ends' regions are up (a region in an outage neither sends nor receives). The
        # account sets it on every change of a region's state, then kicks the link.
        self._receiver_up = True
        self._open = True                 # state is ACTIVE and receiver_up: what moves commits
        self.on_state = None              # fn(link) after its state changed (the account listens)
        self._fire_cb = self._fire        # bound once: every commit sent on an idle link arms it

    @property
    def receiver_up(self) -> bool:
        return self._receiver_up

    @receiver_up.setter
    def receiver_up(self, up: bool) -> None:
        self._receiver_up = up
        self._open = up and self.state == ACTIVE

    def send_snapshot(self, target_rs, snapshot: Snapshot) -> None:
        """A state transfer (snapshot.py), queued in order with the commits."""
        self.send(target_rs, snapshot.lsn, snapshot)

    def send(self, target_rs, lsn: int, versions, now_ms: int | None = None) -> None:
        """Queue a commit; `now_ms` is the account clock's now when the caller has it already."""
        ship(((self, target_rs),), lsn, versions, self.clock.now_ms() if now_ms is None else now_ms)

    def _arm(self, now_ms: int) -> None:
        """Arm the link's one timer for its oldest queued commit, or for now_ms if that one is
        overdue, unless a timer is armed already: an armed timer is never due after a queued
        commit (due times only grow, but for set_lag's cap, which kicks), so it delivers what is
        due and arms for the rest. A closed link arms nothing; opening it kicks it."""
        if self._armed_ms is not None or not self._open:
            return
        q = self._queue
        if not q:
            return
        due = q[0][0]
        if due < now_ms:
            due = now_ms
        self._armed_ms = due
        self.scheduler.call_at(due, self._fire_cb, due)

    def _fire(self, armed_ms: int) -> None:
        if armed_ms != self._armed_ms:
            return                        # superseded by an earlier arm
        self._armed_ms = None
        if not self._open:
            return
        now = self.scheduler.now_ms            # the time the scheduler runs this timer for
        q = self._queue
        while q and q[0][0] <= now:
            _, rs, lsn, versions = q.popleft()
            if type(versions) is Snapshot:
                rs.install_snapshot(versions)
            else:
                rs.apply_replicated(lsn, versions)
            self.delivered += 1
        self._arm(now)

    def set_lag(self, lag_ms: int, jitter_ms: int = 0) -> None:
        """Change the one-way lag. Commits already in flight then arrive at the latest the new
        lag from now: a healed lag spike must not hold its backlog for the spike's length.
        Capping every due time by one bound keeps them in order; raising the lag leaves commits
        already in flight alone."""
        self.lag_ms = lag_ms
        self.jitter_ms = jitter_ms
        cap = self.clock.now_ms() + lag_ms
        if self._last_due_ms > cap:
            # The commits sent from now on may follow at the new lag too, whether or not the
            # ones the old lag held are still queued (forget and purge may have dropped them),
            # and the timer armed for the old lag may be too late for them.
            self._last_due_ms = cap
            if self._queue and self._queue[-1][0] > cap:
                self._queue = deque((min(due, cap), rs, lsn, versions) for due, rs, lsn, versions in self._queue)
            self.kick()

    def set_state(self, state: str) -> None:
        self.state = state
        self._open = state == ACTIVE and self._receiver_up
        if state == ACTIVE:
            self.kick()
        if self.on_state is not None:
            self.on_state(self)

    def kick(self) -> None:
        """Re-arm after something that stalled delivery (a heal, a receiver coming back)."""
        self._armed_ms = None
        self._arm(self.clock.now_ms())

    def purge(self, target_rs, above_lsn: int) -> int:
        """Drop queued commits for target_rs above above_lsn (history rewritten by a forced
        failover); returns how many were dropped."""
        before = len(self._queue)
        self._queue = deque(e for e in self._queue if e[1] is not target_rs or e[2] <= above_lsn)
        return before - len(self._queue)

    def forget(self, targets: set) -> None:
        """Drop queued commits for the replica sets in targets (by id: a deleted container's),
        so a paused or cut link does not keep them, and all they store, alive until healed."""
        if self._queue:
            self._queue = deque(e for e in self._queue if id(e[1]) not in targets)

    @property
    def backlog(self) -> int:
        return len(self._queue)

    def describe(self) -> dict:
        return {"from": self.src, "to": self.dst, "lag_ms": self.lag_ms, "jitter_ms": self.jitter_ms,
                "state": self.state, "backlog": self.backlog, "delivered": self.delivered}


def ship(targets, lsn: int, versions, now_ms: int) -> None:
    """Queue one commit on every (link, target replica set) of targets, at `now_ms` on the account
    clock (a commit leaves for every other region at once: one call, one clock read)."""
    for link, target_rs in targets:
        due = now_ms + link.lag_ms
        if link.jitter_ms > 0:
            due += link.rng.randint(0, link.jitter_ms)
        if due < link._last_due_ms:
            due = link._last_due_ms        # jitter never reorders: FIFO per link
        link._last_due_ms = due
        link._queue.append((due, target_rs, lsn, versions))
        link._arm(now_ms)
