"""Proves VersionStore.add_new (a commit's brand-new keys added in one step, the replica sets'
path for a batch of creates) leaves a store exactly as adding the same versions one by one does:
a hypothesis property test applies random commits (creates, replaces, deletes, several keys per
commit, the floor moving up) to two stores, one through add_new where it applies and one through
add() only, with and without a materialised index, and compares every view of them; examples pin
that add_new refuses, adding nothing, a commit with a tombstone or a key the store holds; and
insert_sorted (the merge of new keys into the key order) is SortedList.update, invariants and
all."""
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sortedcontainers import SortedList

from regionlab.emulator.core import store as store_module
from regionlab.emulator.core.index import materialise
from regionlab.emulator.core.store import Version, VersionStore
from tiers import examples


def put(lsn, key, value):
    return Version(lsn, key, {"id": key[1], "v": value}, b"{}", f'"{lsn}"', 0, f"r{key[1]}")


def tomb(lsn, key):
    return Version(lsn, key, None, None, f'"{lsn}"', 0, f"r{key[1]}", deleted=True)


KEYS = [(f'["{pk}"]', str(i)) for pk in "ab" for i in range(6)]

commits = st.lists(st.tuples(st.lists(st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.integers(0, 9))),
                                      min_size=1, max_size=6, unique_by=lambda kv: kv[0]),
                             st.integers(0, 2)),          # how far the floor moves up after the commit
                   max_size=30)


def view(store: VersionStore, lsn: int) -> dict:
    return {"items": {k: [(v.lsn, v.deleted) for v in store.versions_of_key(k)] for k in store.retained_keys()},
            "changes": store.changes, "scan": [(v.key, v.lsn) for v in store.scan(lsn)],
            "live": store.count_live, "live_bytes": store.live_bytes, "keys": store.key_count(), "a_keys": store.key_count('["a"]'),
            "feed": [(v.key, v.lsn) for v in store.changes_after(0, lsn)],
            "index": None if store.indexes is None else
            {path: {k: sorted((v.key, v.lsn) for v in group) for k, group in index.entries.items()}
             for path, index in store.indexes.paths.items()}}


@settings(max_examples=examples(200), deadline=None)
@given(commits, st.booleans(), st.integers(1, 8))
# Deletes left the change log long, so one-by-one add() compacts it at the batch's first key;
# add_new compacted only after all of them (or not at all), keeping the deleted keys' entries.
@example([([(KEYS[0], None)], 0), ([(KEYS[0], None)], 0), ([(KEYS[0], 0), (KEYS[1], 0), (KEYS[2], 0)], 0),
          ([(KEYS[0], None), (KEYS[1], None), (KEYS[2], None)], 0), ([(KEYS[3], 0), (KEYS[4], 0)], 0)], False, 1)
def test_add_new_is_adding_one_by_one(plan, indexed, slack):
    saved = store_module.CHANGES_SLACK_ENTRIES, store_module.UNSORTED_KEYS_MAX
    store_module.CHANGES_SLACK_ENTRIES, store_module.UNSORTED_KEYS_MAX = slack, slack  # compact and sort often
    try:
        one, batch = VersionStore(), VersionStore()
        if indexed:
            materialise(one, ("v",))
            materialise(batch, ("v",))
        floor = 0
        lsn = 0
        for ops, up in plan:
            lsn += 1
            versions = [put(lsn, key, value) if value is not None else tomb(lsn, key) for key, value in ops]
            for v in versions:
                one.add(v, floor)
            if len(versions) == 1 or not batch.add_new(versions):
                for v in versions:
                    batch.add(v, floor)
            floor = min(lsn, floor + up)
            assert view(one, lsn) == view(batch, lsn)
    finally:
        store_module.CHANGES_SLACK_ENTRIES, store_module.UNSORTED_KEYS_MAX = saved


def test_add_new_refuses_a_tombstone_or_a_held_key_and_adds_nothing():
    s = VersionStore()
    assert s.add_new([put(1, KEYS[0], 1), put(1, KEYS[1], 1)])
    before = (s.changes, s.count_live, s.retained_keys())
    assert not s.add_new([put(2, KEYS[2], 1), put(2, KEYS[0], 2)])        # KEYS[0] is held
    assert not s.add_new([put(2, KEYS[2], 1), tomb(2, KEYS[3])])          # a tombstone
    assert (s.changes, s.count_live, s.retained_keys()) == before
    assert [v.key for v in s.scan(9)] == [KEYS[0], KEYS[1]]


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.integers(0, 2000), unique=True, max_size=300), st.lists(st.integers(0, 2000), max_size=200),
       st.integers(4, 8))                          # SortedList._check wants a load of 4 at least
@example(list(range(0, 2000, 2)), [1, 3, 5, 999, 1001, 1003, 1999, 2001, 2003], 4)      # into a large list
@example(list(range(0, 200, 2)), list(range(1000, 1060)), 4)      # past the end: the last sublist splits
def test_insert_sorted_is_update(held, new, load):
    """store.insert_sorted (runs of keys merged into each sublist at once) leaves the SortedList
    exactly as update() does, its internal invariants included (SortedList._check), with a tiny
    load so that sublists split, and positional lookups still right afterwards."""
    new = sorted(set(new) - set(held))
    ours, theirs = SortedList(), SortedList()
    for sl in (ours, theirs):
        sl._reset(load)
        sl.update(held)
    ours[0] if ours else None                       # a positional lookup builds the index first
    store_module.insert_sorted(ours, new)
    theirs.update(new)
    ours._check()
    assert list(ours) == list(theirs) == sorted(held + new)
    assert len(ours) == len(held) + len(new)
    for k in new[:5]:
        assert ours.bisect_left(k) == theirs.bisect_left(k) and ours[ours.index(k)] == k


def test_the_write_that_compacts_the_change_log_is_in_the_change_feed():
    """Regression: add() compacted the log before filing the version, so the write that
    triggered a compaction was filed at its key's previous LSN and the change feed skipped it."""
    s = VersionStore()
    keys = KEYS[:3]
    lsn = 0
    for key in keys:
        lsn += 1
        s.add(put(lsn, key, 0), lsn)
    for _ in range(2 * store_module.CHANGES_SLACK_ENTRIES + 10):       # enough upserts to compact
        lsn += 1
        s.add(put(lsn, keys[lsn % 3], lsn), lsn)
        newest = [(v.key, v.lsn) for v in s.changes_after(0, lsn)][-1]
        assert newest == (keys[lsn % 3], lsn)
