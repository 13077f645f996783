"""A physical partition: one contiguous range of the effective-partition-key space, with a
replica set in every region of the account.

Theory of operation: the partition knows which regions accept writes. When the replica set of
a write region commits, the partition ships each new commit over the links to every other
region's replica set, in LSN order. A write sent to a region that does not accept writes is
refused with 403/3 before anything happens, as the service does after a failover.

Acknowledgement: under every level but Strong a write is acknowledged when its region's write
quorum has it. Under Strong it also waits until a majority of the account's regions have
committed it (`global_committed_lsn`), and strong reads are served only at or above that LSN,
so no region ever returns a value older than an acknowledged write.

The global LSN is recomputed on every commit of every region, so the partition counts the
regions whose committed LSN is above it; it keeps `_global_short`, how many more of them a
majority needs (at least 1, else the global LSN would have moved). A commit can move the
global LSN only by taking one more region above it: the commits that do not (nearly all: the
write region's own while others are short, and every region's after the majority's) cost two
comparisons. A region's committed LSN only goes up through a commit, which keeps the count;
going down (a cut) only makes the count too high, which at worst costs a full recompute.
Anything else that could make it too low (a region joins, the global LSN is lowered, a restore
sets a region's LSN) forgets it (None), and the next commit recomputes in full. So does a new
epoch in any region: while the regions are in different epochs (one down since a forced
failover) what a commit counts for depends on the cuts, and every commit recomputes in full.
"""
from operator import attrgetter

from .errors import CosmosError, write_forbidden
from .link import ship
from .replica_set import ReplicaSet

STALENESS_OPS_DEFAULT = 100_000          # bounded staleness K; the service's minimum for multi-region
STALENESS_RETRY_MS = 100
SUB_BOUNDED_STALENESS = 3200             # reported like any other request-rate throttle


def _commit_ts_ms(rs: ReplicaSet, lsn: int) -> int | None:
    versions = rs.commit_at(lsn)
    return versions[0].ts_ms if versions else None


class Partition:
    __slots__ = ("range_id", "min_epk", "max_epk", "replica_sets", "write_regions", "_links", "_targets",
                 "_global_waiters", "global_lsn", "staleness_ops", "staleness_s", "_region_ids", "region_order",
                 "region_up", "draining_from", "durable", "_global_short")

    def __init__(self, range_id: str, min_epk: str, max_epk: str):
        self.range_id = range_id
        self.min_epk = min_epk
        self.max_epk = max_epk
        self.replica_sets: dict[str, ReplicaSet] = {}
        self.write_regions: tuple = ()
        self.draining_from = None              # the old write region while a graceful failover drains
        self._links: dict = {}                 # (src, dst) -> Link, shared with the account
        self._targets: dict = {}               # region -> [(link, replica set)] it ships to
        self._global_waiters: list = []        # (lsn, fn) sorted by lsn
        self.global_lsn = 0                    # highest LSN committed by a majority of regions
        self._global_short = None              # regions a majority above global_lsn lacks (module docstring)
        self.staleness_ops = STALENESS_OPS_DEFAULT
        self.staleness_s = None                # set (with staleness_ops) for bounded-staleness accounts
        self.region_up = lambda region: True   # the account's view; a region in an outage is exempt
        self._region_ids: dict[str, int] = {}  # region name -> id in session-token vectors
        self.region_order: tuple = ()          # (name, id) by id: the order of those vectors
        # fn(partition, rs, old, new) for every commit of every region, when the account is
        # durable (runtime/persistence.py writes them); None keeps the in-memory path as it was.
        self.durable = None

    @property
    def region_ids(self) -> dict:
        """Region name -> its id in session-token vectors. Change it only through the setter,
        set_region_id and drop_region_id, which keep region_order."""
        return self._region_ids

    @region_ids.setter
    def region_ids(self, ids: dict) -> None:
        self._region_ids = dict(ids)
        self._order_regions()

    def set_region_id(self, name: str, id: int) -> None:
        self._region_ids[name] = id
        self._order_regions()

    def drop_region_id(self, name: str) -> None:
        self._region_ids.pop(name, None)
        self._order_regions()

    def _order_regions(self) -> None:
        self.region_order = tuple(sorted(self._region_ids.items(), key=lambda kv: kv[1]))

    @property
    def links(self) -> dict:
        return self._links

    @links.setter
    def links(self, links: dict) -> None:
        self._links = links
        self._targets.clear()

    def attach(self, region: str, rs: ReplicaSet) -> None:
        self._targets.clear()
        self._global_short = None              # one more region, and maybe already above
        self.replica_sets[region] = rs
        rs.partition = self
        rs.commit_listeners.append(self._on_commit)

    def detach(self, region: str) -> None:
        self._targets.clear()
        rs = self.replica_sets.pop(region)
        rs.commit_listeners.remove(self._on_commit)
        self._recompute_global()

    def for_write(self, region: str, now_ms: int | None = None) -> ReplicaSet:
        """The replica set that takes a write in region; `now_ms` is the writer's clock (the
        region's, which a clock_skew fault offsets), which the T bound is judged by."""
        if region not in self.write_regions:
            raise write_forbidden(region)
        rs = self.replica_sets[region]
        rs.check_writable()
        if self.staleness_s is not None:
            self._check_staleness(rs, now_ms)
        return rs

    def _check_staleness(self, hub: ReplicaSet, now_ms: int | None = None) -> None:
        """Bounded staleness: while any region lags the write region by more than K operations or
        T seconds, writes are throttled (429) instead of letting the bound break. A region in an
        outage is taken out of the bound (as the service takes it offline) so it cannot stop writes."""
        if now_ms is None:
            now_ms = hub.clock.now_ms()
        for region, rs in self.replica_sets.items():
            behind = hub.committed_lsn - rs.committed_lsn
            if rs is hub or behind <= 0 or not self.region_up(region):
                continue
            oldest_ms = _commit_ts_ms(hub, rs.committed_lsn + 1)
            too_old = oldest_ms is not None and now_ms - oldest_ms > self.staleness_s * 1000
            if behind >= self.staleness_ops or too_old:
                raise CosmosError(429, SUB_BOUNDED_STALENESS,
                                  f"Region {region} lags partition {self.range_id} by {behind} writes; the "
                                  f"bounded-staleness limit is {self.staleness_ops} writes / {self.staleness_s} s, "
                                  "so writes wait until it catches up.", retry_after_ms=STALENESS_RETRY_MS)

    def for_read(self, region: str) -> ReplicaSet:
        return self.replica_sets[region]

    def _on_commit(self, rs: ReplicaSet, old: int, new: int) -> None:
        # A draining old write region takes no new writes, but what it accepted before the
        # failover still commits and must still ship, or the drain never completes.
        if rs.region in self.write_regions or rs.region == self.draining_from:
            self._ship(rs, old, new)
        if self.durable is not None:           # every region's: a restart brings each back as it was
            self.durable(self, rs, old, new)
        short = self._global_short             # _recompute_global's common cases (module docstring)
        if short is not None:
            g = self.global_lsn
            if old > g or new <= g:
                return                         # rs was above the global LSN already, or is not yet
            if short > 1:
                self._global_short = short - 1     # one more above it, still short of a majority
                return
            self._advance_global()
            return
        self._recompute_global()

    def forget_global_count(self) -> None:
        """A region's committed LSN was set outside a commit (a restore levelled it), or its
        epoch changed: the next commit recomputes the global LSN in full."""
        self._global_short = None

    def _epochs_mixed(self) -> bool:
        epoch = None
        for rs in self.replica_sets.values():
            if epoch is None:
                epoch = rs.epoch
            elif rs.epoch != epoch:
                return True
        return False

    def _targets_of(self, region: str) -> list:
        """(link, replica set) for every other region, kept until the regions or links change
        (a function of its own: the comprehension's closure would make _ship's locals cells)."""
        targets = self._targets[region] = [(self._links[(region, dst)], other)
                                           for dst, other in self.replica_sets.items() if dst != region]
        return targets

    def _ship(self, rs: ReplicaSet, old: int, new: int) -> None:
        targets = self._targets.get(rs.region)
        if targets is None:
            targets = self._targets_of(rs.region)
        if not targets:
            return
        own_only = rs.multi_write
        if new == old + 1 and new == rs.lsn and rs.log and not own_only:
            # One new commit, the newest (nearly every commit): commits_between without the
            # generator. The log's last entry is a Version or a list of them (replica_set.py).
            entry = rs.log[-1]
            versions = entry if type(entry) is list else (entry,)
            ship(targets, new, versions, rs.clock.now_ms())    # the links' clock (the account's)
            return
        now_ms = rs.clock.now_ms()
        for lsn, versions in rs.commits_between(old, new):
            if own_only and versions[0].origin != rs.region:
                continue                       # multi-write: every region ships what it originated
            ship(targets, lsn, versions, now_ms)

    # ---- strong consistency ------------------------------------------------------------
    def majority(self) -> int:
        return len(self.replica_sets) // 2 + 1

    def _recompute_global(self) -> None:
        # The global LSN is the majority-th highest of what the regions committed (of the
        # newest history: never more than a region's committed LSN). Unless a majority
        # committed past it, it cannot move, and the sort below is skipped.
        need = self.majority()
        g0 = self.global_lsn
        for rs in self.replica_sets.values():
            if rs.committed_lsn > g0:
                need -= 1
                if not need:
                    break
        else:
            self._global_short = None if self._epochs_mixed() else need
            return
        sets = self.replica_sets.values()
        newest = None                          # the first replica set of the newest epoch
        mixed = False                          # some region is in an older epoch
        for rs in sets:
            if newest is None or rs.epoch > newest.epoch:
                mixed = newest is not None
                newest = rs
            elif rs.epoch < newest.epoch:
                mixed = True
        if mixed:
            committed = sorted([_committed_in(rs, newest) for rs in sets], reverse=True)
        else:                                  # one epoch (nearly always): _committed_in is committed_lsn
            committed = sorted(map(_committed_lsn_of, sets), reverse=True)    # no listcomp frame
        majority = self.majority()
        g = committed[majority - 1]            # the majority-th highest
        moved = g > self.global_lsn
        if moved:
            self.global_lsn = g
        # The count of regions above it, when a majority is not (with mixed epochs a majority
        # may be above it by committed LSN and not by shared history: no count, full each time).
        g = self.global_lsn
        above = 0
        for rs in sets:
            if rs.committed_lsn > g:
                above += 1
        short = majority - above
        self._global_short = short if short > 0 and not mixed else None
        if moved:
            self._release_global_waiters()

    def _advance_global(self) -> None:
        """A commit took the count of regions above the global LSN to a majority (the count may
        be high, after a cut). The regions are in one epoch (a count is kept only then), so the
        new global LSN is the lowest of the exactly majority-many regions above the old one: one
        pass finds it and the new count."""
        g0 = self.global_lsn
        low = n_above = n_low = 0
        for rs in self.replica_sets.values():
            c = rs.committed_lsn
            if c > g0:
                n_above += 1
                if not n_low or c < low:
                    low, n_low = c, 1
                elif c == low:
                    n_low += 1
        majority = self.majority()
        if n_above != majority:
            if n_above < majority:
                self._global_short = majority - n_above    # the count was high: the global LSN stays
            else:
                self._recompute_global()       # more than a majority above: not the lowest of them
            return
        self.global_lsn = low
        self._global_short = majority - (n_above - n_low)
        self._release_global_waiters()

    def _release_global_waiters(self) -> None:
        """The global LSN moved up: the waiters for it and below are told their write is
        globally committed."""
        g = self.global_lsn
        waiters = self._global_waiters
        while waiters and waiters[0][0] <= g:
            waiters.pop(0)[1](True)

    def when_globally_committed(self, lsn: int, fn) -> None:
        if lsn <= self.global_lsn:
            fn(True)
            return
        self._global_waiters.append((lsn, fn))
        self._global_waiters.sort(key=lambda w: w[0])

    def fail_global_waiters_above(self, lsn: int) -> None:
        keep = []
        for w_lsn, fn in self._global_waiters:
            if w_lsn > lsn:
                fn(False)
            else:
                keep.append((w_lsn, fn))
        self._global_waiters = keep
        self.global_lsn = min(self.global_lsn, lsn)
        self._global_short = None              # a lower global LSN may have more regions above it

    def bounded_floor(self) -> int:
        """Bounded staleness: the oldest LSN a read may be served at (K operations behind the
        write region's committed LSN)."""
        hub = self.replica_sets.get(self.write_regions[0]) if self.write_regions else None
        if hub is None:
            return 0
        return max(0, hub.committed_lsn - self.staleness_ops)

    def describe(self) -> dict:
        return {"id": self.range_id, "minInclusive": self.min_epk, "maxExclusive": self.max_epk,
                "write_regions": list(self.write_regions), "global_committed_lsn": self.global_lsn,
                "regions": {name: rs.describe() for name, rs in self.replica_sets.items()}}


_committed_lsn_of = attrgetter("committed_lsn")
_epoch_of = attrgetter("epoch")


def _committed_in(rs: ReplicaSet, newest: ReplicaSet) -> int:
    """What rs has committed of the newest epoch's history. A region still in an older epoch
    (down since a forced failover) holds commits beyond the cut that no longer count: only
    what it had up to the cut is shared history, and a majority must really hold a write."""
    if rs.epoch >= newest.epoch:
        return rs.committed_lsn
    cut = newest.cut_since(rs.epoch)
    return rs.committed_lsn if cut is None else min(rs.committed_lsn, cut)
