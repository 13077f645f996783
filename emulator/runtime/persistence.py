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
import json
import logging
import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor

import msgpack

from ..core import account_image
from ..core.conflicts import CONFLICTS_KEPT_MAX
from . import data_file as F
from .data_file import FILE_NAME, PersistenceError, bound_config  # noqa: F401 (the module's public names)

log = logging.getLogger("regionlab.persistence")

DURABILITY_MODES = ("strict", "relaxed")
SYNCHRONOUS = {"strict": "FULL", "relaxed": "NORMAL"}


class _Group:
    """The commits of one or more loop turns, written in one transaction."""
    __slots__ = ("items", "replicas", "outbox", "conflicts", "resync", "metadata", "waiters", "loop")

    def __init__(self, loop):
        self.loop = loop
        self.items: dict = {}          # (coll rid, idx, region, key) -> newest Version
        self.replicas: dict = {}       # (coll rid, idx, region) -> (container, partition, replica set)
        self.outbox: list = []         # (coll rid, idx, origin, seq, lsn, versions, befores)
        self.conflicts: list = []      # (container, ident, entry)
        self.resync: dict = {}         # (coll rid, idx, region) -> (container, partition, rs): rewrite whole
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
        return bool(self.items or self.replicas or self.metadata or self.conflicts or self.resync)


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
        self._regions: tuple = ()      # the regions the file holds rows of
        self._failovers = (0, None)    # (failovers, write region) the file has seen
        self._have: dict = {}          # (coll rid, idx, region) -> (LSN, progress) its row says
        self._pruned: dict = {}        # (coll rid, idx, origin) -> the outbox pruned up to
        self._conflict_seq: dict = {}  # coll rid -> the last conflicts row's seq
        self.region_ports: dict = {}   # runtime-added region -> the port it was asked for (0: any)
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

    def _adopt(self, account, got) -> None:
        self._colls = set(account.colls_by_rid)
        self._regions = tuple(r.name for r in account.regions)
        self._failovers = (len(account.failovers), account_image.write_region_of(account))
        if got is None:
            return
        self._have = got.have
        self.region_ports = got.region_ports
        self._conflict_seq = got.conflict_seq
        for c, p, region in got.leveled:
            self.leveled.append(f"{c.db.id}/{c.id}/{p.range_id}/{region}")
            log.warning("partition %s of %s/%s in %s had lagged past the commits the file kept; it was "
                        "restored level with the write region", p.range_id, c.db.id, c.id, region)
        if got.leveled:
            group = self._group = _Group(None)
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
        group = _Group(None)
        group.metadata = True
        account = self._account
        for c, p in account.partitions():
            for region, rs in p.replica_sets.items():
                group.resync[(c.rid, int(p.range_id), region)] = (c, p, rs)
        self._failovers = None                        # every replica set and the outbox afresh
        work = self._rows(group)
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
        work = self._rows(group)
        self._writing = group
        fut = self._loop.run_in_executor(self._thread, self._write, work)
        fut.add_done_callback(lambda f: self._written(group, f))

    # ---- the rows of a group (taken on the loop: the core's state moves on) -----------------
    def _rows(self, group: _Group) -> list:
        """[(sql, rows)] in the order the worker thread runs them."""
        account = self._account
        multi = account.config.multi_write
        upserts, deletes = [], []
        for (rid, idx, region, _), v in group.items.items():
            if v.deleted:
                deletes.append((rid, idx, region, v.key[0], v.key[1]))
            else:
                upserts.append((rid, idx, region) + account_image.item_record(v))
        work = [(F.UPSERT_ITEM, upserts), (F.DELETE_ITEM, deletes)]
        # What a container or region that left since (in this group, or before it was written)
        # still reported is not written: its rows are deleted below, and would come back.
        colls, regions = account.colls_by_rid, {r.name for r in account.regions}
        resync = {k: v for k, v in group.resync.items() if k[0] in colls and k[2] in regions}
        replicas = {k: v for k, v in group.replicas.items() if k[0] in colls and k[2] in regions}
        touched = {(rid, idx): p for (rid, idx, _), (_, p, _) in replicas.items()}
        if group.metadata:
            work += self._metadata_rows(resync)
        rows = []
        for key, (c, p, rs) in replicas.items():
            if key not in resync:
                rows.append(self._replica_row(key, c, rs, rs.committed_lsn, account_image.replica_state(rs), multi))
        work.append((F.UPSERT_REPLICA, rows))
        work.append((F.INSERT_OUTBOX, [(rid, idx, origin, seq, lsn, _packed(versions, befores))
                                       for rid, idx, origin, seq, lsn, versions, befores in group.outbox
                                       if rid in colls and origin in regions]))
        work += self._conflict_rows([entry for entry in group.conflicts if entry[0].rid in colls])
        moved = (len(account.failovers), account_image.write_region_of(account))
        failed_over = self._failovers != moved
        if failed_over:
            # A failover began, ended, or cut history: every replica set and the outbox afresh.
            self._failovers = moved
            for c, p in account.partitions():
                for region, rs in p.replica_sets.items():
                    resync[(c.rid, int(p.range_id), region)] = (c, p, rs)
        for key, (c, p, rs) in resync.items():
            work += self._resync_rows(key, c, p, rs, multi)
            touched[key[:2]] = p
        if failed_over and not multi:
            work += self._outbox_rewrite()
        work.append((F.PRUNE_OUTBOX, self._prunes(touched, multi)))
        return [(sql, rows) for sql, rows in work if rows]

    def _replica_row(self, key: tuple, c, rs, lsn: int, state: dict, multi: bool) -> tuple:
        self._have[key] = (lsn, dict(state["progress"]) if multi else None)
        return key + (lsn, json.dumps(dict(state, doc_seq=c.doc_seq)))

    def _resync_rows(self, key: tuple, c, p, rs, multi: bool) -> list:
        """Rewrite one replica set whole: after a failover (a cut), a snapshot, a region's join.
        A single-write account keeps items for its write region only."""
        account = self._account
        lsn, state = account_image.state_after_cuts(account, p, rs)
        work = [("DELETE FROM replica_items WHERE coll_rid = ? AND idx = ? AND region = ?", [key])]
        if multi or rs.region == account_image.write_region_of(account):
            work.append((F.UPSERT_ITEM, [key + account_image.item_record(v) for v in rs.store.scan(lsn)]))
        work.append((F.UPSERT_REPLICA, [self._replica_row(key, c, rs, lsn, state, multi)]))
        return work

    def _metadata_rows(self, resync: dict) -> list:
        """The image, and the rows of containers and regions that left or joined."""
        account = self._account
        image = dict(account_image.metadata(account), region_ports=self.region_ports)
        work = [("UPDATE meta SET value = ? WHERE key = 'metadata'", [(json.dumps(image),)])]
        now = set(account.colls_by_rid)
        gone = [(rid,) for rid in self._colls - now]
        self._colls = now
        for table in ("replica_items", "replicas", "outbox", "conflicts"):
            work.append((f"DELETE FROM {table} WHERE coll_rid = ?", gone))
        regions = tuple(r.name for r in account.regions)
        if regions != self._regions:
            left = [(name,) for name in self._regions if name not in regions]
            joined = [name for name in regions if name not in self._regions]
            self._regions = regions
            work += [("DELETE FROM replica_items WHERE region = ?", left),
                     ("DELETE FROM replicas WHERE region = ?", left), ("DELETE FROM outbox WHERE origin = ?", left)]
            for c, p in account.partitions():
                for region, rs in p.replica_sets.items():
                    # A join seeds the new region whole; every region's session-token epoch moved.
                    resync[(c.rid, int(p.range_id), region)] = (c, p, rs)
            if left:
                self._have = {k: v for k, v in self._have.items() if k[2] in regions}
                self._pruned = {k: v for k, v in self._pruned.items() if k[2] in regions}
            log.debug("regions now %s (joined %s)", regions, joined)
        if gone:
            self._have = {k: v for k, v in self._have.items() if k[0] in now}
            self._pruned = {k: v for k, v in self._pruned.items() if k[0] in now}
        return work

    def _conflict_rows(self, conflicts: list) -> list:
        rows, trims = [], {}
        for c, ident, entry in conflicts:
            seq = self._conflict_seq[c.rid] = self._conflict_seq.get(c.rid, 0) + 1
            (pk, id), origin, oseq = ident
            rows.append((c.rid, seq, json.dumps([pk, id, origin, oseq]), json.dumps(entry)))
            if seq > CONFLICTS_KEPT_MAX:
                trims[c.rid] = seq - CONFLICTS_KEPT_MAX
        return [(F.INSERT_CONFLICT, rows), (F.TRIM_CONFLICTS, list(trims.items()))]

    def _outbox_rewrite(self) -> list:
        """After a failover: each partition's outbox is the new write region's commits above the
        lowest region (a forced failover cut history: what it discarded must not be shipped
        again at a restart). The write region's log may not reach back that far; a restart then
        brings such a region level (account_image.finish)."""
        account = self._account
        hub = account_image.write_region_of(account)
        rows = []
        for c, p in account.partitions():
            rs = p.replica_sets[hub]
            low = min(account_image.state_after_cuts(account, p, other)[0] for other in p.replica_sets.values())
            idx = int(p.range_id)
            rows += [(c.rid, idx, hub, lsn, lsn, _packed(vs, account_image.befores_of(rs, lsn, vs)))
                     for lsn, vs in rs.commits_between(low, rs.committed_lsn)]
        self._pruned.clear()
        return [("DELETE FROM outbox", [()]), (F.INSERT_OUTBOX, rows)]

    def _prunes(self, touched: dict, multi: bool) -> list:
        """Outbox rows every other region's row (in this transaction or before) has committed."""
        out = []
        have = self._have
        for (rid, idx), p in touched.items():
            origins = p.replica_sets if multi else p.write_regions + ((p.draining_from,) if p.draining_from else ())
            for origin in origins:
                bound = None
                for dst in p.replica_sets:
                    if dst == origin:
                        continue
                    lsn, progress = have.get((rid, idx, dst), (0, None))
                    got = progress.get(origin, 0) if multi and progress is not None else (0 if multi else lsn)
                    bound = got if bound is None else min(bound, got)
                key = (rid, idx, origin)
                if bound and bound > self._pruned.get(key, 0):
                    self._pruned[key] = bound
                    out.append(key + (bound,))
        return out

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


def _packed(versions, befores) -> bytes:
    return msgpack.packb(account_image.commit_record(versions, befores), use_bin_type=True)
