"""One group commit's rows: what the worker thread writes for the commits, conflicts and
metadata changes of one or more loop turns (runtime/persistence.py gathers them; the schema is
data_file.py).

Theory of operation: a Group holds references (the newest Version of each key per replica set
touched, the replica sets, the shipped commits with the versions they replaced, the new
conflicts, whether metadata changed); GroupRows turns it into [(sql, rows)] on the event loop,
since the core's state moves on as soon as the loop does. GroupRows remembers what the file
holds (each replica set's LSN and progress as its row says, the containers and regions with
rows, how far each outbox is pruned, the write region), so that one transaction's rows always
agree with each other: an outbox row is pruned only once every other region's row — in this
transaction or an earlier one — says it has the commit; a failover or a change of regions
rewrites every replica set whole; a container or region that left takes its rows with it.
"""
import json
import logging

import msgpack

from ..core import account_image
from . import data_file as F
from ..core.limits import CONFLICTS_KEPT_MAX

log = logging.getLogger("regionlab.persistence")


class Group:
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


class GroupRows:
    """What the file holds, and the rows that bring it up to a group."""

    def __init__(self):
        self.account = None
        self.colls: set = set()        # container rids the file holds metadata of
        self.regions: tuple = ()       # the regions the file holds rows of
        self.failovers = (0, None)     # (failovers, write region) the file has seen
        self.have: dict = {}           # (coll rid, idx, region) -> (LSN, progress) its row says
        self.pruned: dict = {}         # (coll rid, idx, origin) -> the outbox pruned up to
        self.conflict_seq: dict = {}   # coll rid -> the last conflicts row's seq
        self.region_ports: dict = {}   # runtime-added region -> the port it was asked for (0: any)

    def adopt(self, account, got) -> None:
        """Start from a new file (got None) or from what data_file.recover found."""
        self.account = account
        self.colls = set(account.colls_by_rid)
        self.regions = tuple(r.name for r in account.regions)
        self.failovers = (len(account.failovers), account_image.write_region_of(account))
        if got is not None:
            self.have, self.region_ports, self.conflict_seq = got.have, got.region_ports, got.conflict_seq

    def rows(self, group: Group) -> list:
        """[(sql, rows)] in the order the worker thread runs them."""
        account = self.account
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
        failed_over = self.failovers != moved
        if failed_over:
            # A failover began, ended, or cut history: every replica set and the outbox afresh.
            self.failovers = moved
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
        self.have[key] = (lsn, dict(state["progress"]) if multi else None)
        return key + (lsn, json.dumps(dict(state, doc_seq=c.doc_seq)))

    def _resync_rows(self, key: tuple, c, p, rs, multi: bool) -> list:
        """Rewrite one replica set whole: after a failover (a cut), a snapshot, a region's join.
        A single-write account keeps items for its write region only."""
        account = self.account
        lsn, state = account_image.state_after_cuts(account, p, rs)
        work = [("DELETE FROM replica_items WHERE coll_rid = ? AND idx = ? AND region = ?", [key])]
        if multi or rs.region == account_image.write_region_of(account):
            work.append((F.UPSERT_ITEM, [key + account_image.item_record(v) for v in rs.store.scan(lsn)]))
        work.append((F.UPSERT_REPLICA, [self._replica_row(key, c, rs, lsn, state, multi)]))
        return work

    def _metadata_rows(self, resync: dict) -> list:
        """The image, and the rows of containers and regions that left or joined."""
        account = self.account
        image = dict(account_image.metadata(account), region_ports=self.region_ports)
        work = [("UPDATE meta SET value = ? WHERE key = 'metadata'", [(json.dumps(image),)])]
        now = set(account.colls_by_rid)
        gone = [(rid,) for rid in self.colls - now]
        self.colls = now
        for table in ("replica_items", "replicas", "outbox", "conflicts"):
            work.append((f"DELETE FROM {table} WHERE coll_rid = ?", gone))
        regions = tuple(r.name for r in account.regions)
        if regions != self.regions:
            left = [(name,) for name in self.regions if name not in regions]
            joined = [name for name in regions if name not in self.regions]
            self.regions = regions
            work += [("DELETE FROM replica_items WHERE region = ?", left),
                     ("DELETE FROM replicas WHERE region = ?", left), ("DELETE FROM outbox WHERE origin = ?", left)]
            for c, p in account.partitions():
                for region, rs in p.replica_sets.items():
                    # A join seeds the new region whole; every region's session-token epoch moved.
                    resync[(c.rid, int(p.range_id), region)] = (c, p, rs)
            if left:
                self.have = {k: v for k, v in self.have.items() if k[2] in regions}
                self.pruned = {k: v for k, v in self.pruned.items() if k[2] in regions}
            log.debug("regions now %s (joined %s)", regions, joined)
        if gone:
            self.have = {k: v for k, v in self.have.items() if k[0] in now}
            self.pruned = {k: v for k, v in self.pruned.items() if k[0] in now}
        return work

    def _conflict_rows(self, conflicts: list) -> list:
        rows, trims = [], {}
        for c, ident, entry in conflicts:
            seq = self.conflict_seq[c.rid] = self.conflict_seq.get(c.rid, 0) + 1
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
        account = self.account
        hub = account_image.write_region_of(account)
        rows = []
        for c, p in account.partitions():
            rs = p.replica_sets[hub]
            low = min(account_image.state_after_cuts(account, p, other)[0] for other in p.replica_sets.values())
            idx = int(p.range_id)
            rows += [(c.rid, idx, hub, lsn, lsn, _packed(vs, account_image.befores_of(rs, lsn, vs)))
                     for lsn, vs in rs.commits_between(low, rs.committed_lsn)]
        self.pruned.clear()
        return [("DELETE FROM outbox", [()]), (F.INSERT_OUTBOX, rows)]

    def _prunes(self, touched: dict, multi: bool) -> list:
        """Outbox rows every other region's row (in this transaction or before) has committed."""
        out = []
        have = self.have
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
                if bound and bound > self.pruned.get(key, 0):
                    self.pruned[key] = bound
                    out.append(key + (bound,))
        return out


def _packed(versions, befores) -> bytes:
    return msgpack.packb(account_image.commit_record(versions, befores), use_bin_type=True)
