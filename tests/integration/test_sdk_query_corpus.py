"""Proves that the official SDK (sync and aio) gets correct query results from regionlab: a
corpus of SQL queries (sdk_corpus_cases.py) runs against ~200 varied documents spread over 4
physical partitions, cross-partition and scoped by partition key, whole and paged by 3, and
every result equals an independent plain-Python reference over the same stored documents;
read_items, feed_range queries, and the /dbs, /colls and /offers queries are checked the same way.

One emulator and one container serve the whole module (a module-scoped fixture); nothing here
writes to the corpus container after it is loaded. The module runs twice, once per query mode:
`whole` (the gateway runs every query and returns final results) and `service` (as the service,
cross-partition ORDER BY/aggregate/GROUP BY/DISTINCT/TOP/OFFSET queries answer 400/1004, and the SDK
asks for the query plan and merges the per-partition results itself; the service will not plan
GROUP BY or aggregates outside SELECT VALUE for this SDK, which then raises the service's 400).
"""
import asyncio
import json
import re
from dataclasses import dataclass

import pytest
from azure.cosmos import PartitionKey
from azure.cosmos.exceptions import CosmosHttpResponseError

from regionlab.emulator.testing import running_emulator
from sdk_corpus_cases import CASES
from query_reference import MISSING
from sdk_corpus_docs import PKS, bag, canon, make_docs, user_part
from sdk_harness import WireLog, make_aio_client, make_client

PARTITIONS = 4
PAGE_ITEMS = 3
CROSS_PARTITION_HEADER = "x-ms-documentdb-query-enablecrosspartition"
DB, COLL = "corpus", "docs"
EXTRA_DBS = ("other-1", "other-2")


@dataclass
class Corpus:
    emu: object
    client: object
    container: object
    docs: list          # the stored documents (with system properties), in insertion order
    mode: str           # the emulator's query mode: "whole" or "service"
    range_docs: list    # the stored documents of each physical partition (feed range)


@pytest.fixture(scope="module", params=["whole", "service"])
def corpus(request):
    # The corpus bulk-loads far past the database's 1000 RU/s; throttling has its own tests.
    with running_emulator(partitions=PARTITIONS, ru_limits=False, query_mode=request.param) as emu, \
            make_client(emu) as client:
        db = client.create_database(DB, offer_throughput=1000)
        container = db.create_container(COLL, PartitionKey(path="/pk"))
        db.create_container("side", PartitionKey(path="/x"), offer_throughput=500)
        for name in EXTRA_DBS:
            client.create_database(name)
        stored = [json.loads(json.dumps(container.create_item(d))) for d in make_docs()]   # plain dicts
        assert [user_part(d) for d in stored] == make_docs()
        by_id = {d["id"]: d for d in stored}
        range_docs = [[by_id[i] for i in container.query_items("SELECT VALUE c.id FROM c", feed_range=r)]
                      for r in container.read_feed_ranges()]
        yield Corpus(emu, client, container, stored, request.param, range_docs)


# ---- comparison ---------------------------------------------------------------------------------
def _key_text(v) -> str:
    if isinstance(v, list):
        return "[" + ",".join(_key_text(x) for x in v) + "]"
    return "<undefined>" if v is MISSING else canon(v)


def check(case, got: list, docs: list) -> None:
    expected = case.ref(docs)
    if case.pick is not None:
        assert len(got) == min(case.pick, len(expected)), got
        pool = bag(expected)
        for r in bag(got):
            assert r in pool, f"{r} is not a result of the query"
            pool.remove(r)
    elif case.ordered is True:
        assert [canon(r) for r in got] == [canon(e) for e in expected]
    else:
        assert bag(got) == bag(expected)
        if callable(case.ordered):
            assert [_key_text(case.ordered(r)) for r in got] == [_key_text(case.ordered(e)) for e in expected]


# ---- --query-mode service: where the SDK's own merge differs from running the query whole ------
# In service mode the SDK plans cross-partition queries and merges per-partition results itself,
# as it does against the real service; these are the corpus cases where that merge gives
# another answer than the whole query. Each is asserted as the SDK behaves, so a change on
# either side shows up here.
# ORDER BY keys of different types in different partitions: the SDK refuses to compare them
# (document_producer.py `_validate_orderby_items`).
MIXED_TYPE_ORDER_BY = {
    "SELECT c.id, c.name FROM c ORDER BY c.name", "SELECT c.id, c.name FROM c ORDER BY c.name DESC",
    "SELECT c.id, c.n FROM c ORDER BY c.n", "SELECT c.id, c.n FROM c ORDER BY c.n DESC",
    "SELECT c.id, c.n FROM c WHERE c.rank < 48 ORDER BY c.n DESC",
    "SELECT c.id, c.addr.zip FROM c ORDER BY c.addr.zip DESC",
    "SELECT VALUE c.rank FROM c ORDER BY c['gr\xf6\xdfe'], c.rank",
}
# VALUE aggregates the SDK combines from per-partition partials (aggregators.py): a partition
# whose partial is undefined is left out, null counts as "no value yet" for MIN and MAX, and
# nothing at all gives null.
SDK_MERGED = {"SELECT VALUE MIN(c.n) FROM c": "min", "SELECT VALUE SUM(c.n) FROM c": "sum",
              "SELECT VALUE MAX(c.rank) FROM c WHERE c.kind = 'z'": "max",
              "SELECT VALUE MAX(c.mixed) FROM c": "max"}


# A VALUE aggregate whose answer is undefined (nothing to aggregate, mixed types) is `[null]`
# across ranges in whole mode too: what the SDK's merge gives against the service
# (docs/queries.md; test_query_fidelity.py).
UNDEFINED_VALUE_AGGREGATE = re.compile(r"^SELECT VALUE (MIN|MAX|AVG|SUM)\(")


def merged_to_null(corpus, case) -> bool:
    return (corpus.mode == "whole" and UNDEFINED_VALUE_AGGREGATE.match(case.sql) is not None
            and " GROUP BY " not in case.sql and case.ref(corpus.docs) == [])


def _sdk_merge(kind: str, partials: list) -> list:
    from azure.cosmos._execution_context.aggregators import _MaxAggregator, _MinAggregator, _SumAggregator
    merged = {"min": _MinAggregator, "max": _MaxAggregator, "sum": _SumAggregator}[kind]()
    for partial in partials:
        if partial:                     # [] is an undefined partial: the SDK never sees a value
            merged.aggregate(partial[0])
    return [merged.get_result()]


# GROUP BY and aggregates outside SELECT VALUE: the service plans them only for a client that
# lists GroupBy / NonValueAggregate in x-ms-cosmos-supported-query-features, which azure-cosmos
# 4.17.1 does not, so a cross-partition one fails in the SDK with the service's 400.
AGGREGATE_CALL = re.compile(r"(COUNT|SUM|MIN|MAX|AVG)\s*\(", re.IGNORECASE)


def unplanned_features(sql: str) -> list:
    """The query features of sql that the Python SDK does not list (read off the text: GROUP
    BY, or an aggregate call in a non-VALUE select list outside any subquery)."""
    out = ["GroupBy"] if " GROUP BY " in sql else []
    if not sql.startswith("SELECT VALUE "):
        depth, i = 0, len("SELECT ")
        while i < len(sql) and not (depth == 0 and sql.startswith(" FROM ", i)):
            if depth == 0 and AGGREGATE_CALL.match(sql, i) and not sql[i - 1].isalnum():
                out.append("NonValueAggregate")
                break
            depth += {"(": 1, ")": -1}.get(sql[i], 0)
            i += 1
    return out


def refused_for_the_python_sdk(corpus, case) -> str | None:
    """The service's message when, in service mode, the SDK must plan the case and cannot."""
    missing = unplanned_features(case.sql) if corpus.mode == "service" else []
    return f"Query contained {', '.join(missing)}, which the calling client does not support" if missing else None


def test_unplanned_features_reads_the_corpus_queries():
    assert unplanned_features("SELECT c.kind, COUNT(1) AS n FROM c GROUP BY c.kind") == ["GroupBy", "NonValueAggregate"]
    assert unplanned_features("SELECT VALUE COUNT(1) FROM c GROUP BY c.kind") == ["GroupBy"]
    assert unplanned_features("SELECT COUNT(1) FROM c") == ["NonValueAggregate"]
    assert unplanned_features("SELECT VALUE MAX(c.n) FROM c") == []
    assert unplanned_features("SELECT c.id, (SELECT VALUE COUNT(1) FROM t IN c.tags) AS ntags FROM c") == []
    assert sum(1 for c in CASES if unplanned_features(c.sql)) >= 20


def check_query(corpus, case, run) -> None:
    """run() -> the SDK's results of the case cross-partition; judged for the corpus's mode."""
    refused = refused_for_the_python_sdk(corpus, case)
    if refused is not None:
        with pytest.raises(CosmosHttpResponseError, match=re.escape(refused)) as e:
            run()
        assert e.value.status_code == 400
        return
    if corpus.mode == "service" and case.sql in MIXED_TYPE_ORDER_BY:
        with pytest.raises(ValueError, match=r"^Expected \w+, but got \w+\.$"):
            run()
        return
    if corpus.mode == "service" and case.sql in SDK_MERGED:
        expected = _sdk_merge(SDK_MERGED[case.sql], [case.ref(docs) for docs in corpus.range_docs])
        assert [canon(r) for r in run()] == [canon(e) for e in expected]
        assert expected != case.ref(corpus.docs)      # the case really is one where the merge differs
        return
    if merged_to_null(corpus, case):
        assert run() == [None]
        return
    check(case, run(), corpus.docs)


def scoped(docs: list, pk) -> list:
    return [d for d in docs if d["pk"] == pk and type(d["pk"]) is type(pk)]


def case_ids(cases):
    return [c.id for c in cases]


# ---- the corpus: cross-partition and scoped by partition key -----------------------------------
def test_corpus_is_large_and_spread_over_every_partition(corpus):
    assert len(CASES) >= 150 and len({c.sql for c in CASES}) == len(CASES)
    ranges = list(corpus.container.read_feed_ranges())
    assert len(ranges) == PARTITIONS
    counts = [len(list(corpus.container.query_items("SELECT VALUE c.id FROM c", feed_range=r))) for r in ranges]
    assert all(n > 10 for n in counts) and sum(counts) == len(corpus.docs)


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_sync_query(corpus, case):
    check_query(corpus, case, lambda: list(corpus.container.query_items(case.sql, parameters=case.params,
                                                                                 enable_cross_partition_query=True)))


SCOPED = [(case, PKS[i % len(PKS)]) for i, case in enumerate(CASES)]


@pytest.mark.parametrize("case,pk", SCOPED, ids=[f"{pk}|{c.id}" for c, pk in SCOPED])
def test_sync_query_scoped_by_partition_key(corpus, case, pk):
    got = list(corpus.container.query_items(case.sql, parameters=case.params, partition_key=pk))
    check(case, got, scoped(corpus.docs, pk))


AIO_SCOPED = SCOPED[1::4]


@pytest.fixture(scope="module")
def aio_results(corpus):
    """Every aio corpus query, run once in one event loop through one aio client:
    {(case sql, partition key or None): results, or the exception raised}."""
    async def run_all():
        out = {}
        async with make_aio_client(corpus.emu) as client:
            c = client.get_database_client(DB).get_container_client(COLL)
            for case, pk in [(c_, None) for c_ in CASES] + AIO_SCOPED:
                kwargs = {} if pk is None else {"partition_key": pk}
                try:
                    out[case.sql, pk] = [r async for r in c.query_items(case.sql, parameters=case.params, **kwargs)]
                except Exception as e:          # reported by the test of that case
                    out[case.sql, pk] = e
        return out
    return asyncio.run(run_all())


def aio_result(results, case, pk=None) -> list:
    got = results[case.sql, pk]
    if isinstance(got, Exception):
        raise got
    return got


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_aio_query(corpus, aio_results, case):
    check_query(corpus, case, lambda: aio_result(aio_results, case))


@pytest.mark.parametrize("case,pk", AIO_SCOPED, ids=[f"{pk}|{c.id}" for c, pk in AIO_SCOPED])
def test_aio_query_scoped_by_partition_key(corpus, aio_results, case, pk):
    check(case, aio_result(aio_results, case, pk), scoped(corpus.docs, pk))


# ---- paging: max_item_count=3, every result exactly once, in order for ORDER BY ------------------
PAGED_SQL = [
    "SELECT VALUE c.id FROM c WHERE c.rank < 10",
    "SELECT * FROM c WHERE c.kind = 'a'",
    "SELECT c.id, c.created FROM c WHERE c.kind = 'b' ORDER BY c.created",
    "SELECT c.id, c.n FROM c WHERE c.rank < 48 ORDER BY c.n DESC",
    "SELECT c.id, c.kind, c.score FROM c WHERE c.rank < 40 ORDER BY c.kind, c.score DESC",
    "SELECT TOP 3 c.id, c.score FROM c WHERE c.kind = 'c' ORDER BY c.score DESC",
    "SELECT VALUE c.rank FROM c ORDER BY c.rank OFFSET 10 LIMIT 5",
    "SELECT VALUE c.id FROM c WHERE c.kind = 'd' ORDER BY c.rank OFFSET 2 LIMIT 3",
    "SELECT TOP 5 * FROM c ORDER BY c.rank DESC",
    "SELECT DISTINCT VALUE t FROM c JOIN t IN c.tags",
    "SELECT c.kind, COUNT(1) AS n FROM c GROUP BY c.kind",
    "SELECT c.id, i.qty * i.price AS cost FROM c JOIN i IN c.items WHERE c.rank < 30",
    "SELECT VALUE COUNT(1) FROM c",
    "SELECT VALUE COUNT(1) FROM c WHERE c.kind = 'z'",
]
PAGED = [c for c in CASES if c.sql in PAGED_SQL]


def check_pages(case, pages: list, docs: list) -> None:
    assert all(len(p) == PAGE_ITEMS for p in pages[:-1]), [len(p) for p in pages]
    assert len(pages[-1]) <= PAGE_ITEMS if pages else True
    check(case, [r for p in pages for r in p], docs)


def test_paged_cases_are_all_found():
    assert len(PAGED) == len(PAGED_SQL)


@pytest.mark.parametrize("case", PAGED, ids=case_ids(PAGED))
def test_sync_paging_by_three(corpus, case):
    def pages():
        it = corpus.container.query_items(case.sql, parameters=case.params, max_item_count=PAGE_ITEMS,
                                          enable_cross_partition_query=True)
        return [list(p) for p in it.by_page()]
    check_paged(corpus, case, pages)


def check_paged(corpus, case, pages) -> None:
    refused = refused_for_the_python_sdk(corpus, case)
    if refused is not None:
        with pytest.raises(CosmosHttpResponseError, match=re.escape(refused)):
            pages()
        return
    if corpus.mode == "service" and case.sql in MIXED_TYPE_ORDER_BY:
        with pytest.raises(ValueError, match=r"^Expected \w+, but got \w+\.$"):
            pages()
        return
    if STREAMING.match(case.sql):
        check_range_pages(corpus, case, pages())
        return
    check_pages(case, pages(), corpus.docs)


# No ORDER BY, aggregate, GROUP BY, DISTINCT, TOP or OFFSET: the gateway serves the query a
# partition key range at a time, so its pages end at each range's end as well as at 3 items.
STREAMING = re.compile(r"^SELECT (?!DISTINCT |TOP |VALUE (COUNT|SUM|MIN|MAX|AVG)\()(?!.* (ORDER BY|GROUP BY|OFFSET) )")


def check_range_pages(corpus, case, pages: list) -> None:
    sizes = []
    for docs in corpus.range_docs:
        n = len(case.ref(docs))
        sizes += [PAGE_ITEMS] * (n // PAGE_ITEMS) + ([n % PAGE_ITEMS] if n % PAGE_ITEMS else [])
    assert [len(p) for p in pages] == sizes
    check(case, [r for p in pages for r in p], corpus.docs)


def test_streaming_cases_are_read_off_the_text():
    assert STREAMING.match("SELECT VALUE c.id FROM c WHERE c.rank < 10")
    assert STREAMING.match("SELECT c.id, i.qty * i.price AS cost FROM c JOIN i IN c.items WHERE c.rank < 30")
    assert not STREAMING.match("SELECT VALUE COUNT(1) FROM c")
    assert not STREAMING.match("SELECT c.id FROM c ORDER BY c.n")
    assert not STREAMING.match("SELECT TOP 5 c.id FROM c")
    assert not STREAMING.match("SELECT DISTINCT VALUE c.kind FROM c")


@pytest.mark.parametrize("case", PAGED, ids=case_ids(PAGED))
def test_aio_paging_by_three(corpus, case):
    async def pages():
        async with make_aio_client(corpus.emu) as client:
            c = client.get_database_client(DB).get_container_client(COLL)
            it = c.query_items(case.sql, parameters=case.params, max_item_count=PAGE_ITEMS)
            return [[r async for r in p] async for p in it.by_page()]
    check_paged(corpus, case, lambda: asyncio.run(pages()))


SCOPED_PAGED = [(c, pk) for c in PAGED for pk in ("p5", 42)]


@pytest.mark.parametrize("case,pk", SCOPED_PAGED, ids=[f"{pk}|{c.id}" for c, pk in SCOPED_PAGED])
def test_sync_paging_by_three_scoped_by_partition_key(corpus, case, pk):
    it = corpus.container.query_items(case.sql, parameters=case.params, partition_key=pk, max_item_count=PAGE_ITEMS)
    check_pages(case, [list(p) for p in it.by_page()], scoped(corpus.docs, pk))


# The gateway's own continuation (whole mode). A planned cross-partition ORDER BY is paged by
# the SDK, whose 4.17.1 token does not resume such a query in a new iterator.
@pytest.mark.parametrize("corpus", ["whole"], indirect=True)
def test_sync_paging_resumes_from_a_continuation_token_in_a_new_iterator(corpus):
    sql = "SELECT VALUE c.rank FROM c ORDER BY c.rank DESC"
    first = corpus.container.query_items(sql, max_item_count=PAGE_ITEMS, enable_cross_partition_query=True).by_page()
    head = list(next(first))
    token = first.continuation_token
    assert head == [199, 198, 197] and token
    rest = corpus.container.query_items(sql, max_item_count=PAGE_ITEMS, enable_cross_partition_query=True).by_page(token)
    assert head + [r for p in rest for r in p] == list(range(199, -1, -1))


def test_sync_cross_partition_query_without_the_flag(corpus):
    """The sync SDK sends no cross-partition flag unless asked: over 4 ranges that is the
    service's 400 (test_query_fidelity.py has the other cases); with the flag, every page is 200."""
    log = WireLog()
    with make_client(corpus.emu, raw_response_hook=log) as client:
        c = client.get_database_client(DB).get_container_client(COLL)
        with pytest.raises(CosmosHttpResponseError, match="Cross partition query is required but disabled"):
            list(c.query_items("SELECT VALUE c.id FROM c", max_item_count=70))
        got = [r for p in c.query_items("SELECT VALUE c.id FROM c", max_item_count=70,
                                        enable_cross_partition_query=True).by_page() for r in p]
    sent = [e for e in log.entries if e.method == "POST" and e.path.rstrip("/").endswith("/docs")]
    per_range = [-(-len(docs) // 70) for docs in corpus.range_docs]     # pages of at most 70, per range
    assert [e.status for e in sent] == [400] + [200] * sum(per_range)
    assert CROSS_PARTITION_HEADER not in sent[0].request_headers
    assert all(CROSS_PARTITION_HEADER in e.request_headers for e in sent[1:])
    assert all("x-ms-documentdb-partitionkey" not in e.request_headers for e in sent)
    assert sorted(got) == sorted(d["id"] for d in corpus.docs)


@pytest.mark.parametrize("sql", ["SELECT VALUE c.id FROM c", "SELECT VALUE c.id FROM c ORDER BY c.n"])
def test_sync_paging_survives_writes_between_pages(corpus, sql):
    c = corpus.client.get_database_client(EXTRA_DBS[0]).create_container(f"paged-{len(sql)}", PartitionKey(path="/pk"))
    for i in range(30):
        c.create_item({"id": f"i{i:02d}", "pk": f"k{i % 6}", "n": i})
    pager = c.query_items(sql, max_item_count=PAGE_ITEMS, enable_cross_partition_query=True).by_page()
    got = list(next(pager)) + list(next(pager))
    c.delete_item(got[0], partition_key=f"k{int(got[0][1:]) % 6}")      # an item already returned
    got += [r for p in pager for r in p]
    assert sorted(got) == [f"i{i:02d}" for i in range(30)]


# ---- read_items (read many) ---------------------------------------------------------------------
def _read_many_request(docs):
    chosen = docs[::7] + [docs[3]]                 # every partition, and one item asked twice
    wanted = [(d["id"], d["pk"]) for d in chosen] + [("absent", "p1"), ("d000", "p1")]  # d000 is in p0
    expected = {d["id"]: d for d in chosen}
    return wanted, list(expected.values())


def test_sync_read_items_across_partitions(corpus):
    wanted, expected = _read_many_request(corpus.docs)
    got = corpus.container.read_items(wanted)
    assert bag(got) == bag(expected)


def test_aio_read_items_across_partitions(corpus):
    wanted, expected = _read_many_request(corpus.docs)

    async def read():
        async with make_aio_client(corpus.emu) as client:
            return await client.get_database_client(DB).get_container_client(COLL).read_items(wanted)
    assert bag(asyncio.run(read())) == bag(expected)


# ---- feed ranges --------------------------------------------------------------------------------
def _in_range(container, pk, feed_range) -> bool:
    epk = container.feed_range_from_partition_key(pk)["Range"]["min"]
    r = feed_range["Range"]
    return r["min"] <= epk < r["max"] or (r["max"] == "FF" and epk >= r["min"])


def _span(a: dict, b: dict) -> dict:
    return {"Range": dict(a["Range"], max=b["Range"]["max"])}


def test_sync_feed_range_queries_return_exactly_their_documents(corpus):
    c = corpus.container
    ranges = list(c.read_feed_ranges())
    seen = []
    for r in ranges + [_span(ranges[1], ranges[2])]:
        got = list(c.query_items("SELECT * FROM c", feed_range=r))
        assert bag(got) == bag([d for d in corpus.docs if _in_range(c, d["pk"], r)])
        seen += got if r in ranges else []
        count = list(c.query_items("SELECT VALUE COUNT(1) FROM c", feed_range=r))
        assert count == [len(got)]
    assert bag(seen) == bag(corpus.docs)
    for pk in ("p3", 42, "日本"):
        got = list(c.query_items("SELECT * FROM c ORDER BY c.rank", feed_range=c.feed_range_from_partition_key(pk)))
        assert got == sorted(scoped(corpus.docs, pk), key=lambda d: d["rank"])


def test_aio_feed_range_queries_return_exactly_their_documents(corpus):
    async def run():
        async with make_aio_client(corpus.emu) as client:
            c = client.get_database_client(DB).get_container_client(COLL)
            ranges = [r async for r in c.read_feed_ranges()]
            per_range = [[d async for d in c.query_items("SELECT * FROM c", feed_range=r)] for r in ranges]
            one = await c.feed_range_from_partition_key("ünï")
            per_key = [d async for d in c.query_items("SELECT VALUE c.id FROM c", feed_range=one)]
            return ranges, per_range, per_key
    ranges, per_range, per_key = asyncio.run(run())
    assert len(ranges) == PARTITIONS
    for r, got in zip(ranges, per_range):
        assert bag(got) == bag([d for d in corpus.docs if _in_range(corpus.container, d["pk"], r)])
    assert bag([d for got in per_range for d in got]) == bag(corpus.docs)
    assert sorted(per_key) == sorted(d["id"] for d in scoped(corpus.docs, "ünï"))


# ---- /dbs, /colls and /offers queries ---------------------------------------------------------------
def test_sync_query_databases_containers_and_offers(corpus):
    client = corpus.client
    assert sorted(client.query_databases("SELECT VALUE r.id FROM r")) == sorted((DB,) + EXTRA_DBS)
    found = list(client.query_databases("SELECT * FROM r WHERE r.id = @id", parameters=[{"name": "@id", "value": DB}]))
    assert [d["id"] for d in found] == [DB] and found[0]["_self"].startswith("dbs/")
    descending = list(client.query_databases("SELECT VALUE r.id FROM r ORDER BY r.id DESC"))
    assert descending == sorted((DB,) + EXTRA_DBS, reverse=True)
    db = client.get_database_client(DB)
    assert sorted(db.query_containers("SELECT VALUE r.id FROM r")) == ["docs", "side"]
    side = list(db.query_containers("SELECT * FROM r WHERE r.id = 'side'"))
    assert [c["partitionKey"]["paths"] for c in side] == [["/x"]]
    assert list(db.query_containers("SELECT VALUE COUNT(1) FROM r")) == [2]
    assert db.get_throughput().offer_throughput == 1000
    assert db.get_container_client("side").get_throughput().offer_throughput == 500


def test_aio_query_databases_containers_and_offers(corpus):
    async def run():
        async with make_aio_client(corpus.emu) as client:
            dbs = [d async for d in client.query_databases("SELECT VALUE r.id FROM r")]
            db = client.get_database_client(DB)
            colls = [c async for c in db.query_containers("SELECT * FROM r WHERE STARTSWITH(r.id, 'd')")]
            throughput = (await db.get_throughput()).offer_throughput
            side = (await db.get_container_client("side").get_throughput()).offer_throughput
            return dbs, colls, throughput, side
    dbs, colls, throughput, side = asyncio.run(run())
    assert sorted(dbs) == sorted((DB,) + EXTRA_DBS)
    assert [c["id"] for c in colls] == ["docs"] and colls[0]["partitionKey"]["paths"] == ["/pk"]
    assert (throughput, side) == (1000, 500)
