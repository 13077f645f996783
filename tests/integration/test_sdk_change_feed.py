"""Proves the change feed works through the official SDK (sync and aio) against a real regionlab
with 4 physical partitions: from the beginning every item appears once in its latest version;
a continuation (the SDK's etag, or by_page's continuation_token) sees later writes and only
them; per-partition-key and per-feed-range feeds hold exactly their own changes; a point in time
and "Now" start where they should; all-versions-and-deletes mode shows creates, replaces and
deletes with their metadata; an idle feed answers 304 and keeps its etag; and a client preferring
West US reads West US's feed, which holds what West US has replicated and nothing more.

Expected results come from the writes the test itself made; ids are checked as exact lists or
multisets so duplicates and strays fail. No sleeps: waiting is a bounded loop of reads, or the
server's own commit event (sdk_harness.wait_replicated).
"""
import asyncio
import collections
import datetime

import pytest
from azure.cosmos import PartitionKey

from sdk_harness import WireLog, make_aio_client, make_client, no_lag, wait_replicated

PARTITIONS = 4
KEYS = ["k0", "k1", "k2", "ünï", 7, "k5", "日本", "k7"]
FIRST = [{"id": f"a{i:02d}", "pk": KEYS[i % len(KEYS)], "v": 0} for i in range(40)]
POLL_READS_MAX = 500          # bound on feed reads while waiting for replication
TICK_WRITES_MAX = 2000        # bound on writes while waiting for the server clock's next second
NO_LAG = no_lag(("East US", "East US 2", "West US"))


def setup(client, docs=FIRST):
    c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
    for d in docs:
        c.create_item(d)
    return c


def feed(c, **kwargs) -> tuple:
    """(items, the SDK's continuation after draining them) of one sync change feed read."""
    items = list(c.query_items_change_feed(**kwargs))
    return items, c.client_connection.last_response_headers["etag"]


def ids(items) -> list:
    return [d["id"] for d in items]


def bag(items) -> list:
    return sorted(ids(items))


def same_key(a, b) -> bool:
    return a == b and type(a) is type(b)


def epk_in(c, pk, feed_range) -> bool:
    epk = c.feed_range_from_partition_key(pk)["Range"]["min"]
    r = feed_range["Range"]
    return r["min"] <= epk and (epk < r["max"] or r["max"] == "FF")


# ---- sync: beginning, continuation, by_page ---------------------------------------------------
@pytest.mark.regionlab_config(partitions=PARTITIONS)
def test_from_beginning_sees_every_item_once_in_its_latest_version(sdk_client):
    c = setup(sdk_client)
    for d in FIRST[::3]:
        c.replace_item(d["id"], dict(d, v=1))
    for d in FIRST[1::10]:
        c.delete_item(d["id"], partition_key=d["pk"])
    items, _ = feed(c, start_time="Beginning")
    deleted = {d["id"] for d in FIRST[1::10]}
    assert bag(items) == sorted(d["id"] for d in FIRST if d["id"] not in deleted)
    versions = {d["id"]: int(i % 3 == 0) for i, d in enumerate(FIRST) if d["id"] not in deleted}
    assert {d["id"]: d["v"] for d in items} == versions
    for pk in KEYS:                   # inside one logical partition: the order of the last writes
        mine = [d for d in FIRST if same_key(d["pk"], pk) and d["id"] not in deleted]
        last_write_order = [d["id"] for d in mine if d not in FIRST[::3]] + [d["id"] for d in mine if d in FIRST[::3]]
        assert [i for i in ids(items) if i in {d["id"] for d in mine}] == last_write_order


@pytest.mark.regionlab_config(partitions=PARTITIONS)
def test_continuation_sees_later_writes_and_only_them(sdk_client):
    c = setup(sdk_client)
    items, token = feed(c, start_time="Beginning")
    assert len(items) == len(FIRST)
    c.create_item({"id": "new1", "pk": "k2", "v": 0})
    c.upsert_item(dict(FIRST[5], v=9))
    c.create_item({"id": "new2", "pk": 7, "v": 0})
    later, token2 = feed(c, continuation=token)
    assert bag(later) == sorted(["new1", FIRST[5]["id"], "new2"])
    assert {d["id"]: d["v"] for d in later}[FIRST[5]["id"]] == 9
    c.replace_item("new1", {"id": "new1", "pk": "k2", "v": 1})
    again, _ = feed(c, continuation=token2)
    assert [(d["id"], d["v"]) for d in again] == [("new1", 1)]
    assert feed(c, continuation=token2)[0] == again      # a continuation can be read twice


@pytest.mark.regionlab_config(partitions=PARTITIONS)
def test_by_page_continuation_token_resumes_after_the_last_page(sdk_client):
    c = setup(sdk_client)
    pager = c.query_items_change_feed(start_time="Beginning", max_item_count=4).by_page()
    pages = [list(p) for p in pager]
    assert all(len(p) <= 4 for p in pages)
    assert bag([d for p in pages for d in p]) == bag(FIRST)
    token = pager.continuation_token
    c.create_item({"id": "late", "pk": "k0"})
    assert ids(c.query_items_change_feed(continuation=token)) == ["late"]


@pytest.mark.regionlab_config(partitions=PARTITIONS)
def test_idle_feed_answers_304_and_keeps_its_etag(sdk_client, regionlab):
    log = WireLog()
    with make_client(regionlab, raw_response_hook=log) as client:
        c = setup(client)
        _, token = feed(c, start_time="Beginning")
        log.entries.clear()
        for _ in range(3):
            items, again = feed(c, continuation=token)
            assert items == [] and again == token
        reads = log.matching("GET", "/docs")
        assert len(reads) >= 3 * PARTITIONS and {e.status for e in reads} == {304}
        assert all(e.response_headers.get("etag") for e in reads)
        c.create_item({"id": "wake", "pk": "k1"})
        items, moved = feed(c, continuation=token)
        assert ids(items) == ["wake"] and moved != token


# ---- sync: partition keys, feed ranges, start time, Now -----------------------------------------
@pytest.mark.regionlab_config(partitions=PARTITIONS)
def test_partition_key_feeds_contain_exactly_that_keys_changes(sdk_client):
    c = setup(sdk_client)
    tokens = {}
    for pk in KEYS:
        items, tokens[repr(pk)] = feed(c, start_time="Beginning", partition_key=pk)
        assert bag(items) == sorted(d["id"] for d in FIRST if same_key(d["pk"], pk))
        assert all(same_key(d["pk"], pk) for d in items)
    c.create_item({"id": "n-k1", "pk": "k1"})
    c.create_item({"id": "n-7", "pk": 7})
    c.create_item({"id": "n-str7", "pk": "7"})             # same digits, another key
    c.upsert_item(dict(FIRST[3], v=5))
    assert FIRST[3]["pk"] == "ünï"
    expected = {"k1": ["n-k1"], 7: ["n-7"], "ünï": [FIRST[3]["id"]]}
    for pk in KEYS:
        assert ids(feed(c, continuation=tokens[repr(pk)])[0]) == expected.get(pk, [])
    assert ids(feed(c, start_time="Beginning", partition_key="7")[0]) == ["n-str7"]


@pytest.mark.regionlab_config(partitions=PARTITIONS)
def test_feed_range_feeds_hold_exactly_their_ranges(sdk_client):
    c = setup(sdk_client)
    ranges = list(c.read_feed_ranges())
    assert len(ranges) == PARTITIONS
    seen, tokens = [], []
    for r in ranges:
        items, token = feed(c, start_time="Beginning", feed_range=r)
        assert bag(items) == sorted(d["id"] for d in FIRST if epk_in(c, d["pk"], r))
        seen += ids(items)
        tokens.append(token)
    assert sorted(seen) == bag(FIRST)
    extra = [{"id": f"x{i}", "pk": f"x{i}"} for i in range(12)]
    for d in extra:
        c.create_item(d)
    later = []
    for r, token in zip(ranges, tokens):
        items = feed(c, continuation=token)[0]
        assert bag(items) == sorted(d["id"] for d in extra if epk_in(c, d["pk"], r))
        later += ids(items)
    assert sorted(later) == bag(extra)


@pytest.mark.regionlab_config(partitions=PARTITIONS)
def test_start_time_reads_from_a_point_in_time(sdk_client):
    c = setup(sdk_client)
    before = max(d["_ts"] for d in c.query_items("SELECT c._ts FROM c", enable_cross_partition_query=True))
    tick = None
    for _ in range(TICK_WRITES_MAX):             # write until the server's clock passes `before`
        tick = c.upsert_item({"id": "tick", "pk": "clock"})
        if tick["_ts"] > before:
            break
    assert tick["_ts"] > before, "the server clock did not advance"
    later = [c.create_item({"id": f"b{i}", "pk": KEYS[i % len(KEYS)]}) for i in range(6)]
    point = datetime.datetime.fromtimestamp(tick["_ts"], datetime.timezone.utc)
    assert bag(feed(c, start_time=point)[0]) == sorted(["tick"] + ids(later))
    earlier = datetime.datetime.fromtimestamp(before - 3600, datetime.timezone.utc)
    assert len(feed(c, start_time=earlier)[0]) == len(FIRST) + 1 + len(later)
    future = datetime.datetime.fromtimestamp(tick["_ts"] + 3600, datetime.timezone.utc)
    assert feed(c, start_time=future)[0] == []


@pytest.mark.regionlab_config(partitions=PARTITIONS)
def test_now_sees_nothing_old_then_exactly_the_new(sdk_client):
    c = setup(sdk_client)
    items, token = feed(c)                       # start_time defaults to "Now"
    assert items == []
    assert feed(c, start_time="Now", partition_key="k1")[0] == []
    c.create_item({"id": "fresh", "pk": "k3"})
    c.upsert_item(dict(FIRST[0], v=3))
    assert bag(feed(c, continuation=token)[0]) == sorted(["fresh", FIRST[0]["id"]])


# ---- sync: all versions and deletes --------------------------------------------------------------
def check_all_versions(entries: list, pk) -> None:
    """create y, replace y, delete y, upsert z (create), upsert z (replace), in that order."""
    ops = [(e["metadata"]["operationType"], (e.get("current") or e.get("previous") or {}).get("id")
            or e["metadata"].get("id")) for e in entries]
    assert ops == [("create", "y"), ("replace", "y"), ("delete", "y"), ("create", "z"), ("replace", "z")]
    lsns = [e["metadata"]["lsn"] for e in entries]
    assert lsns == sorted(lsns) and len(set(lsns)) == len(lsns)
    create_y, replace_y, delete_y, create_z, replace_z = entries
    assert [create_y["current"]["v"], replace_y["current"]["v"], replace_z["current"]["v"]] == [1, 2, 2]
    assert "previousImageLSN" not in create_y["metadata"]
    assert replace_y["metadata"]["previousImageLSN"] == create_y["metadata"]["lsn"]
    assert delete_y["metadata"]["previousImageLSN"] == replace_y["metadata"]["lsn"]
    assert replace_z["metadata"]["previousImageLSN"] == create_z["metadata"]["lsn"]
    assert not delete_y.get("current")
    assert delete_y["metadata"]["id"] == "y" and delete_y["metadata"]["partitionKey"] == {"pk": pk}
    assert delete_y["metadata"]["timeToLiveExpired"] is False
    for e in (create_y, replace_y, create_z, replace_z):
        assert e["metadata"]["crts"] == e["current"]["_ts"]
    assert delete_y["metadata"]["crts"] >= replace_y["metadata"]["crts"]


def all_version_writes(c, pk) -> None:
    c.create_item({"id": "y", "pk": pk, "v": 1})
    c.replace_item("y", {"id": "y", "pk": pk, "v": 2})
    c.delete_item("y", partition_key=pk)
    c.upsert_item({"id": "z", "pk": pk, "v": 1})
    c.upsert_item({"id": "z", "pk": pk, "v": 2})


@pytest.mark.regionlab_config(partitions=PARTITIONS)
def test_all_versions_and_deletes_shows_every_operation_with_metadata(sdk_client):
    c = setup(sdk_client)
    mode = "AllVersionsAndDeletes"
    items, token = feed(c, mode=mode)
    assert items == []
    _, pk_token = feed(c, mode=mode, partition_key="k2")
    all_version_writes(c, "k2")
    c.upsert_item(dict(FIRST[1], v=4))                     # pk k1: another key, same feed
    entries, token2 = feed(c, mode=mode, continuation=token)
    mine = [e for e in entries if (e.get("current") or e.get("previous") or {}).get("pk", "k2") == "k2"]
    check_all_versions(mine, "k2")
    assert len(entries) == len(mine) + 1
    check_all_versions(feed(c, mode=mode, continuation=pk_token)[0], "k2")
    assert feed(c, mode=mode, continuation=token2)[0] == []
    latest = feed(c, start_time="Beginning", partition_key="k2")[0]
    assert sorted((d["id"], d["v"]) for d in latest) == sorted(
        [(d["id"], d["v"]) for d in FIRST if d["pk"] == "k2"] + [("z", 2)])   # deletes never in latest


# ---- multi-region: a region serves what it has replicated ---------------------------------------
def poll_feed(c, token, want: str) -> tuple:
    """Read the feed from `token` until an item with id `want` arrives (bounded by POLL_READS_MAX
    reads, each a real request); returns (every item read on the way, the last token)."""
    got = []
    for _ in range(POLL_READS_MAX):
        items, token = feed(c, continuation=token)
        got += items
        if want in ids(got):
            return got, token
    raise AssertionError(f"{want} never reached the feed after {POLL_READS_MAX} reads")


@pytest.mark.regionlab_config(partitions=PARTITIONS, lag_ms=NO_LAG)
def test_preferred_region_feed_serves_what_it_has_replicated(regionlab):
    west = regionlab.region_endpoints["West US"]
    with make_client(regionlab) as writer:
        c = setup(writer)
        wait_replicated(regionlab, "db", "c", "West US")
        log = WireLog()
        with make_client(regionlab, preferred_locations=["West US"], raw_response_hook=log) as reader:
            rc = reader.get_database_client("db").get_container_client("c")
            items, token = feed(rc, start_time="Beginning")
            assert bag(items) == bag(FIRST)
            cut = regionlab.call(lambda a: a.faults.inject({"type": "link_cut", "from": "East US", "to": "West US",
                                                            "one_way": True}))
            c.create_item({"id": "late", "pk": "k1"})
            assert ids(feed(c, continuation=token)[0]) == ["late"]        # East US has it
            stale, stale_token = feed(rc, continuation=token)
            assert stale == [] and stale_token == token                  # West US does not, yet
            assert bag(feed(rc, start_time="Beginning")[0]) == bag(FIRST)
            regionlab.call(lambda a: a.faults.heal(cut))
            got, token = poll_feed(rc, token, "late")
            assert ids(got) == ["late"]
            feeds = [e for e in log.entries if e.method == "GET" and e.path.rstrip("/").endswith("/docs")]
            assert feeds and {e.endpoint for e in feeds} == {west} and {e.status for e in feeds} <= {200, 304}
        c.create_item({"id": "after", "pk": "k2"})                         # West US's token, read at East US
        assert ids(feed(c, continuation=token)[0]) == ["after"]


# ---- aio --------------------------------------------------------------------------------------------
async def aio_feed(c, **kwargs) -> tuple:
    items = [d async for d in c.query_items_change_feed(**kwargs)]
    return items, c.client_connection.last_response_headers["etag"]


async def aio_setup(client, docs=FIRST):
    db = await client.create_database("db")
    c = await db.create_container("c", PartitionKey(path="/pk"))
    for d in docs:
        await c.create_item(d)
    return c


@pytest.mark.regionlab_config(partitions=PARTITIONS)
def test_aio_beginning_continuation_and_idle(regionlab):
    log = WireLog()

    async def run():
        async with make_aio_client(regionlab, raw_response_hook=log) as client:
            c = await aio_setup(client)
            first, token = await aio_feed(c, start_time="Beginning")
            await c.create_item({"id": "new", "pk": "k3", "v": 0})
            await c.upsert_item(dict(FIRST[2], v=7))
            later, token2 = await aio_feed(c, continuation=token)
            log.entries.clear()
            idle, token3 = await aio_feed(c, continuation=token2)
            return first, later, idle, token2, token3
    first, later, idle, token2, token3 = asyncio.run(run())
    assert bag(first) == bag(FIRST)
    assert bag(later) == sorted(["new", FIRST[2]["id"]]) and {d["id"]: d["v"] for d in later}[FIRST[2]["id"]] == 7
    assert idle == [] and token3 == token2
    assert {e.status for e in log.matching("GET", "/docs")} == {304}


@pytest.mark.regionlab_config(partitions=PARTITIONS)
def test_aio_partition_key_and_feed_range_feeds(regionlab):
    async def run():
        async with make_aio_client(regionlab) as client:
            c = await aio_setup(client)
            per_key = {repr(pk): (await aio_feed(c, start_time="Beginning", partition_key=pk))[0] for pk in KEYS}
            ranges = [r async for r in c.read_feed_ranges()]
            per_range = [(await aio_feed(c, start_time="Beginning", feed_range=r))[0] for r in ranges]
            return per_key, ranges, per_range
    per_key, ranges, per_range = asyncio.run(run())
    for pk in KEYS:
        assert bag(per_key[repr(pk)]) == sorted(d["id"] for d in FIRST if same_key(d["pk"], pk))
    assert len(ranges) == PARTITIONS and all(per_range)
    counts = collections.Counter(i for items in per_range for i in ids(items))
    assert sorted(counts) == bag(FIRST) and set(counts.values()) == {1}


@pytest.mark.regionlab_config(partitions=PARTITIONS)
def test_aio_now_and_all_versions_and_deletes(regionlab):
    async def run():
        async with make_aio_client(regionlab) as client:
            c = await aio_setup(client)
            now_items, now_token = await aio_feed(c)
            _, avad_token = await aio_feed(c, mode="AllVersionsAndDeletes", partition_key=7)
            await c.create_item({"id": "y", "pk": 7, "v": 1})
            await c.replace_item("y", {"id": "y", "pk": 7, "v": 2})
            await c.delete_item("y", partition_key=7)
            await c.upsert_item({"id": "z", "pk": 7, "v": 1})
            await c.upsert_item({"id": "z", "pk": 7, "v": 2})
            entries, _ = await aio_feed(c, mode="AllVersionsAndDeletes", continuation=avad_token)
            latest, _ = await aio_feed(c, continuation=now_token)
            return now_items, entries, latest
    now_items, entries, latest = asyncio.run(run())
    assert now_items == []
    check_all_versions(entries, 7)
    assert [(d["id"], d["v"]) for d in latest] == [("z", 2)]
