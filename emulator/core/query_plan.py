"""Choosing which documents of one store a query must look at, from its secondary indexes.

Theory of operation: a compiled query carries index hints (query/hints.py): top-level AND-ed
`path op constant` terms and its ORDER BY paths. `candidates` turns them into the versions
visible at a reader's LSN that *could* produce a result, or None to mean "scan everything".
The caller still runs the whole query on what it gets, so an index can only save work, never
change a result; the set returned is always a superset of the documents that pass WHERE (or,
for an ORDER BY walk, of those that decide the first rows), in store key order so the
engine's stable sort breaks ties exactly as it does on a scan.

Plans, cheapest first by estimated documents loaded:
* filter: the most selective hinted path: `=` and `IN` read one group per value; `<`, `<=`,
  `>`, `>=` (BETWEEN gives two) on one path combine into one range inside the constants' type;
* ORDER BY walk: when only the first k rows in ORDER BY order decide the results (TOP, LIMIT or
  the gateway's page cap; `CompiledQuery.rows_needed`), walk the first ORDER BY path's index
  in that order, keep visible documents that pass WHERE, and stop after the group in which
  the k-th one was found (ties at the boundary are all kept). The walk gives up, falling back
  to the filter or the scan, once it has examined as many entries as those would load.
  `merged_walk` walks the indexes of all the partitions a query reads as one ordered stream,
  so TOP k loads about k documents in all; each partition's candidates still come back in its
  own key order, and the caller keeps partition order, so ties break as on a scan;
* scan: when no index beats reading the documents in scope (SCAN_SMALL_DOCS or fewer, no
  eligible path, or an index would load more than 1/INDEX_COST_FACTOR of the scope).
A path is eligible when the container's indexing policy includes it; its index is built on
first use (index.materialise). `PlanTuning` holds the two cost thresholds; tests pass
ALWAYS_INDEX to take an index whenever one applies. Pure: reads the store, changes only its
indexes.
"""
from __future__ import annotations

import heapq
from typing import NamedTuple

from .index import materialise
from .index_policy import policy_of
from .query.values import TAG_ARRAY, TAG_NULL, TAG_UNDEFINED, sort_key, tag_of
from .limits import QUERY_SHAPES_CACHE_MAX_ENTRIES

SCAN_SMALL_DOCS = 64        # documents in scope at or below which a scan is always chosen
INDEX_COST_FACTOR = 2       # an index candidate costs about this many scanned documents
RANGE_OPS = frozenset({"<", "<=", ">", ">="})
FILTER_OPS = RANGE_OPS | {"=", "in"}
UNLIMITED = float("inf")

_shapes: dict = {}          # id(compiled query) -> (query, shape); see _shape_of


class PlanTuning(NamedTuple):
    small_docs: int = SCAN_SMALL_DOCS
    cost_factor: int = INDEX_COST_FACTOR     # 0: an index always beats a scan


DEFAULT_TUNING = PlanTuning()
ALWAYS_INDEX = PlanTuning(small_docs=0, cost_factor=0)


class Selection:
    """The versions a query must look at, in key order, and how many documents were loaded
    (read and tested) to choose them."""
    __slots__ = ("versions", "loaded", "plan")

    def __init__(self, versions: list, loaded: int, plan: str):
        self.versions = versions
        self.loaded = loaded
        self.plan = plan


def candidates(query, store, lsn: int, policy: dict | None, now_ms: int, prefix: str | None = None,
               accept=None, cap: int | None = None, tuning: PlanTuning = DEFAULT_TUNING,
               implied: tuple = ()) -> Selection | None:
    """Versions of store visible at lsn (of partition key `prefix` when given, and whose key
    `accept(key)` allows) that may matter to query; None when a full scan is the better plan.
    Hints on `implied` paths are ignored: the scope already fixes their values (the partition
    key paths under a partition-key scope), so their index would select the whole scope."""
    prepared = _prepare(query, store, policy, prefix, tuning, implied)
    if prepared is None:
        return None
    indexes, best, budget = prepared
    keep = _keeper(prefix, accept)
    order = query.leading_order
    if order is not None and order.path in indexes:
        walked = _walk(query, [(store, lsn, indexes[order.path])], keep, now_ms, cap, budget)
        if walked is not None:
            return walked[0]
    if best is None:
        return None
    return _collect(best[1], store, lsn, keep)


def merged_walk(query, sources: list, policy: dict | None, now_ms: int, prefix: str | None = None,
                accept=None, cap: int | None = None, tuning: PlanTuning = DEFAULT_TUNING,
                implied: tuple = ()) -> list | None:
    """One Selection per (store, lsn) of `sources` (the physical partitions one query reads, in
    the order it reads them), from a single ORDER BY walk over all their indexes merged: it
    stops once the rows needed pass WHERE across all stores together, so TOP k loads about k
    documents rather than k per store. None when some store would not walk its index (see
    candidates) or the walk passes the stores' combined budget; plan each store alone then."""
    order = query.leading_order
    if order is None or query.rows_needed(cap) is None:
        return None
    walks, budget = [], 0
    for store, lsn in sources:
        prepared = _prepare(query, store, policy, prefix, tuning, implied)
        if prepared is None or order.path not in prepared[0]:
            return None
        budget += prepared[2]
        walks.append((store, lsn, prepared[0][order.path]))
    return _walk(query, walks, _keeper(prefix, accept), now_ms, cap, budget)


def _prepare(query, store, policy, prefix, tuning: PlanTuning, implied: tuple):
    """(indexes by path, best filter or None, walk budget) of query on store; None to scan."""
    selectors, paths = _shape_of(query)
    if implied:
        paths = tuple(p for p in paths if p not in implied)
    if not paths:
        return None
    scope = store.key_count(prefix)
    if scope <= tuning.small_docs:
        return None
    compiled = policy_of(policy)
    indexes = {}
    for path in paths:
        if compiled.indexes(path):
            index = materialise(store, path)
            if index is not None and index.ready:      # a building index: scan this time
                indexes[path] = index
    if not indexes:
        return None
    factor = tuning.cost_factor
    best = _best_filter(selectors, indexes, scope // factor if factor else UNLIMITED)
    if not factor:
        budget = UNLIMITED
    else:
        budget = scope if best is None else best[0] * factor
    return indexes, best, budget


def _keeper(prefix: str | None, accept):
    if prefix is None:
        return accept
    if accept is None:
        return lambda key: key[0] == prefix
    return lambda key: key[0] == prefix and accept(key)


# ---- query shapes ----------------------------------------------------------------------
def _shape_of(query) -> tuple:
    """({path: selector}, paths worth an index) of a compiled query, worked out once per query.
    A selector says which index groups can hold a match, with its sort keys precomputed:
    ("eq", key), ("in", keys), ("range", low, high, inclusive) or ("none",)."""
    entry = _shapes.get(id(query))
    if entry is not None and entry[0] is query:
        return entry[1]
    by_path: dict = {}
    for h in query.index_hints:
        if h.op in FILTER_OPS:
            by_path.setdefault(h.path, []).append(h)
    selectors = {path: _selector(hints) for path, hints in by_path.items()}
    paths = tuple(selectors)
    order = query.leading_order
    if order is not None and order.path not in selectors:
        paths += (order.path,)
    if len(_shapes) >= QUERY_SHAPES_CACHE_MAX_ENTRIES:
        _shapes.clear()
    _shapes[id(query)] = (query, (selectors, paths))
    return selectors, paths


def _selector(hints: list) -> tuple:
    for h in hints:
        if h.op == "=":
            return ("eq", sort_key(h.value))
    for h in hints:
        if h.op == "in":
            return ("in", tuple({sort_key(v): None for v in h.value}))   # IN (1, 1.0): one group
    bounds = _range_bounds([h for h in hints if h.op in RANGE_OPS])
    return ("none",) if bounds is None else ("range", *bounds)


# ---- filter plans ----------------------------------------------------------------------
def _best_filter(selectors: dict, indexes: dict, limit):
    """(index entries, their groups) of the most selective filter with at most limit entries,
    or None."""
    best = None
    for path, index in indexes.items():
        selector = selectors.get(path)
        if selector is None:
            continue
        bound = limit if best is None else best[0] - 1
        count, taken = _take_upto(_groups(index, selector, bound), bound)
        if count <= bound:
            best = (count, taken)
    return best


def _groups(index, selector: tuple, bound):
    """The version groups that can hold a match, in index order; no range reads past the
    group that takes the count over bound (every group holds at least one entry)."""
    kind = selector[0]
    if kind == "eq":
        return (index.group(selector[1]),)
    if kind == "in":
        return [index.group(key) for key in selector[1]]
    if kind == "range":
        return index.between(*selector[1:], most=None if bound == UNLIMITED else bound + 1)
    return ()


def _range_bounds(ranges: list):
    """(low, high, inclusive) sort keys covering every value that passes all range hints,
    or None when none can (constants of different or unordered types)."""
    tag = tag_of(ranges[0].value)
    if tag in (TAG_UNDEFINED,) or tag >= TAG_ARRAY or any(tag_of(h.value) != tag for h in ranges):
        return None
    if tag == TAG_NULL:
        if any(h.op in ("<", ">") for h in ranges):
            return None
        return sort_key(None), sort_key(None), (True, True)
    low, high, inclusive = (tag,), (tag + 1,), [True, False]
    for h in ranges:
        key = sort_key(h.value)
        if h.op in (">", ">=") and (key > low or (key == low and h.op == ">")):
            low, inclusive[0] = key, h.op == ">="
        elif h.op in ("<", "<=") and (key < high or (key == high and h.op == "<")):
            high, inclusive[1] = key, h.op == "<="
    return low, high, tuple(inclusive)


def _take_upto(groups, bound) -> tuple:
    """(entries, groups) of the leading groups, taking none beyond the one that passes bound."""
    taken, total = [], 0
    for group in groups:
        taken.append(group)
        total += len(group)
        if total > bound:
            break
    return total, taken


def _collect(groups, store, lsn: int, keep) -> Selection:
    get = store.get
    out = []
    for group in groups:
        for v in group:
            if get(v.key, lsn) is v and (keep is None or keep(v.key)):
                out.append(v)
    out.sort(key=_key_of)
    return Selection(out, len(out), "index")


def _key_of(version):
    return version.key


# ---- ORDER BY walk ---------------------------------------------------------------------
def _walk(query, walks: list, keep, now_ms: int, cap, budget):
    """A Selection per (store, lsn, index) of walks: the index groups of all of them merged in
    ORDER BY order, until `rows_needed` visible documents passed WHERE and the sort key moves
    on (the boundary's ties are kept, in every store). None when that examines more than
    budget entries, or when every row may matter."""
    needed = query.rows_needed(cap)
    if needed is None:
        return None
    descending = query.leading_order.op == "order_desc"
    streams = [_tagged(i, index.ordered(descending)) for i, (_, _, index) in enumerate(walks)]
    merged = streams[0] if len(streams) == 1 else heapq.merge(*streams, key=_sort_key_of, reverse=descending)
    matches = query.filter_matches if query.has_filter else None
    outs, loaded = [[] for _ in walks], [0] * len(walks)
    found, examined, boundary = 0, 0, None
    for key, i, group in merged:
        if found >= needed and key != boundary:
            break
        boundary = key
        examined += len(group)
        if examined > budget:
            return None
        store, lsn, _ = walks[i]
        get, out = store.get, outs[i]
        for v in group:
            if get(v.key, lsn) is v and (keep is None or keep(v.key)):
                loaded[i] += 1
                if matches is None or matches(v.doc, now_ms):
                    out.append(v)
                    found += 1
    return [Selection(sorted(out, key=_key_of), n, "order") for out, n in zip(outs, loaded)]


def _tagged(i: int, pairs):
    """(sort key, group) pairs -> (sort key, i, group): which walk each group came from."""
    for key, group in pairs:
        yield key, i, group


def _sort_key_of(item):
    return item[0]
