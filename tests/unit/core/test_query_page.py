"""Query pages (emulator/core/query_page.py) end at a work budget, at a byte cap or at the item
count, and resume by position: following the continuations gives exactly the whole query's
result (compared with running it in one go), a page inside one document's JOIN rows resumes at
its cursor without redoing the rows before it, pages may be empty, ORDER BY pages resume after
the last row returned (documents unchanged while paging come exactly once, whatever else is
written), and blocking queries run in bounded slices. Pure core, no clock: inputs are lists of
versions, the budgets are passed in."""
import json
import random

import pytest

from regionlab.emulator.core import limits
from regionlab.emulator.core import query_page as qp
from regionlab.emulator.core.account import Account, AccountConfig
from regionlab.emulator.core.documents import Writer
from regionlab.emulator.core.scheduler import ManualClock, Scheduler
from regionlab.emulator.core.store import versions_of
from regionlab.emulator.core.errors import CosmosError
from regionlab.emulator.core.query import compile_query
from regionlab.emulator.core.store import Version

FIVE_JOINS = ("SELECT VALUE [a, b, d, e, f] FROM c JOIN a IN c.arr JOIN b IN c.arr JOIN d IN c.arr "
              "JOIN e IN c.arr JOIN f IN c.arr WHERE a + b + d + e + f = 12")


def _version(doc: dict, lsn: int = 1) -> Version:
    body = json.dumps(doc, separators=(",", ":")).encode()
    return Version(lsn, (json.dumps([doc["pk"]]), doc["id"]), doc, body, "e", 0, "r")


def _parts(docs: list, partitions: int = 2) -> list:
    """Versions per partition, each in key order (as a store scan yields them)."""
    parts = [[] for _ in range(partitions)]
    for doc in docs:
        parts[int(doc["pk"][1:]) % partitions].append(_version(doc))
    return [sorted(p, key=lambda v: v.key) for p in parts]


def _inputs(parts: list, at):
    """(ordinal, version) from position `at` on: inclusive of at's document when it resumes
    inside it, after it otherwise (what the gateway's _Inputs.documents does)."""
    for part, versions in enumerate(parts):
        if at is not None and part < at.part:
            continue
        for v in versions:
            if at is not None and part == at.part:
                if v.key < at.key or (v.key == at.key and at.rows is None):
                    continue
            yield part, v


def _encode(value, v) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _stream_all(q, parts, size=100, work_max=limits.QUERY_PAGE_MAX_WORK_UNITS, bytes_max=limits.PAGE_MAX_BYTES):
    """Every page of a streaming query, following continuations through the encoded token."""
    state, pages = qp.decode_state(q, None, len(parts)), []
    while True:
        page = qp.stream_page(q, _inputs(parts, state.at), state, size, _encode, 0, work_max, bytes_max)
        pages.append(page)
        if page.state is None:
            return pages
        state = qp.decode_state(q, qp.encode_state(page.state), len(parts))


def _results(pages) -> list:
    return [json.loads(raw) for page in pages for raw in page.raw]


def _everything(q, parts) -> list:
    return q.execute([v.doc for p in parts for v in p], 0)


def _docs(n: int) -> list:
    return [{"id": f"d{i:03d}", "pk": f"p{i % 5}", "n": i, "arr": [i % 3, 1, 2]} for i in range(n)]


def test_a_streaming_query_pages_at_its_work_budget_and_loses_nothing():
    q = compile_query("SELECT c.id, c.n FROM c WHERE c.n % 7 = 1")
    parts = _parts(_docs(300))
    pages = _stream_all(q, parts, size=1000, work_max=50)
    assert len(pages) > 10                               # the budget, not the item count, ended them
    assert all(p.work <= 50 + 2 for p in pages)          # a document and its one row past the limit
    assert _results(pages) == _everything(q, parts)


def test_pages_that_find_nothing_are_empty_and_carry_on():
    q = compile_query("SELECT * FROM c WHERE c.n = 299")
    parts = _parts(_docs(300))
    pages = _stream_all(q, parts, work_max=40)
    assert [len(p.raw) for p in pages[:-1]].count(0) >= 5 and pages[-1].state is None
    assert _results(pages) == [d for d in _docs(300) if d["n"] == 299]


def test_five_joins_resume_inside_one_document_without_redoing_its_rows():
    doc = {"id": "big", "pk": "p0", "arr": [0, 1, 2, 3, 4, 5]}          # 6^5 = 7776 rows
    parts = _parts([doc], partitions=1)
    q = compile_query(FIVE_JOINS)
    pages = _stream_all(q, parts, size=1000, work_max=500)
    assert len(pages) >= 15
    assert _results(pages) == _everything(q, parts)
    one_go = qp.stream_page(q, _inputs(parts, None), qp.first_state(q), 10 ** 6, _encode, 0, 10 ** 9)
    # Every page resumes at its cursor: all pages together do the work of one run, plus per
    # page the document and the 5 JOIN levels leading to the cursor (skipping would be ~n^2).
    assert sum(p.work for p in pages) <= one_go.work + 6 * len(pages)


def test_offset_and_limit_survive_budget_pages():
    q = compile_query("SELECT VALUE c.n FROM c OFFSET 37 LIMIT 50")
    parts = _parts(_docs(200))
    pages = _stream_all(q, parts, size=7, work_max=30)
    assert _results(pages) == _everything(q, parts) and len(_results(pages)) == 50


def test_a_page_stops_before_its_byte_cap_but_always_holds_one_result():
    docs = [{"id": f"d{i}", "pk": "p0", "blob": "x" * 900} for i in range(10)]
    parts = _parts(docs, partitions=1)
    q = compile_query("SELECT * FROM c")
    pages = _stream_all(q, parts, bytes_max=2500)
    assert [len(p.raw) for p in pages] == [2, 2, 2, 2, 2]
    assert all(sum(map(len, p.raw)) <= 2500 for p in pages)
    assert _results(pages) == docs
    alone = _stream_all(q, parts, bytes_max=100)         # each result alone is over the cap
    assert [len(p.raw) for p in alone] == [1] * 10


def test_the_default_byte_cap_is_four_megabytes():
    assert limits.PAGE_MAX_BYTES == 4 * 1024 * 1024


def _blocking(q, parts, state, size=10, work_max=limits.QUERY_SLICE_MAX_WORK_UNITS):
    run = qp.BlockingRun(q, _inputs(parts, None), state, size, _encode)
    while not run.step(0, work_max):
        pass
    return run, run.page()


def _blocking_all(q, parts, size=10, work_max=limits.QUERY_SLICE_MAX_WORK_UNITS, between=None):
    state, out, pages = qp.decode_state(q, None, len(parts)), [], 0
    while True:
        _, page = _blocking(q, parts, state, size, work_max)
        out.extend(json.loads(r) for r in page.raw)
        pages += 1
        if page.state is None:
            return out, pages
        state = qp.decode_state(q, qp.encode_state(page.state), len(parts))
        if between is not None:
            between(pages)


@pytest.mark.parametrize("text", [
    "SELECT c.id, c.n FROM c ORDER BY c.n DESC",
    "SELECT VALUE c.id FROM c ORDER BY c.arr[0], c.id DESC",
    "SELECT VALUE [c.id, t] FROM c JOIN t IN c.arr ORDER BY t DESC",
    "SELECT TOP 23 c.id FROM c ORDER BY c.pk OFFSET 4 LIMIT 30",
    "SELECT c.arr[0] AS k, COUNT(1) AS n FROM c GROUP BY c.arr[0]",
    "SELECT VALUE COUNT(1) FROM c JOIN t IN c.arr",
    "SELECT DISTINCT VALUE c.n % 17 FROM c",
    "SELECT DISTINCT VALUE c.n % 13 FROM c ORDER BY c.n % 13 DESC",
])
def test_blocking_queries_page_to_the_whole_result(text):
    q = compile_query(text)
    parts = _parts(_docs(120))
    out, pages = _blocking_all(q, parts, size=7, work_max=25)
    assert out == _everything(q, parts)


def test_a_blocking_query_runs_in_bounded_slices():
    q = compile_query("SELECT VALUE COUNT(1) FROM c JOIN t IN c.arr")
    parts = _parts(_docs(300))
    run, page = _blocking(q, parts, 0, work_max=100)
    assert run.slices >= (300 + 900) // 100 and json.loads(page.raw[0]) == 900
    assert run.work == 300 + 300 + 900           # a unit per document, per FROM row, per JOIN row


def test_order_by_pages_resume_by_position_through_concurrent_writes():
    """Documents that stay unchanged come exactly once, in order; documents created ahead of
    the cursor appear, those created behind it do not; deleted ones may have been returned."""
    q = compile_query("SELECT VALUE c.id FROM c ORDER BY c.n")
    docs = _docs(60)
    parts = _parts(docs, partitions=1)
    versions = parts[0]
    stable = {d["id"] for d in docs if d["n"] % 10 != 3}   # those the writes below leave alone

    def write(page):
        ids = {v.doc["id"] for v in versions}
        for v in list(versions):
            if v.doc["n"] % 10 == 3 and v.doc["n"] // 10 == page:
                versions.remove(v)                  # delete one document per page
        for n in (-page, 1000 + page):              # one behind the cursor, one far ahead
            doc = {"id": f"new{n}", "pk": "p0", "n": n, "arr": []}
            if doc["id"] not in ids:
                versions.append(_version(doc))
        versions.sort(key=lambda v: v.key)

    out, _ = _blocking_all(q, parts, size=8, between=write)
    kept = [i for i in out if i in stable]
    assert kept == sorted(stable, key=lambda i: int(i[1:])) and len(set(out)) == len(out)
    assert "new1001" in out and "new-1" not in out


def test_a_continuation_that_is_not_ours_is_refused():
    q = compile_query("SELECT * FROM c")
    for token in ("garbage", qp.encode_state(5), qp.encode_state(qp.StreamState(qp.Position(9, ("a", "b"), None), 0, None))):
        with pytest.raises(CosmosError) as e:
            qp.decode_state(q, token, 2)
        assert e.value.status == 400 and "continuation" in e.value.message


def test_old_versions_are_collected_while_a_continuation_is_outstanding():
    """A real replica set in virtual time: a page's continuation holds no snapshot, so steady
    writes keep one version per item, and the next pages still return every item once."""
    clock = ManualClock()
    account = Account(AccountConfig(regions=("East US",)), clock, Scheduler(), random.Random(1))
    db = account.create_database({"id": "db"})
    c = account.create_container(db, {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}})
    rs = c.partitions[0].replica_sets["East US"]

    def put(i, v):
        w = Writer(c, "East US", '["p"]', ["p"], clock.now_ms())
        w.upsert({"id": f"d{i:02d}", "pk": "p", "v": v})
        w.commit()
    for i in range(40):
        put(i, 0)
    q = compile_query("SELECT VALUE c.id FROM c")

    def page(state):
        versions = [(0, v) for v in rs.store.scan(rs.committed_lsn)]
        return qp.stream_page(q, _inputs([[v for _, v in versions]], state.at), state, 10, _encode, clock.now_ms())
    first = page(qp.first_state(q))
    assert first.state is not None
    for v in range(1, 51):                                  # 50 rounds of writes meanwhile
        for i in range(0, 40, 4):
            put(i, v)
    retained = sum(len(versions_of(entry)) for _, entry in rs.store.keys_with_versions())
    assert retained <= 40 + 10                              # at most one superseded per written item
    seen, state = [json.loads(r) for r in first.raw], first.state
    while state is not None:
        nxt = page(state)
        seen.extend(json.loads(r) for r in nxt.raw)
        state = nxt.state
    assert seen == [f"d{i:02d}" for i in range(40)]


class _Unparsed:
    """A stored version whose document must not be read: its key and its body only."""
    __slots__ = ("key", "body")

    def __init__(self, v):
        self.key, self.body = v.key, v.body

    @property
    def doc(self):
        raise AssertionError("parsed a document whose WHERE the scope already answers")


def _stream_implied(q, parts, size, work_max, bytes_max):
    bare = [[_Unparsed(v) for v in p] for p in parts]
    state, pages = qp.decode_state(q, None, len(parts)), []
    while True:
        page = qp.stream_page(q, _inputs(bare, state.at), state, size, _encode, 0, work_max, bytes_max,
                              where_implied=True)
        pages.append(page)
        if page.state is None:
            return pages
        state = qp.decode_state(q, qp.encode_state(page.state), len(parts))


@pytest.mark.parametrize("text", ["SELECT * FROM c WHERE c.pk = 'p0'",
                                  "SELECT * FROM c WHERE c.pk = 'p0' OFFSET 13 LIMIT 40"])
@pytest.mark.parametrize("size,work_max,bytes_max", [(10, limits.QUERY_PAGE_MAX_WORK_UNITS, limits.PAGE_MAX_BYTES),
                                                     (1000, 40, limits.PAGE_MAX_BYTES), (25, 10 ** 6, 3000)])
def test_a_filter_the_scope_implies_serves_stored_bodies_unparsed_in_the_same_pages(text, size, work_max, bytes_max):
    """A partition-key query scoped to that key (`WHERE c.pk = @pk` with its header) parsed
    every document it returned only to find the filter true (11 json.loads per page of 10, a
    third of its CPU). With where_implied it takes the bodies as stored, and its pages, work,
    documents loaded and continuations are exactly those of parsing them."""
    q = compile_query(text)
    docs = [{"id": f"d{i:03d}", "pk": "p0", "n": i, "blob": "x" * (i * 37 % 500)} for i in range(120)]
    parts = _parts(docs, partitions=1)
    plain = _stream_all(q, parts, size, work_max, bytes_max)
    implied = _stream_implied(q, parts, size, work_max, bytes_max)
    assert [(p.raw, p.loaded, p.state, p.work) for p in implied] == [(p.raw, p.loaded, p.state, p.work) for p in plain]
    assert _results(implied) == _everything(q, parts) and len(plain) > 1


# ---- aggregates carry their partials across pages -------------------------------------------
def _aggregate_pages(q, parts, page_work_max: int) -> list:
    """Every page of an aggregate query, each ending at page_work_max units, following the
    continuations through their encoded tokens."""
    state, pages = qp.decode_state(q, None, len(parts)), []
    while True:
        at = state.at if isinstance(state, qp.PartialState) else None
        run = qp.BlockingRun(q, _inputs(parts, at), state, 10, _encode, page_work_max)
        while not run.step(0, 7):
            pass
        pages.append(run.page())
        if pages[-1].state is None:
            return pages
        state = qp.decode_state(q, qp.encode_state(pages[-1].state), len(parts))


@pytest.mark.parametrize("text", [
    "SELECT VALUE COUNT(1) FROM c JOIN t IN c.arr",
    "SELECT VALUE SUM(t * c.n) FROM c JOIN t IN c.arr WHERE c.n % 3 = 1",
    "SELECT AVG(c.n) AS mean, MIN(c.id) AS lo, MAX(t) AS hi, COUNT(c.missing) AS none FROM c JOIN t IN c.arr",
    'SELECT VALUE {"n": COUNT(1), "s": SUM(c.n), "x": MAX(c.n > 5 ? "big" : null)} FROM c',
    "SELECT VALUE SUM(c.id) FROM c",                         # poisoned: undefined
    "SELECT VALUE MAX(c.arr) FROM c",                        # an array: undefined
    "SELECT VALUE MIN(c.n) FROM c WHERE c.n < 0",            # no row at all
])
def test_an_aggregate_page_ends_at_its_budget_and_the_last_gives_the_whole_result(text):
    q = compile_query(text)
    assert q.carries_partials
    parts = _parts(_docs(120))
    pages = _aggregate_pages(q, parts, page_work_max=50)
    assert len(pages) >= 240 // 50                           # the budget ended them
    assert all(p.raw == [] and isinstance(p.state, qp.PartialState) for p in pages[:-1])
    assert _results(pages) == _everything(q, parts)
    # Each document is read by one page, or by two when a page ended inside its JOIN rows.
    assert sum(p.loaded for p in pages) <= 120 + len(pages)


def test_partials_past_their_byte_cap_stay_in_the_page():
    q = compile_query("SELECT VALUE MAX(c.s) FROM c")
    docs = [{"id": f"d{i:02d}", "pk": "p0", "s": f"{i:02d}" + "x" * limits.QUERY_PARTIALS_MAX_BYTES} for i in range(20)]
    pages = _aggregate_pages(q, _parts(docs, 1), page_work_max=1)
    assert len(pages) == 1 and _results(pages) == [docs[-1]["s"]]
    short = compile_query("SELECT VALUE MIN(c.s) FROM c")        # "00xxx...": then shorter ones
    docs = [{"id": f"d{i:02d}", "pk": "p0", "s": f"{i:02d}" + "x" * (limits.QUERY_PARTIALS_MAX_BYTES >> i)}
            for i in range(20)]
    pages = _aggregate_pages(short, _parts(docs, 1), page_work_max=1)
    assert len(pages) == 1 and _results(pages) == [docs[0]["s"]]
    docs = [{**d, "id": f"d{19 - i:02d}"} for i, d in enumerate(docs)]    # the short ones first: they ride
    pages = _aggregate_pages(short, _parts(docs, 1), page_work_max=1)
    assert len(pages) > 20 and _results(pages) == [docs[0]["s"]]


@pytest.mark.parametrize("partials", ['[[-1]]', '[[true]]', '[["1"]]', '[[1], [2]]', '[1]', '{"a": 1}', '[[1, 2]]'])
def test_a_forged_partial_continuation_is_400(partials):
    import base64
    q = compile_query("SELECT VALUE COUNT(1) FROM c")
    token = base64.urlsafe_b64encode(f'{{"p":[{partials},0,"[\\"p0\\"]","d000",null]}}'.encode()).decode()
    with pytest.raises(CosmosError) as e:
        qp.decode_state(q, token, 1)
    assert e.value.status == 400
    good = base64.urlsafe_b64encode(b'{"p":[[[3]],0,"[\\"p0\\"]","d000",null]}').decode()
    assert qp.decode_state(q, good, 1) == qp.PartialState(qp.Position(0, ('["p0"]', "d000"), None), [[3]])
    grouped = compile_query("SELECT VALUE COUNT(1) FROM c GROUP BY c.pk")     # its groups never ride
    with pytest.raises(CosmosError):
        qp.decode_state(grouped, good, 1)


@pytest.mark.parametrize("text", ["SELECT VALUE COUNT(1) FROM c GROUP BY c.pk",
                                  "SELECT c.id, COUNT(1) AS n FROM c",      # reads a row besides its aggregates
                                  "SELECT VALUE c.n FROM c ORDER BY c.n", "SELECT DISTINCT VALUE c.n FROM c"])
def test_other_blocking_queries_never_end_a_page_at_the_work_budget(text):
    q = compile_query(text)
    assert not q.carries_partials
    parts = _parts(_docs(120))
    pages = _aggregate_pages(q, parts, page_work_max=50)
    assert not any(isinstance(p.state, qp.PartialState) for p in pages) and max(p.work for p in pages) > 50
    assert _results(pages) == _everything(q, parts)


def test_a_blocking_slice_ends_at_its_budget_even_when_no_row_passes_where():
    q = compile_query("SELECT VALUE COUNT(1) FROM c JOIN t IN c.arr WHERE t < 0")
    parts = _parts(_docs(300))
    run, page = _blocking(q, parts, 0, work_max=100)
    assert run.slices >= (300 + 300 + 900) // 100 and json.loads(page.raw[0]) == 0


def test_a_streaming_page_run_in_slices_is_the_page_run_at_once():
    q = compile_query("SELECT VALUE [c.id, t] FROM c JOIN t IN c.arr WHERE c.n % 5 = 1")
    parts = _parts(_docs(300))
    state = qp.first_state(q)
    run = qp.StreamRun(q, _inputs(parts, None), state, 1000, _encode, page_work_max=700)
    slices = 1
    while not run.step(0, 13):
        slices += 1
    sliced = run.page()
    whole = qp.stream_page(q, _inputs(parts, None), state, 1000, _encode, 0, 700)
    assert slices > 10 and sliced == whole and sliced.state is not None
