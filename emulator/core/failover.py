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
  lost-writes log with their LSNs, ids and the region that accepted them, and cut out of every
  region that had them (a region that is down is cut when it recovers). The list is exact
  however far the target lagged: it is read from the stores, which keep every version above
  the lowest region's LSN, not from the logs, which keep only the last commits. The
  partition's epoch moves on, so session tokens that name lost LSNs are answered with an error,
  never with older data.
* Strong loses nothing: a write was acknowledged once a majority of regions committed it (the
  partition's global LSN), so before a forced failover the target is brought up to that LSN
  from a region that is up, linked to it and holds it (`strong_sources`). When some partition
  has no such region, a manual forced failover is refused and a service-managed one waits.
* Service-managed failover is a forced failover `detection_delay_ms` (AccountConfig) after the
  write region went down, if it stayed down all that time, to the first region in failover
  priority (the configured order) that is up (under Strong: that can be brought up to the
  global LSN).
* After any failover the new write region backfills every region that lags it: by its commits
  while its log reaches back far enough, else by a snapshot (snapshot.py).
"""
from .errors import bad_request
from .link import ACTIVE
from .snapshot import catch_up, take
from .ttl import EXPIRE_OP

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
    lacks: a region that lagged the old write region must not wait for a region that may never
    come back (duplicates are dropped on arrival). One that lagged past the target's retained
    log gets a snapshot instead, as a joining region does."""
    account.write_regions = (target,) + tuple(r for r in account.write_regions
                                              if r != target and account.config.multi_write)
    for _, p in account.partitions():
        p.write_regions = account.write_regions
        p.draining_from = None
        hub = p.replica_sets[target]
        for region, rs in p.replica_sets.items():
            have = _lsn_after_cuts(account, p, region, rs)
            if region == target or have >= hub.committed_lsn:
                continue
            link = account.links[(target, region)]
            if hub.log_first_lsn() > have + 1:
                link.send_snapshot(rs, take(hub, hub.committed_lsn, have))
                continue
            for lsn, versions in hub.commits_between(have, hub.committed_lsn):
                link.send(rs, lsn, versions)
    account.metadata_changed()          # a durable account keeps the write region (account_image.py)


def _lsn_after_cuts(account, p, region: str, rs) -> int:
    """rs's LSN once the cuts a forced failover left for it (it was down) are applied."""
    keeps = [keep for q, keep in account.pending_cuts.get(region, ()) if q is p]
    return min([rs.lsn] + keeps)


def cut_history(account, container, p, keep_lsn: int, reason: str, now_ms: int) -> int:
    """Discard commits above keep_lsn in every region of partition p and list each discarded
    write as lost, once, with the region that accepted it. A region that is down is cut when it
    recovers (`Account.set_region_state`)."""
    seen = set()
    lost = []
    for region, rs in p.replica_sets.items():
        # A region still down since an earlier forced failover holds commits that one already
        # cut (and listed); they are not lost a second time.
        listed_above = _lsn_after_cuts(account, p, region, rs)
        for v in rs.store.versions_above(keep_lsn):
            # A delete by TTL is no client's write: the new write region expires the item again.
            if v.lsn <= listed_above and (v.lsn, v.key) not in seen and v.op != EXPIRE_OP:
                seen.add((v.lsn, v.key))
                lost.append((v, region))
        if account.region(region).state == "up":
            rs.truncate_to(keep_lsn)
            rs.new_epoch()
        else:
            account.pending_cuts.setdefault(region, []).append((p, keep_lsn))
    for (src, dst), link in account.links.items():
        if dst in p.replica_sets:
            link.purge(p.replica_sets[dst], keep_lsn)
    p.fail_global_waiters_above(keep_lsn)
    if container.ttl is not None:
        account.ttl_sweeper.hurry()     # a cut delete by TTL is done again at the new write region
    lost.sort(key=_lost_order)
    for v, region in lost:
        account.lost_writes.append({
            "database": container.db.id, "container": container.id, "partition": p.range_id,
            "lsn": v.lsn, "id": v.key[1], "partition_key": v.key[0], "operation": v.op,
            "region": v.origin or region, "reason": reason, "at_ms": now_ms})
    return len(lost)


def _lost_order(entry) -> tuple:
    return entry[0].lsn, entry[0].key


def strong_sources(account, target: str) -> list:
    """Under Strong: [(partition, region to bring target up from, or None)] for every partition
    whose global LSN the target lacks. The source is the first region in failover priority that
    is up, has the target's history up to that LSN and an active link to it."""
    out = []
    for _, p in account.partitions():
        dst = p.replica_sets[target]
        if dst.lsn >= p.global_lsn:
            continue
        source = None
        for r in account.regions:
            rs = p.replica_sets.get(r.name)
            if r.name != target and r.state == "up" and rs is not None and rs.epoch == dst.epoch \
                    and rs.lsn >= p.global_lsn and account.links[(r.name, target)].state == ACTIVE:
                source = rs
                break
        out.append((p, source))
    return out


def strong_refusal(account, target: str, sources: list) -> str | None:
    """Why target cannot become the write region without losing an acknowledged Strong write."""
    missing = [p for p, source in sources if source is None]
    if not missing:
        return None
    p = missing[0]
    holders = [f"{name} ({_unreachable_because(account, name, target)})" for name, rs in p.replica_sets.items()
               if name != target and rs.lsn >= p.global_lsn]
    return (f"Cannot fail over to {target} without losing acknowledged writes: under Strong "
            f"consistency a majority of regions committed partition {p.range_id} up to LSN "
            f"{p.global_lsn}, {target} has only {p.replica_sets[target].lsn}, and no region that "
            f"holds it can bring {target} up to it: {', '.join(holders) or 'none holds it'}"
            + (f" ({len(missing)} partitions are short)" if len(missing) > 1 else "")
            + ". Bring such a region back (or heal its link), or fail over to one that has it.")


def _unreachable_because(account, name: str, target: str) -> str:
    if account.region(name).state != "up":
        return "down"
    return f"its link to {target} is {account.links[(name, target)].state}"


def check_strong(account, target: str) -> list:
    """The strong_sources of a forced failover to target, or 400 with the reason it would lose
    acknowledged writes."""
    sources = strong_sources(account, target)
    reason = strong_refusal(account, target, sources)
    if reason is not None:
        raise bad_request(reason)
    return sources


def forced(account, failover: Failover, sources: list = ()) -> None:
    """sources: the strong_sources to bring the target up from first (Strong), else none."""
    for p, source in sources:
        catch_up(source, p.replica_sets[failover.target], p.global_lsn)
    now = account.clock.now_ms()
    for c, p in account.partitions():
        keep = p.replica_sets[failover.target].lsn
        if any(rs.lsn > keep for rs in p.replica_sets.values()):
            failover.lost += cut_history(account, c, p, keep, f"forced failover #{failover.id}", now)
    switch_write_region(account, failover.target)
