"""Secondary indexes of one VersionStore: (path, value) -> the versions holding that value.

Theory of operation: a `PathIndex` maps the sort key of the value found at one document path
(`values.sort_key`, the query engine's cross-type order: undefined < null < false < true <
numbers < strings < arrays < objects) to the set of `Version`s whose document holds it, in a
SortedDict. A range scan therefore stays inside one type (the sort keys of a type are
bracketed by `(tag,)` and `(tag + 1,)`), and walking the keys in order is walking ORDER BY
order. A version that lacks the path is filed under undefined, so ORDER BY walks meet the
rows the engine sorts first.

MVCC: the store is shared by replicas at different LSNs, so the index files *every* live
(non-tombstone) version the store retains, whatever LSN it carries. A reader at LSN L
accepts an entry only when `store.get(key, L) is version`: the version is exactly the one L
sees. A stale entry (superseded at L, or above L) can only cost a look-up, never change a
result; and because the visible version is itself filed under its own value, no visible
match is ever missed.

Invariants (checked by tests/unit/core/test_index.py):
* each PathIndex holds exactly the live versions the store retains, once each: the store
  calls `add` for every live version it adds and `discard` for every version it prunes or
  truncates, so memory stays at one entry per retained live version per indexed path;
* an index is materialised for a path only on demand (`materialise`, called by the query
  planner when the container's indexing policy includes the path), at most
  INDEXED_PATHS_PER_STORE_MAX per store. A store with no index pays one `is None` test per write.
* building is bounded: a new index files the store's existing versions INDEX_BUILD_STEP_VERSIONS
  per `materialise` call (every query that wants it advances it; the gateway also finishes it
  a step per event-loop turn, gateway/queries.build_in_background), and is not `ready` until
  it has filed them all; the planner scans meanwhile. So the first indexed query on a million
  items costs one step, not a stop of every region's loop for seconds. While it builds, writes
  file their versions at once (add is idempotent, so a version filed by both counts once).

Who changes what: only the VersionStore calls add/discard; only the planner materialises.
"""
from __future__ import annotations

from itertools import islice

from sortedcontainers import SortedDict

from .query.evaluate import index_value
from .query.values import UNDEFINED, sort_key
from .limits import INDEXED_PATHS_PER_STORE_MAX

INDEX_BUILD_STEP_VERSIONS = 500   # versions a building index files per query (~5 ms of CPU here)


def value_at(doc: dict, path: tuple):
    """The value at path under the query language's member rules (undefined when absent)."""
    if len(path) == 1 and type(path[0]) is str:
        return doc.get(path[0], UNDEFINED)
    value = doc
    for step in path:
        value = index_value(value, step)
    return value


def _reader(path: tuple):
    """value_at(doc, path) specialised for path: writes run this once per indexed path."""
    if all(type(step) is str for step in path):
        def read_names(doc):
            value = doc
            for name in path:
                if type(value) is not dict:
                    return UNDEFINED
                value = value.get(name, UNDEFINED)
            return value
        return read_names
    return lambda doc: value_at(doc, path)


class PathIndex:
    """sort key of the value at `path` -> set of versions holding it."""
    __slots__ = ("path", "entries", "size", "_read", "pending")

    def __init__(self, path: tuple):
        self.path = path
        self.entries = SortedDict()
        self.size = 0                 # versions filed, over all keys
        self._read = _reader(path)
        self.pending = None           # keys whose versions are still to file; None: complete

    @property
    def ready(self) -> bool:
        return self.pending is None

    def add(self, version) -> None:
        key = sort_key(self._read(version.doc))
        group = self.entries.get(key)
        if group is None:
            self.entries[key] = {version}
        elif version in group:
            return
        else:
            group.add(version)
        self.size += 1

    def discard(self, version) -> None:
        key = sort_key(self._read(version.doc))
        group = self.entries.get(key)
        if group is None or version not in group:
            return
        group.remove(version)
        self.size -= 1
        if not group:
            del self.entries[key]

    def group(self, key) -> set:
        """The versions whose value has this sort key (json equality: 1 and 1.0 share one)."""
        return self.entries.get(key, ())

    def between(self, low, high, inclusive: tuple, most: int | None = None) -> list:
        """The groups (at most `most`) whose sort keys lie between two sort keys, in order."""
        entries = self.entries
        return [entries[k] for k in islice(entries.irange(low, high, inclusive), most)]

    def ordered(self, descending: bool):
        """Every (sort key, group) in ORDER BY order."""
        entries = self.entries
        return ((k, entries[k]) for k in entries.irange(reverse=descending))


class SecondaryIndexes:
    """The materialised PathIndexes of one store."""
    __slots__ = ("paths",)

    def __init__(self):
        self.paths: dict[tuple, PathIndex] = {}

    def add(self, version) -> None:
        for index in self.paths.values():
            index.add(version)

    def discard(self, versions) -> None:
        for v in versions:
            if not v.deleted:
                for index in self.paths.values():
                    index.discard(v)

    def drop(self, path: tuple) -> None:
        self.paths.pop(path, None)


def materialise(store, path: tuple, step_versions: int = INDEX_BUILD_STEP_VERSIONS) -> PathIndex | None:
    """The store's index of path, advanced by one build step if it is still building (see
    `ready`); None when the store already indexes INDEXED_PATHS_PER_STORE_MAX other paths."""
    indexes = store.indexes
    if indexes is None:
        indexes = store.indexes = SecondaryIndexes()
    index = indexes.paths.get(path)
    if index is None:
        if len(indexes.paths) >= INDEXED_PATHS_PER_STORE_MAX:
            return None
        indexes.paths[path] = index = PathIndex(path)
        index.pending = store.retained_keys()
    if index.pending is not None:
        build_step(store, index, step_versions)
    return index


def build_step(store, index: PathIndex, step_versions: int) -> None:
    """File the current versions of pending keys, about step_versions of them."""
    pending, filed = index.pending, 0
    while pending and filed < step_versions:
        for v in store.versions_of_key(pending.pop()):
            if not v.deleted:
                index.add(v)
                filed += 1
    if not pending:
        index.pending = None
