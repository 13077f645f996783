"""Request-unit charges: what each operation costs. docs/throughput.md states the model and shows
measured charges; every caller goes through these functions so there is one model.

Shape, following the service's published figures (a 1 KB point read is 1 RU and a 100 KB one
about 10; a 1 KB write about 5-6 RU and a 100 KB one about 50; a replace about twice a create):
* point read: READ_RU_BASE for the first KB, READ_RU_PER_KB for each further KB (sizes are the
  stored item's, system properties included, counted continuously);
* create: WRITE_RU_BASE + WRITE_RU_PER_KB per KB after the first + INDEX_RU_PER_TERM per index
  term. A term is a scalar value (each array element counts) at a path the container's
  indexingPolicy indexes, plus `_ts`; excluded paths make writes cheaper and
  `indexingMode: none` leaves only size;
* replace (also an upsert over an existing item, and a patch, which stores a whole new version):
  the new version's create, plus REPLACE_RU_BASE and the removal of the old version's terms
  (counted as many as the new version's, so the charge depends on the request alone);
* delete: the same as creating the deleted item (its terms are removed);
* transactional batch: the sum of its operations; delete by partition key: the sum of its deletes;
* queries: QUERY_RU_BASE per page plus the documents loaded (all of them on a scan, only the
  index candidates otherwise), the results returned and their size; read feed and change feed:
  FEED_RU_BASE plus items and KB returned (an empty change feed page, 304, NOT_MODIFIED_RU);
* metadata: reads and lists METADATA_READ_RU, writes METADATA_WRITE_RU.
Charges are rounded to 2 decimals, as the service reports them. Pure functions of the request
and the stored state; nothing here reads a clock.
"""
import functools

from . import jsontext
from .documents import STAGED_SYSTEM_PROPERTIES
from .index_policy import policy_of
from .limits import CHARGES_CACHE_MAX_ENTRIES, CHARGE_POLICIES_CACHE_MAX_ENTRIES

KB = 1024
READ_RU_BASE = 1.0              # a point read of up to 1 KB
READ_RU_PER_KB = 0.09           # each further KB: 100 KB is about 10 RU
WRITE_RU_BASE = 4.6
WRITE_RU_PER_KB = 0.45          # each KB after the first: 100 KB is about 50 RU
INDEX_RU_PER_TERM = 0.25
REPLACE_RU_BASE = 3.7           # a replace also retires the old version: ~2x a create
TYPICAL_TERMS = 4               # id, the partition key, one property, _ts: for callers without a document
FEED_RU_BASE = 1.0
FEED_RU_PER_ITEM = 0.1
FEED_RU_PER_KB = 0.1
METADATA_READ_RU = 1.0
METADATA_WRITE_RU = 4.0
NOT_MODIFIED_RU = 1.0
QUERY_RU_BASE = 2.31            # the service's floor for a query page
QUERY_RU_PER_DOC_LOADED = 0.02  # per document read and tested
QUERY_RU_PER_DOC_RETURNED = 0.05
QUERY_RU_PER_KB_RETURNED = 0.1    # like a point read beyond its first KB
SYSTEM_PROPERTIES = frozenset(("_rid", "_self", "_etag", "_ts", "_attachments", "_lsn"))


def _kb_over_first(nbytes: int) -> float:
    """KB beyond the first (an item's size counts continuously, not rounded up)."""
    return max(0.0, nbytes / KB - 1.0)


# ---- index terms ---------------------------------------------------------------------------
def index_terms(doc: dict, indexing_policy: dict | None, body: bytes | None = None,
                system: int | None = None) -> int:
    """Index terms a stored document has under a container's indexingPolicy (see the module
    docstring); system properties other than `_ts` are never counted. body: the document's
    compact JSON, when the caller has it (a staged or stored version's); system: how many
    system properties doc has, when the caller knows it (a document a Writer staged)."""
    _, enabled, everything, policy = _policy_shape(indexing_policy)
    if not enabled:
        return 0
    n = 1                                   # _ts is always indexed
    if everything:
        # No object or array inside (most documents): one term per property that is not a
        # system one, counted without a loop in Python. (A string holding a bracket takes the
        # walk below.) The body opens with its own brace, so no other one means the last brace
        # is at 0: nothing before it. rpartition and partition take one argument, so they cost
        # less than a find with its optional bounds.
        if body is not None and not body.rpartition(b"{")[0] and not body.partition(b"[")[1]:
            return n + len(doc) - (len(doc.keys() & SYSTEM_PROPERTIES) if system is None else system)
        for k, v in doc.items():
            if k not in SYSTEM_PROPERTIES:
                t = type(v)
                n += _scalars(v) if t is dict or t is list else 1
        return n
    indexes = policy.indexes
    for k, v in doc.items():
        if k not in SYSTEM_PROPERTIES:
            n += _indexed_scalars(v, (k,), indexes)
    return n


_shapes: dict = {}      # id(indexingPolicy object) -> _policy_shape's answer


def _policy_shape(indexing_policy: dict | None) -> tuple:
    """(indexingPolicy, indexes anything?, indexes everything?, compiled policy), decided once
    per policy object (a container's definition holds one until it is replaced). Everything
    is the default shape: `/*` included and only system paths (`/_etag/?`...) excluded."""
    entry = _shapes.get(id(indexing_policy))
    if entry is not None and entry[0] is indexing_policy:
        return entry
    policy = policy_of(indexing_policy)
    everything = (policy.enabled and any(p.segments == () and p.terminal == "*" for p in policy.included)
                  and all(p.segments and p.segments[0].startswith("_") for p in policy.excluded))
    if len(_shapes) >= CHARGE_POLICIES_CACHE_MAX_ENTRIES:
        _shapes.clear()
    entry = _shapes[id(indexing_policy)] = (indexing_policy, policy.enabled, everything, policy)
    return entry


def _scalars(v) -> int:
    t = type(v)
    if t is dict:
        values = v.values()
    elif t is list:
        values = v
    else:
        return 1
    n = 0
    for x in values:
        t = type(x)
        n += _scalars(x) if t is dict or t is list else 1
    return n


def _indexed_scalars(v, path: tuple, indexes) -> int:
    t = type(v)
    if t is dict:
        return sum(_indexed_scalars(x, path + (k,), indexes) for k, x in v.items())
    if t is list:
        return sum(_indexed_scalars(x, path + (i,), indexes) for i, x in enumerate(v))
    return 1 if indexes(path) else 0


# ---- item operations -----------------------------------------------------------------------
# round(x, 2) costs more than the rest of a charge (a correctly rounded decimal conversion), and
# items of one size come again and again: point charges are remembered by their arguments.


@functools.lru_cache(maxsize=CHARGES_CACHE_MAX_ENTRIES)
def read(nbytes: int) -> float:
    """A point read of an item of nbytes (a miss costs the same as a 1 KB read)."""
    return round(READ_RU_BASE + READ_RU_PER_KB * _kb_over_first(nbytes), 2)


@functools.lru_cache(maxsize=CHARGES_CACHE_MAX_ENTRIES)
def write(nbytes: int, terms: int = TYPICAL_TERMS) -> float:
    """Creating an item of nbytes with `terms` index terms."""
    return round(WRITE_RU_BASE + WRITE_RU_PER_KB * _kb_over_first(nbytes) + INDEX_RU_PER_TERM * terms, 2)


def replace(nbytes: int, terms: int = TYPICAL_TERMS) -> float:
    """Replacing an item with a new version of nbytes and `terms` index terms."""
    return round(write(nbytes, terms) + REPLACE_RU_BASE + INDEX_RU_PER_TERM * terms, 2)


def delete(nbytes: int = KB, terms: int = TYPICAL_TERMS) -> float:
    """Deleting an item of nbytes with `terms` index terms."""
    return write(nbytes, terms)


def staged(writer) -> float:
    """The charge of everything a core Writer has staged for its commit (one operation, or
    every tombstone of a delete by partition key), computed before anything is applied."""
    pending = writer.pending
    if len(pending) == 1:                   # one operation: its charge is already rounded
        for v in pending.values():
            return _staged(writer, v) if v.lsn == writer.lsn else 0.0
    return round(sum(_staged(writer, v) for v in pending.values() if v.lsn == writer.lsn), 2)


def staged_key(writer, key: tuple) -> float:
    """The charge of the version a Writer has staged under key (e.g. one operation of a batch)."""
    return _staged(writer, writer.pending[key])


def _staged(writer, v) -> float:
    """The charge of one Version the Writer staged: a create, a replace or (a tombstone) a
    delete, which costs as much as creating the item it deletes (its stored size when the store
    still has it as the tombstone found it)."""
    policy = writer.container.definition.get("indexingPolicy")
    if v.deleted:
        prev = writer.rs.store.latest(v.key)
        if prev is not None and prev.lsn == v.prev_lsn and prev.body is not None:
            old_nbytes = len(prev.body)
        else:
            old_nbytes = len(jsontext.dumps_bytes(v.doc))
        return delete(old_nbytes, index_terms(v.doc, policy))
    body = v.body
    terms = index_terms(v.doc, policy, body, STAGED_SYSTEM_PROPERTIES)
    return replace(len(body), terms) if v.op == "replace" else write(len(body), terms)


def staged_count(writer) -> int:
    """Items a Writer's commit touches (its credits)."""
    pending = writer.pending
    if len(pending) == 1:
        for v in pending.values():
            return 1 if v.lsn == writer.lsn else 0
    return sum(1 for v in pending.values() if v.lsn == writer.lsn)


# ---- feeds and queries ---------------------------------------------------------------------
def feed(items: int, nbytes: int) -> float:
    """A read-feed or change-feed page returning `items` items of nbytes in all."""
    return round(FEED_RU_BASE + FEED_RU_PER_ITEM * items + FEED_RU_PER_KB * (nbytes / KB), 2)


def query(loaded: int, returned: int, nbytes: int) -> float:
    """A query page that loaded `loaded` documents and returned `returned` results of nbytes."""
    return round(QUERY_RU_BASE + QUERY_RU_PER_DOC_LOADED * loaded + QUERY_RU_PER_DOC_RETURNED * returned
                 + QUERY_RU_PER_KB_RETURNED * (nbytes / KB), 2)
