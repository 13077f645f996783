"""The change feed of one physical partition in one region.

Theory of operation: a feed position is an LSN of the partition. Latest-version mode returns,
in LSN order, the newest version (visible at the serving replica) of every item changed after
the position; intermediate versions may be skipped, deletes are not shown. All-versions-and-
deletes mode walks the replica set's retained log and returns every create, replace and
delete with its metadata. A page never splits one commit (a batch shares its LSN), so the next
position is always a whole LSN. A page ends at max_items, or before a commit whose entries would
take it past PAGE_MAX_BYTES (`size_of` tells an entry's size as the caller will send it; a page
always holds at least one commit, and a commit is at most about one request body). A region
serves exactly what it has replicated.
"""
import json

from .errors import CosmosError
from .limits import PAGE_MAX_BYTES
from .ttl import EXPIRE_OP


def in_epk_range(epk_of, lo: str, hi: str):
    """A feed filter: keys whose effective partition key is in [lo, hi)."""
    return lambda key: lo <= epk_of(key[0]) < hi


def of_partition_key(pk_json: str):
    """A feed filter: the keys of one logical partition (its canonical JSON)."""
    return lambda key: key[0] == pk_json


def _body_size(v) -> int:
    return len(v.body) if v.body is not None else 0


def latest_versions(store, after_lsn: int, upto_lsn: int, max_items: int, accept=None,
                    size_of=_body_size, bytes_max: int = PAGE_MAX_BYTES, expired=None):
    """(versions, position after them): at most max_items versions and about bytes_max bytes
    (at least one version). `accept(key)` narrows the feed (None: every key); `expired(v)`
    leaves out an item past its time to live (None: none is)."""
    out = []
    last = after_lsn
    nbytes = 0
    for v in store.changes_after(after_lsn, upto_lsn):
        if v.lsn != last and out and (len(out) >= max_items or nbytes >= bytes_max):
            return out, last
        if (accept is None or accept(v.key)) and (expired is None or not expired(v)):
            size = size_of(v)
            if v.lsn != last and out and nbytes + size > bytes_max:
                return out, last
            out.append(v)
            nbytes += size
        last = v.lsn
    return out, upto_lsn


def all_versions(rs, after_lsn: int, upto_lsn: int, max_items: int, accept=None,
                 size_of=_body_size, bytes_max: int = PAGE_MAX_BYTES):
    """(versions incl. tombstones, position after them) from the retained log."""
    first = rs.log_first_lsn()
    if after_lsn + 1 < first:             # (an empty log after a snapshot or a join retains nothing)
        raise CosmosError(400, 0, f"The change feed position LSN {after_lsn} is older than the retained log of "
                                  f"partition {rs.range_id} (it starts at LSN {first}); all-versions-and-deletes "
                                  "mode can only continue from a recent position. Start from now instead.")
    out = []
    last = after_lsn
    nbytes = 0
    for lsn, versions in rs.commits_between(after_lsn, upto_lsn):
        if len(out) >= max_items:
            return out, last
        commit = [v for v in versions if accept is None or accept(v.key)]
        size = sum(map(size_of, commit))
        if out and nbytes + size > bytes_max:
            return out, last
        out.extend(commit)
        nbytes += size
        last = lsn
    return out, upto_lsn


def position_at_time(store, upto_lsn: int, ts_s: int) -> int:
    """The position just before the first change at or after ts_s (epoch seconds)."""
    for v in store.changes_after(0, upto_lsn):
        if v.ts >= ts_s:
            return v.lsn - 1
    return upto_lsn


def avad_entry(v, pk_names) -> dict:
    """One all-versions-and-deletes entry in the service's wire shape. `crts` is the time the
    change was committed (the version's `_ts`), not the time of the read. A delete carries the
    deleted item's id and partition key ({property name: value}, one member per level of a
    hierarchical key, `pk_names` naming them) and the deleted document as `previous`; a delete
    by the TTL sweep is a delete with `timeToLiveExpired` true."""
    meta = {"operationType": "delete" if v.op == EXPIRE_OP else v.op, "lsn": v.lsn, "crts": v.ts}
    if v.prev_lsn:
        meta["previousImageLSN"] = v.prev_lsn
    if v.deleted:
        values = json.loads(v.key[0])
        meta["id"] = v.key[1]
        meta["partitionKey"] = {k: x for k, x in zip(pk_names, values) if x != {}}
        meta["timeToLiveExpired"] = v.op == EXPIRE_OP
        return {"current": {}, "previous": v.doc, "metadata": meta}
    return {"current": v.doc, "metadata": meta}
