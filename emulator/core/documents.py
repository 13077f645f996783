"""Item operations: what a write does to a partition, and which replica a read sees.

Theory of operation:
* A `Writer` serves one commit at the primary of a write region's replica set: a single
  operation, or every operation of a transactional batch. Each operation reads the current
  state (the primary's latest versions, overlaid with the commit's own pending versions), checks
  preconditions, and stages a new immutable Version stamped with the commit's LSN. Nothing is
  visible, and nothing is in the store, until `commit()` appends the whole set under one LSN:
  a batch is all-or-nothing, and a refused operation changes nothing.
* Reads choose a replica by consistency (see read_routing.py) and see what that replica has
  applied up to the partition's committed LSN; they never see an unacknowledged write.
"""
import json

from . import epk as epks, memory, ttl
from .consistency import SESSION, STRONG, BOUNDED
from .container import canonical_pk_json
from .errors import (CosmosError, bad_request, conflict, not_found, precondition_failed,
                     session_not_available, SUB_PARTITION_KEY_MISMATCH, SUB_READ_SESSION_NOT_AVAILABLE)
from .jsontext import dumps_bytes as _dumps
from .read_routing import PINNED_LEVELS
from .rid import document_rid
from .store import Version
from .validation import ValidationError, check_depth
from .limits import ITEM_MAX_BYTES

SYSTEM_PROPERTIES = frozenset(("_rid", "_self", "_etag", "_ts", "_attachments", "_lsn"))
# What Writer._stage gives every document it stages (having dropped the client's system
# properties): so a staged document has exactly these (charge.staged counts on it).
STAGED_SYSTEM_PROPERTIES = 5      # _rid, _self, _etag, _attachments, _ts
# The system properties as dumps writes them after an item's own members, in
# the order Writer._stage splices them in (written there as an f-string). Their values are ASCII
# that needs no escaping but for the quotes around the etag: a rid is base64 (rid.py), a _self
# is made of rids, an etag is hex in quotes (ReplicaSet.etag); tests/unit/core/test_item_splice.py
# holds the spliced bodies to dumps' bytes.
#   ,"_rid":"<rid>","_self":"<_self>","_etag":"\"<etag>\"","_attachments":"attachments/","_ts":<ts>}


class Writer:
    __slots__ = ("container", "region", "pk_json", "pk_values", "partition_index", "rs", "lsn",
                 "now_ms", "pending", "rids_drawn", "dropped_rids", "_etag")

    def __init__(self, container, region: str, pk_json: str, pk_values: list, now_ms: int):
        self.container = container
        self.region = region
        # Every item of a logical partition shares one string for its partition key: the stores
        # key items by (pk json, id), and a request's own copy would be ~60 bytes an item.
        self.pk_json = pk_json = memory.intern(pk_json)
        self.pk_values = pk_values
        partitions = container.partitions
        # One partition holds every key: no need for the key's EPK.
        self.partition_index = index = (0 if len(partitions) == 1 else
                                        container.partition_index(container.epk_of(pk_json, pk_values)))
        self.rs = partitions[index].for_write(region, now_ms)
        self.lsn = self.rs.next_lsn()
        self.now_ms = now_ms
        self.pending: dict = {}          # key -> Version (a tombstone for a delete)
        self.rids_drawn = 0              # document rids this commit drew (a refusal gives them back)
        self.dropped_rids: list = []     # (rid, key) of items this commit deletes
        self._etag = None                # the etag of this commit's LSN, made at its first version

    # ---- state as this commit sees it -----------------------------------------------------
    def current(self, id: str) -> Version | None:
        key = (self.pk_json, id)
        pending = self.pending
        if pending:                     # (a commit's first operation finds nothing pending)
            v = pending.get(key)
            if v is not None:
                return None if v.deleted else v
            if key in pending:
                return None
        v = self.rs.store.latest(key)
        if v is not None and self.container.ttl is not None and self.container.ttl.expired_at(v, self.now_ms):
            # Expired: gone for every operation, even before the sweep. A write of its id that
            # commits drops its _rid too (the new item gets its own).
            self.dropped_rids.append((v.rid, v.key))
            return None
        return v

    def _check_pk(self, doc: dict) -> None:
        pk_def = self.container.pk_def
        top = pk_def.top_level_name
        if top is not None:
            # The common key, one top-level string property: equal values are equal keys.
            value = doc.get(top)
            if type(value) is str and len(self.pk_values) == 1 and self.pk_values[0] == value:
                return
        body_values = pk_def.values_from_document(doc)
        if pk_def.kind == epks.KIND_MULTI_HASH and any(v is epks.UNDEFINED for v in body_values):
            # Every level of a hierarchical key must be in the item (null is a value; absent is
            # not), whatever the header says: the Python SDK sends null for a level the item lacks.
            missing = [p for p, v in zip(pk_def.paths, body_values) if v is epks.UNDEFINED]
            raise CosmosError(400, SUB_PARTITION_KEY_MISMATCH,
                              "Partition key provided either doesn't correspond to definition in the collection "
                              "or doesn't match partition key field values specified in the document. "
                              f"(The item has no value at {', '.join(missing)}; a hierarchical partition key "
                              "needs every level.)")
        if canonical_pk_json(body_values) != self.pk_json:
            raise CosmosError(400, SUB_PARTITION_KEY_MISMATCH,
                              "PartitionKey extracted from document doesn't match the one specified "
                              f"in the header (document has {canonical_pk_json(body_values)}, "
                              f"header has {self.pk_json}).")

    def _stage(self, id: str, user_doc: dict, rid: str | None, prev: Version | None = None,
               raw: bytes | None = None) -> Version:
        """Stage user_doc as the item's new version. raw: user_doc's JSON exactly as
        jsontext.dumps_bytes writes it (validation.parse_item_body's verbatim), or None. With
        it, and no system property in the document, the body is raw with the system properties
        spliced in before its closing brace: the bytes encoding the document again would give."""
        c = self.container
        if c.ttl is not None:
            ttl.check_item_ttl(user_doc)
        if rid is None:
            c.doc_seq = seq = c.doc_seq + 1
            rid = document_rid(c.rid, seq)
            self.rids_drawn += 1
        etag = self._etag
        if etag is None:
            etag = self._etag = self.rs.etag(self.lsn)
        now_ms = self.now_ms
        ts = now_ms // 1000
        self_link = f"{c.docs_link}{rid}/"
        if SYSTEM_PROPERTIES.isdisjoint(user_doc):
            doc = user_doc.copy()
        else:
            doc = {k: v for k, v in user_doc.items() if k not in SYSTEM_PROPERTIES}
            raw = None
        doc["_rid"] = rid
        doc["_self"] = self_link
        doc["_etag"] = etag
        doc["_attachments"] = "attachments/"
        doc["_ts"] = ts
        if raw is not None and user_doc:
            # The members dumps writes after the client's (see above the class; an f-string
            # costs half of what a %-format does).
            body = raw[:-1] + (f',"_rid":"{rid}","_self":"{self_link}","_etag":"\\{etag[:-1]}\\"",'
                               f'"_attachments":"attachments/","_ts":{ts}}}').encode()
        else:
            body = _dumps(doc)
        key = (self.pk_json, id)
        if prev is None:
            v = Version(self.lsn, key, doc, body, etag, ts, rid, False, "create", 0,
                        self.region, self.rs.own_seq + 1, now_ms, None)
        else:
            v = Version(self.lsn, key, doc, body, etag, ts, rid, False, "replace", prev.lsn,
                        self.region, self.rs.own_seq + 1, now_ms, (prev.origin, prev.oseq))
        self.pending[key] = v
        return v

    def _tombstone(self, old: Version, op: str = "delete") -> None:
        self.dropped_rids.append((old.rid, old.key))
        self.pending[old.key] = Version(self.lsn, old.key, old.body, None, old.etag, self.now_ms // 1000,
                                        old.rid, deleted=True, op=op, prev_lsn=old.lsn,
                                        origin=self.region, oseq=self.rs.own_seq + 1, ts_ms=self.now_ms,
                                        prev_id=(old.origin, old.oseq))

    @staticmethod
    def _check_if_match(v: Version, if_match: str | None) -> None:
        if if_match is not None and if_match != "*" and if_match != v.etag:
            raise precondition_failed()

    # ---- operations ----------------------------------------------------------------------
    def create(self, doc: dict, raw: bytes | None = None) -> tuple[int, Version]:
        """raw, here and in upsert and replace: doc's JSON as _stage takes it, or None."""
        self._check_pk(doc)
        id = doc["id"]
        if self.current(id) is not None:
            raise conflict()
        return 201, self._stage(id, doc, None, None, raw)

    def upsert(self, doc: dict, if_match: str | None = None, raw: bytes | None = None) -> tuple[int, Version]:
        self._check_pk(doc)
        id = doc["id"]
        old = self.current(id)
        if old is None:
            # As the service does: If-Match guards replacing an item, so with none to replace
            # an upsert creates whatever etag it names.
            return 201, self._stage(id, doc, None, None, raw)
        self._check_if_match(old, if_match)
        return 200, self._stage(id, doc, old.rid, old, raw)

    def replace(self, id: str, doc: dict, if_match: str | None = None,
                raw: bytes | None = None) -> tuple[int, Version]:
        """Replace item id with doc. A doc with another id renames the item, as the service
        does: the old id is gone, the new one holds doc under the item's _rid (409 if an item
        has the new id already). The rename is a delete and a create in one commit, so the
        change feed, replication and conflict resolution see it as they see those two."""
        self._check_pk(doc)
        old = self.current(id)
        if old is None:
            raise not_found()
        self._check_if_match(old, if_match)
        new_id = doc["id"]
        if new_id == id:
            return 200, self._stage(id, doc, old.rid, old, raw)
        if self.current(new_id) is not None:
            raise conflict("Entity with the specified id already exists in the system. "
                           f"(Item '{id}' cannot be renamed to '{new_id}': that id is taken in this partition.)")
        self._tombstone(old)
        return 200, self._stage(new_id, doc, old.rid, None, raw)

    def delete(self, id: str, if_match: str | None = None) -> tuple[int, None]:
        old = self.current(id)
        if old is None:
            raise not_found()
        self._check_if_match(old, if_match)
        self._tombstone(old)
        return 204, None

    def patch(self, id: str, operations: list, condition: str | None,
              if_match: str | None = None) -> tuple[int, Version]:
        from .patch import apply_patch, PatchError
        if condition is not None and not isinstance(condition, str):
            raise bad_request("The patch condition must be a string such as \"FROM c WHERE c.n > 1\"; "
                              f"got {_shown(condition)}.")
        old = self.current(id)
        if old is None:
            raise not_found()
        self._check_if_match(old, if_match)
        if condition:
            if not _condition_holds(condition, old.doc, self.now_ms):
                raise precondition_failed("The patch condition was not satisfied by the item's current state.")
        try:
            new_doc = apply_patch(old.doc, operations)
        except PatchError as e:
            raise bad_request(str(e)) from None
        if new_doc.get("id") != id:
            raise bad_request("A patch cannot change the id of an item.")
        self._check_pk(new_doc)
        _check_patched(new_doc)
        return 200, self._stage(id, new_doc, old.rid, old)

    def read(self, id: str, if_none_match: str | None = None) -> tuple[int, Version]:
        v = self.current(id)
        if v is None:
            raise not_found()
        if if_none_match is not None and if_none_match in (v.etag, "*"):
            return 304, v
        return 200, v

    def expire(self, v: Version) -> None:
        """Tombstone v, the item's newest version, as a delete by TTL (ttl.Sweeper)."""
        self._tombstone(v, ttl.EXPIRE_OP)

    def delete_all(self) -> int:
        """Tombstone every item of this logical partition (delete by partition key)."""
        n = 0
        for v in self.rs.store.scan(self.rs.lsn, prefix=self.pk_json):
            if (v.key not in self.pending) or not self.pending[v.key].deleted:
                self._tombstone(v)
                n += 1
        return n

    def commit(self) -> int:
        """Append the staged versions as one commit; returns its LSN (0 when nothing changed)."""
        versions = list(self.pending.values())     # _stage and _tombstone stage at self.lsn
        if not versions:
            return 0
        lsn = self.rs.append(versions)
        assert lsn == self.lsn
        index = self.container.rid_index
        for rid, key in self.dropped_rids:
            entry = index.get(rid)
            if entry is not None and entry.key == key:
                del index[rid]
        for v in versions:
            if not v.deleted:
                index[v.rid] = v
            v.settle()                  # the store keeps the body only (store.Version)
        if self.container.ttl is not None:
            self.container.ttl.wake()   # the sweep indexes this commit's expiries
        return lsn


def _check_patched(doc: dict) -> None:
    """A patched item obeys the limits a written one does: a patch may add nesting or bytes."""
    try:
        check_depth(doc)
    except ValidationError as e:
        raise bad_request(f"The patched item would break a limit: {e.message}") from None
    size = len(_dumps(doc))
    if size > ITEM_MAX_BYTES:
        raise CosmosError(413, 0, f"Request size is too large: the patched item would be {size} bytes; "
                                  f"the limit is {ITEM_MAX_BYTES} bytes.")


def _shown(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _condition_holds(condition: str, doc: dict, now_ms: int) -> bool:
    from .query import compile_query, QueryError
    text = condition.strip()
    if not text.lower().startswith("select"):
        text = "SELECT * " + text
    try:
        return compile_query(text, None).filter_matches(doc, now_ms)
    except QueryError as e:
        raise bad_request(f"The patch condition is not a valid filter: {e}") from None


# ---- reads -------------------------------------------------------------------------------
def min_lsn_for(rs, consistency: str, session: dict | None) -> int:
    """The lowest LSN a replica of rs must have applied to serve a read at this level."""
    if consistency == SESSION:
        token = session.get(rs.range_id) if session else None
        if token is None:
            return 0
        if rs.multi_write:
            return _multi_write_floor(rs, token)
        cut = rs.cut_since(token.version)
        if cut is not None and token.global_lsn > cut:
            raise CosmosError(404, SUB_READ_SESSION_NOT_AVAILABLE,
                              f"The session token {token.version}#{token.global_lsn} names writes of partition "
                              f"{rs.range_id} that a forced failover discarded (history was cut at LSN "
                              f"{cut} after epoch {token.version}); they will never be readable. "
                              "See the lost-writes log on the control port.")
        return token.global_lsn
    if consistency == STRONG and rs.partition is not None:
        return rs.partition.global_lsn
    if consistency == BOUNDED and rs.partition is not None:
        return rs.partition.bounded_floor()
    return 0


def _multi_write_floor(rs, token) -> int:
    """Multi-write session: the token's vector says how many writes of each region the session
    has seen; this region must have merged at least that many from each. If it has, its
    current LSN serves; if not, an LSN it has not reached yet (so the read waits, then 404/1002)."""
    names = {i: n for n, i in rs.partition.region_ids.items()} if rs.partition else {}
    for region_id, seen in token.region_lsns:
        name = names.get(region_id)
        if name is not None and rs.progress.get(name, 0) < seen:
            return rs.lsn + 1
    return rs.lsn


def choose_replica(rs, consistency: str, session: dict | None, primary_ok: bool = True, pins=None):
    """(replica, visible LSN) for a read, or 404/1002 when no replica has the session yet.
    primary_ok=False (a read-only endpoint): only a secondary may serve; when none can, a
    session read is 404/1002 and any other 503, never the primary. pins: the connection's
    ConnectionPins (strategy `connections`), followed only by eventual and consistent-prefix
    reads (read_routing.py)."""
    need = min_lsn_for(rs, consistency, session)
    replica = rs.readable_replica(need, primary_ok, pins if consistency in PINNED_LEVELS else None)
    if replica is None:
        if not primary_ok and consistency != SESSION:
            raise CosmosError(503, 0, f"No secondary replica of partition {rs.range_id} in {rs.region} can "
                                      f"serve this {consistency} read (it needs LSN {need}); a read-only "
                                      "endpoint never reads from the primary. Retry, or use the regional endpoint.")
        raise session_not_available(rs.region, need, rs.committed_lsn)
    lsn = rs.visible_lsn(replica)
    if consistency == STRONG and rs.partition is not None:
        # A commit above the global LSN is not acknowledged yet (its write may still end in
        # 408 and be lost to a forced failover): a strong read must not see it, or a later
        # read in another region would go back in time.
        lsn = min(lsn, rs.partition.global_lsn)
    return replica, lsn


def read_item(container, region: str, pk_json: str, pk_values: list, id: str,
              consistency: str, session: dict | None):
    """(version or None, replica set, visible LSN)."""
    rs = container.partition_for_epk(container.epk_of(pk_json, pk_values)).for_read(region)
    version, lsn = read_in(rs, pk_json, id, consistency, session)
    return version, rs, lsn


def read_in(rs, pk_json: str, id: str, consistency: str, session: dict | None):
    """(version or None, visible LSN) of one item at the replica that consistency allows."""
    replica, lsn = choose_replica(rs, consistency, session)
    return rs.store.get((pk_json, id), lsn), lsn


def read_at(rs, replica, pk_json: str, id: str, consistency: str, session: dict | None):
    """Direct mode: (version or None, visible LSN) at the replica the request named. It never
    waits: a replica behind the session token answers 404/1002 at once (the client tries another
    replica or the primary). Under Strong and Bounded Staleness it serves what it has and its
    reply's LSNs let the client judge a read quorum, as the service's direct clients do."""
    need = min_lsn_for(rs, consistency, session)
    if consistency == SESSION and need and (replica.applied_lsn < need or rs.committed_lsn < need):
        raise session_not_available(f"{rs.region} (replica {replica.index})", need,
                                    min(replica.applied_lsn, rs.committed_lsn))
    lsn = rs.visible_lsn(replica)
    if consistency == STRONG and rs.partition is not None:
        lsn = min(lsn, rs.partition.global_lsn)      # see choose_replica
    return rs.store.get((pk_json, id), lsn), lsn


def locate_rid(container, doc_rid: str):
    """(pk_json, id) of a document addressed by its _rid, or 404."""
    entry = container.rid_index.get(doc_rid)
    if entry is None:
        raise not_found(f"No document with _rid '{doc_rid}' in this container.")
    return entry.key


def writer_for_key(container, region: str, pk_json: str, now_ms: int) -> Writer:
    """A Writer for the logical partition of a stored key's pk_json (the TTL sweep's)."""
    return Writer(container, region, pk_json, pk_values_of(pk_json), now_ms)


def pk_values_of(pk_json: str) -> list:
    values = json.loads(pk_json)
    return [epks.UNDEFINED if v == {} else v for v in values]
