"""Proves store.py keeps, per key, exactly the versions some reader can still see: a hypothesis
property test checks every lookup at or above the pruning floor against a model (a list of
per-LSN dicts), and examples pin truncate_after, count_live and scan (key order, prefix,
after_key)."""
from hypothesis import given, settings
from hypothesis import strategies as st

from regionlab.emulator.core.store import Version, VersionStore
from tiers import examples


def put(lsn, key, value):
    return Version(lsn, key, {"id": key[1], "v": value}, b"", f'"{lsn}"', 0, f"r{key[1]}")


def tomb(lsn, key):
    return Version(lsn, key, None, None, f'"{lsn}"', 0, f"r{key[1]}", deleted=True)


def value(store, key, lsn):
    v = store.get(key, lsn)
    return None if v is None else v.doc["v"]


KEYS = [('["a"]', "1"), ('["a"]', "2"), ('["b"]', "1")]

ops = st.lists(st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.integers(0, 9)),
                         st.integers(0, 3)),            # how far the floor moves up after this op
               max_size=60)


@settings(max_examples=examples(200), deadline=None)
@given(ops)
def test_pruning_keeps_everything_visible_at_or_above_the_floor(ops):
    store = VersionStore()
    states = [{}]            # states[lsn]: the model's items after the commit with that LSN
    floor = 0
    floor_at_write = {}      # pruning is per key, at the floor its last write passed in
    for lsn, (key, val, floor_step) in enumerate(ops, start=1):
        state = dict(states[-1])
        if val is None:
            store.add(tomb(lsn, key), floor)
            state.pop(key, None)
        else:
            store.add(put(lsn, key, val), floor)
            state[key] = val
        states.append(state)
        floor_at_write[key] = floor
        floor = min(lsn, floor + floor_step)            # replicas only ever move forward
        for seen_at in range(floor, lsn + 1):
            for k in KEYS:
                assert value(store, k, seen_at) == states[seen_at].get(k)
        assert store.count_live == len(state)
        assert store.live_bytes == sum(len(v.body) for v in store.scan(lsn))
        assert {v.key: v.doc["v"] for v in store.scan(lsn)} == state
    for key, versions in store.keys_with_versions():
        lsns = [v.lsn for v in versions]
        assert lsns == sorted(set(lsns))
        # at most one version at or below the floor survives: the one the floor sees
        assert sum(1 for n in lsns if n <= floor_at_write[key]) <= 1


def test_versions_older_than_the_floor_view_are_dropped():
    store = VersionStore()
    k = KEYS[0]
    for lsn in (1, 2, 3):
        store.add(put(lsn, k, lsn), 0)
    store.add(put(4, k, 4), 2)              # the slowest replica is at 2: 1 is invisible now
    assert [v.lsn for v in dict(store.keys_with_versions())[k]] == [2, 3, 4]
    assert [value(store, k, n) for n in (2, 3, 4)] == [2, 3, 4]


def test_a_tombstone_everyone_sees_removes_the_key():
    store = VersionStore()
    k = KEYS[0]
    store.add(put(1, k, 1), 0)
    store.add(tomb(2, k), 0)
    assert k in dict(store.keys_with_versions())
    store.add(put(3, KEYS[1], 0), 2)
    store.add(tomb(4, KEYS[1]), 4)          # pruning happens per key, as it is written
    assert KEYS[1] not in dict(store.keys_with_versions())
    assert store.count_live == 0 and store.latest(KEYS[1]) is None
    store.add(put(5, KEYS[1], 5), 4)        # a new incarnation after the key vanished
    assert store.count_live == 1 and value(store, KEYS[1], 5) == 5


def test_get_and_latest():
    store = VersionStore()
    k = KEYS[0]
    store.add(put(2, k, "x"), 0)
    store.add(tomb(5, k), 0)
    assert store.get(k, 1) is None
    assert value(store, k, 4) == "x"
    assert store.get(k, 5) is None and store.latest(k) is None
    assert store.get(KEYS[1], 99) is None and store.latest(KEYS[1]) is None


def test_truncate_after_drops_the_tail_and_recounts():
    store = VersionStore()
    store.add(put(1, KEYS[0], 1), 0)
    store.add(put(2, KEYS[1], 2), 0)
    store.add(tomb(3, KEYS[0]), 0)
    store.add(put(4, KEYS[2], 4), 0)
    assert store.count_live == 2
    store.truncate_after(2)
    assert store.count_live == 2
    assert value(store, KEYS[0], 9) == 1 and store.latest(KEYS[0]).lsn == 1
    assert KEYS[2] not in dict(store.keys_with_versions())
    store.truncate_after(0)
    assert store.count_live == 0 and list(store.keys_with_versions()) == []


def scan_ids(store, lsn, **kw):
    return [v.key for v in store.scan(lsn, **kw)]


def test_scan_walks_key_order_at_an_lsn():
    store = VersionStore()
    keys = [('["b"]', "2"), ('["a"]', "9"), ('["b"]', "1"), ('["a"]', "10"), ('["ab"]', "1")]
    for lsn, k in enumerate(keys, start=1):
        store.add(put(lsn, k, lsn), 0)
    store.add(tomb(6, ('["b"]', "1")), 0)
    assert scan_ids(store, 6) == sorted(set(keys) - {('["b"]', "1")})
    assert scan_ids(store, 2) == [('["a"]', "9"), ('["b"]', "2")]


def test_scan_with_prefix_and_after_key():
    store = VersionStore()
    keys = [('["a"]', "1"), ('["a"]', "2"), ('["a"]', "3"), ('["ab"]', "1"), ('["b"]', "1"),
            ('["a', "z")]
    for lsn, k in enumerate(keys, start=1):
        store.add(put(lsn, k, lsn), 0)
    lsn = len(keys)
    assert scan_ids(store, lsn, prefix='["a"]') == keys[:3]
    assert scan_ids(store, lsn, prefix='["a"]', after_key=('["a"]', "1")) == keys[1:3]
    assert scan_ids(store, lsn, prefix='["a"]', after_key=('["a"]', "3")) == []
    assert scan_ids(store, lsn, prefix='["zz"]') == []
    assert scan_ids(store, lsn, after_key=('["a"]', "3")) == [('["ab"]', "1"), ('["b"]', "1")]
    assert scan_ids(store, lsn, after_key=('["a"]', "25")) == [('["a"]', "3"), ('["ab"]', "1"),
                                                              ('["b"]', "1")]
    assert scan_ids(store, 2, prefix='["a"]') == keys[:2]



MANY_KEYS = [(f'["{pk}"]', id) for pk in ("a", "ab", "b") for id in ("1", "2", "10")]
WALKS = ("scan", "scan_prefix", "scan_after", "count", "count_prefix", "keys")
walks = st.lists(st.tuples(st.sampled_from(MANY_KEYS), st.one_of(st.none(), st.integers(0, 9)),
                           st.sampled_from(("add", "add", "truncate") + WALKS)), max_size=80)


@settings(max_examples=examples(300), deadline=None)
@given(walks)
def test_ordered_walks_see_every_retained_key_in_order(walks):
    """Keys are sorted only when walked in order: each kind of ordered walk, made first after
    writes, tombstones that drop keys and truncations, sees exactly the retained keys in order."""
    store = VersionStore()
    lsn = 0
    for key, val, walk in walks:
        if walk == "truncate":
            lsn = max(0, lsn - 2)
            store.truncate_after(lsn)
        lsn += 1
        store.add(tomb(lsn, key) if val is None else put(lsn, key, val), lsn)   # floor = lsn: prune
        if walk not in WALKS:
            continue                    # several writes between walks: keys pile up unsorted
        got = {"scan": lambda: [v.key for v in store.scan(lsn)],
               "scan_prefix": lambda: [v.key for v in store.scan(lsn, prefix=key[0])],
               "scan_after": lambda: [v.key for v in store.scan(lsn, after_key=key)],
               "count": lambda: store.key_count(),
               "count_prefix": lambda: store.key_count(key[0]),
               "keys": lambda: [k for k, _ in store.keys_with_versions()]}[walk]()
        retained = [k for k, _ in store.keys_with_versions()]
        live = [k for k in retained if not store.newest(k).deleted]
        assert retained == sorted(retained)
        assert got == {"scan": live, "scan_prefix": [k for k in live if k[0] == key[0]],
                       "scan_after": [k for k in live if k > key], "count": len(retained),
                       "count_prefix": sum(1 for k in retained if k[0] == key[0]),
                       "keys": retained}[walk]
