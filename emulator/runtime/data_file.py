"""The data dir's file: its schema, and reading an account back from it (docs/durability.md).

Theory of operation: one SQLite file, `PRAGMA application_id` marking it as regionlab's and the
meta table recording its schema version and the topology flags it was made with. Tables:

* meta: schema_version, config (the flags of BOUND_SETTINGS), metadata (core/account_image.py's
  image: databases, containers, offers, regions, write region, lost writes; JSON);
* replicas: one row per (container, partition, region): the replica set's committed LSN and its
  state (write progress, epochs, the container's rid counter; JSON);
* replica_items: per replica set, the newest committed live version of each key (in a
  single-write account the write region's only: the others are taken back from it);
* outbox: the commits a region shipped that some region had not committed yet (msgpack, with
  the versions they replaced), by shipping region and sequence (the LSN, or in a multi-write
  account the origin's sequence);
* conflicts: each container's conflicts feed.

`recover` checks a file and rebuilds the account from it, or raises PersistenceError, one line
that names the file and the way out. A schema-1 file (one state for every region) is read and
rewritten as schema 2 at once; nothing else is ever adopted silently.
"""
import json
import os

import msgpack

from ..core import account_image

FILE_NAME = "regionlab.sqlite"
SCHEMA_VERSION = 2
APPLICATION_ID = 0x52474C42               # "RGLB": PRAGMA application_id of a regionlab file
SQLITE_HEADER = b"SQLite format 3\x00"
# The settings a data dir is bound to: the account's shape. Others (ports, faults) may change.
BOUND_SETTINGS = ("regions", "multi_write", "consistency", "partition_count")

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS replicas (coll_rid TEXT NOT NULL, idx INTEGER NOT NULL, region TEXT NOT NULL, "
    "lsn INTEGER NOT NULL, state TEXT NOT NULL, PRIMARY KEY (coll_rid, idx, region)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS replica_items (coll_rid TEXT NOT NULL, idx INTEGER NOT NULL, region TEXT NOT NULL, "
    "pk TEXT NOT NULL, id TEXT NOT NULL, lsn INTEGER NOT NULL, rid TEXT NOT NULL, etag TEXT NOT NULL, "
    "ts INTEGER NOT NULL, ts_ms INTEGER NOT NULL, op TEXT NOT NULL, prev_lsn INTEGER NOT NULL, "
    "origin TEXT NOT NULL, oseq INTEGER NOT NULL, body BLOB NOT NULL, "
    "PRIMARY KEY (coll_rid, idx, region, pk, id)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS outbox (coll_rid TEXT NOT NULL, idx INTEGER NOT NULL, origin TEXT NOT NULL, "
    "seq INTEGER NOT NULL, lsn INTEGER NOT NULL, record BLOB NOT NULL, "
    "PRIMARY KEY (coll_rid, idx, origin, seq)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS conflicts (coll_rid TEXT NOT NULL, seq INTEGER NOT NULL, ident TEXT NOT NULL, "
    "entry TEXT NOT NULL, PRIMARY KEY (coll_rid, seq)) WITHOUT ROWID",
)
UPSERT_ITEM = "INSERT OR REPLACE INTO replica_items VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
DELETE_ITEM = "DELETE FROM replica_items WHERE coll_rid = ? AND idx = ? AND region = ? AND pk = ? AND id = ?"
UPSERT_REPLICA = "INSERT OR REPLACE INTO replicas VALUES (?, ?, ?, ?, ?)"
INSERT_OUTBOX = "INSERT OR REPLACE INTO outbox VALUES (?, ?, ?, ?, ?, ?)"
PRUNE_OUTBOX = "DELETE FROM outbox WHERE coll_rid = ? AND idx = ? AND origin = ? AND seq <= ?"
INSERT_CONFLICT = "INSERT OR REPLACE INTO conflicts VALUES (?, ?, ?, ?)"
TRIM_CONFLICTS = "DELETE FROM conflicts WHERE coll_rid = ? AND seq <= ?"
EMPTY_METADATA = {"seq": 0, "databases": [], "containers": [], "offers": []}


class PersistenceError(Exception):
    """A data dir regionlab cannot start from; str() is one line naming the file and what to do."""


def bound_config(account_config) -> dict:
    return {name: (list(v) if isinstance(v := getattr(account_config, name), tuple) else v)
            for name in BOUND_SETTINGS}


def check_header(path: str) -> bool:
    """Whether the file exists with content; PersistenceError when that content is not SQLite."""
    if not (os.path.exists(path) and os.path.getsize(path) > 0):
        return False
    with open(path, "rb") as f:
        if f.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
            raise PersistenceError(f"{path} is not a regionlab data file (not SQLite); "
                                   "point --data-dir elsewhere, or --reset-data to start empty")
    return True


def create(db, bound: dict) -> None:
    db.execute("BEGIN")
    db.execute(f"PRAGMA application_id={APPLICATION_ID}")
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID")
    for statement in SCHEMA:
        db.execute(statement)
    db.executemany("INSERT INTO meta VALUES (?, ?)",
                   [("schema_version", str(SCHEMA_VERSION)), ("config", json.dumps(bound)),
                    ("metadata", json.dumps(EMPTY_METADATA))])
    db.execute("COMMIT")


def _meta(db, path: str, bound: dict) -> tuple:
    if db.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
        raise PersistenceError(f"{path} is an SQLite file but not a regionlab data file; point "
                               "--data-dir elsewhere, or --reset-data to start empty")
    meta = dict(db.execute("SELECT key, value FROM meta"))
    version = int(meta.get("schema_version", "0"))
    if version > SCHEMA_VERSION:
        raise PersistenceError(f"{path} was written by a newer regionlab (schema {version}; this one "
                               f"reads up to {SCHEMA_VERSION}); upgrade regionlab, or --reset-data to start empty")
    if version < 1 or "metadata" not in meta or "config" not in meta:
        raise PersistenceError(f"{path} has no regionlab schema; --reset-data to start empty")
    stored = json.loads(meta["config"])
    if stored != bound:
        diff = ", ".join(f"{k} {stored.get(k)!r} (now {bound[k]!r})" for k in BOUND_SETTINGS
                         if stored.get(k) != bound[k])
        raise PersistenceError(f"{path} holds an account made with {diff}; start with the same "
                               "--regions/--multi-write/--consistency/--partitions, or --reset-data to start empty")
    return version, json.loads(meta["metadata"])


class Recovered:
    """What recover learnt besides the account: the rows' state, for the writer to go on from."""
    def __init__(self):
        self.items = 0
        self.have: dict = {}             # (coll rid, idx, region) -> (committed LSN, progress)
        self.conflict_seq: dict = {}     # coll rid -> the last conflicts row's seq
        self.leveled: list = []          # (container, partition, region) brought level at restore
        self.migrated = False            # a schema-1 file: everything is to be written again
        self.region_ports: dict = {}     # runtime-added region -> the port it was asked for


def recover(db, path: str, account, bound: dict) -> Recovered:
    """Rebuild account (empty, from its flags) from the file; raises PersistenceError."""
    version, image = _meta(db, path, bound)
    out = Recovered()
    if version == 1:
        out.items = _recover_v1(db, account, image)
        out.migrated = True
        return out
    account_image.restore_topology(account, image)
    out.region_ports = {name: port for name, port in image.get("region_ports", {}).items()
                        if account.region_state(name) is not None}
    account_image.restore_metadata(account, image)
    account.lost_writes.extend(image.get("lost_writes", ()))
    for coll_rid, seq, ident, entry in db.execute("SELECT coll_rid, seq, ident, entry FROM conflicts "
                                                  "ORDER BY coll_rid, seq").fetchall():
        c = account.colls_by_rid.get(coll_rid)
        if c is not None:
            pk, id, origin, oseq = json.loads(ident)
            account_image.restore_conflicts(c, [(((pk, id), origin, oseq), json.loads(entry))])
            out.conflict_seq[coll_rid] = seq
    outbox: dict = {}
    for coll_rid, idx, origin, seq, lsn, record in db.execute(
            "SELECT coll_rid, idx, origin, seq, lsn, record FROM outbox ORDER BY coll_rid, idx, origin, seq"):
        versions, befores = account_image.commit_from_record(msgpack.unpackb(record), json.loads)
        outbox.setdefault((coll_rid, idx, origin), []).append((seq, lsn, versions, befores))
    _recover_replicas(db, account, out, outbox)
    out.leveled += account_image.finish(account, outbox)
    account_image.restore_faults(account, image)
    return out


def _recover_replicas(db, account, out: Recovered, outbox: dict) -> None:
    multi = account.config.multi_write
    hub = account_image.write_region_of(account)
    rows = db.execute("SELECT coll_rid, idx, region, lsn, state FROM replicas ORDER BY coll_rid, idx").fetchall()
    parts: dict = {}
    for coll_rid, idx, region, lsn, state in rows:
        c = account.colls_by_rid.get(coll_rid)
        if c is not None and idx < len(c.partitions) and region in c.partitions[idx].replica_sets:
            parts.setdefault((coll_rid, idx), []).append((region, lsn, json.loads(state)))
    for (coll_rid, idx), replicas in parts.items():
        c = account.colls_by_rid[coll_rid]
        # The write region first: a single-write account's other regions are taken from it.
        replicas.sort(key=lambda r: r[0] != hub)
        shared: dict | None = {} if multi else None     # one Version per version, across regions
        hub_versions, hub_lsn = [], 0
        for n, (region, lsn, state) in enumerate(replicas):
            c.doc_seq = max(c.doc_seq, state.get("doc_seq", 0))     # rids of deleted items are not reused
            if multi or region == hub:
                versions = _items(db, coll_rid, idx, region, shared)
                if region == hub:
                    hub_versions, hub_lsn = versions, lsn
            else:
                commits = [(at, vs, bs) for _, at, vs, bs in outbox.get((coll_rid, idx, hub), ())]
                versions = account_image.state_at(hub_versions, commits, hub_lsn, lsn)
                if versions is None:      # lagged past what was kept: level with the write region
                    versions, lsn, state = hub_versions, hub_lsn, dict(state, progress=_progress_of(replicas, hub))
                    out.leveled.append((c, c.partitions[idx], region))
            account_image.restore_replica(c, idx, region, lsn, state, versions, index_rids=n == 0 or multi)
            out.have[(coll_rid, idx, region)] = (lsn, dict(state["progress"]) if multi else None)
            if region == (hub or account.regions[0].name):
                out.items += len(versions)


def _progress_of(replicas: list, region: str) -> dict:
    return next((state["progress"] for name, _, state in replicas if name == region), {})


def _items(db, coll_rid: str, idx: int, region: str, shared: dict | None) -> list:
    rows = db.execute("SELECT pk, id, lsn, rid, etag, ts, ts_ms, op, prev_lsn, origin, oseq, body "
                      "FROM replica_items WHERE coll_rid = ? AND idx = ? AND region = ?", (coll_rid, idx, region))
    version = account_image.version_from_record
    if shared is None:
        return [version(row) for row in rows]
    versions = []
    for row in rows:
        ident = (row[0], row[1], row[2], row[9], row[10])
        v = shared.get(ident)
        if v is None:
            v = shared[ident] = account_image.version_from_record(row)
        versions.append(v)
    return versions


def _recover_v1(db, account, image: dict) -> int:
    """Schema 1 kept one state for every region: the write region's."""
    account_image.restore_metadata(account, image)
    restored = 0
    for coll_rid, idx, lsn, state in db.execute("SELECT coll_rid, idx, lsn, state FROM partitions").fetchall():
        c = account.colls_by_rid.get(coll_rid)
        if c is None or idx >= len(c.partitions):
            continue
        state = json.loads(state)
        c.doc_seq = max(c.doc_seq, state["doc_seq"])
        rows = db.execute("SELECT pk, id, lsn, rid, etag, ts, ts_ms, op, prev_lsn, origin, oseq, body "
                          "FROM items WHERE coll_rid = ? AND idx = ?", (coll_rid, idx)).fetchall()
        versions = [account_image.version_from_record(row) for row in rows]
        account_image.restore_partition(c, idx, lsn, state["progress"], versions, state.get("epoch", 0))
        restored += len(versions)
    account_image.restore_write_region(account, image)
    return restored


def migrate_v1(db, rewrite: list) -> None:
    """Schema 1 to 2 in one transaction: the new tables filled from the restored account
    (`rewrite`: the writer's statements for it), the old ones dropped."""
    db.execute("BEGIN")
    try:
        for statement in SCHEMA:
            db.execute(statement)
        for sql, rows in rewrite:
            db.executemany(sql, rows)
        db.execute("DROP TABLE IF EXISTS items")
        db.execute("DROP TABLE IF EXISTS partitions")
        db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
