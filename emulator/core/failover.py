"""Moving the write region: graceful (manual) and forced (service-managed) failover.

Theory of operation:
* Graceful: the old write region stops taking writes at once (they get 403/3 WriteForbidden,
  which sends the SDKs to refresh and retry), replication drains until the target has applied
  and committed everything the old region committed, in every partition, and then the target
  becomes the write region. Nothing acknowledged is lost. If the drain cannot finish in
  DRAIN_TIMEOUT_MS (the link to the target is cut, the target is down) the failover is
  aborted and the old region takes writes again.
* Forced: the target becomes the write region immediately, at whatever it has applied. In every
  partition, commits beyond the target's LSN exist only in regions that cannot be trusted any
  more; they are lost on purpose, as in the service (RPO > 0 unless Strong), recorded in the
  lost-writes log with their LSNs and ids, and cut out of every region that had them (a region
  that is down is cut when it recovers). The partition's epoch moves on, so session tokens
  that name lost LSNs are answered with an error, never with older data.
* Service-managed failover is a forced failover scheduled `detection_delay_ms` (AccountConfig)
  after the write region goes down, to the next region in failover priority (the configured
  order) that is up.
"""
DRAIN_POLL_MS = 5                       # a drain is checked this often (the simulator jumps; the server wakes)
DRAIN_TIMEOUT_MS = 60_000


class Failover:
    """One failover's progress, as the control plane reports it."""
    __slots__ = ("id", "source", "target", "forced", "state", "started_ms", "finished_ms", "lost",
                 "reason", "listeners")

    def __init__(self, id: int, source: str, target: str, forced: bool, started_ms: int, reason: str):
        self.id = id
        self.source = source
        self.target = target
        self.forced = forced
        self.state = "draining" if not forced else "completed"
        self.started_ms = started_ms
        self.finished_ms = started_ms if forced else None
        self.lost = 0
        self.reason = reason
        self.listeners: list = []

    def describe(self) -> dict:
        return {"id": self.id, "from": self.source, "to": self.target,
                "kind": "forced" if self.forced else "graceful", "state": self.state,
                "reason": self.reason, "started_ms": self.started_ms, "finished_ms": self.finished_ms,
                "lost_writes": self.lost}


def drained(account, source: str, target: str) -> bool:
    for _, p in account.partitions():
        src, dst = p.replica_sets[source], p.replica_sets[target]
        if src.committed_lsn != src.lsn or dst.committed_lsn < src.committed_lsn:
            return False
    return True


def switch_write_region(account, target: str) -> None:
    """Make target the write region. It then ships to every other region whatever that region
    lacks of its log: a region that lagged the old write region must not wait for a region that
    may never come back (duplicates are dropped on arrival)."""
    account.write_regions = (target,) + tuple(r for r in account.write_regions
                                              if r != target and account.config.multi_write)
    for _, p in account.partitions():
        p.write_regions = account.write_regions
        p.draining_from = None
        hub = p.replica_sets[target]
        for region, rs in p.replica_sets.items():
            if region == target or rs.lsn >= hub.committed_lsn:
                continue
            link = account.links[(target, region)]
            for lsn, versions in hub.commits_between(rs.lsn, hub.committed_lsn):
                link.send(rs, lsn, versions)


def cut_history(account, container, p, keep_lsn: int, reason: str, now_ms: int) -> int:
    """Discard commits above keep_lsn in every region of partition p and log them as lost.
    A region that is down is cut when it recovers (`Account.set_region_state`)."""
    seen = set()
    lost = 0
    for region, rs in p.replica_sets.items():
        # A region still down since an earlier forced failover holds commits that one already
        # cut (and listed); they are not lost a second time.
        earlier = [keep for q, keep in account.pending_cuts.get(region, ()) if q is p]
        listed_above = min(earlier) if earlier else None
        for lsn, versions in rs.commits_between(0, rs.lsn):
            for v in versions:
                if lsn <= keep_lsn or (lsn, v.key) in seen or (listed_above is not None and lsn > listed_above):
                    continue
                seen.add((lsn, v.key))
                lost += 1
                account.lost_writes.append({
                    "database": container.db.id, "container": container.id, "partition": p.range_id,
                    "lsn": lsn, "id": v.key[1], "partition_key": v.key[0], "operation": v.op,
                    "region": region, "reason": reason, "at_ms": now_ms})
        if account.region(region).state == "up":
            rs.truncate_to(keep_lsn)
            rs.new_epoch()
        else:
            account.pending_cuts.setdefault(region, []).append((p, keep_lsn))
    for (src, dst), link in account.links.items():
        if dst in p.replica_sets:
            link.purge(p.replica_sets[dst], keep_lsn)
    p.fail_global_waiters_above(keep_lsn)
    return lost


def forced(account, failover: Failover) -> None:
    now = account.clock.now_ms()
    for c, p in account.partitions():
        keep = p.replica_sets[failover.target].lsn
        if any(rs.lsn > keep for rs in p.replica_sets.values()):
            failover.lost += cut_history(account, c, p, keep, f"forced failover #{failover.id}", now)
    switch_write_region(account, failover.target)
