"""A physical partition: one contiguous range of the effective-partition-key space, with a
replica set in every region of the account.

Theory of operation: the partition knows which regions accept writes. When the replica set of
a write region commits, the partition ships each new commit over the links to every other
region's replica set, in LSN order. A write sent to a region that does not accept writes is
refused with 403/3 before anything happens, as the service does after a failover.
"""
from .errors import write_forbidden
from .replica_set import ReplicaSet


class Partition:
    __slots__ = ("range_id", "min_epk", "max_epk", "replica_sets", "write_regions", "links")

    def __init__(self, range_id: str, min_epk: str, max_epk: str):
        self.range_id = range_id
        self.min_epk = min_epk
        self.max_epk = max_epk
        self.replica_sets: dict[str, ReplicaSet] = {}
        self.write_regions: tuple = ()
        self.links: dict = {}                  # (src, dst) -> Link, shared with the account

    def attach(self, region: str, rs: ReplicaSet) -> None:
        self.replica_sets[region] = rs
        rs.commit_listeners.append(self._ship)

    def for_write(self, region: str) -> ReplicaSet:
        if region not in self.write_regions:
            raise write_forbidden(region)
        rs = self.replica_sets[region]
        rs.check_writable()
        return rs

    def for_read(self, region: str) -> ReplicaSet:
        return self.replica_sets[region]

    def _ship(self, rs: ReplicaSet, old: int, new: int) -> None:
        if rs.region not in self.write_regions:
            return
        targets = [(self.links[(rs.region, dst)], other)
                   for dst, other in self.replica_sets.items() if dst != rs.region]
        if not targets:
            return
        for lsn, versions in rs.commits_between(old, new):
            for link, other in targets:
                link.send(other, lsn, versions)

    def describe(self) -> dict:
        return {"id": self.range_id, "minInclusive": self.min_epk, "maxExclusive": self.max_epk,
                "regions": {name: rs.describe() for name, rs in self.replica_sets.items()}}
