"""The replica set of one physical partition in one region: 1 primary + 3 secondaries.

Theory of operation:
* In a write region, `append` gives a write the next LSN, adds its versions to the shared
  store and has the primary apply it; each secondary applies it after the intra-region delay
  (immediately when that is 0), always in LSN order.
* In any other region, `apply_replicated` receives commits shipped from the write region, in
  LSN order, and replicates them locally the same way.
* `committed_lsn` is the highest LSN that a write quorum (3 of 4) has applied. It never goes
  back. A write is acknowledged once committed; reads never see versions above it, so nothing
  that could still be lost is ever visible. Commit listeners (cross-region shipping, the
  shell's waiters) hear about every advance, in order.
* `lockstep` is True while every replica is up, no election is under way and every secondary
  applies a commit at once (no intra-region or slow-replica delay, no apply scheduled): then a
  commit is applied by all four replicas and committed in one step, with no per-replica checks.
  Every change to a replica's state, role or delay goes through this class
  (set_replica_state, set_replica_delay, crash_primary, elect, truncate_to and the scheduled
  applies), which recomputes it (`_refresh_lockstep`).
* `epoch` is the version part of session tokens; it moves on when a failover discarded writes,
  so old tokens can be told apart from new ones.

Who changes what: only this class moves LSNs; replicas are plain state.
"""
import bisect
from collections import deque

from .errors import CosmosError, service_unavailable
from .read_routing import CONNECTIONS, ReadRoutingPolicy
from .replica import Replica, PRIMARY, SECONDARY, UP, DOWN
from .store import VersionStore, versions_of

REPLICA_COUNT = 4
WRITE_QUORUM = 3
LOG_RETAINED_COMMITS_MAX = 10_000
NO_CUT_LSN = 2 ** 62                     # an epoch that began without cutting history


class ReplicaSet:
    __slots__ = ("region", "range_id", "scheduler", "clock", "delay_ms", "routing", "replicas", "primary",
                 "store", "lsn", "committed_lsn", "epoch", "epoch_start_lsn", "epoch_starts", "log", "commit_listeners",
                 "_waiters", "_early", "electing", "partition", "own_seq", "progress", "progress_seq", "multi_write",
                 "resolver", "on_conflict", "discard_tail", "_etag_prefix", "log_retained_commits",
                 "token_vector", "lockstep", "_floor_of", "progress_moved", "__weakref__")

    def __init__(self, region: str, range_id: str, scheduler, clock, *, delay_ms: int = 0,
                 routing: ReadRoutingPolicy | None = None):
        self.region = region
        self.range_id = range_id
        self.scheduler = scheduler
        self.clock = clock
        self.delay_ms = delay_ms
        self.routing = routing or ReadRoutingPolicy()
        self.replicas = [Replica(0, PRIMARY)] + [Replica(i, SECONDARY) for i in range(1, REPLICA_COUNT)]
        for r, w in zip(self.replicas, self.routing.weights_for(region)):
            r.weight = w                   # the weights asked for at runtime (PUT /routing/weights)
        self.primary = self.replicas[0]    # the replica whose role is PRIMARY; only elect() changes it
        self.store = VersionStore()
        self.lsn = 0
        self.committed_lsn = 0
        self.epoch = 0
        self.epoch_start_lsn = 0           # the LSN at which the current epoch began
        self.epoch_starts = [0]            # the LSN at which each epoch began, oldest first
        # The versions of recent commits, oldest first. Their LSNs are consecutive and end at
        # self.lsn, so an entry's LSN is implied by its position (see log_first_lsn). A commit
        # of one version is kept as that Version, others as their list: no (lsn, versions)
        # tuple and no one-element list outlive a commit, since each would be one more object
        # for the garbage collector to walk on every full collection. Read it through
        # commit_at and commits_between, which always give a sequence of versions.
        self.log: deque = deque()
        # Past this many, the oldest committed commit is dropped from the log (never from the
        # store): a region that lags further is brought back by a snapshot (snapshot.py).
        self.log_retained_commits = LOG_RETAINED_COMMITS_MAX
        self.commit_listeners: list = []   # fn(replica_set, old_committed, new_committed)
        self._waiters: deque = deque()     # (lsn, fn) in LSN order; fn(ok: bool)
        self._early: dict = {}             # shipped commits that arrived ahead of a gap
        self.electing = False              # a primary crashed and no new one is elected yet
        self.discard_tail = True           # an election in a write region drops the unacked tail
        self.partition = None              # set by Partition.attach
        self.own_seq = 0                   # how many commits this region originated
        self.progress: dict = {}           # origin region -> highest oseq of it applied here
        self.progress_seq = 0              # counts changes to progress (the gateway caches on it)
        # The origin whose count the last change to progress moved, when it moved that one alone
        # (None: a change of the whole map). Whoever changes progress bumps progress_seq and sets
        # this: the session token's vector then formats one number anew, not every region's.
        self.progress_moved = None
        self.multi_write = False           # shipped commits are merged (conflicts) not appended
        self.resolver = None               # fn(current, incoming) -> True when incoming wins
        self.on_conflict = None            # fn(loser, winner)
        self._etag_prefix = (None, "")     # (epoch, the etag up to the LSN) for that epoch
        # The gateway's session-token vector text for this set (gateway/sessions.py owns it).
        # Kept here, not in a table keyed by replica set, so it dies with the set: a table
        # would keep a deleted container's partitions, and all their items, alive.
        self.token_vector = None
        self.lockstep = False
        self._refresh_lockstep()
        self._floor_of = self.floor_lsn    # bound once: the store calls it for a key it has

    # ---- state -------------------------------------------------------------------------
    def floor_lsn(self) -> int:
        """The lowest LSN any reader can be served at: no replica is read above the committed LSN,
        which in a read region may stall below every applied LSN (two replicas down), so the
        store must keep what is visible there, not just at the slowest replica. Nor below any
        region's LSN: a forced failover cuts every region back to its target's LSN, even below
        what was committed here, and the versions visible there must still be in the store.
        Nor below the partition's global LSN, where strong reads are served."""
        floor = min(self.committed_lsn, min(r.applied_lsn for r in self.replicas))
        if self.partition is not None and not self.multi_write:
            floor = min(floor, self.partition.global_lsn, self._lowest_region_lsn())
        return floor

    def _lowest_region_lsn(self) -> int:
        """The lowest LSN a forced failover could cut this partition back to: any region's LSN,
        where a region still in an older epoch (down since a forced failover) counts at the cut
        it will take when it recovers, not at the stale commits it still holds."""
        low = self.lsn
        for rs in self.partition.replica_sets.values():
            lsn = rs.lsn
            if rs.epoch < self.epoch:
                cut = self.cut_since(rs.epoch)
                if cut is not None:
                    lsn = min(lsn, cut)
            low = min(low, lsn)
        return low

    def _refresh_lockstep(self) -> None:
        """Recompute `lockstep` (theory of operation) after a replica's state, role or delay changed."""
        delay_ms = self.delay_ms
        primary = self.primary
        self.lockstep = not self.electing and all(
            r.state == UP and (r is primary or (delay_ms + r.extra_delay_ms <= 0 and r.next_apply_ms == 0))
            for r in self.replicas)

    def up_count(self) -> int:
        n = 0
        for r in self.replicas:
            if r.state == UP:
                n += 1
        return n

    # ---- writes ------------------------------------------------------------------------
    def check_writable(self) -> None:
        """Raise (definitely not applied) when a write could not reach a quorum now."""
        if self.lockstep:
            return                           # every replica up, no election: the common answer
        if self.electing or self.primary.state != UP:
            raise service_unavailable(
                f"The primary replica of partition {self.range_id} in {self.region} is not available; "
                "an election is under way. Retry the request.")
        if self.up_count() < WRITE_QUORUM:
            raise service_unavailable(
                f"Partition {self.range_id} in {self.region} has {self.up_count()} of "
                f"{REPLICA_COUNT} replicas up; a write needs {WRITE_QUORUM}.")

    def next_lsn(self) -> int:
        return self.lsn + 1

    def etag(self, lsn: int) -> str:
        """The etag of what this replica set commits at lsn: "<epoch>-<range>-<lsn>" in hex."""
        epoch, prefix = self._etag_prefix
        if epoch != self.epoch:
            prefix = f'"{self.epoch:08x}-{int(self.range_id):04x}-'
            self._etag_prefix = (self.epoch, prefix)
        return '%s%016x"' % (prefix, lsn)

    def append(self, versions: list) -> int:
        """Commit-path entry for a write region. versions are stamped with next_lsn()."""
        self.check_writable()
        lsn = self.lsn + 1
        self._add(lsn, versions)
        return lsn

    def apply_foreign(self, versions) -> None:
        """Multi-write: merge a commit another region originated. Each version is compared with
        this region's newest version of its key; a causal successor (it superseded exactly that
        version) applies, otherwise last-writer-wins by the container's policy decides, the same
        way in every region, and the loser goes to the conflicts feed."""
        origin, oseq = versions[0].origin, versions[0].oseq
        if oseq <= self.progress.get(origin, 0):
            return
        lsn = self.lsn + 1
        keep = []
        for v in versions:
            cur = self.store.newest(v.key)
            if cur is None or v.prev_id == (cur.origin, cur.oseq) or self.resolver is None:
                keep.append(v.with_lsn(lsn))
            elif self.resolver(cur, v):
                if self.on_conflict:
                    self.on_conflict(cur, v)
                keep.append(v.with_lsn(lsn))
            elif self.on_conflict:
                self.on_conflict(v, cur)
        self.progress[origin] = oseq
        self.progress_seq += 1
        self.progress_moved = origin
        if keep:
            self._add(lsn, keep)

    def apply_replicated(self, lsn: int, versions) -> None:
        """A commit shipped from a write region. Commits are applied strictly in LSN order; one
        that arrives ahead of a gap (after a failover two regions ship to this one) waits in
        `_early` until the gap is filled."""
        if lsn == self.lsn + 1 and not self.multi_write:     # the next one (nearly always)
            self._add(lsn, versions)
            if self._early:
                self._drain_early()
            return
        if self.multi_write:
            self.apply_foreign(versions)
        elif lsn > self.lsn:
            self._early[lsn] = versions
        # else: a duplicate delivery after a heal: already have it

    def _drain_early(self) -> None:
        early = self._early
        while early and self.lsn + 1 in early:
            nxt = self.lsn + 1
            self._add(nxt, early.pop(nxt))

    def install_snapshot(self, snap) -> None:
        """A state transfer (snapshot.py): everything up to snap.lsn at once, for a region that
        lagged past what the sender's log retains. The replicas apply it like one commit; the
        log starts over after it, since the commits it stands for are not retained here."""
        if snap.lsn <= self.lsn or self.lsn < snap.after_lsn:
            # Already there (commits that raced it arrived first), or below what it was taken
            # for, which a cut of history would have purged from the link first.
            return
        store, floor, mine = self.store, self.floor_lsn(), self.lsn
        for v in snap.versions:
            if v.lsn > mine:
                store.add(v, floor)
        progress = self.progress
        for origin, oseq in snap.progress.items():
            if oseq > progress.get(origin, 0):
                progress[origin] = oseq
        self.progress_seq += 1
        self.progress_moved = None
        self.own_seq = max(self.own_seq, progress.get(self.region, 0))
        self.lsn = snap.lsn
        self.log.clear()
        self._early = {k: v for k, v in self._early.items() if k > snap.lsn}
        primary = self.primary
        primary.applied_lsn = snap.lsn
        for r in self.replicas:
            if r is not primary and r.state == UP:
                self._replicate_to(r, snap.lsn)
        self._recompute_commit()
        self._drain_early()

    def _add(self, lsn: int, versions) -> None:
        if versions:
            first = versions[0]
            origin, oseq = first.origin, first.oseq
            if origin == self.region:
                self.own_seq = oseq
            progress = self.progress
            if oseq > progress.get(origin, 0):
                progress[origin] = oseq
                self.progress_seq += 1
                self.progress_moved = origin
        store = self.store
        if len(versions) == 1:
            # One version (nearly every commit), kept in the log as itself (see __init__).
            entry = versions[0]
            store.put(entry, self._floor_of)                 # the floor only for a key it has
        else:
            entry = versions
            if not store.add_new(versions):                  # add_new: a batch of new keys at once
                floor = None
                for v in versions:
                    if floor is None and store.has(v.key):
                        floor = self.floor_lsn()     # pruning needs it; a brand-new key does not
                    store.add(v, floor or 0)
        self.lsn = lsn
        log = self.log
        log.append(entry)
        # Only committed commits leave the log: the ones above still have to be shipped.
        while len(log) > self.log_retained_commits and lsn - len(log) < self.committed_lsn:
            log.popleft()
        if self.lockstep:
            # Every replica up and applying at once (nearly every commit): all four are at lsn
            # now, so lsn is committed.
            a, b, c, d = self.replicas         # REPLICA_COUNT of them, unrolled: every commit
            a.applied_lsn = b.applied_lsn = c.applied_lsn = d.applied_lsn = lsn
            self._committed(lsn)
            return
        primary = self.primary
        primary.applied_lsn = lsn
        for r in self.replicas:
            if r is not primary and r.state == UP:
                self._replicate_to(r, lsn)
        self._recompute_commit()

    def _replicate_to(self, r: Replica, lsn: int) -> None:
        delay = self.delay_ms + r.extra_delay_ms
        if delay <= 0 and (r.next_apply_ms == 0 or r.next_apply_ms <= self.clock.now_ms()):
            r.applied_lsn = lsn
            if r.next_apply_ms:
                # No apply of r is due after now: forgetting when the last one was due changes
                # nothing below, and lets the replica set go back to lockstep.
                r.next_apply_ms = 0
                self._refresh_lockstep()
            return
        due = max(self.clock.now_ms() + delay, r.next_apply_ms)
        r.next_apply_ms = due
        self.lockstep = False
        self.scheduler.call_at(due, self._apply_at, r, lsn, due)

    def _apply_at(self, r: Replica, lsn: int, due_ms: int) -> None:
        if r.next_apply_ms == due_ms:
            # The last apply scheduled for r (none is due later): as in _replicate_to.
            r.next_apply_ms = 0
            self._refresh_lockstep()
        # The log may have been cut back (truncate_to) since this apply was scheduled: apply
        # what is left of it. Dropping it would strand a replica catching up from below the cut.
        lsn = min(lsn, self.lsn)
        if r.state != UP or lsn <= r.applied_lsn:
            return
        r.applied_lsn = lsn
        self._recompute_commit()

    def _recompute_commit(self) -> None:
        replicas = self.replicas
        lsn = quorum_lsn = self.lsn          # the common case: every replica is up and current
        for r in replicas:
            if r.applied_lsn != lsn or r.state != UP:
                applied = sorted((r.applied_lsn for r in replicas if r.state == UP), reverse=True)
                if len(applied) < WRITE_QUORUM:
                    return
                quorum_lsn = applied[WRITE_QUORUM - 1]
                break
        self._committed(quorum_lsn)

    def _committed(self, quorum_lsn: int) -> None:
        """A write quorum has applied everything up to quorum_lsn: commit it, and tell the
        listeners and the waiters."""
        if quorum_lsn <= self.committed_lsn:
            return
        old = self.committed_lsn
        self.committed_lsn = quorum_lsn
        for fn in self.commit_listeners:
            fn(self, old, quorum_lsn)
        waiters = self._waiters
        while waiters and waiters[0][0] <= quorum_lsn:
            waiters.popleft()[1](True)

    def when_committed(self, lsn: int, fn) -> None:
        """Call fn(True) once lsn is committed (at once if it already is), or fn(False) if the
        write is discarded first (its primary crashed before a quorum had it)."""
        if lsn <= self.committed_lsn:
            fn(True)
        elif not self._waiters or self._waiters[-1][0] <= lsn:
            self._waiters.append((lsn, fn))
        else:
            # Reads wait for any LSN (a session token's), so keep the queue in LSN order: a
            # waiter for a far LSN must not hold back the writes behind it.
            self._waiters.insert(bisect.bisect_right(self._waiters, lsn, key=_waiter_lsn), (lsn, fn))

    def log_first_lsn(self) -> int:
        """The LSN of the oldest retained commit (self.lsn + 1 when none is retained)."""
        return self.lsn - len(self.log) + 1

    def commit_at(self, lsn: int):
        """The versions committed at lsn, or None when that commit is not retained."""
        i = lsn - self.log_first_lsn()
        return versions_of(self.log[i]) if 0 <= i < len(self.log) else None

    def commits_between(self, old: int, new: int):
        """The retained commits with old < lsn <= new, as (lsn, versions), in order."""
        log = self.log
        first = self.log_first_lsn()
        for i in range(max(old + 1 - first, 0), min(new + 1 - first, len(log))):
            yield first + i, versions_of(log[i])

    # ---- reads -------------------------------------------------------------------------
    def readable_replica(self, min_lsn: int, primary_ok: bool = True, pins=None) -> Replica | None:
        """pins: the reading connection's ConnectionPins when its read may follow a pin (an
        eventual or consistent-prefix read); used only under the `connections` strategy."""
        if self.committed_lsn < min_lsn:
            return None
        if pins is not None and self.routing.setting(self.region, "strategy") == CONNECTIONS:
            return pins.replica_for(self, primary_ok)
        return self.routing.choose(self.replicas, min_lsn, self.region, primary_ok)

    def visible_lsn(self, r: Replica) -> int:
        # A comparison, not min(): builtins without vectorcall cost about 0.7 k instructions a
        # call here, and every point read asks.
        applied = r.applied_lsn
        committed = self.committed_lsn
        return applied if applied < committed else committed

    # ---- history rewrites: elections and forced failovers ----------------------------------
    def truncate_to(self, lsn: int) -> list:
        """Discard every commit above lsn; returns the discarded versions (for the lost-writes
        log). Writes waiting for those commits are told they did not happen."""
        # Shipped commits waiting ahead of a gap belong to the history being cut, even when the
        # log itself is not above lsn: left there, they would fill in after the next epoch's
        # commits arrive.
        self._early = {k: v for k, v in self._early.items() if k <= lsn}
        if lsn >= self.lsn:
            return []
        lost = [v for _, versions in self.commits_between(lsn, self.lsn) for v in versions]
        self.store.truncate_after(lsn)
        for _ in range(min(self.lsn - lsn, len(self.log))):
            self.log.pop()
        self.lsn = lsn
        self.committed_lsn = min(self.committed_lsn, lsn)
        for r in self.replicas:
            r.applied_lsn = min(r.applied_lsn, lsn)
            r.next_apply_ms = 0
        self._refresh_lockstep()
        keep = deque()
        for w_lsn, fn in self._waiters:
            if w_lsn > lsn:
                fn(False)
            else:
                keep.append((w_lsn, fn))
        self._waiters = keep
        return lost

    def new_epoch(self) -> None:
        """History diverged here (a forced failover): session tokens of older epochs that claim
        LSNs above this point name writes this region will never have."""
        self.epoch += 1
        self.epoch_start_lsn = self.lsn
        self.epoch_starts.append(self.lsn)
        if self.partition is not None:
            self.partition.forget_global_count()     # what a region's commits count for changed

    def next_version(self) -> None:
        """A new session-token version without a cut (the account's regions changed)."""
        self.epoch += 1
        self.epoch_starts.append(NO_CUT_LSN)
        if self.partition is not None:
            self.partition.forget_global_count()     # what a region's commits count for changed

    def cut_since(self, epoch: int) -> int | None:
        """The lowest LSN history was cut back to after `epoch` ended (None: it is the current
        one). A token of epoch 0 must be held against every later cut, not just the last: a
        second failover may cut higher than the first did."""
        if epoch >= self.epoch:
            return None
        later = self.epoch_starts[max(epoch, 0) + 1:]
        return min(later) if later else self.epoch_start_lsn

    def crash_primary(self, discard_tail: bool = True) -> None:
        """The primary stops. Writes fail with 503 until `elect()` picks a new one."""
        self.primary.state = DOWN
        self.electing = True
        self.lockstep = False
        self.discard_tail = discard_tail

    def elect(self, discard_tail: bool | None = None) -> int | None:
        """Promote the most up-to-date live secondary (lowest index on ties). Everything a quorum
        acknowledged is on it: 3 of 4 replicas had each committed write and at most one of them
        was the old primary. In a write region the old primary's unacknowledged tail beyond that
        replica is discarded; in a read region (discard_tail=False) the tail came from the write
        region, so the new primary fetches it again instead of losing it."""
        candidates = [r for r in self.replicas if r.state == UP and r.role != PRIMARY]
        if len(candidates) < WRITE_QUORUM - 1:
            # Fewer than two live secondaries may all lack an acknowledged write (a quorum of 3
            # of 4 guarantees only that one of any two does): wait for a replica to come back.
            return None
        if discard_tail is None and self.partition is not None:
            # Decided now, not at the crash: an election that waited for a candidate may find
            # its region no longer (or newly) taking writes after a failover.
            discard_tail = self.region in self.partition.write_regions
        elif discard_tail is None:
            discard_tail = self.discard_tail
        best = max(candidates, key=lambda r: (r.applied_lsn, -r.index))
        old = self.primary
        old.role = SECONDARY
        best.role = PRIMARY
        self.primary = best
        self.electing = False
        self._refresh_lockstep()
        if discard_tail:
            keep = min(self.lsn, max(best.applied_lsn, self._committed_elsewhere()))
            best.applied_lsn = keep
            self.truncate_to(keep)
            if self.partition is not None and self.region in self.partition.write_regions:
                # Strong writes wait on the partition for a majority of regions; the discarded
                # ones must hear so there too, or a later write reusing their LSN acknowledges them.
                # (Only this region's own writes: a read region's election must not fail the
                # write region's waiters.)
                self.partition.fail_global_waiters_above(keep)
        else:
            best.applied_lsn = self.lsn
        self._recompute_commit()
        return best.index

    def _committed_elsewhere(self) -> int:
        """The highest LSN another region of the partition has committed. Everything up to it
        was committed where it was written, so an election here must not discard it: a region
        that became the write region (a forced failover) while its election was pending holds
        commits shipped to it that its slow secondaries had not applied yet."""
        if self.partition is None or self.multi_write:
            return 0
        # Same epoch only: a region still down since a forced failover holds commits it cut.
        return max((rs.committed_lsn for rs in self.partition.replica_sets.values()
                    if rs is not self and rs.epoch == self.epoch), default=0)

    # ---- replica faults (the fault catalogue drives these) --------------------------------
    def set_replica_state(self, index: int, state: str) -> None:
        r = self.replicas[index]
        r.state = state
        if state == UP and r.role == PRIMARY and self.electing:
            self.electing = False           # back before an election replaced it
        elif state == UP and self.electing:
            self.elect()                    # an election that lacked candidates can finish now
        self._refresh_lockstep()
        if state == UP and r.applied_lsn < self.primary.applied_lsn:
            # Catch up from the shared store: every version it needs is still there, because
            # the store's floor counted this replica while it was down.
            self._replicate_to(r, self.primary.applied_lsn)
        self._recompute_commit()

    def set_replica_delay(self, index: int, extra_delay_ms: int) -> None:
        """A slow replica (the replica_slow fault): every apply of it waits extra_delay_ms more."""
        self.replicas[index].extra_delay_ms = extra_delay_ms
        self._refresh_lockstep()

    def describe(self) -> dict:
        return {"range": self.range_id, "region": self.region, "lsn": self.lsn,
                "committed_lsn": self.committed_lsn, "epoch": self.epoch,
                "items": self.store.count_live,
                "replicas": [r.describe() for r in self.replicas]}


def _waiter_lsn(waiter) -> int:
    return waiter[0]


__all__ = ["ReplicaSet", "REPLICA_COUNT", "WRITE_QUORUM", "CosmosError", "UP", "DOWN"]
