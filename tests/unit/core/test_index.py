"""Proves that secondary indexes never change a query's result and stay one entry per live
version: a hypothesis state machine writes, replaces and deletes random documents at
increasing LSNs, moves the prune floor, truncates uncommitted tails and materialises indexes
at random moments, and after every step runs random queries at random visible LSNs, with and
without a partition-key scope and a result cap, comparing the engine over the planner's
candidates with the engine over a full scan (the model); a second property does the same for
one ORDER BY walk merged over several partitions. Examples then show, by counting
documents loaded rather than time, that an indexed equality or ORDER BY + TOP on 10,000
documents touches only the candidates, including for a reader at an older LSN.
"""
import json

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from regionlab.emulator.core import query_plan
from regionlab.emulator.core.index import INDEX_BUILD_STEP_VERSIONS, materialise, value_at
from regionlab.emulator.core.query import QueryError, compile_query
from regionlab.emulator.core.query.values import UNDEFINED
from regionlab.emulator.core.query_plan import ALWAYS_INDEX, PlanTuning, candidates
from regionlab.emulator.core.store import Version, VersionStore
from tiers import examples
from regionlab.emulator.core.limits import INDEXED_PATHS_PER_STORE_MAX

MISSING = object()
PKS = ('["a"]', '["b"]')
IDS = tuple(str(i) for i in range(6))
PATHS = (("x",), ("y",), ("o", "z"), ("arr", 0))
PATH_TEXT = {("x",): "c.x", ("y",): "c.y", ("o", "z"): "c.o.z", ("arr", 0): "c.arr[0]"}
SCALARS = [0, 1, 1.0, 2.5, "", "a", None, True, False]
VALUES = st.sampled_from(SCALARS + [MISSING, [1, "a"], {"k": 1}])
TUNINGS = st.sampled_from([ALWAYS_INDEX, ALWAYS_INDEX, ALWAYS_INDEX, PlanTuning(small_docs=0, cost_factor=2)])


# ---- documents -----------------------------------------------------------------------------
@st.composite
def documents(draw):
    doc = {}
    for field in ("x", "y"):
        value = draw(VALUES)
        if value is not MISSING:
            doc[field] = value
    inner = draw(VALUES)
    if inner is not MISSING:
        doc["o"] = {"z": inner}
    first = draw(VALUES)
    if first is not MISSING:
        doc["arr"] = [first, 9]
    return doc


# ---- queries -------------------------------------------------------------------------------
def literal(value) -> str:
    return json.dumps(value)


@st.composite
def conjuncts(draw):
    path = PATH_TEXT[draw(st.sampled_from(PATHS))]
    kind = draw(st.sampled_from(["cmp", "cmp", "cmp", "cmp", "in", "between", "param", "other"]))
    if kind == "cmp":
        op = draw(st.sampled_from(["=", "<", "<=", ">", ">="]))
        value = literal(draw(VALUES.filter(lambda v: v is not MISSING)))
        return f"{value} {op} {path}" if draw(st.booleans()) else f"{path} {op} {value}"
    if kind == "in":
        values = draw(st.lists(st.sampled_from(SCALARS), min_size=1, max_size=3))
        return f"{path} IN ({', '.join(map(literal, values))})"
    if kind == "between":
        low, high = sorted(draw(st.lists(st.sampled_from([0, 1, 2.5]), min_size=2, max_size=2)))
        return f"{path} BETWEEN {low} AND {high}"
    if kind == "param":
        return f"{path} = @p"
    return draw(st.sampled_from([f"IS_DEFINED({path})", f"({path} = 1 OR {path} = 'a')", f"NOT ({path} > 0)"]))


@st.composite
def queries(draw):
    where = draw(st.lists(conjuncts(), min_size=draw(st.sampled_from([0, 1, 1])), max_size=2))
    select = draw(st.sampled_from(["*", "*", "VALUE c.x", "c.x, c.y", "VALUE COUNT(1)", "DISTINCT VALUE c.x"]))
    top = draw(st.sampled_from(["", "", "TOP 1 ", "TOP 3 "]))
    text = f"SELECT {top}{select} FROM c"
    if where:
        text += " WHERE " + " AND ".join(where)
    if "COUNT" not in select and draw(st.booleans()):
        keys = draw(st.lists(st.sampled_from(PATHS), min_size=1, max_size=2, unique=True))
        text += " ORDER BY " + ", ".join(f"{PATH_TEXT[p]} {draw(st.sampled_from(['ASC', 'DESC']))}" for p in keys)
    if not top and "COUNT" not in select and draw(st.booleans()):
        text += f" OFFSET {draw(st.integers(0, 2))} LIMIT {draw(st.integers(0, 3))}"
    params = [{"name": "@p", "value": draw(st.sampled_from(SCALARS))}]
    try:
        return compile_query(text, params)
    except QueryError:
        assume(False)


# ---- the machine ---------------------------------------------------------------------------
class IndexedStore(RuleBasedStateMachine):
    """A store whose indexed answers must equal scan answers at every visible LSN."""

    @initialize(writes=st.lists(st.tuples(st.sampled_from(PKS), st.sampled_from(IDS), documents()),
                                min_size=3, max_size=12))
    def start(self, writes):
        self.store = VersionStore()
        self.lsn = 0
        self.floor = 0
        for pk, id, doc in writes:
            self._add((pk, id), doc, deleted=False)

    def _add(self, key, doc, deleted: bool) -> None:
        self.lsn += 1
        body = json.dumps(doc).encode()
        self.store.add(Version(self.lsn, key, doc, body, f'"{self.lsn}"', self.lsn, f"r{self.lsn}",
                               deleted=deleted, op="delete" if deleted else "create"), self.floor)

    @rule(pk=st.sampled_from(PKS), id=st.sampled_from(IDS), doc=documents())
    def upsert(self, pk, id, doc):
        self._add((pk, id), doc, deleted=False)

    @rule(data=st.data())
    def delete(self, data):
        live = [key for key in self._keys() if self.store.get(key, self.lsn) is not None]
        assume(live)
        key = data.draw(st.sampled_from(live))
        self._add(key, self.store.get(key, self.lsn).doc, deleted=True)

    @rule(data=st.data())
    def advance_floor(self, data):
        self.floor = data.draw(st.integers(self.floor, self.lsn))

    @rule(data=st.data())
    def truncate(self, data):
        self.lsn = data.draw(st.integers(self.floor, self.lsn))
        self.store.truncate_after(self.lsn)

    @precondition(lambda self: self.store.indexes is None or len(self.store.indexes.paths) < len(PATHS))
    @rule(path=st.sampled_from(PATHS))
    def index_path(self, path):
        assert materialise(self.store, path) is not None

    @rule(q=queries(), data=st.data(), tuning=TUNINGS)
    def query(self, q, data, tuning):
        lsn = data.draw(st.integers(self.floor, self.lsn), label="lsn")
        prefix = data.draw(st.sampled_from([None, *PKS]), label="prefix")
        cap = data.draw(st.sampled_from([None, 1, 2, 5]), label="cap")
        scanned = [v.doc for v in self.store.scan(lsn, prefix=prefix)]
        chosen = candidates(q, self.store, lsn, None, 0, prefix=prefix, cap=cap, tuning=tuning)
        docs = scanned if chosen is None else [v.doc for v in chosen.versions]
        assert q.execute(docs, 0, cap) == q.execute(scanned, 0, cap)

    def _keys(self):
        return [key for key, _ in self.store.keys_with_versions()]

    @invariant()
    def index_holds_each_live_version_once(self):
        if self.store.indexes is None:
            return
        live = {id(v) for _, versions in self.store.keys_with_versions() for v in versions if not v.deleted}
        for path, index in self.store.indexes.paths.items():
            filed = [v for group in index.entries.values() for v in group]
            assert len(filed) == index.size == len(live)
            assert {id(v) for v in filed} == live
            assert all(group for group in index.entries.values())


IndexedStore.TestCase.settings = settings(max_examples=examples(150), stateful_step_count=40, deadline=None)
TestIndexedStore = IndexedStore.TestCase


# ---- several partitions walked together ----------------------------------------------------
@st.composite
def ordered_queries(draw):
    keys = draw(st.lists(st.sampled_from(PATHS), min_size=1, max_size=2, unique=True))
    order = ", ".join(f"{PATH_TEXT[p]} {draw(st.sampled_from(['ASC', 'DESC']))}" for p in keys)
    where = draw(st.sampled_from(["", " WHERE IS_DEFINED(c.y)", " WHERE c.x > 0", " WHERE c.o.z != 'a'"]))
    select = draw(st.sampled_from(["*", "c.x, c.y", "TOP 2 *", "TOP 5 c.o"]))
    paging = draw(st.sampled_from(["", " OFFSET 1 LIMIT 2", " OFFSET 0 LIMIT 4"])) if "TOP" not in select else ""
    return compile_query(f"SELECT {select} FROM c{where} ORDER BY {order}{paging}")


@settings(max_examples=examples(300), deadline=None)
@given(parts=st.lists(st.lists(st.tuples(st.sampled_from(IDS), documents()), max_size=12), min_size=2, max_size=4),
       q=ordered_queries(), cap=st.sampled_from([None, 1, 3]), data=st.data())
def test_merged_walk_over_partitions_matches_a_scan(parts, q, cap, data):
    """Stores written with random documents (ids rewritten, so some keys carry several
    versions), each read at a random LSN: the engine over the merged walk's candidates, taken
    store by store, equals the engine over every store's scan, concatenated in the same order."""
    sources = []
    for writes in parts:
        store = VersionStore()
        for lsn, (id, doc) in enumerate(writes, start=1):
            store.add(Version(lsn, ('["a"]', id), doc, b"{}", "e", 0, "r"), 0)
        sources.append((store, data.draw(st.integers(0, len(writes)), label="lsn")))
    scanned = [v.doc for store, lsn in sources for v in store.scan(lsn)]
    chosen = query_plan.merged_walk(q, sources, None, 0, cap=cap, tuning=ALWAYS_INDEX)
    if chosen is None:      # every row may matter (no TOP, LIMIT or cap), or a store is empty
        assert q.rows_needed(cap) is None or any(store.key_count() == 0 for store, _ in sources)
        return
    assert q.execute([v.doc for sel in chosen for v in sel.versions], 0, cap) == q.execute(scanned, 0, cap)


def test_merged_walk_loads_top_k_in_all_not_per_partition():
    stores = [VersionStore() for _ in range(4)]
    for i in range(DOCS):
        doc = {"id": str(i), "n": i}
        stores[i % 4].add(Version(i + 1, ('["p"]', doc["id"]), doc, b"{}", "e", 0, "r"), 0)
    for store in stores:
        built(store, ("n",))
    q = compile_query("SELECT TOP 10 * FROM c ORDER BY c.n DESC")
    sources = [(store, DOCS) for store in stores]
    chosen = query_plan.merged_walk(q, sources, None, 0)
    assert sum(sel.loaded for sel in chosen) == 10
    docs = [v.doc for sel in chosen for v in sel.versions]
    assert [d["n"] for d in q.execute(docs, 0)] == list(range(DOCS - 1, DOCS - 11, -1))
    filtered = compile_query("SELECT TOP 10 * FROM c WHERE c.n = 5 ORDER BY c.n")
    assert query_plan.merged_walk(filtered, sources, None, 0) is None      # the filter is cheaper


def test_merged_walk_keeps_boundary_ties_from_every_partition():
    stores = [VersionStore(), VersionStore()]
    for s, (id, y) in zip(stores, [("a", 5), ("b", 1)]):
        doc = {"id": id, "x": 0, "y": y}
        s.add(Version(1, ('["p"]', id), doc, b"{}", "e", 0, "r"), 0)
    q = compile_query("SELECT TOP 1 c.id FROM c ORDER BY c.x, c.y")
    chosen = query_plan.merged_walk(q, [(s, 1) for s in stores], None, 0, tuning=ALWAYS_INDEX)
    assert q.execute([v.doc for sel in chosen for v in sel.versions], 0) == [{"id": "b"}]


# ---- type brackets, by example -------------------------------------------------------------
MIXED = [0, 1, 1.0, 2.5, -3, "", "a", "b", None, True, False, [1, "a"], [1.0, "a"], {"k": 1}, MISSING]


@pytest.mark.parametrize("where", [
    "c.x >= null", "c.x <= null", "c.x > null", "c.x < null", "c.x = null", "c.x > false", "c.x <= true",
    "c.x >= 1", "c.x > 1", "c.x < 1", "c.x <= 1.0", "c.x BETWEEN -3 AND 1", "c.x >= 'a'", "c.x < 'b'",
    "c.x > ''", "c.x = @arr", "c.x = @obj", "c.x > @arr", "c.x IN (@arr, 0)", "c.x IN (1, 1.0, 'a', null)",
    "c.x > 1 AND c.x < 'z'", "c.x >= 0 AND c.x < 2.5 AND c.x > -3", "c.x = undefined",
])
@pytest.mark.parametrize("order", ["", " ORDER BY c.x", " ORDER BY c.x DESC"])
def test_type_brackets_match_a_scan(where, order):
    store = VersionStore()
    for i, x in enumerate(MIXED * 2):
        doc = {"n": i} if x is MISSING else {"n": i, "x": x}
        store.add(Version(i + 1, ('["a"]', f"{i:02}"), doc, b"{}", "e", 0, "r"), 0)
    for top in ("", "TOP 3 "):
        q = compile_query(f"SELECT {top}c.n FROM c WHERE {where}{order}",
                          [{"name": "@arr", "value": [1.0, "a"]}, {"name": "@obj", "value": {"k": 1.0}}])
        chosen = candidates(q, store, len(MIXED) * 2, None, 0, tuning=ALWAYS_INDEX)
        scanned = [v.doc for v in store.scan(len(MIXED) * 2)]
        assert chosen is not None or not q.index_hints
        assert q.execute([v.doc for v in chosen.versions], 0) == q.execute(scanned, 0)


def test_ascending_walk_meets_missing_values_first():
    store = VersionStore()
    for i, x in enumerate(MIXED):
        doc = {"n": i} if x is MISSING else {"n": i, "x": x}
        store.add(Version(i + 1, ('["a"]', f"{i:02}"), doc, b"{}", "e", 0, "r"), 0)
    q = compile_query("SELECT TOP 2 c.n FROM c ORDER BY c.x")
    chosen = candidates(q, store, len(MIXED), None, 0, tuning=ALWAYS_INDEX)
    assert chosen.plan == "order" and chosen.loaded == 2
    assert q.execute([v.doc for v in chosen.versions], 0) == [{"n": MIXED.index(MISSING)}, {"n": MIXED.index(None)}]


# ---- examples on 10,000 documents ----------------------------------------------------------
DOCS = 10_000
CATEGORIES = 1_000


def built(store, *paths):
    """The store with its indexes of paths built whole (a new index builds a step per query)."""
    for path in paths:
        materialise(store, path, step_versions=10**9)
    return store


def big_store(*indexed):
    store = VersionStore()
    for i in range(DOCS):
        doc = {"id": str(i), "pk": f"p{i % 100}", "cat": f"c{i % CATEGORIES}", "n": i}
        store.add(Version(i + 1, (json.dumps([doc["pk"]]), doc["id"]), doc, b"{}", "e", 0, "r"), 0)
    return built(store, *indexed)


def test_a_new_index_builds_a_bounded_step_per_query_and_scans_until_ready():
    """The first indexed query on a big store must not file every version at once (that held
    every region's loop for seconds at a million items): each query files one step and scans
    until the index is whole; writes and deletes meanwhile leave it exactly right."""
    store = VersionStore()
    for i in range(DOCS):
        doc = {"id": str(i), "pk": f"p{i % 100}", "cat": f"c{i % CATEGORIES}", "n": i}
        store.add(Version(i + 1, (json.dumps([doc["pk"]]), doc["id"]), doc, b"{}", "e", 0, "r"), 0)
    q = compile_query("SELECT * FROM c WHERE c.cat = 'c7'")
    lsn, steps = DOCS, 0
    while True:
        chosen = candidates(q, store, lsn, None, 0)
        index = store.indexes.paths[("cat",)]
        if index.ready:
            break
        steps += 1
        assert chosen is None                                 # scanned this time
        assert index.size <= steps * INDEX_BUILD_STEP_VERSIONS + (lsn - DOCS)
        lsn += 1                                              # a write while it builds
        doc = {"id": f"new{lsn}", "pk": "p1", "cat": "c7", "n": -lsn}
        store.add(Version(lsn, ('["p1"]', doc["id"]), doc, b"{}", "e", 0, "r"), 0)
    assert steps >= DOCS // INDEX_BUILD_STEP_VERSIONS - 1
    chosen = candidates(q, store, lsn, None, 0)
    assert chosen.plan == "index"
    want = sorted(v.key for v in store.scan(lsn) if v.doc.get("cat") == "c7")
    assert sorted(v.key for v in chosen.versions) == want
    live = sum(1 for _, versions in store.keys_with_versions() for v in versions if not v.deleted)
    assert index.size == live                                # each live version once


def test_indexed_equality_loads_only_matching_documents():
    store = big_store(("cat",))
    q = compile_query("SELECT * FROM c WHERE c.cat = @cat", [{"name": "@cat", "value": "c7"}])
    chosen = candidates(q, store, DOCS, None, 0)
    assert chosen.plan == "index"
    assert chosen.loaded == len(chosen.versions) == DOCS // CATEGORIES
    assert [v.key for v in chosen.versions] == sorted(v.key for v in chosen.versions)
    assert len(q.execute([v.doc for v in chosen.versions], 0)) == DOCS // CATEGORIES


def test_reader_at_an_older_lsn_sees_old_values_through_the_index():
    store = big_store(("cat",))
    q = compile_query("SELECT VALUE c.n FROM c WHERE c.cat = 'c7'")
    candidates(q, store, DOCS, None, 0)                       # builds the index
    moved = [v for v in store.scan(DOCS) if v.doc["cat"] == "c7"][:4]
    for lsn, v in enumerate(moved, start=DOCS + 1):
        store.add(Version(lsn, v.key, dict(v.doc, cat="c8"), b"{}", "e", 0, "r"), DOCS)
    old = candidates(q, store, DOCS, None, 0)
    new = candidates(q, store, DOCS + len(moved), None, 0)
    assert (old.loaded, new.loaded) == (10, 6)
    assert sorted(q.execute([v.doc for v in old.versions], 0)) == list(range(7, DOCS, CATEGORIES))


def test_order_by_top_walks_the_index_and_stops():
    store = big_store(("n",))
    q = compile_query("SELECT TOP 10 * FROM c WHERE c.n >= 0 ORDER BY c.n DESC")
    chosen = candidates(q, store, DOCS, None, 0)
    assert chosen.plan == "order" and chosen.loaded == 10
    assert [d["n"] for d in q.execute([v.doc for v in chosen.versions], 0)] == list(range(DOCS - 1, DOCS - 11, -1))


def test_page_cap_bounds_an_order_by_walk_without_top():
    store = big_store(("cat",))
    q = compile_query("SELECT c.id FROM c ORDER BY c.cat")
    chosen = candidates(q, store, DOCS, None, 0, cap=3)
    assert chosen.plan == "order" and chosen.loaded == 10     # the first group: c0 holds 10 ties


def test_unselective_or_unindexed_queries_scan():
    store = big_store()
    assert candidates(compile_query("SELECT * FROM c WHERE c.n >= 0"), store, DOCS, None, 0) is None
    assert candidates(compile_query("SELECT * FROM c WHERE c.cat = 'c1' OR c.n = 2"), store, DOCS, None, 0) is None
    excluded = {"includedPaths": [{"path": "/*"}], "excludedPaths": [{"path": "/cat/?"}]}
    assert candidates(compile_query("SELECT * FROM c WHERE c.cat = 'c1'"), store, DOCS, excluded, 0) is None
    assert "cat" not in {p[0] for p in store.indexes.paths}


def test_small_scopes_scan_without_building_an_index():
    store = big_store()
    q = compile_query("SELECT * FROM c WHERE c.cat = 'c1'")
    assert candidates(q, store, DOCS, None, 0, prefix='["p1"]', tuning=PlanTuning(small_docs=100)) is None
    assert store.indexes is None


def test_materialised_paths_are_capped():
    store = big_store()
    for i in range(INDEXED_PATHS_PER_STORE_MAX):
        assert materialise(store, (f"f{i}",)) is not None
    assert materialise(store, ("one_more",)) is None
    assert materialise(store, ("f0",)) is not None


def test_value_at_follows_the_member_rules():
    doc = {"a": {"b": [10, {"c": None}]}, "s": "x"}
    assert value_at(doc, ("a", "b", 0)) == 10
    assert value_at(doc, ("a", "b", 1, "c")) is None
    assert value_at(doc, ("a", "b", 5)) is UNDEFINED
    assert value_at(doc, ("s", 0)) is UNDEFINED
    assert value_at(doc, ("missing",)) is UNDEFINED
