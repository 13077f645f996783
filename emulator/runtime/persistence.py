"""The account on disk: SQLite in WAL mode, written by group commit (docs/durability.md).

Theory of operation: the core reports every commit of every region's replica sets
(Partition.durable), every new conflict (Account.conflict_hook) and every metadata or topology
change (Account.metadata_hook); nothing is written there. Here they collect in the current
*group* (the newest version of each key touched per region, the replica sets touched, the
commits shipped, the conflicts, whether metadata changed), and at the end of the event-loop turn
(call_soon) the group is written in one SQLite transaction on a worker thread while the loop
goes on serving. A write is acknowledged only after the group that holds its commit is on disk
(`barrier`): the gateway awaits it after the commit's quorum. At most one group is being
written at a time; commits arriving meanwhile form the next group, written as soon as the
current one is done — so the queue is bounded at two groups, and a busy second fills one
transaction instead of many.

What a region shipped is kept in the outbox until every other region's row says it committed
it (the rows of one transaction agree with each other), so a restart can queue exactly the
missing commits on the links again (core/account_image.py).

Durability: `strict` sets synchronous=FULL (each group is fsynced before its writes are
acknowledged: survives power loss), `relaxed` sets synchronous=NORMAL in WAL mode (each group
is in the OS's page cache before it is acknowledged: survives a killed process, not a power
loss or kernel crash). The file itself is data_file.py.
"""
import logging
import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor

import msgpack

from ..core import account_image
from . import data_file as F
from .data_file import FILE_NAME, PersistenceError, bound_config  # noqa: F401 (the module's public names)
from .group_rows import Group, GroupRows

log = logging.getLogger("regionlab.persistence")

DURABILITY_MODES = ("strict", "relaxed")
SYNCHRONOUS = {"strict": "FULL", "relaxed": "NORMAL"}


class Persistence:
    def __init__(self, data_dir: str, durability: str = "strict", reset: bool = False):
        self.path = os.path.join(data_dir, FILE_NAME)
        self.durability = durability
        self._db: sqlite3.Connection | None = None
        self._account = None
        self._loop = None
        self._group: Group | None = None
        self._writing: Group | None = None
        self._scheduled = False
        self._file = GroupRows()       # what the file holds; the rows of each group
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="regionlab-persistence")
        self.groups_written = 0
        self.leveled: list = []        # "container/partition/region" a restart brought level (rare)
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
            existed = F.check_header(self.path)
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            db = self._db
            got = F.recover(db, self.path, account, bound) if existed else None
            if got is None:
                F.create(db, bound)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={SYNCHRONOUS[self.durability]}")
            self._account = account
            self._adopt(account, got)
            if got is not None and got.migrated:
                F.migrate_v1(db, self._everything())
        except sqlite3.DatabaseError as e:
            self._close_quietly()
            raise PersistenceError(f"{self.path} is corrupt or unreadable ({e}); move it away, or "
                                   "--reset-data to start empty") from None
        except PersistenceError:
            self._close_quietly()
            raise
        except (KeyError, IndexError, ValueError, TypeError, AttributeError, msgpack.UnpackException) as e:
            # Rows that are not what this schema writes (edited by hand, or damaged inside a
            # page SQLite itself still reads): refused like a damaged file, never half-restored.
            self._close_quietly()
            what = (str(e).splitlines() or [""])[0][:200]
            raise PersistenceError(f"{self.path} holds rows this regionlab cannot read ({type(e).__name__}: "
                                   f"{what}); move it away, or --reset-data to start empty") from None
        self._hook(account)
        return got.items if got is not None else 0

    @property
    def region_ports(self) -> dict:
        """Runtime-added region -> the port it was asked for (0: any); the control port fills it."""
        return self._file.region_ports

    def _adopt(self, account, got) -> None:
        self._file.adopt(account, got)
        if got is None:
            return
        for c, p, region in got.leveled:
            self.leveled.append(f"{c.db.id}/{c.id}/{p.range_id}/{region}")
            log.warning("partition %s of %s/%s in %s had lagged past the commits the file kept; it was "
                        "restored level with the write region", p.range_id, c.db.id, c.id, region)
        if got.leveled:
            group = self._group = Group(None)
            for c, p, region in got.leveled:
                group.resync[(c.rid, int(p.range_id), region)] = (c, p, p.replica_sets[region])

    def _hook(self, account) -> None:
        account.metadata_hook = self._on_metadata
        account.commit_hook = self._on_commit
        account.conflict_hook = self._on_conflict
        for c in account.colls_by_rid.values():      # restored before the hooks were there
            for p in c.partitions:
                p.durable = lambda p, rs, old, new, c=c: self._on_commit(c, p, rs, old, new)
            c.conflicts.on_record = lambda ident, entry, c=c: self._on_conflict(c, ident, entry)

    def _everything(self) -> list:
        """Statements that write the whole account (a schema-1 file's migration)."""
        group = Group(None)
        group.metadata = True
        account = self._account
        for c, p in account.partitions():
            for region, rs in p.replica_sets.items():
                group.resync[(c.rid, int(p.range_id), region)] = (c, p, rs)
        self._file.failovers = None                   # every replica set and the outbox afresh
        work = self._file.rows(group)
        return [(sql, rows) for sql, rows in work if sql is not None]

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
        if self._group is not None:                   # what recovery itself changed
            self._group.loop = loop
            self._scheduled = True
            loop.call_soon(self._flush)

    def _current(self) -> Group:
        group = self._group
        if group is None:
            group = self._group = Group(self._loop)
        if not self._scheduled and self._writing is None:
            self._scheduled = True
            self._loop.call_soon(self._flush)
        return group

    def _on_commit(self, c, p, rs, old: int, new: int) -> None:
        group = self._current()
        idx = int(p.range_id)
        rid, region = c.rid, rs.region
        key = (rid, idx, region)
        ships = region in p.write_regions or region == p.draining_from
        multi = rs.multi_write
        if not ships and not multi:
            # Single-write: a region's items are the write region's taken back to its LSN
            # (account_image.state_at); its row's LSN is all it writes.
            group.replicas[key] = (c, p, rs)
            return
        if rs.log_first_lsn() > old + 1:
            # A state transfer (a snapshot) moved this replica set on without its commits.
            group.resync[key] = (c, p, rs)
            return
        items, outbox = group.items, group.outbox
        for lsn, versions in rs.commits_between(old, new):
            for v in versions:
                items[(rid, idx, region, v.key)] = v
            if not multi:
                outbox.append((rid, idx, region, lsn, lsn, versions, account_image.befores_of(rs, lsn, versions)))
            elif versions[0].origin == region:
                outbox.append((rid, idx, region, versions[0].oseq, lsn, versions, None))
        group.replicas[key] = (c, p, rs)

    def _on_conflict(self, c, ident, entry) -> None:
        self._current().conflicts.append((c, ident, entry))

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
        work = self._file.rows(group)
        self._writing = group
        fut = self._loop.run_in_executor(self._thread, self._write, work)
        fut.add_done_callback(lambda f: self._written(group, f))

    def _write(self, work: list) -> None:
        db = self._db
        db.execute("BEGIN")
        try:
            for sql, rows in work:
                db.executemany(sql, rows)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def _written(self, group: Group, f) -> None:
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
