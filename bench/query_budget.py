"""How long one slice of QUERY_SLICE_MAX_WORK_UNITS work units takes, on the core alone: the
longest the event loop is held by a query between two other requests.

    python bench/query_budget.py

Work units (core/query_page.py) are documents loaded plus rows made by FROM/JOIN; every page
runs in slices of QUERY_SLICE_MAX_WORK_UNITS, meant to stay at or under about a millisecond or
two, and streaming pages end at QUERY_PAGE_MAX_WORK_UNITS (aggregates that carry their partials
at QUERY_AGGREGATE_PAGE_MAX_WORK_UNITS). A VersionStore holds DOCS documents of a few hundred
bytes with a 6-element array (JOIN_DOCS of them for the 5-JOIN query: 6^5 rows each); each
query shape runs all its pages, slice by slice, and the pages, slices, slowest and median full
slice are printed with the µs per work unit. Times are this thread's CPU time
(time.thread_time), which other load on the shared machine inflates far less than wall time;
on an idle machine the two agree. Best of REPEATS runs.
"""
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from regionlab.emulator.core import limits  # noqa: E402
from regionlab.emulator.core import query_page as qp  # noqa: E402
from regionlab.emulator.core.jsontext import dumps_bytes  # noqa: E402
from regionlab.emulator.core.query import compile_query  # noqa: E402
from regionlab.emulator.core.store import Version, VersionStore  # noqa: E402

DOCS = 20_000
JOIN_DOCS = 40
REPEATS = 3
PAGE_ITEMS = 100

QUERIES = {
    "filter scan (no match)": "SELECT * FROM c WHERE c.n < 0",
    "SELECT * (pages of 100)": "SELECT * FROM c",
    "5 JOINs, no match": ("SELECT VALUE 1 FROM c JOIN a IN c.arr JOIN b IN c.arr JOIN d IN c.arr "
                          "JOIN e IN c.arr JOIN f IN c.arr WHERE a + b + d + e + f < 0"),
    "JOIN + string functions": ("SELECT VALUE CONCAT(UPPER(c.name), '-', ToString(t)) FROM c JOIN t IN c.arr "
                                "WHERE CONTAINS(LOWER(c.name), 'zz')"),
    "COUNT(1) (slices)": "SELECT VALUE COUNT(1) FROM c",
    "GROUP BY + AVG (slices)": "SELECT c.cat, AVG(c.n) AS a FROM c GROUP BY c.cat",
    "ORDER BY c.n DESC (slices)": "SELECT c.id, c.n FROM c ORDER BY c.n DESC",
    "DISTINCT VALUE c.cat (slices)": "SELECT DISTINCT VALUE c.cat FROM c",
}


def document(i: int) -> dict:
    return {"id": f"d{i:06d}", "pk": f"p{i % 100}", "cat": f"c{i % 40}", "n": (i * 7919) % DOCS,
            "name": f"name number {i}", "arr": [1, 2, 3, 4, 5, 6],
            "addr": {"city": f"city{i % 50}", "zip": 10000 + i}, "note": "x" * 200}


def store_of(docs: int) -> VersionStore:
    store = VersionStore()
    for i in range(docs):
        doc = document(i)
        v = Version(i + 1, (f'["{doc["pk"]}"]', doc["id"]), doc, dumps_bytes(doc), "e", 0, "r")
        v.settle()                  # as a committed write leaves it: the body only (store.Version)
        store.add(v, i)
    return store


def encode(value, v) -> bytes:
    return v.body if v is not None and value is v.doc else dumps_bytes(value)


def slices(query, store) -> tuple:
    """(seconds and work units per slice, pages) over the whole query, following its pages."""
    lsn, took, pages = 1 << 40, [], 0
    state = qp.first_state(query) if query.streams else 0
    while True:
        at = state.at if isinstance(state, (qp.StreamState, qp.PartialState)) else None
        docs = ((0, v) for v in (store.scan(lsn) if at is None else _from(store, lsn, at)))
        if query.streams:
            run = qp.StreamRun(query, docs, state, PAGE_ITEMS, encode)
        else:
            run = qp.BlockingRun(query, docs, state, PAGE_ITEMS, encode)
        done = False
        while not done:
            before = run.work
            t0 = time.thread_time()
            done = run.step(0)
            page = run.page() if done else None
            took.append((time.thread_time() - t0, run.work - before))
        pages += 1
        if page.state is None:
            return took, pages
        state = page.state


def _from(store, lsn, at):
    if at.rows is not None:
        v = store.get(at.key, lsn)
        if v is not None:
            yield v
    yield from store.scan(lsn, after_key=at.key)


def small_page_us(store) -> float:
    """µs of engine time for a page of 10 `SELECT *` results from the first 11 documents of one
    partition key (the shape of query (a) in docs/performance.md), best of REPEATS."""
    q = compile_query("SELECT * FROM c WHERE c.pk = @pk", [{"name": "@pk", "value": "p7"}])
    state, runs = qp.first_state(q), 2000

    def page():
        return qp.stream_page(q, ((0, v) for v in store.scan(1 << 40, prefix='["p7"]')), state, 10, encode, 0)
    best = None
    for _ in range(REPEATS):
        t0 = time.thread_time()
        for _ in range(runs):
            page()
        us = (time.thread_time() - t0) / runs * 1e6
        best = us if best is None else min(best, us)
    return best


def main() -> None:
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}, "
          f"QUERY_SLICE_MAX_WORK_UNITS={limits.QUERY_SLICE_MAX_WORK_UNITS}, "
          f"QUERY_PAGE_MAX_WORK_UNITS={limits.QUERY_PAGE_MAX_WORK_UNITS}, {DOCS} documents")
    stores = {DOCS: store_of(DOCS), JOIN_DOCS: store_of(JOIN_DOCS)}
    print(f"{'query':32} {'pages':>6} {'slices':>7} {'max ms':>8} {'median ms':>10} {'µs/unit':>8}")
    for name, text in QUERIES.items():
        best = None
        for _ in range(REPEATS):
            took, n = slices(compile_query(text), stores[JOIN_DOCS if "5 JOINs" in name else DOCS])
            worst = max(t for t, _ in took)
            if best is None or worst < best[0]:
                best = (worst, took, n)
        worst, took, n = best
        full = [t for t, w in took if w >= limits.QUERY_SLICE_MAX_WORK_UNITS] or [t for t, _ in took]
        units = sum(w for _, w in took)
        print(f"{name:32} {n:>6} {len(took):>7} {worst * 1e3:>8.2f} {statistics.median(full) * 1e3:>10.2f} "
              f"{sum(t for t, _ in took) / max(units, 1) * 1e6:>8.2f}", flush=True)
    print(f"a page of 10 of one partition key (query (a)'s shape): {small_page_us(stores[DOCS]):.1f} µs")


if __name__ == "__main__":
    main()
