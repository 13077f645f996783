"""A committed Version keeps only its body, yet answers its document, etag and timestamp exactly as
staged; the store's compact change log and key list keep their order under churn. Driven through
the core's Writer on a simulated account, in virtual time."""
import json
import random

from regionlab.emulator.core.account import Account, AccountConfig
from regionlab.emulator.core.account_image import item_record, version_from_record
from regionlab.emulator.core.container import canonical_pk_json
from regionlab.emulator.core.documents import Writer
from regionlab.emulator.core.scheduler import ManualClock, Scheduler, run_until_idle
from regionlab.emulator.core.store import CHANGES_SLACK_ENTRIES, UNSORTED_KEYS_MAX, Version, VersionStore

TRICKY = [
    {"id": "plain", "pk": "a", "n": 1},
    {"id": "nested", "pk": "a", "inner": {"_etag": "\"user-1\"", "_ts": 5}, "list": [{"_etag": "x"}]},
    {"id": "text", "pk": "a", "s": '"_etag":"\\"fake\\""', "t": "\\\"_etag\\\":"},
    {"id": "sys", "pk": "a", "_etag": "\"mine\"", "_ts": 1, "_rid": "zz", "ü": "ñ 😀"},
]


def _world():
    clock = ManualClock()
    account = Account(AccountConfig(), clock, Scheduler(), random.Random(0))
    db = account.create_database({"id": "d"})
    c = account.create_container(db, {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}})
    clock.advance_to(1_700_000_000_123)
    return account, c


def _write(account, c, doc, op="create"):
    pk_json = canonical_pk_json([doc["pk"]])
    w = Writer(c, account.write_regions[0], pk_json, [doc["pk"]], account.clock.now_ms())
    _, v = w.upsert(doc) if op == "upsert" else w.create(doc)
    staged = (v.doc.copy(), v.etag, v.ts, v.ts_ms)
    w.commit()
    return v, staged


def test_a_committed_version_answers_what_was_staged_from_its_body_alone():
    account, c = _world()
    for doc in TRICKY:
        v, (doc_staged, etag, ts, ts_ms) = _write(account, c, doc)
        assert v._doc is None and v._etag is None          # nothing but the body is kept
        assert v.doc == doc_staged == json.loads(v.body)
        assert v.etag == etag and v.etag.startswith('"') and v.etag.endswith('"')
        assert (v.ts, v.ts_ms) == (ts, ts_ms) == (1_700_000_000, 1_700_000_000_123)
        assert v.doc["_etag"] == etag


def test_replicas_in_every_region_share_the_one_committed_version():
    account, c = _world()
    v, _ = _write(account, c, TRICKY[1])
    run_until_idle(account.clock, account.scheduler)
    p = c.partitions[c.partition_index(c.epk_of(v.key[0], ["a"]))]
    seen = [rs.store.get(v.key, rs.committed_lsn) for rs in p.replica_sets.values()]
    assert len(seen) == 3 and all(s is v for s in seen)


def test_a_tombstone_keeps_the_deleted_document_and_its_etag():
    account, c = _world()
    v, (doc_staged, etag, _, _) = _write(account, c, TRICKY[2])
    w = Writer(c, account.write_regions[0], v.key[0], ["a"], account.clock.now_ms() + 5)
    w.delete(v.key[1])
    w.commit()
    t = next(iter(w.pending.values()))
    assert t.deleted and t.body is None and t.etag == etag and t.doc == doc_staged


def test_a_restored_record_is_as_compact_and_answers_the_same():
    account, c = _world()
    v, (doc_staged, etag, ts, ts_ms) = _write(account, c, TRICKY[3])
    back = version_from_record(item_record(v))
    assert back._doc is None and back._etag is None
    assert (back.doc, back.etag, back.ts, back.ts_ms, back.key, back.rid) == (doc_staged, etag, ts, ts_ms, v.key, v.rid)
    # A record whose body does not hold its etag (not one a Writer made) keeps the etag given.
    row = list(item_record(v))
    row[4] = '"other"'
    assert version_from_record(tuple(row)).etag == '"other"'


def _v(lsn, id, deleted=False):
    key = ('["p"]', id)
    return Version(lsn, key, None if deleted else {"id": id}, None if deleted else b"{}", "e", 0, "r", deleted)


def test_key_churn_without_ordered_walks_keeps_the_key_list_bounded_and_scans_right():
    store, model, lsn = VersionStore(), set(), 0
    rng = random.Random(7)
    for _ in range(6 * CHANGES_SLACK_ENTRIES):
        lsn += 1
        id = f"k{rng.randrange(300)}"
        if id in model and rng.random() < 0.5:
            store.add(_v(lsn, id, deleted=True), lsn)       # floor at lsn: the key is dropped
            model.discard(id)
        else:
            store.add(_v(lsn, id), lsn)
            model.add(id)
        assert len(store._unsorted) < UNSORTED_KEYS_MAX
        if rng.random() < 0.01:
            assert [v.key[1] for v in store.scan(lsn)] == sorted(model)
    assert [v.key[1] for v in store.scan(lsn)] == sorted(model)
    assert store.key_count() == len(model) == store.count_live


def test_the_change_log_stays_in_lsn_order_through_compaction_and_truncation():
    store = VersionStore()
    for lsn in range(1, 3 * CHANGES_SLACK_ENTRIES):
        store.add(_v(lsn, f"k{lsn % 50}"), lsn)
    lsns = [lsn for lsn, _ in store.changes]
    assert lsns == sorted(lsns) and len(lsns) < 3 * CHANGES_SLACK_ENTRIES - 1     # compacted
    top = lsns[-1]
    assert [v.lsn for v in store.changes_after(top - 10, top)] == list(range(top - 9, top + 1))
    store.truncate_after(top - 5)
    assert [lsn for lsn, _ in store.changes][-1] <= top - 5
    assert [v.lsn for v in store.changes_after(top - 10, top)] == list(range(top - 9, top - 4))


def test_the_rid_index_and_item_maps_never_fall_back_into_the_young_generation():
    """A dict of untracked values is untracked by a full collection and re-enters generation 0 on
    its next insert, so every young collection walked all of it again (runtime/collector.py)."""
    import gc
    # Only this test's versions: in a whole run, earlier tests' emulators may still hold staged
    # (tracked) versions of their own until the collector frees them.
    held = [o for o in gc.get_objects() if type(o) is Version]     # kept alive: their ids stay theirs
    before = {id(o) for o in held}
    account, c = _world()
    for i in range(50):
        _write(account, c, {"id": f"i{i}", "pk": "a"})
    run_until_idle(account.clock, account.scheduler)
    gc.collect()
    _write(account, c, {"id": "after", "pk": "a"})
    run_until_idle(account.clock, account.scheduler)
    maps = [c.rid_index] + [rs.store._items for p in c.partitions for rs in p.replica_sets.values()]
    young = gc.get_objects(generation=0)
    assert not any(o is m for o in young for m in maps)
    assert all(gc.is_tracked(m) for m in maps)


def test_stored_versions_leave_nothing_for_the_collector_to_walk():
    """A full collection walks every tracked object, and each stored item was one tracked
    Version (a million items: a million objects, 16-35 ms per full collection of what one run
    of creates wrote). A committed version, a tombstone and a restored one hold atoms only and
    are not tracked; one still staged (its document a dict) is."""
    import gc
    # Only this test's versions: in a whole run, earlier tests' emulators may still hold staged
    # (tracked) versions of their own until the collector frees them.
    held = [o for o in gc.get_objects() if type(o) is Version]     # kept alive: their ids stay theirs
    before = {id(o) for o in held}
    account, c = _world()
    written = [_write(account, c, {"id": f"i{i}", "pk": f"p{i % 7}", "n": i})[0] for i in range(200)]
    w = Writer(c, account.write_regions[0], written[0].key[0], ["p0"], account.clock.now_ms() + 5)
    w.delete(written[0].key[1])
    w.commit()
    tombstone = next(iter(w.pending.values()))
    run_until_idle(account.clock, account.scheduler)
    restored = version_from_record(item_record(written[1]))
    assert not any(map(gc.is_tracked, written + [tombstone, restored]))
    assert not [o for o in gc.get_objects() if type(o) is Version and id(o) not in before]
    staged = Writer(c, account.write_regions[0], written[2].key[0], ["p2"], account.clock.now_ms()).create(
        {"id": "staged", "pk": "p2"})[1]
    assert gc.is_tracked(staged)
    assert staged.doc["id"] == "staged" and written[5].doc["n"] == 5 and tombstone.doc["id"] == "i0"


def test_a_bulk_load_leaves_no_more_than_a_bounded_sort_for_the_first_ordered_walk():
    """The first scan after loading many keys used to sort all of them at once (0.6 s per
    250k keys, every region's loop waiting); now no more than UNSORTED_KEYS_MAX ever wait."""
    store = VersionStore()
    for i in range(5 * UNSORTED_KEYS_MAX + 7):
        store.add(_v(i + 1, f"k{i:06d}"), 0)
        assert len(store._unsorted) < UNSORTED_KEYS_MAX
    assert [v.key[1] for v in store.scan(10**9)] == [f"k{i:06d}" for i in range(5 * UNSORTED_KEYS_MAX + 7)]
