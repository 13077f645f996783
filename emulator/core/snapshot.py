"""A state transfer: what brings a replica set that lagged past the retained log up to an LSN.

Theory of operation: log shipping needs every commit after the receiver's LSN, and a replica
set retains only its last `log_retained_commits` commits (replica_set.py). A region that lagged
further (its link was cut for long, and then a failover moved the write region to a region whose
log no longer reaches back that far) gets a Snapshot instead, as a joining region does: for
every key changed since the receiver's LSN, its newest version up to the snapshot's LSN, a
tombstone for a key deleted meanwhile. The sender's store still holds all of them: a replica
set's floor (`ReplicaSet.floor_lsn`) never rises above any region's LSN, so nothing a lagging
region could still need is pruned anywhere.

A snapshot travels over the link like a commit, in order with the commits after it, and a cut
purges it like one. The receiver installs it whole (`ReplicaSet.install_snapshot`) and takes
ordinary commits again from the LSN after it. Its change feed then shows the newest version of
each key changed across the gap, as the service's latest-version feed does.
"""


class Snapshot:
    """The changes (after_lsn, lsn] of one replica set, newest version per key, in LSN order."""
    __slots__ = ("lsn", "after_lsn", "versions", "progress")

    def __init__(self, lsn: int, after_lsn: int, versions: list, progress: dict):
        self.lsn = lsn
        self.after_lsn = after_lsn
        self.versions = versions
        self.progress = progress


def take(rs, upto_lsn: int, after_lsn: int) -> Snapshot:
    """What rs holds up to upto_lsn that a replica set at after_lsn (of the same history) lacks."""
    return Snapshot(upto_lsn, after_lsn, rs.store.changed_since(after_lsn, upto_lsn), dict(rs.progress))


def catch_up(source, target, upto_lsn: int) -> None:
    """Bring target up to upto_lsn from source at once, by its commits while source's log still
    reaches back to target's LSN, else by a snapshot."""
    if target.lsn >= upto_lsn:
        return
    if source.log_first_lsn() <= target.lsn + 1:
        for lsn, versions in source.commits_between(target.lsn, upto_lsn):
            target.apply_replicated(lsn, versions)
    else:
        target.install_snapshot(take(source, upto_lsn, target.lsn))
