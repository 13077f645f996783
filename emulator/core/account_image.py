"""The account as plain data, for a durable store to keep and a restart to rebuild from.

Theory of operation: a durable account (runtime/persistence.py) keeps four things.
* Its metadata and topology (databases, containers with their definitions and partition
  ranges, offers, users and their permissions, the account's rid sequence, its regions with their ids, the write region,
  the lost-writes log) are small and kept whole: `metadata(account)` is a JSON-able dict of
  all of it, written again after every change.
* Each region's replica set of each partition: its committed LSN and state (`replica_state`:
  write progress per origin region, session-token epochs), and the newest committed version
  of each of its keys (`item_record` / `version_from_record`) — in a multi-write account for
  every region (each has its own LSNs and its own merge of the others' writes), in a
  single-write account for the write region only: another region's items are the write
  region's taken back to its LSN (`state_at`), since its history is a prefix of the write
  region's. Either way a region that lagged comes back lagging.
* The *outbox*: the commits a region shipped (the write region's, or in a multi-write account
  each region's own) that some other region had not committed yet (`commit_record`, with the
  versions they replaced in a single-write account). A restart queues them on the links
  again (`finish`), so the lagging region receives exactly what it lacked, after the link's
  lag, as it would have without the restart.
* The conflicts feed of each container (core/conflicts.py).

This module never touches a file: the runtime does. Restoring goes topology first
(`restore_topology`), then metadata (containers get a replica set in every restored region),
then every replica (`restore_replica`), then `finish` (global LSNs, the write regions, the
outbox back on the links).
"""
from collections import deque

from .account import Region
from .geography import default_lag_ms
from . import scripts
from .container import Database
from .errors import CosmosError
from .faults import KEPT_FAULT_TYPES
from .offers import Offer
from .replica_set import NO_CUT_LSN
from .store import Version, etag_in


def write_region_of(account) -> str | None:
    """The single write region to keep: during a graceful failover's drain it is still the
    source (the drain had not finished, so the target may lack acknowledged writes)."""
    if account.config.multi_write:
        return None
    if account.write_regions:
        return account.write_regions[0]
    return account.draining.source if account.draining is not None else None


def metadata(account) -> dict:
    """Every database, container and offer, the regions, and the counters new rids and etags
    come from."""
    dbs, colls = [], []
    for db in account.databases.values():
        dbs.append({"id": db.id, "rid": db.rid, "ts": db.ts, "etag": db.etag, "offer_rid": db.offer_rid})
        for c in db.containers.values():
            colls.append({"db_rid": db.rid, "rid": c.rid, "definition": c.definition, "ts": c.ts,
                          "etag": c.etag, "offer_rid": c.offer_rid, "doc_seq": c.doc_seq,
                          "scripts": [s.record() for s in c.scripts.by_rid.values()],
                          "ranges": [[p.min_epk, p.max_epk] for p in c.partitions]})
    offers = [{"rid": o.rid, "resource": o.resource, "resource_rid": o.resource_rid,
               "throughput": o.throughput, "autoscale_max": o.autoscale_max, "etag": o.etag, "ts": o.ts,
               "auto_upgrade": o.auto_upgrade}
              for o in account.offers.values()]
    return {"seq": account._seq, "databases": dbs, "containers": colls, "offers": offers,
            "write_region": write_region_of(account), "failovers": len(account.failovers),
            "lost_writes": account.lost_writes,
            "regions": [[r.name, r.id] for r in account.regions],
            "users": account.users.image(),
            "faults": [spec for spec in account.faults.active.values() if spec["type"] in KEPT_FAULT_TYPES],
            "fault_seq": account.faults._seq}


def restore_topology(account, image: dict) -> None:
    """Before any container exists: the regions the account had (added or removed at runtime
    included), with their ids (session-token vectors and conflict resolution use them), and a
    link per ordered pair. An image without regions (an older file) keeps the configured ones."""
    regions = image.get("regions")
    if not regions:
        return
    account.regions = [Region(name, id) for name, id in regions]
    names = [name for name, _ in regions]
    links = {}
    for a in names:
        for b in names:
            if a != b:
                links[(a, b)] = account.links.get((a, b)) or account._link(
                    a, b, account.config.lag_ms.get((a, b), default_lag_ms(a, b)))
    account.links = links
    if account.config.multi_write:
        account.write_regions = tuple(names)
    else:
        target = image.get("write_region")
        account.write_regions = (target if target in names else names[0],)


def restore_metadata(account, image: dict) -> None:
    """Rebuild the databases, containers and offers of `metadata(...)` in an empty account."""
    account._seq = image["seq"]
    for d in image["databases"]:
        db = Database(d["id"], d["rid"], d["ts"], d["etag"])
        db.offer_rid = d["offer_rid"]
        account.databases[db.id] = db
        account.dbs_by_rid[db.rid] = db
    for c in image["containers"]:
        db = account.dbs_by_rid[c["db_rid"]]
        container = account.build_container(db, c["definition"], c["rid"], c["ts"], c["etag"],
                                            [tuple(r) for r in c["ranges"]])
        container.offer_rid = c["offer_rid"]
        container.doc_seq = c["doc_seq"]
        scripts.restore(container, c.get("scripts", ()))
    for o in image["offers"]:
        account.offers[o["rid"]] = Offer(o["rid"], o["resource"], o["resource_rid"], o["throughput"],
                                         o["autoscale_max"], o["etag"], o["ts"], o.get("auto_upgrade"))
    account.users.restore(image.get("users", ()))


def restore_write_region(account, image: dict) -> None:
    """An older file's way (one state for every region): the write region a failover had moved
    to, and the lost-writes log; a region the account no longer has is ignored."""
    from .failover import switch_write_region
    account.lost_writes.extend(image.get("lost_writes", ()))
    target = image.get("write_region")
    if (target and not account.config.multi_write and target != account.write_regions[0]
            and account.region_state(target) is not None):
        switch_write_region(account, target)


# ---- items and commits ---------------------------------------------------------------------
def item_record(v: Version) -> tuple:
    """A live version as a row: (pk json, id, lsn, rid, etag, ts, ts_ms, op, prev_lsn, origin,
    oseq, body). The document is its body (the JSON it is served as)."""
    return (v.key[0], v.key[1], v.lsn, v.rid, v.etag, v.ts, v.ts_ms, v.op, v.prev_lsn, v.origin, v.oseq, v.body)


def version_from_record(row, doc: dict | None = None) -> Version:
    """The Version of an item_record row (its document is parsed from the body when needed)."""
    pk, id, lsn, rid, etag, ts, ts_ms, op, prev_lsn, origin, oseq, body = row
    v = Version(lsn, (pk, id), doc, body, etag, ts, rid, False, op, prev_lsn, origin, oseq, ts_ms, None)
    if etag_in(body) == etag:           # as every body a Writer made: keep it as compact as one
        v.settle()
    return v


def commit_record(versions, befores=None) -> list:
    """One shipped commit as plain data (msgpack-able): every version with what an item row
    lacks, since a commit in flight may be a delete, and a multi-write merge compares the
    version each one superseded (prev_id); and in a single-write account the live version each
    one replaced (None: none), which takes a region back from the write region's state to the
    LSN before the commit (`state_at`)."""
    records = [[v.key[0], v.key[1], v.lsn, v.rid, v.etag, v.ts, v.ts_ms, v.op, v.prev_lsn, v.origin, v.oseq,
                v.body, v.deleted, list(v.prev_id) if v.prev_id else None, v.doc if v.deleted else None]
               for v in versions]
    return [records, [None if b is None else list(item_record(b)) for b in befores or ()]]


def commit_from_record(record: list, parse) -> tuple:
    """(versions, befores) of a commit_record; parse(body bytes) -> the document."""
    records, befores = record
    out = []
    for pk, id, lsn, rid, etag, ts, ts_ms, op, prev_lsn, origin, oseq, body, deleted, prev_id, doc in records:
        doc = doc if deleted else parse(body)
        out.append(Version(lsn, (pk, id), doc, body, etag, ts, rid, deleted, op, prev_lsn, origin, oseq, ts_ms,
                           tuple(prev_id) if prev_id else None))
    return out, [None if b is None else version_from_record(b) for b in befores]


def befores_of(rs, lsn: int, versions) -> list:
    """The live version each of a commit's versions replaced (visible at lsn - 1; the store
    keeps it while any region is below lsn, see ReplicaSet.floor_lsn)."""
    get = rs.store.get
    return [get(v.key, lsn - 1) for v in versions]


def state_at(versions: list, commits: list, upto_lsn: int, lsn: int) -> list | None:
    """A single-write region's items at lsn, from the write region's (`versions`, at upto_lsn)
    and its commits [(lsn, versions, befores)] above lsn, undone newest first; None when the
    commits do not cover (lsn, upto_lsn] whole."""
    if lsn >= upto_lsn:
        return versions
    above = [(at, vs, bs) for at, vs, bs in commits if lsn < at <= upto_lsn]
    if [at for at, _, _ in above] != list(range(lsn + 1, upto_lsn + 1)):
        return None
    state = {v.key: v for v in versions}
    for _, vs, bs in reversed(above):
        for v, b in zip(vs, bs):
            if b is None:
                state.pop(v.key, None)
            else:
                state[v.key] = b
    return list(state.values())


# ---- replicas --------------------------------------------------------------------------------
def replica_state(rs) -> dict:
    """What a replica set's row keeps besides its committed LSN and items."""
    return {"progress": rs.progress, "epoch": rs.epoch, "epoch_starts": rs.epoch_starts}


def state_after_cuts(account, p, rs) -> tuple:
    """(committed LSN, state) of rs as it will be once the cuts a forced failover left for it
    (it was down then) are applied: what a restart must bring it back as."""
    keeps = [keep for q, keep in account.pending_cuts.get(rs.region, ()) if q is p]
    state = replica_state(rs)
    lsn = rs.committed_lsn
    if keeps:
        lsn = min([lsn] + keeps)
        state = dict(state, epoch=rs.epoch + len(keeps), epoch_starts=rs.epoch_starts + keeps)
    return lsn, state


def restore_replica(container, index: int, region: str, lsn: int, state: dict, versions: list,
                    index_rids: bool = True) -> None:
    """Region's replica set of partition `index` at committed LSN lsn, holding `versions` (the
    newest live version of each key it had there); the container's rid index learns each item
    (once per partition is enough: index_rids=False for the other regions)."""
    p = container.partitions[index]
    rs = p.replica_sets.get(region)
    if rs is None:
        return
    if index_rids:
        rid_index = container.rid_index
        for v in versions:
            rid_index[v.rid] = v
    add = rs.store.add
    # In LSN order, whatever order the file gave them: the store's change log is kept in LSN
    # order, and a change feed resumed after a restart bisects it.
    for v in sorted(versions, key=_lsn_of):
        add(v, 0)
    rs.lsn = rs.committed_lsn = lsn
    p.forget_global_count()                # its committed LSN moved without a commit
    for r in rs.replicas:
        r.applied_lsn = lsn
    rs.progress = dict(state["progress"])
    rs.progress_seq += 1
    rs.progress_moved = None
    rs.own_seq = rs.progress.get(region, 0)
    epoch = state.get("epoch", 0)
    starts = state.get("epoch_starts") or [0] + [lsn] * epoch
    rs.epoch, rs.epoch_starts = epoch, list(starts)
    rs.epoch_start_lsn = starts[-1] if starts[-1] != NO_CUT_LSN else max(
        [s for s in starts if s != NO_CUT_LSN] or [0])


def _lsn_of(v) -> int:
    return v.lsn


def restore_partition(container, index: int, lsn: int, progress: dict, versions: list, epoch: int = 0) -> None:
    """An older file's way: every region's replica set of partition `index` the same."""
    state = {"progress": progress, "epoch": epoch}
    for region in list(container.partitions[index].replica_sets):
        restore_replica(container, index, region, lsn, state, versions)
    container.partitions[index].global_lsn = lsn
    container.partitions[index].forget_global_count()


def finish(account, outbox: dict) -> list:
    """After every replica is restored: each partition's global LSN and write regions, and the
    commits of `outbox` ({(container rid, partition index, origin region): [(seq, lsn,
    versions, befores)] in seq order}) queued again on the links to every region that lacked them.
    Returns the (container, partition, region) replica sets a single-write region lagged past
    what the outbox kept; those are brought level with the write region here, and named."""
    caught_up = []
    for c, p in account.partitions():
        p.write_regions = account.write_regions
        p.global_lsn = 0
        p._recompute_global()
        idx = int(p.range_id)
        if account.config.multi_write:
            for origin in p.replica_sets:
                _requeue_multi(account, p, origin, outbox.get((c.rid, idx, origin), ()))
        else:
            hub = account.write_regions[0]
            caught_up += [(c, p, region) for region in
                          _requeue_single(account, p, hub, outbox.get((c.rid, idx, hub), ()))]
    return caught_up


def _requeue_single(account, p, hub_name: str, commits) -> list:
    """The write region's commits back in its log (when they reach up to its LSN) and on the
    link to each region below them. A region below the first one kept gets the write region's
    state at once (it cannot happen unless a failover's new write region's log did not reach
    back far enough): returns those regions."""
    hub = p.replica_sets[hub_name]
    commits = [(lsn, vs) for _, lsn, vs, _ in commits if lsn <= hub.committed_lsn]
    first = commits[0][0] if commits else hub.committed_lsn + 1
    if commits and commits[-1][0] == hub.committed_lsn and all(
            lsn == first + i for i, (lsn, _) in enumerate(commits)):
        tail = commits[-hub.log_retained_commits:]
        hub.log = deque(vs[0] if len(vs) == 1 else vs for _, vs in tail)
    else:
        first = hub.committed_lsn + 1
    level = []
    for region, rs in p.replica_sets.items():
        if region == hub_name or rs.committed_lsn >= hub.committed_lsn:
            continue
        if rs.committed_lsn + 1 < first:
            _level_with(rs, hub)
            level.append(region)
            continue
        link = account.links[(hub_name, region)]
        for lsn, versions in commits:
            if lsn > rs.committed_lsn:
                link.send(rs, lsn, versions)
    return level


def _level_with(rs, hub) -> None:
    store = rs.store.__class__()
    for v in hub.store.scan(hub.committed_lsn):
        store.add(v, 0)
    rs.store = store
    rs.lsn = rs.committed_lsn = hub.committed_lsn
    rs.partition.forget_global_count()     # its committed LSN moved without a commit
    for r in rs.replicas:
        r.applied_lsn = hub.committed_lsn
    rs.progress = dict(hub.progress)
    rs.progress_seq += 1
    rs.progress_moved = None
    rs.epoch, rs.epoch_start_lsn, rs.epoch_starts = hub.epoch, hub.epoch_start_lsn, list(hub.epoch_starts)


def _requeue_multi(account, p, origin: str, commits) -> None:
    """Multi-write: origin's own commits on the link to every region whose progress had not
    reached them (a region merges each one as it would have before the restart)."""
    for region, rs in p.replica_sets.items():
        if region == origin:
            continue
        have = rs.progress.get(origin, 0)
        link = account.links[(origin, region)]
        for seq, lsn, versions, _ in commits:
            if seq > have:
                link.send(rs, lsn, versions)


def restore_faults(account, image: dict) -> None:
    """The link faults that were active, injected again under their ids (a client may heal
    one by the id it was given). A timed one runs its whole duration again: the time the
    process was down is not known here. One that no longer applies is left out."""
    faults = account.faults
    for spec in sorted(image.get("faults", ()), key=lambda s: s["id"]):
        faults._seq = spec["id"] - 1
        fresh = {k: v for k, v in spec.items() if k not in ("id", "started_ms")}
        try:
            faults.inject(fresh)
        except CosmosError:
            continue
    faults._seq = max(faults._seq, image.get("fault_seq", 0))


# ---- the conflicts feed ----------------------------------------------------------------------
def restore_conflicts(container, entries: list) -> None:
    """entries: [(ident, entry)] oldest first, as ConflictLog.on_record reported them."""
    log = container.conflicts
    for ident, entry in entries:
        log.entries.append(entry)
        log._seen.add(ident)
        log.recorded = max(log.recorded, int(entry["id"]))
