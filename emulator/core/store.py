"""Item versions of one physical partition in one region, shared by its four replicas.

Theory of operation: every committed write produces immutable `Version`s (the document as
stored, its serialised body, etag, timestamp, or a tombstone) stamped with the write's LSN.
A replica's state is just the LSN it has applied up to; what it "has" is, per item, the newest
version with `lsn <= that LSN`. So the twelve replicas of a three-region account cost little
more memory than one copy, and replicating a write is moving a number.

Invariants:
* per key, versions are kept in strictly increasing LSN order;
* a version is dropped only when no reader can see it any more: it is older than the newest
  version visible at the lowest LSN any replica is read at (`ReplicaSet.floor_lsn`: the
  lowest applied LSN, capped by the committed LSN);
* `truncate_after(lsn)` removes versions above lsn (a primary that lost its unacknowledged
  tail in an election); nothing acknowledged is ever above the new primary's LSN.

Keys are (partition key JSON, id): ids are unique per logical partition. The key order is what
read-feed paging walks, so a continuation is just the last key returned. Versions live in a
plain dict: a key's value is its one Version, or a list of its versions (oldest first) while
it has several, which is rare (a newer version supersedes an older one that a slow replica or
a snapshot can still see). Most items hold one version, and a list for each of them in every
region's store would be objects the garbage collector walks on every full collection. The
sorted key list is brought up to date only when something walks keys in order
(a scan, a count by prefix), or once UNSORTED_KEYS_MAX new keys wait in `_unsorted`: a write
does not pay for an ordered insert in every region's store, and the first ordered walk after a
bulk load does not sort a million keys while every region's loop waits (0.6 s per 250k keys
here), since no more than UNSORTED_KEYS_MAX (about 4 ms of work) ever wait. Every key of `_items` is in `_sorted` or in
`_unsorted`; `_unsorted` is a plain list (8 bytes a key, where a set takes 30-60), so it may
also hold a key dropped since, or a key twice: the merge skips those. The merge sorts the new
keys and puts each run of them that falls into one of the SortedList's sublists in at once
(`insert_sorted`): SortedList.update would add them one by one into a large list.

The change feed walks an append-only log of (lsn, key) for every live version in LSN order,
kept as two parallel sequences, `_change_lsns` (an array of 8-byte integers) and `_change_keys`
(the key tuples the items dict already holds): 16 bytes an entry, where an (lsn, key) tuple
costs 64 and is one more object. An entry is current when the key's version visible at the
reader's LSN is exactly that one; stale entries (superseded versions) are skipped, and the log
is compacted to one entry per live key once stale ones outnumber live ones
(CHANGES_SLACK_ENTRIES of slack).

What the garbage collector sees. A full collection walks every tracked object not frozen (see
runtime/collector.py), and each stored item is one Version, so a store of a million items would be
a million objects to walk. But a settled Version holds atoms only (ints, strings, bytes, None, and
tuples of those: its key and prev_id), so it can never be part of a reference cycle, which is
exactly why CPython untracks a tuple or dict of atoms; `settle` untracks the Version the same way
(memory.untrack: the C call the collector itself uses, which the runtime installs), and a create
leaves nothing for a collection to walk. What holds settled versions for long must then stay
tracked for good: a plain dict whose values and keys are all untracked is untracked by the next
full collection, and the next insert of a fresh (still tracked) key tracks it again *in the
youngest generation*, so young collections would walk all its entries. `_items` and the
container's rid index are therefore `TrackedDict`s, which the collector never untracks (it
untracks exact dicts only).

Secondary indexes (index.py) live in `indexes`, None until a query planner materialises one;
every version added, pruned or truncated here is reported to them, so they hold exactly the
live versions retained.
"""
import bisect
import json
from array import array

from sortedcontainers import SortedList

from . import memory

CHANGES_SLACK_ENTRIES = 1024
UNSORTED_KEYS_MAX = 2048          # new keys merged into the sorted list at once (~4 ms of work)


def _lsn_key_of(v) -> tuple:
    return v.lsn, v.key


class TrackedDict(dict):
    """A dict the collector never untracks (it untracks exact dicts only): for the long-lived
    maps of settled versions, which would otherwise flip between untracked and the youngest
    generation (module docstring)."""
    __slots__ = ()


def _untrack_if_atoms(v: "Version") -> None:
    """Untrack v when it holds atoms only: every slot but `_doc` always does, and `_doc` is
    None or bytes once settled (a tombstone may keep the deleted document as a dict)."""
    if type(v._doc) is not dict:
        memory.untrack(v)


class Version:
    """One immutable state of an item. A tombstone (deleted=True) keeps the deleted document for
    the all-versions change feed; `op` is create, replace or delete and `prev_lsn` the LSN of the
    version it superseded (0 for a create).

    A live version holds its document only as `body`, the JSON it is served as: the parsed
    document (`doc`) is made again from it when something needs its values (a query, a patch,
    an index), since a parsed document takes about twice the memory of its text. The Writer
    that stages a version hands it the document it already has (`_doc`), so the charge and the
    write region's indexes do not parse it again, and drops it once the commit is in the
    store (`settle`). A tombstone's `_doc` is the deleted document or its JSON.

    For the same reason a settled live version keeps no etag string of its own: the body holds
    it as its `_etag` property (documents.Writer writes the system properties last, so the last
    `"_etag":"` in the body is that one; inside a JSON string a quote is always escaped), and
    `etag` reads it from there. `ts` is `ts_ms // 1000`.

    A settled version is immutable and holds atoms only, so it is untracked by the garbage
    collector (module docstring); nothing may give it a container later."""
    __slots__ = ("lsn", "key", "_doc", "body", "_etag", "deleted", "rid", "op", "prev_lsn",
                 "origin", "oseq", "ts_ms", "prev_id")

    def __init__(self, lsn: int, key: tuple, doc: dict | bytes | None, body: bytes | None,
                 etag: str, ts: int, rid: str, deleted: bool = False, op: str = "create",
                 prev_lsn: int = 0, origin: str = "", oseq: int = 0, ts_ms: int = 0,
                 prev_id: tuple | None = None):
        # Where the write was accepted, its sequence number among that region's writes, and its
        # millisecond timestamp: what multi-write conflict resolution and session vectors use.
        self.origin = origin
        self.oseq = oseq
        self.ts_ms = ts_ms or ts * 1000
        self.prev_id = prev_id            # (origin, oseq) of the version this one superseded
        self.op = op
        self.prev_lsn = prev_lsn
        self.lsn = lsn
        self.key = key
        self._doc = doc
        self.body = body
        self._etag = etag
        self.rid = rid
        self.deleted = deleted

    @property
    def doc(self) -> dict | None:
        """The document (a new dict each time once settled: callers must not rely on identity)."""
        doc = self._doc
        if doc is None:
            return None if self.body is None else json.loads(self.body)
        if type(doc) is bytes:
            return json.loads(doc)
        return doc

    @property
    def etag(self) -> str:
        etag = self._etag
        return etag_in(self.body) if etag is None else etag

    @property
    def ts(self) -> int:
        return self.ts_ms // 1000

    def settle(self) -> None:
        """Forget the staged document and the etag: from now on both come from the body, which
        the caller guarantees holds this etag as its `_etag` (a body documents.Writer made).
        From then on the collector does not track it (see the class docstring)."""
        if not self.deleted:
            self._doc = None
            self._etag = None
        _untrack_if_atoms(self)

    def with_lsn(self, lsn: int) -> "Version":
        v = Version(lsn, self.key, self._doc, self.body, self._etag, 0, self.rid, self.deleted,
                    self.op, self.prev_lsn, self.origin, self.oseq, self.ts_ms, self.prev_id)
        if self._etag is None:          # a copy of a settled version is settled too
            _untrack_if_atoms(v)
        return v


# The _etag member as the body holds it, "_etag":"\"<etag>\"", up to the backslash of the
# etag's escaped opening quote; and what follows the etag: its escaped closing quote, then the
# end of the JSON string.
_ETAG_MEMBER_HEAD = b'"_etag":"\\'
_ETAG_TAIL = b'\\""'


def etag_in(body: bytes) -> str | None:
    """The etag a settled version's body holds (see Version); None when it has none. (Two
    partitions: each takes its one argument without the argument parsing that find's and
    index's optional bounds cost, about 1.7 k instructions of every read.)"""
    _, found, rest = body.rpartition(_ETAG_MEMBER_HEAD)
    if not found:
        return None
    return rest.partition(_ETAG_TAIL)[0].decode() + '"'


class VersionStore:
    __slots__ = ("_items", "_sorted", "_unsorted", "count_live", "_change_lsns", "_change_keys", "indexes")

    def __init__(self):
        self._items = TrackedDict()       # key -> its Version, or its versions oldest first
        self._sorted = SortedList()       # the keys in order, except those in _unsorted
        self._unsorted: list = []         # keys added since the last ordered walk (see above)
        self.count_live = 0
        self._change_lsns = array("q")    # the change log's LSNs, in order; see the module docstring
        self._change_keys: list = []      # its keys, one per LSN
        self.indexes = None              # index.SecondaryIndexes once a path is indexed

    def add(self, version: Version, floor_lsn: int) -> None:
        key = version.key
        if not version.deleted:
            self._change_keys.append(key)
            self._change_lsns.append(version.lsn)
            if self.indexes is not None:
                self.indexes.add(version)
        entry = self._items.get(key)
        if entry is None:
            if not version.deleted:
                self._items[key] = version
                unsorted = self._unsorted
                unsorted.append(key)
                if len(unsorted) >= UNSORTED_KEYS_MAX:
                    self._keys_in_order()
                self.count_live += 1
        else:
            if type(entry) is Version:
                prev = entry
                versions = [entry, version]
            else:
                prev = entry[-1]
                versions = entry
                versions.append(version)
            if prev.deleted and not version.deleted:
                self.count_live += 1
            elif version.deleted and not prev.deleted:
                self.count_live -= 1
            self._prune(key, versions, floor_lsn)
        # Compact only once the version is in place: compacting rebuilds the log from the
        # newest item of every key, so done before, it filed this key at its previous LSN and
        # the change feed never showed this write.
        if not version.deleted and len(self._change_keys) > 2 * self.count_live + CHANGES_SLACK_ENTRIES:
            self._compact_changes()

    def put(self, version: Version, floor_of) -> None:
        """add(version, floor_of()), with floor_of called only when the key is already here (a
        brand-new key prunes nothing, and the floor takes a walk over replicas and regions).
        A live version of a new key (every create) goes in here at once."""
        key = version.key
        items = self._items
        if version.deleted or key in items:
            self.add(version, floor_of() if key in items else 0)
            return
        change_keys = self._change_keys
        change_keys.append(key)
        self._change_lsns.append(version.lsn)
        if self.indexes is not None:
            self.indexes.add(version)
        items[key] = version
        unsorted = self._unsorted
        unsorted.append(key)
        if len(unsorted) >= UNSORTED_KEYS_MAX:
            self._keys_in_order()
        self.count_live = live = self.count_live + 1
        if len(change_keys) > 2 * live + CHANGES_SLACK_ENTRIES:
            self._compact_changes()

    def add_new(self, versions) -> bool:
        """Add a commit's versions in one step when every one is a live version of a key the
        store does not hold (a batch of creates: most of a bulk load), as add() one by one would;
        False, adding nothing, otherwise. The versions of one commit have distinct keys."""
        items = self._items
        keys = [v.key for v in versions if not v.deleted]
        if len(keys) != len(versions) or any(map(items.__contains__, keys)):
            return False
        if len(self._change_keys) + 1 > 2 * (self.count_live + 1) + CHANGES_SLACK_ENTRIES:
            # The first key's add() would compact the change log (deletes left it long), and
            # then file the rest after it in commit order: add() one by one does exactly that.
            # Otherwise no add() of this commit compacts (each adds one entry and one live key).
            return False
        if self.indexes is not None:
            for v in versions:
                self.indexes.add(v)
        items.update(zip(keys, versions))
        self._change_keys.extend(keys)
        self._change_lsns.extend([v.lsn for v in versions])
        self.count_live += len(keys)
        unsorted = self._unsorted
        unsorted.extend(keys)
        if len(unsorted) >= UNSORTED_KEYS_MAX:
            self._keys_in_order()
        return True

    def _prune(self, key, versions: list, floor_lsn: int) -> None:
        # Keep the newest version visible at floor_lsn and everything after it.
        keep_from = 0
        for i in range(len(versions) - 1, -1, -1):
            if versions[i].lsn <= floor_lsn:
                keep_from = i
                break
        if keep_from:
            if self.indexes is not None:
                self.indexes.discard(versions[:keep_from])
            del versions[:keep_from]
        if len(versions) == 1:
            only = versions[0]
            if only.deleted and only.lsn <= floor_lsn:
                self._drop_key(key)
            else:
                self._items[key] = only
        else:
            self._items[key] = versions

    def _drop_key(self, key: tuple) -> None:
        del self._items[key]
        # A key still in _unsorted stays there, stale, until the next ordered walk or compaction.
        if key in self._sorted:
            self._sorted.remove(key)

    def _fresh_unsorted(self) -> list:
        """The keys of _unsorted still held, once each, in key order. None of them is in
        _sorted: a key joins _unsorted only when _items lacks it, _sorted holds only keys of
        _items (_drop_key takes them out of both), and a merge empties _unsorted."""
        items = self._items
        fresh = [k for k in dict.fromkeys(self._unsorted) if k in items]
        fresh.sort()
        return fresh

    def _keys_in_order(self) -> SortedList:
        if self._unsorted:
            insert_sorted(self._sorted, self._fresh_unsorted())
            self._unsorted = []
        return self._sorted

    def get(self, key: tuple, lsn: int) -> Version | None:
        """The live version of key visible at lsn, or None."""
        entry = self._items.get(key)
        if entry is None:
            return None
        if type(entry) is Version:
            return entry if entry.lsn <= lsn and not entry.deleted else None
        for i in range(len(entry) - 1, -1, -1):
            v = entry[i]
            if v.lsn <= lsn:
                return None if v.deleted else v
        return None

    def has(self, key: tuple) -> bool:
        return key in self._items

    def newest(self, key: tuple) -> Version | None:
        """The newest version of key, a tombstone included."""
        entry = self._items.get(key)
        return entry if entry is None or type(entry) is Version else entry[-1]

    def latest(self, key: tuple) -> Version | None:
        entry = self._items.get(key)
        if entry is None:
            return None
        v = entry if type(entry) is Version else entry[-1]
        return None if v.deleted else v

    def scan(self, lsn: int, after_key: tuple | None = None, prefix: str | None = None):
        """Live versions visible at lsn in key order, starting after `after_key`.
        With `prefix`, only keys of that partition key (JSON) are visited."""
        items = self._items
        ordered = self._keys_in_order()
        if prefix is not None:
            start = (prefix, "") if after_key is None else after_key
            keys = ordered.irange(minimum=start, inclusive=(after_key is None, False))
        elif after_key is None:
            keys = ordered
        else:
            keys = ordered.irange(minimum=after_key, inclusive=(False, False))
        for key in keys:
            if prefix is not None and key[0] != prefix:
                break
            v = items[key]
            if type(v) is not Version:
                v = v[-1]
            if v.lsn > lsn:                 # rare: a newer version than the reader sees
                v = self.get(key, lsn)
                if v is not None:
                    yield v
            elif not v.deleted:
                yield v

    def _compact_changes(self) -> None:
        live = [(v.lsn, key) for key, v in map(_newest_item, self._items.items()) if not v.deleted]
        live.sort()
        self._set_changes(live)

    def _set_changes(self, changes: list) -> None:
        self._change_lsns = array("q", [lsn for lsn, _ in changes])
        self._change_keys = [key for _, key in changes]

    @property
    def changes(self) -> list:
        """The change log as (lsn, key) pairs in LSN order (a copy, for tests and tools)."""
        return list(zip(self._change_lsns, self._change_keys))

    def changes_after(self, after_lsn: int, upto_lsn: int):
        """Live versions visible at upto_lsn whose LSN is in (after_lsn, upto_lsn], in LSN order."""
        lsns, keys = self._change_lsns, self._change_keys
        i = bisect.bisect_right(lsns, after_lsn)
        get = self.get
        for j in range(i, len(lsns)):
            lsn = lsns[j]
            if lsn > upto_lsn:
                break
            v = get(keys[j], upto_lsn)
            if v is not None and v.lsn == lsn:
                yield v

    def truncate_after(self, lsn: int) -> None:
        self._set_changes([c for c in zip(self._change_lsns, self._change_keys) if c[0] <= lsn])

        dead = []
        indexes = self.indexes
        items = self._items
        for key, entry in list(items.items()):
            versions = [entry] if type(entry) is Version else entry
            if versions[-1].lsn <= lsn:
                continue
            while versions and versions[-1].lsn > lsn:
                v = versions.pop()
                if indexes is not None:
                    indexes.discard((v,))
            if not versions:
                dead.append(key)
            else:
                items[key] = versions[0] if len(versions) == 1 else versions
        for key in dead:
            self._drop_key(key)
        self.count_live = sum(1 for _, v in map(_newest_item, items.items()) if not v.deleted)

    def versions_above(self, lsn: int) -> list:
        """Every retained version (tombstones included) with an LSN above lsn, in (LSN, key)
        order. Nothing above the replica set's floor is ever pruned, so above it this is the
        whole history, however long ago the log stopped retaining it."""
        out = []
        for entry in self._items.values():
            if type(entry) is Version:
                if entry.lsn > lsn:
                    out.append(entry)
                continue
            for i in range(len(entry) - 1, -1, -1):
                if entry[i].lsn <= lsn:
                    break
                out.append(entry[i])
        out.sort(key=_lsn_key_of)
        return out

    def changed_since(self, after_lsn: int, upto_lsn: int) -> list:
        """Per key changed in (after_lsn, upto_lsn], its newest version up to upto_lsn (a
        tombstone for a key deleted there), in (LSN, key) order: the state transfer that
        brings a reader at after_lsn to upto_lsn."""
        out = []
        for entry in self._items.values():
            for v in reversed(versions_of(entry)):
                if v.lsn <= upto_lsn:
                    if v.lsn > after_lsn:
                        out.append(v)
                    break
        out.sort(key=_lsn_key_of)
        return out

    def key_count(self, prefix: str | None = None) -> int:
        """Keys retained (live or not), all of them or those of one partition key (JSON)."""
        if prefix is None:
            return len(self._items)
        # (prefix,) sorts before every key of prefix; (prefix + "\0",) after all of them.
        ordered = self._keys_in_order()
        return ordered.bisect_left((prefix + "\0",)) - ordered.bisect_left((prefix,))

    def retained_keys(self) -> list:
        """Every retained key, in no particular order (a building index's worklist)."""
        return list(self._items)

    def versions_of_key(self, key) -> tuple | list:
        """The versions a key holds now, oldest first; () when the store no longer has it."""
        entry = self._items.get(key)
        return () if entry is None else versions_of(entry)

    def keys_with_versions(self):
        """(key, versions oldest first) of every retained key, in key order."""
        items = self._items
        return [(key, versions_of(items[key])) for key in self._keys_in_order()]


def insert_sorted(ordered: SortedList, values: list) -> None:
    """ordered.update(values), for values in order and none of them in ordered already. Once the
    list is large, update() adds its values one at a time (a bisect and an insert each, in
    Python: ~4 us a key here, in every region's store); this puts each run of values that falls
    into one of the list's sublists in at once (one slice assignment when no old key lies inside
    the run, as when new ids follow a partition key's last one), then splits what grew too long,
    as SortedList itself does."""
    lists, maxes = getattr(ordered, "_lists", None), getattr(ordered, "_maxes", None)
    if not maxes or len(values) * 4 >= len(ordered) or lists is None:
        ordered.update(values)           # small: update re-sorts it whole, in C
        return
    load = ordered._load
    i, n = 0, len(values)
    while i < n:
        pos = bisect.bisect_right(maxes, values[i])
        if pos == len(maxes):            # past every sublist's maximum: the rest go to the last
            pos -= 1
            j = n
        else:
            j = bisect.bisect_left(values, maxes[pos], i)
        sub = lists[pos]
        run = values[i:j]
        at = bisect.bisect_left(sub, run[0])
        if at == len(sub) or run[-1] < sub[at]:
            sub[at:at] = run             # the whole run between two neighbours: the usual case
        else:
            for value in run:
                bisect.insort(sub, value)
        maxes[pos] = sub[-1]
        while len(sub) > load << 1:      # SortedList._expand's split, as often as it takes
            half = sub[load:]
            del sub[load:]
            maxes[pos] = sub[-1]
            lists.insert(pos + 1, half)
            maxes.insert(pos + 1, half[-1])
            pos += 1
            sub = half
        i = j
    ordered._len += n
    del ordered._index[:]                # positions moved: rebuilt when next asked for


def versions_of(entry) -> tuple | list:
    """All versions of an entry that holds one Version or a list of them, oldest first."""
    return (entry,) if type(entry) is Version else entry


def _newest_item(item: tuple) -> tuple:
    """(key, newest version) of an (key, entry) item of VersionStore._items."""
    key, entry = item
    return key, entry if type(entry) is Version else entry[-1]
