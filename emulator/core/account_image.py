"""The account as plain data, for a durable store to keep and a restart to rebuild from.

Theory of operation: a durable account (runtime/persistence.py) keeps two things. Its metadata
(databases, containers with their definitions and partition ranges, offers, the account's rid
sequence) is small and is kept whole: `metadata(account)` is a JSON-able dict of all of it,
written again after every change. Its items are kept as the newest committed version of each
key per partition, with each partition's committed LSN and write progress: `item_record` and
`version_from_record` turn a Version into a flat row and back.

A restart rebuilds the account from those (`restore_metadata`, then `restore_partition` per
partition): every region's replica set starts at the write region's committed LSN with the
same items, as if every region had caught up — replication lag and writes in flight before the
restart do not survive it (they were never acknowledged, or were already everywhere that
matters: the write region had them). This module never touches a file: the runtime does.
"""
from .container import Database
from .offers import Offer
from .store import Version, etag_in



def metadata(account) -> dict:
    """Every database, container and offer, and the counters new rids and etags come from."""
    dbs, colls = [], []
    for db in account.databases.values():
        dbs.append({"id": db.id, "rid": db.rid, "ts": db.ts, "etag": db.etag, "offer_rid": db.offer_rid})
        for c in db.containers.values():
            colls.append({"db_rid": db.rid, "rid": c.rid, "definition": c.definition, "ts": c.ts,
                          "etag": c.etag, "offer_rid": c.offer_rid, "doc_seq": c.doc_seq,
                          "ranges": [[p.min_epk, p.max_epk] for p in c.partitions]})
    offers = [{"rid": o.rid, "resource": o.resource, "resource_rid": o.resource_rid,
               "throughput": o.throughput, "autoscale_max": o.autoscale_max, "etag": o.etag, "ts": o.ts}
              for o in account.offers.values()]
    return {"seq": account._seq, "databases": dbs, "containers": colls, "offers": offers,
            "write_region": account.hub_region, "failovers": len(account.failovers),
            "lost_writes": account.lost_writes}


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
    for o in image["offers"]:
        account.offers[o["rid"]] = Offer(o["rid"], o["resource"], o["resource_rid"], o["throughput"],
                                         o["autoscale_max"], o["etag"], o["ts"])


def restore_write_region(account, image: dict) -> None:
    """After the partitions are restored: the write region a failover had moved to, and the
    lost-writes log; a region the account no longer has is ignored (the flags decide)."""
    from .failover import switch_write_region
    account.lost_writes.extend(image.get("lost_writes", ()))
    target = image.get("write_region")
    if (target and not account.config.multi_write and target != account.write_regions[0]
            and account.region_state(target) is not None):
        switch_write_region(account, target)


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


def restore_partition(container, index: int, lsn: int, progress: dict, versions: list, epoch: int = 0) -> None:
    """Every region's replica set of partition `index` at the committed LSN lsn, holding
    `versions` (the newest live version of each key), with the write progress of each origin
    region, in session-token version `epoch` (a forced failover's cut moved it on; every older
    epoch counts as cut back to lsn); the container's rid index learns each item."""
    p = container.partitions[index]
    rid_index = container.rid_index
    for v in versions:
        rid_index[v.rid] = v
    for rs in p.replica_sets.values():
        store = rs.store
        for v in versions:
            store.add(v, 0)
        rs.lsn = rs.committed_lsn = lsn
        for r in rs.replicas:
            r.applied_lsn = lsn
        rs.progress = dict(progress)
        rs.progress_seq += 1
        rs.own_seq = progress.get(rs.region, 0)
        rs.epoch, rs.epoch_start_lsn = epoch, lsn
        rs.epoch_starts = [0] + [lsn] * epoch
    p.global_lsn = lsn
