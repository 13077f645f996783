"""Queries have a budget and pages a byte cap, proven with the official SDK on a real emulator:
a 5-JOIN query pages at its work budget (some pages empty) and the SDK, following the
continuations, gets exactly the full result; query, read-feed and change-feed pages stay
under 4 MB; a paged query pins no old versions while writes go on, and still returns every
unchanged document exactly once; point reads are answered while a heavy aggregate runs (by
completion order, never by timing); and a heavy query whose client disconnects stops
(counted in slices the server ran, not in time).

Expected results are computed here from the documents the test wrote. Waiting is a bounded
loop of calls on the emulator's own loop (each is answered between two query slices), or, for
the two tests whose emulator runs as its own process (so that its query slices do not take
this process's GIL from the test's reads and polling), of reads of its /metrics; never a sleep."""
import asyncio
import itertools
import json
import threading
import urllib.request

import pytest
from azure.cosmos import CosmosClient, PartitionKey

from regionlab.emulator.core import limits
from regionlab.emulator.core import query_page as qp
from regionlab.emulator.core.store import versions_of
from sdk_harness import host_port, make_aio_client, raw_socket, signed_headers
from test_cli import spawn

ONE_REGION = dict(regions=("East US",), ru_limits=False)
PAGE_MAX_BYTES = 4 * 1024 * 1024          # the service's page cap, restated: the test states it
FIVE_JOINS = ("SELECT VALUE [c.id, a, b, d, e, f] FROM c JOIN a IN c.arr JOIN b IN c.arr JOIN d IN c.arr "
              "JOIN e IN c.arr JOIN f IN c.arr WHERE c.hit AND a + b + d + e + f = 24")
HEAVY = ("SELECT VALUE COUNT(1) FROM c JOIN a IN c.arr JOIN b IN c.arr JOIN d IN c.arr "
         "JOIN e IN c.arr JOIN f IN c.arr")
# The same rows by group: its groups cannot ride a continuation, so one page reads them all.
HEAVY_GROUPED = HEAVY + " GROUP BY c.pk"
HEAVY_DOCS, HEAVY_ARR = 20, 10            # 20 x 10^5 JOIN rows: about 1,000 slices
WAIT_CALLS_MAX = 100_000                  # bound on emulator calls while waiting for a state
BIG_BLOB_BYTES = 1_500_000


def _query_work(emu) -> dict:
    def total(account):
        out = {}
        for gw in emu.emulator.services.values():
            for k, n in gw.query_work.items():
                out[k] = out.get(k, 0) + n
        return out
    return emu.call(lambda account: total(account))


def _wait_for(emu, check) -> dict:
    for _ in range(WAIT_CALLS_MAX):
        work = _query_work(emu)
        if check(work):
            return work
    raise AssertionError("the server never reached the state waited for")


def _fill(container, docs):
    for d in docs:
        container.create_item(d)


@pytest.mark.regionlab_config(**ONE_REGION, partitions=2)
def test_a_five_join_query_pages_at_its_budget_and_the_sdk_gets_the_whole_result(regionlab, container):
    docs = [{"id": f"d{i:02d}", "pk": f"p{i % 3}", "arr": [0, 1, 2, 3, 4, 5], "hit": i in (5, 17, 28)}
            for i in range(30)]
    _fill(container, docs)
    expected = sorted([d["id"], *t] for d in docs for t in itertools.product(d["arr"], repeat=5)
                      if d["hit"] and sum(t) == 24)
    before = _query_work(regionlab)
    pages = [list(p) for p in container.query_items(FIVE_JOINS, enable_cross_partition_query=True).by_page()]
    after = _query_work(regionlab)
    assert sorted(r for p in pages for r in p) == expected
    # Loading a document costs a unit, plus one per DOC_BYTES_PER_UNIT of the stored JSON it is
    # parsed from; then its FROM row and its JOIN rows.
    parse = [len(json.dumps(container.read_item(d["id"], d["pk"]), separators=(",", ":"), ensure_ascii=False)
                 .encode()) // qp.DOC_BYTES_PER_UNIT for d in docs]
    units = 30 * (1 + sum(6 ** k for k in range(6))) + sum(parse)
    served = after["pages"] - before.get("pages", 0)     # pages the server answered
    assert served >= units // limits.QUERY_PAGE_MAX_WORK_UNITS    # the budget ended them, not the item count
    assert served > len(pages) == 3                      # the SDK followed the empty ones through
    spent = after["work"] - before.get("work", 0)
    assert spent <= units + (7 + max(parse)) * served    # each page resumed at its cursor, none redone

    async def aio_query():                               # the aio client follows them too
        async with make_aio_client(regionlab) as client:
            c = client.get_database_client("db").get_container_client("items")
            return [r async for r in c.query_items(FIVE_JOINS)]
    assert sorted(asyncio.run(aio_query())) == expected


def _big_docs(n: int) -> list:
    return [{"id": f"b{i}", "pk": "p", "n": i, "blob": str(i) * BIG_BLOB_BYTES} for i in range(n)]


def _assert_capped(pages: list, ids: list) -> None:
    assert [d["id"] for p in pages for d in p] == ids
    assert len(pages) > 1
    for p in pages:
        assert sum(len(json.dumps(d, separators=(",", ":"))) for d in p) <= PAGE_MAX_BYTES


@pytest.mark.regionlab_config(**ONE_REGION)
def test_query_pages_stop_at_four_megabytes(container):
    docs = _big_docs(6)                                              # 9 MB in all
    _fill(container, docs)
    ids = [d["id"] for d in docs]
    _assert_capped([list(p) for p in container.query_items("SELECT * FROM c", partition_key="p").by_page()], ids)
    ordered = container.query_items("SELECT * FROM c ORDER BY c.n DESC", partition_key="p").by_page()
    _assert_capped([list(p) for p in ordered], ids[::-1])


@pytest.mark.regionlab_config(**ONE_REGION)
def test_read_feed_and_change_feed_pages_stop_at_four_megabytes(container):
    docs = _big_docs(6)
    _fill(container, docs)
    ids = [d["id"] for d in docs]
    _assert_capped([list(p) for p in container.read_all_items().by_page()], ids)
    changes = container.query_items_change_feed(start_time="Beginning").by_page()
    pages = [[{k: v for k, v in d.items() if k != "_lsn"} for d in p] for p in changes]
    _assert_capped([p for p in pages if p], ids)


def _versions_retained(emu) -> int:
    def count(account):
        c = account.databases["db"].containers["items"]
        return sum(len(versions_of(entry)) for p in c.partitions for rs in p.replica_sets.values()
                   for _, entry in rs.store.keys_with_versions())
    return emu.call(count)


@pytest.mark.regionlab_config(**ONE_REGION)
def test_a_paged_query_pins_no_old_versions_and_still_returns_each_document_once(regionlab, container):
    docs = [{"id": f"d{i:02d}", "pk": "p", "v": 0} for i in range(50)]
    _fill(container, docs)
    pages = container.query_items("SELECT * FROM c", partition_key="p", max_item_count=10).by_page()
    seen = [d["id"] for d in next(pages)]
    assert len(seen) == 10 and pages.continuation_token
    for v in range(1, 21):                                           # steady writes meanwhile
        for d in docs[::5]:
            container.upsert_item({**d, "v": v})
    # One version per item, plus at most the one a written item's latest write superseded (it
    # is pruned by the next write): not one per write, as a pinned snapshot would keep.
    assert _versions_retained(regionlab) <= len(docs) + len(docs[::5])
    for page in pages:
        seen.extend(d["id"] for d in page)
    assert seen == [d["id"] for d in docs]                           # none twice, none missed


def _heavy_docs(container):
    _fill(container, [{"id": f"h{i:02d}", "pk": f"p{i % 2}", "arr": list(range(HEAVY_ARR))}
                      for i in range(HEAVY_DOCS)])


METRICS = {"slices": "regionlab_query_slices_total", "abandoned": "regionlab_queries_abandoned_total"}


def _process_work(control_endpoint: str) -> dict:
    """Query slices run and queries abandoned by an emulator process (its control port's metrics)."""
    with urllib.request.urlopen(control_endpoint + "metrics", timeout=30) as r:
        lines = r.read().decode().splitlines()
    return {kind: sum(int(float(line.rsplit(" ", 1)[1])) for line in lines if line.startswith(name + "{"))
            for kind, name in METRICS.items()}


def _process_wait_for(control_endpoint: str, check) -> dict:
    for _ in range(WAIT_CALLS_MAX):
        work = _process_work(control_endpoint)
        if check(work):
            return work
    raise AssertionError("the server never reached the state waited for")


def _slices(control_endpoint: str) -> int:
    return _process_work(control_endpoint)["slices"]


class _Process:
    """What _raw_query needs of an emulator, for one running as its own process."""

    def __init__(self, info: dict):
        self.key, self.endpoint = info["key"], info["regions"][0]["endpoint"]


@pytest.mark.slow
def test_point_reads_are_served_while_a_heavy_aggregate_runs(tmp_path):
    # The emulator runs as its own process: in this one it would share the GIL with the query's
    # and the reads' threads, and its CPU-bound slices would make each read wait for the GIL
    # (0.25-1 s per read were measured so), which is this process's doing, not the server's.
    with spawn(tmp_path, "--port", "0", "--control-port", "0", "--direct-ports", "0",
               "--regions", "East US", "--no-ru-limits") as cli:
        info = cli.info
        finished = []
        with CosmosClient(info["account_endpoint"], info["key"]) as client, \
                CosmosClient(info["account_endpoint"], info["key"]) as other:
            container = client.create_database("db").create_container("items", PartitionKey(path="/pk"))
            _heavy_docs(container)
            container.create_item({"id": "probe", "pk": "p0"})
            heavy = other.get_database_client("db").get_container_client("items")

            def run_heavy():
                finished.append(("query", list(heavy.query_items(HEAVY, enable_cross_partition_query=True))))
            start = _slices(info["control_endpoint"])
            thread = threading.Thread(target=run_heavy)
            thread.start()
            for _ in range(WAIT_CALLS_MAX):                              # it is running
                if _slices(info["control_endpoint"]) > start + 1:
                    break
            for i in range(10):
                container.read_item("probe", partition_key="p0")
                finished.append(("read", i))
            thread.join(120)
        assert "Traceback" not in cli.stderr(), cli.stderr()[-3000:]
    assert [kind for kind, _ in finished] == ["read"] * 10 + ["query"]
    assert finished[-1][1] == [HEAVY_DOCS * HEAVY_ARR ** 5]


def _raw_query(emu, text: str) -> bytes:
    path = "/dbs/db/colls/items/docs"
    body = json.dumps({"query": text, "parameters": []}).encode()
    headers = signed_headers(emu.key, "POST", path, {
        "x-ms-documentdb-isquery": "True", "content-type": "application/query+json",
        "x-ms-documentdb-query-enablecrosspartition": "True", "content-length": str(len(body))})
    host, port = host_port(emu.endpoint)
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def test_a_query_whose_client_disconnects_stops(tmp_path):
    # Its own process, as above: in this one the query's slices would hold the GIL against the
    # test's own polling, and the query could finish before the test closed its socket.
    with spawn(tmp_path, "--port", "0", "--control-port", "0", "--direct-ports", "0",
               "--regions", "East US", "--no-ru-limits") as cli:
        info, control = cli.info, cli.info["control_endpoint"]
        with CosmosClient(info["account_endpoint"], info["key"]) as client:
            _heavy_docs(client.create_database("db").create_container("items", PartitionKey(path="/pk")))
        emu = _Process(info)
        full_slices = HEAVY_DOCS * sum(HEAVY_ARR ** k for k in range(6)) // limits.QUERY_SLICE_MAX_WORK_UNITS
        start = _process_work(control)
        with raw_socket(emu) as sock:
            sock.sendall(_raw_query(emu, HEAVY_GROUPED))
            _process_wait_for(control, lambda w: w["slices"] > start["slices"] + 1)
        stopped = _process_wait_for(control, lambda w: w["abandoned"] > start["abandoned"])
        later = _process_work(control)
        assert "Traceback" not in cli.stderr(), cli.stderr()[-3000:]
    assert later["slices"] == stopped["slices"]                      # nothing runs on for nobody
    assert stopped["slices"] - start["slices"] < full_slices // 2


@pytest.mark.regionlab_config(**ONE_REGION)
def test_order_by_pages_resume_by_position_when_rows_are_written_behind_the_cursor(container):
    """The index walk narrows a page to the rows deciding the first results; writes ahead of the
    position in ORDER BY order must not make a later page miss rows (it then reads everything)."""
    _fill(container, [{"id": f"n{i:03d}", "pk": f"p{i % 4}", "n": i} for i in range(200)])
    pages = container.query_items("SELECT c.id FROM c ORDER BY c.n", enable_cross_partition_query=True,
                                  max_item_count=20).by_page()
    seen = [r["id"] for r in next(pages)]
    assert seen == [f"n{i:03d}" for i in range(20)]
    _fill(container, [{"id": f"m{i:02d}", "pk": "p0", "n": -1 - i} for i in range(30)])   # behind
    container.create_item({"id": "z", "pk": "p1", "n": 1000})                            # ahead
    for page in pages:
        seen.extend(r["id"] for r in page)
    assert seen == [f"n{i:03d}" for i in range(200)] + ["z"]


@pytest.mark.regionlab_config(**ONE_REGION)
def test_a_blocking_page_past_its_total_budget_is_a_clear_400(container, monkeypatch):
    """The in-process emulator reads the limit at run time; lowering it stands for a query ten
    thousand times this size without spending minutes of CPU on it."""
    from azure.cosmos.exceptions import CosmosHttpResponseError
    _heavy_docs(container)
    monkeypatch.setattr(limits, "QUERY_REQUEST_MAX_WORK_UNITS", 5 * limits.QUERY_SLICE_MAX_WORK_UNITS)
    with pytest.raises(CosmosHttpResponseError) as e:
        list(container.query_items(HEAVY_GROUPED, enable_cross_partition_query=True))
    assert e.value.status_code == 400 and "work units" in e.value.message
