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
"""
from .errors import write_forbidden
from .replica_set import ReplicaSet

STALENESS_OPS_DEFAULT = 100_000          # bounded staleness K; the service's minimum for multi-region


class Partition:
    __slots__ = ("range_id", "min_epk", "max_epk", "replica_sets", "write_regions", "links",
                 "_global_waiters", "global_lsn", "staleness_ops", "region_ids")

    def __init__(self, range_id: str, min_epk: str, max_epk: str):
        self.range_id = range_id
        self.min_epk = min_epk
        self.max_epk = max_epk
        self.replica_sets: dict[str, ReplicaSet] = {}
        self.write_regions: tuple = ()
        self.links: dict = {}                  # (src, dst) -> Link, shared with the account
        self._global_waiters: list = []        # (lsn, fn) sorted by lsn
        self.global_lsn = 0                    # highest LSN committed by a majority of regions
        self.staleness_ops = STALENESS_OPS_DEFAULT
        self.region_ids: dict[str, int] = {}   # region name -> id in session-token vectors

    def attach(self, region: str, rs: ReplicaSet) -> None:
        self.replica_sets[region] = rs
        rs.partition = self
        rs.commit_listeners.append(self._on_commit)

    def detach(self, region: str) -> None:
        rs = self.replica_sets.pop(region)
        rs.commit_listeners.remove(self._on_commit)
        self._recompute_global()

    def for_write(self, region: str) -> ReplicaSet:
        if region not in self.write_regions:
            raise write_forbidden(region)
        rs = self.replica_sets[region]
        rs.check_writable()
        return rs

    def for_read(self, region: str) -> ReplicaSet:
        return self.replica_sets[region]

    def _on_commit(self, rs: ReplicaSet, old: int, new: int) -> None:
        if rs.region in self.write_regions:
            self._ship(rs, old, new)
        self._recompute_global()

    def _ship(self, rs: ReplicaSet, old: int, new: int) -> None:
        targets = [(self.links[(rs.region, dst)], other)
                   for dst, other in self.replica_sets.items() if dst != rs.region]
        if not targets:
            return
        own_only = rs.multi_write
        for lsn, versions in rs.commits_between(old, new):
            if own_only and versions[0].origin != rs.region:
                continue                       # multi-write: every region ships what it originated
            for link, other in targets:
                link.send(other, lsn, versions)

    # ---- strong consistency ------------------------------------------------------------
    def majority(self) -> int:
        return len(self.replica_sets) // 2 + 1

    def _recompute_global(self) -> None:
        committed = sorted((rs.committed_lsn for rs in self.replica_sets.values()), reverse=True)
        if not committed:
            return
        g = committed[min(self.majority(), len(committed)) - 1]
        if g <= self.global_lsn:
            return
        self.global_lsn = g
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
