"""The account on disk: SQLite in WAL mode, written by group commit (docs/durability.md).

Theory of operation: the core reports every commit of a write region (Partition.durable) and
every metadata change (Account.metadata_hook); nothing is written there. Here they collect in
the current *group* (the newest version of each key touched, the partitions touched, whether
metadata changed), and at the end of the event-loop turn (call_soon) the group is written in
one SQLite transaction on a worker thread while the loop goes on serving. A write is
acknowledged only after the group that holds its commit is on disk (`barrier`): the gateway
awaits it after the commit's quorum. At most one group is being written at a time; commits
arriving meanwhile form the next group, written as soon as the current one is done — so the
queue is bounded at two groups, and a busy second fills one transaction instead of many.

Durability: `strict` sets synchronous=FULL (each group is fsynced before its writes are
acknowledged: survives power loss), `relaxed` sets synchronous=NORMAL in WAL mode (each group
is in the OS's page cache before it is acknowledged: survives a killed process, not a power
loss or kernel crash).

The file: tables meta (schema version, the config it was made with, the metadata image of
core/account_image.py), partitions (committed LSN, write progress and the container's document
rid counter per container partition) and items (the newest live version of every key). `PRAGMA application_id` marks it
as regionlab's. Opening refuses, with one line (PersistenceError), a file that is not SQLite,
not regionlab's, of a newer schema, corrupt, or made with other topology flags.
"""
import asyncio
import json
import logging
import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor

from ..core import account_image

log = logging.getLogger("regionlab.persistence")

FILE_NAME = "regionlab.sqlite"
SCHEMA_VERSION = 1
APPLICATION_ID = 0x52474C42               # "RGLB": PRAGMA application_id of a regionlab file
SQLITE_HEADER = b"SQLite format 3\x00"
DURABILITY_MODES = ("strict", "relaxed")
SYNCHRONOUS = {"strict": "FULL", "relaxed": "NORMAL"}
# The settings a data dir is bound to: the account's shape. Others (ports, faults) may change.
BOUND_SETTINGS = ("regions", "multi_write", "consistency", "partition_count")

_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
    "CREATE TABLE partitions (coll_rid TEXT NOT NULL, idx INTEGER NOT NULL, lsn INTEGER NOT NULL, "
    "state TEXT NOT NULL, PRIMARY KEY (coll_rid, idx)) WITHOUT ROWID",
    "CREATE TABLE items (coll_rid TEXT NOT NULL, idx INTEGER NOT NULL, pk TEXT NOT NULL, id TEXT NOT NULL, "
    "lsn INTEGER NOT NULL, rid TEXT NOT NULL, etag TEXT NOT NULL, ts INTEGER NOT NULL, ts_ms INTEGER NOT NULL, "
    "op TEXT NOT NULL, prev_lsn INTEGER NOT NULL, origin TEXT NOT NULL, oseq INTEGER NOT NULL, "
    "body BLOB NOT NULL, PRIMARY KEY (coll_rid, idx, pk, id)) WITHOUT ROWID",
)
_UPSERT_ITEM = "INSERT OR REPLACE INTO items VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_DELETE_ITEM = "DELETE FROM items WHERE coll_rid = ? AND idx = ? AND pk = ? AND id = ?"
_UPSERT_PARTITION = "INSERT OR REPLACE INTO partitions VALUES (?, ?, ?, ?)"


class PersistenceError(Exception):
    """A data dir regionlab cannot start from; str() is one line naming the file and what to do."""


def bound_config(account_config) -> dict:
    return {name: (list(v) if isinstance(v := getattr(account_config, name), tuple) else v)
            for name in BOUND_SETTINGS}


class _Group:
    """The commits of one or more loop turns, written in one transaction."""
    __slots__ = ("items", "partitions", "metadata", "waiters", "loop")

    def __init__(self, loop):
        self.loop = loop
        self.items: dict = {}          # (coll rid, partition index, key) -> newest Version
        self.partitions: dict = {}     # (coll rid, partition index) -> (container, write replica set)
        self.metadata = False
        # One future per waiting write, not one shared: a gateway handler's first step runs
        # outside its task (gateway/http.py), and a future awaited that way must be its own.
        self.waiters: list = []

    def waiter(self):
        fut = self.loop.create_future()
        self.waiters.append(fut)
        return fut

    def settle(self, failed: str | None) -> None:
        """Tell every waiter: None when the group is durable, else what went wrong."""
        for fut in self.waiters:
            if not fut.done():
                fut.set_result(failed)
        self.waiters.clear()

    def __bool__(self) -> bool:
        return bool(self.items or self.partitions or self.metadata)


class Persistence:
    def __init__(self, data_dir: str, durability: str = "strict", reset: bool = False):
        self.path = os.path.join(data_dir, FILE_NAME)
        self.durability = durability
        self._db: sqlite3.Connection | None = None
        self._account = None
        self._loop = None
        self._group: _Group | None = None
        self._writing: _Group | None = None
        self._scheduled = False
        self._colls: set = set()       # container rids the file holds metadata of
        self._failovers = 0            # the account's failovers the file has seen
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="regionlab-persistence")
        self.groups_written = 0
        try:
            os.makedirs(data_dir, exist_ok=True)
            if reset:
                for suffix in ("", "-wal", "-shm"):
                    if os.path.exists(self.path + suffix):
                        os.remove(self.path + suffix)
            if not os.access(data_dir, os.W_OK | os.X_OK):
                raise PermissionError(13, "Permission denied")
        except OSError as e:
            self._thread.shutdown(wait=False)
            raise PersistenceError(f"cannot keep data in {data_dir}: {e.strerror or e}; give --data-dir a "
                                   "directory this user can write") from None

    # ---- opening and recovery (at start-up, before anything listens) -----------------------
    def open(self, account) -> int:
        """Open (or create) the file, check it is ours and fits this account's flags, rebuild the
        account's state from it, and hook the account's commits; how many items it restored."""
        bound = bound_config(account.config)
        try:
            existed = os.path.exists(self.path) and os.path.getsize(self.path) > 0
            if existed:
                with open(self.path, "rb") as f:
                    if f.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
                        raise PersistenceError(f"{self.path} is not a regionlab data file (not SQLite); "
                                               "point --data-dir elsewhere, or --reset-data to start empty")
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            db = self._db
            if existed:
                restored = self._recover(account, bound)
            else:
                self._create(bound)
                restored = 0
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={SYNCHRONOUS[self.durability]}")
        except sqlite3.DatabaseError as e:
            self._close_quietly()
            raise PersistenceError(f"{self.path} is corrupt or unreadable ({e}); move it away, or "
                                   "--reset-data to start empty") from None
        except PersistenceError:
            self._close_quietly()
            raise
        self._account = account
        self._colls = set(account.colls_by_rid)
        account.metadata_hook = self._on_metadata
        account.commit_hook = self._on_commit
        for c in account.colls_by_rid.values():      # restored before the hook was there
            for p in c.partitions:
                p.durable = lambda p, rs, old, new, c=c: self._on_commit(c, p, rs, old, new)
        return restored

    def _create(self, bound: dict) -> None:
        db = self._db
        db.execute("BEGIN")
        db.execute(f"PRAGMA application_id={APPLICATION_ID}")
        for statement in _SCHEMA:
            db.execute(statement)
        db.executemany("INSERT INTO meta VALUES (?, ?)",
                       [("schema_version", str(SCHEMA_VERSION)), ("config", json.dumps(bound)),
                        ("metadata", json.dumps({"seq": 0, "databases": [], "containers": [], "offers": []}))])
        db.execute("COMMIT")

    def _recover(self, account, bound: dict) -> int:
        db = self._db
        if db.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
            raise PersistenceError(f"{self.path} is an SQLite file but not a regionlab data file; point "
                                   "--data-dir elsewhere, or --reset-data to start empty")
        meta = dict(db.execute("SELECT key, value FROM meta"))
        version = int(meta.get("schema_version", "0"))
        if version > SCHEMA_VERSION:
            raise PersistenceError(f"{self.path} was written by a newer regionlab (schema {version}; this one "
                                   f"reads up to {SCHEMA_VERSION}); upgrade regionlab, or --reset-data to start empty")
        if version < 1 or "metadata" not in meta or "config" not in meta:
            raise PersistenceError(f"{self.path} has no regionlab schema; --reset-data to start empty")
        stored = json.loads(meta["config"])
        if stored != bound:
            diff = ", ".join(f"{k} {stored.get(k)!r} (now {bound[k]!r})" for k in BOUND_SETTINGS
                             if stored.get(k) != bound[k])
            raise PersistenceError(f"{self.path} holds an account made with {diff}; start with the same "
                                   "--regions/--multi-write/--consistency/--partitions, or --reset-data to start empty")
        image = json.loads(meta["metadata"])
        account_image.restore_metadata(account, image)
        restored = 0
        for coll_rid, idx, lsn, state in db.execute("SELECT coll_rid, idx, lsn, state FROM partitions").fetchall():
            c = account.colls_by_rid.get(coll_rid)
            if c is None or idx >= len(c.partitions):
                continue
            state = json.loads(state)
            c.doc_seq = max(c.doc_seq, state["doc_seq"])      # rids of deleted items are not reused
            rows = db.execute("SELECT pk, id, lsn, rid, etag, ts, ts_ms, op, prev_lsn, origin, oseq, body "
                              "FROM items WHERE coll_rid = ? AND idx = ?", (coll_rid, idx)).fetchall()
            versions = [account_image.version_from_record(row) for row in rows]
            account_image.restore_partition(c, idx, lsn, state["progress"], versions, state.get("epoch", 0))
            restored += len(versions)
        account_image.restore_write_region(account, image)
        self._failovers = len(account.failovers)
        return restored

    def _close_quietly(self) -> None:
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
            self._db = None

    # ---- group commit ---------------------------------------------------------------------
    def start(self, loop) -> None:
        self._loop = loop

    def _current(self) -> _Group:
        group = self._group
        if group is None:
            group = self._group = _Group(self._loop)
        if not self._scheduled and self._writing is None:
            self._scheduled = True
            self._loop.call_soon(self._flush)
        return group

    def _on_commit(self, c, p, rs, old: int, new: int) -> None:
        group = self._current()
        idx = int(p.range_id)
        rid = c.rid
        items = group.items
        for _, versions in rs.commits_between(old, new):
            for v in versions:
                items[(rid, idx, v.key)] = v
        group.partitions[(rid, idx)] = (c, rs)

    def _on_metadata(self) -> None:
        self._current().metadata = True

    def barrier(self):
        """A future that is done (result None, or the error text) once every commit reported so
        far is on disk; None when it already is."""
        if self._group:
            return self._group.waiter()
        if self._writing is not None:
            return self._writing.waiter()
        return None

    def _flush(self) -> None:
        self._scheduled = False
        group, self._group = self._group, None
        if not group:
            if group is not None:
                group.settle(None)
            return
        work = self._rows(group)
        self._writing = group
        fut = self._loop.run_in_executor(self._thread, self._write, work)
        fut.add_done_callback(lambda f: self._written(group, f))

    def _rows(self, group: _Group) -> tuple:
        """What the worker thread writes, taken now on the loop (the core's state moves on)."""
        upserts, deletes = [], []
        for (rid, idx, _), v in group.items.items():
            if v.deleted:
                deletes.append((rid, idx, v.key[0], v.key[1]))
            else:
                upserts.append((rid, idx) + account_image.item_record(v))
        parts = [(rid, idx, rs.committed_lsn, json.dumps({"progress": rs.progress, "doc_seq": c.doc_seq, "epoch": rs.epoch}))
                 for (rid, idx), (c, rs) in group.partitions.items()]
        image = gone = resync = None
        if group.metadata:
            account = self._account
            image = json.dumps(account_image.metadata(account))
            now = set(account.colls_by_rid)
            gone = [(rid,) for rid in self._colls - now]
            self._colls = now
            if len(account.failovers) != self._failovers:
                self._failovers = len(account.failovers)
                resync = self._resync_rows(account)
        return upserts, deletes, parts, image, gone, resync

    @staticmethod
    def _resync_rows(account) -> list:
        """After a failover, every partition as its new write region has it: a forced failover
        cut history back (its lost writes must not come back at a restart), and the file kept
        only the newest version of each key, not what to go back to. Rare, and O(items)."""
        out = []
        for c, p in account.partitions():
            rs = p.replica_sets[account.hub_region]
            idx = int(p.range_id)
            rows = [(c.rid, idx) + account_image.item_record(v) for v in rs.store.scan(rs.committed_lsn)]
            state = json.dumps({"progress": rs.progress, "doc_seq": c.doc_seq, "epoch": rs.epoch})
            out.append((c.rid, idx, rows, (c.rid, idx, rs.committed_lsn, state)))
        return out

    def _write(self, work: tuple) -> None:
        upserts, deletes, parts, image, gone, resync = work
        db = self._db
        db.execute("BEGIN")
        try:
            if upserts:
                db.executemany(_UPSERT_ITEM, upserts)
            if deletes:
                db.executemany(_DELETE_ITEM, deletes)
            if parts:
                db.executemany(_UPSERT_PARTITION, parts)
            if image is not None:
                db.execute("UPDATE meta SET value = ? WHERE key = 'metadata'", (image,))
            if gone:
                db.executemany("DELETE FROM items WHERE coll_rid = ?", gone)
                db.executemany("DELETE FROM partitions WHERE coll_rid = ?", gone)
            # Last: the partitions as they are now, over any older commit of this group.
            for rid, idx, rows, part in resync or ():
                db.execute("DELETE FROM items WHERE coll_rid = ? AND idx = ?", (rid, idx))
                db.executemany(_UPSERT_ITEM, rows)
                db.execute(_UPSERT_PARTITION, part)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def _written(self, group: _Group, f) -> None:
        self._writing = None
        err = f.exception()
        if err is not None:
            log.error("writing to %s failed: %s", self.path, err)
            group.settle(f"{self.path}: {err}")
        else:
            self.groups_written += 1
            group.settle(None)
        if self._group:
            self._scheduled = True
            self._loop.call_soon(self._flush)

    async def close(self) -> None:
        """Write what is pending, then close the file (a clean stop)."""
        while True:
            fut = self.barrier()
            if fut is None:
                break
            await fut
        self._thread.shutdown(wait=True)
        self._close_quietly()
