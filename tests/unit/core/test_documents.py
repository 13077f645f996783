"""Proves documents.py and feed.py give the service's item semantics on the core (201/200/204,
409, 404, 412 on If-Match, 400/1001 on a partition-key mismatch), that a multi-operation commit
is one LSN and all-or-nothing, that session reads in a lagging region answer 404/1002 until the
region has the token's LSN, and that feed paging visits every item once despite writes between
pages (hypothesis interleavings), all on a real account in virtual time."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core_world import World, session_of
from regionlab.emulator.core.geography import LAG_SAME_CONTINENT_MS
from regionlab.emulator.core.container import canonical_pk_json
from regionlab.emulator.core.errors import CosmosError
from regionlab.emulator.core.feed import read_page
from regionlab.emulator.core.replica_set import DOWN
from tiers import examples

REGIONS = ("East US", "East US 2", "West US")


def status_of(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)[0]
    except CosmosError as e:
        assert e.definite, "a refused item operation certainly did not happen"
        return (e.status, e.substatus) if e.substatus else e.status


@pytest.fixture
def one():
    """A one-region account with one container."""
    w = World(regions=("East US",))
    return w, w.container()


# ---- single operations -------------------------------------------------------------------
def test_create_then_conflict(one):
    w, c = one
    status, v, lsn, _ = w.write(c, "k", "create", {"id": "x", "pk": "k", "_etag": "forged", "_ts": 1})
    assert (status, lsn) == (201, 1)
    assert v.doc["_etag"] == v.etag != "forged" and v.doc["_ts"] == w.now_ms // 1000
    assert v.doc["_rid"] == v.rid and v.doc["_self"].endswith(f"docs/{v.rid}/")
    assert status_of(w.writer(c, "k").create, {"id": "x", "pk": "k"}) == 409
    assert status_of(w.writer(c, "other").create, {"id": "x", "pk": "other"}) == 201   # ids are per pk


def test_read_304_404(one):
    w, c = one
    _, v, _, _ = w.write(c, "k", "create", {"id": "x", "pk": "k"})
    r = w.writer(c, "k")
    assert r.read("x")[0] == 200
    assert r.read("x", if_none_match=v.etag)[0] == 304
    assert r.read("x", if_none_match='"other"')[0] == 200
    assert status_of(r.read, "missing") == 404
    assert r.commit() == 0                             # reads alone commit nothing


def test_replace_keeps_the_rid_and_checks_if_match(one):
    w, c = one
    _, v1, _, _ = w.write(c, "k", "create", {"id": "x", "pk": "k", "n": 1})
    assert status_of(w.writer(c, "k").replace, "missing", {"id": "missing", "pk": "k"}) == 404
    assert status_of(w.writer(c, "k").replace, "x", {"id": "y", "pk": "k"}) == 400
    assert status_of(w.writer(c, "k").replace, "x", {"id": "x", "pk": "k"}, if_match='"stale"') == 412
    status, v2, _, _ = w.write(c, "k", "replace", "x", {"id": "x", "pk": "k", "n": 2}, if_match=v1.etag)
    assert status == 200 and v2.rid == v1.rid and v2.etag != v1.etag
    assert status_of(w.writer(c, "k").replace, "x", {"id": "x", "pk": "k"}, if_match=v1.etag) == 412
    assert w.write(c, "k", "replace", "x", {"id": "x", "pk": "k", "n": 3}, if_match="*")[0] == 200
    assert w.read(c, "East US", "k", "x")[0]["n"] == 3


def test_upsert_201_then_200(one):
    w, c = one
    assert status_of(w.writer(c, "k").upsert, {"id": "x", "pk": "k"}, if_match='"e"') == 412
    status, v1, _, _ = w.write(c, "k", "upsert", {"id": "x", "pk": "k"})
    assert status == 201
    status, v2, _, _ = w.write(c, "k", "upsert", {"id": "x", "pk": "k", "n": 2})
    assert status == 200 and v2.rid == v1.rid
    assert status_of(w.writer(c, "k").upsert, {"id": "x", "pk": "k"}, if_match=v1.etag) == 412
    assert w.write(c, "k", "upsert", {"id": "x", "pk": "k"}, if_match=v2.etag)[0] == 200


def test_delete_204_then_404(one):
    w, c = one
    _, v, _, _ = w.write(c, "k", "create", {"id": "x", "pk": "k"})
    assert status_of(w.writer(c, "k").delete, "x", if_match='"stale"') == 412
    assert w.write(c, "k", "delete", "x", if_match=v.etag)[0] == 204
    assert w.read(c, "East US", "k", "x")[0] is None
    assert status_of(w.writer(c, "k").delete, "x") == 404
    assert w.write(c, "k", "create", {"id": "x", "pk": "k"})[0] == 201    # and it can come back


def test_patch_404_and_200(one):
    w, c = one
    assert status_of(w.writer(c, "k").patch, "x", [{"op": "set", "path": "/n", "value": 1}], None) == 404
    w.write(c, "k", "create", {"id": "x", "pk": "k"})
    status, v, _, _ = w.write(c, "k", "patch", "x", [{"op": "set", "path": "/n", "value": 1}], None)
    assert status == 200 and v.doc["n"] == 1


@pytest.mark.parametrize("body", [{"id": "x", "pk": "other"}, {"id": "x"}, {"id": "x", "pk": ["k"]}])
def test_partition_key_mismatch_is_400_1001(one, body):
    w, c = one
    w.write(c, "k", "create", {"id": "x", "pk": "k"})
    lsn = c.partitions[0].for_read("East US").lsn
    assert status_of(w.writer(c, "k").create, dict(body, id="new")) == (400, 1001)
    assert status_of(w.writer(c, "k").upsert, body) == (400, 1001)
    assert status_of(w.writer(c, "k").replace, "x", body) == (400, 1001)
    assert c.partitions[0].for_read("East US").lsn == lsn


# ---- commits of several operations --------------------------------------------------------
def test_a_batch_is_one_lsn(one):
    w, c = one
    w.write(c, "k", "create", {"id": "a", "pk": "k", "n": 0})
    w.write(c, "k", "create", {"id": "gone", "pk": "k"})
    b = w.writer(c, "k")
    b.create({"id": "new", "pk": "k"})
    b.replace("a", {"id": "a", "pk": "k", "n": 1})
    b.replace("a", {"id": "a", "pk": "k", "n": 2})    # later operations see earlier ones
    assert b.read("new")[0] == 200
    b.delete("gone")
    assert status_of(b.read, "gone") == 404
    lsn = b.commit()
    rs = b.rs
    assert lsn == rs.lsn == rs.committed_lsn == 3
    got = {id: w.read(c, "East US", "k", id)[0] for id in ("a", "new", "gone")}
    assert got["a"]["n"] == 2 and got["new"] is not None and got["gone"] is None
    assert {v.lsn for _, versions in rs.commits_between(2, 3) for v in versions} == {3}


def test_a_refused_operation_discards_the_whole_batch(one):
    w, c = one
    w.write(c, "k", "create", {"id": "a", "pk": "k", "n": 0})
    rs = c.partitions[0].for_read("East US")
    b = w.writer(c, "k")
    b.create({"id": "new", "pk": "k"})
    b.replace("a", {"id": "a", "pk": "k", "n": 1})
    assert status_of(b.create, {"id": "a", "pk": "k"}) == 409
    # the shell drops the writer without committing: nothing happened
    assert rs.lsn == 1 and w.read(c, "East US", "k", "new")[0] is None
    assert w.read(c, "East US", "k", "a")[0]["n"] == 0
    assert rs.store.count_live == 1


def test_a_commit_without_a_quorum_changes_nothing():
    w = World(regions=("East US",))
    c = w.container()
    b = w.writer(c, "k")
    b.create({"id": "x", "pk": "k"})
    rs = b.rs
    rs.set_replica_state(1, DOWN)
    rs.set_replica_state(2, DOWN)
    with pytest.raises(CosmosError) as e:
        b.commit()
    assert (e.value.status, e.value.definite) == (503, True)
    assert rs.lsn == 0 and rs.store.latest((canonical_pk_json(["k"]), "x")) is None
    assert c.rid_index == {}


def test_delete_all_tombstones_one_logical_partition(one):
    w, c = one
    for pk, n in (("a", 3), ("b", 2)):
        for i in range(n):
            w.write(c, pk, "create", {"id": f"{pk}{i}", "pk": pk})
    d = w.writer(c, "a")
    assert d.delete_all() == 3
    lsn = d.commit()
    assert lsn == 6
    assert all(w.read(c, "East US", "a", f"a{i}")[0] is None for i in range(3))
    assert all(w.read(c, "East US", "b", f"b{i}")[0] is not None for i in range(2))
    empty = w.writer(c, "a")
    assert empty.delete_all() == 0 and empty.commit() == 0


# ---- reads in a lagging region --------------------------------------------------------------
def test_a_session_ahead_of_a_lagging_region_is_404_1002_until_it_arrives():
    w = World(regions=REGIONS)
    c = w.container()
    t0 = w.now_ms
    _, _, lsn, rs_write = w.write(c, "k", "create", {"id": "x", "pk": "k"})
    session = session_of(rs_write, lsn)
    assert w.read(c, "East US", "k", "x", "Session", session)[0] is not None
    w.until(t0 + LAG_SAME_CONTINENT_MS - 1)
    with pytest.raises(CosmosError) as e:
        w.read(c, "West US", "k", "x", "Session", session)
    assert (e.value.status, e.value.substatus) == (404, 1002)
    doc, _, seen = w.read(c, "West US", "k", "x", "Eventual")     # eventual: stale, not an error
    assert doc is None and seen == 0
    assert w.read(c, "West US", "k", "x", "Session", None)[0] is None   # no token: anything goes
    w.until(t0 + LAG_SAME_CONTINENT_MS)
    doc, _, seen = w.read(c, "West US", "k", "x", "Session", session)
    assert doc is not None and seen >= lsn


def test_a_session_read_waits_for_the_local_quorum():
    # a token can only name an acknowledged write; one beyond the committed LSN is not served
    # even by the primary, which already has it
    w = World(regions=("East US",), intra_region_delay_ms=10)
    c = w.container()
    _, _, lsn, rs = w.write(c, "k", "create", {"id": "x", "pk": "k"})
    assert rs.primary.applied_lsn == lsn and rs.committed_lsn == lsn - 1
    with pytest.raises(CosmosError) as e:
        w.read(c, "East US", "k", "x", "Session", session_of(rs, lsn))
    assert (e.value.status, e.value.substatus) == (404, 1002)
    assert w.read(c, "East US", "k", "x", "Eventual")[0] is None     # unacknowledged: invisible
    w.until(w.now_ms + 10)
    assert w.read(c, "East US", "k", "x", "Session", session_of(rs, lsn))[0] is not None


def test_a_strong_read_never_sees_a_commit_no_majority_of_regions_has():
    # the write region commits locally, but with both of its links cut no other region gets
    # the commit: it is not acknowledged, so no strong read anywhere may see it (or a later
    # strong read in another region would go back in time)
    w = World(regions=REGIONS, consistency="Strong", lag_ms={(a, b): 0 for a in REGIONS for b in REGIONS})
    c = w.container()
    w.write(c, "k", "create", {"id": "x", "pk": "k", "v": 1})
    w.settle()
    links = [w.account.links[("East US", other)] for other in REGIONS[1:]]
    for link in links:
        link.set_state("cut")
    _, _, lsn, rs = w.write(c, "k", "upsert", {"id": "x", "pk": "k", "v": 2})
    w.settle()
    assert rs.committed_lsn == lsn > c.partitions[0].global_lsn
    for region in REGIONS:
        assert w.read(c, region, "k", "x", "Strong")[0]["v"] == 1
    for link in links:
        link.set_state("active")
    w.settle()
    for region in REGIONS:
        assert w.read(c, region, "k", "x", "Strong")[0]["v"] == 2


# ---- feed paging -------------------------------------------------------------------------
def feed_world(n_items=40, partitions=3):
    w = World(regions=("East US",), partition_count=partitions)
    c = w.container()
    for i in range(n_items):
        pk = f"p{i % 7}"
        w.write(c, pk, "create", {"id": f"i{i:03d}", "pk": pk})
    return w, c


def read_all(w, c, max_items, between=lambda page: None, **kw):
    seen, continuation, page = [], None, 0
    while True:
        versions, continuation, _ = read_page(c, "East US", "Session", None, continuation, max_items, **kw)
        seen.extend(v.key for v in versions)
        if continuation is None:
            return seen
        between(page)
        page += 1
        assert page < 1000


def test_paging_visits_every_item_once():
    w, c = feed_world()
    for size in (1, 3, 7, 40, 1000):
        seen = read_all(w, c, size)
        assert len(seen) == len(set(seen)) == 40


def test_paging_one_logical_partition_and_some_partitions():
    w, c = feed_world()
    pk_json = canonical_pk_json(["p3"])
    seen = read_all(w, c, 2, pk_json=pk_json, partition_indexes=[c.partition_index(c.epk_of(pk_json, ["p3"]))])
    assert sorted(seen) == sorted((pk_json, f"i{i:03d}") for i in range(3, 40, 7))
    seen = read_all(w, c, 5, partition_indexes=[1, 2])
    assert set(seen) == {v.key for i in (1, 2) for v in c.partitions[i].for_read("East US").store.scan(10**9)}


def test_a_bad_continuation_is_400():
    w, c = feed_world(n_items=1)
    with pytest.raises(CosmosError) as e:
        read_page(c, "East US", "Session", None, "not-a-token", 10)
    assert e.value.status == 400


writes_between_pages = st.lists(
    st.lists(st.tuples(st.sampled_from(["create", "upsert", "delete"]), st.integers(0, 59),
                       st.sampled_from([f"p{i}" for i in range(7)])), max_size=4),
    max_size=30)


@settings(max_examples=examples(60), deadline=None)
@given(writes=writes_between_pages, page_size=st.integers(1, 9))
def test_paging_survives_writes_between_pages(writes, page_size):
    w, c = feed_world()
    original = {(canonical_pk_json([f"p{i % 7}"]), f"i{i:03d}") for i in range(40)}
    touched = set()

    def between(page):
        for op, i, pk in (writes[page] if page < len(writes) else []):
            key = (canonical_pk_json([pk]), f"n{i:03d}" if op == "create" else f"i{i:03d}")
            wr = w.writer(c, pk)
            try:
                if op == "delete":
                    wr.delete(key[1])
                    touched.add(key)
                else:
                    wr.create({"id": key[1], "pk": pk}) if op == "create" else wr.upsert({"id": key[1], "pk": pk})
            except CosmosError:
                continue
            wr.commit()

    seen = read_all(w, c, page_size, between)
    assert len(seen) == len(set(seen)), "an item came back twice"
    assert original - touched <= set(seen), "an item present throughout was skipped"
