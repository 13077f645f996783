"""A query's store walk (gateway/queries.py _Inputs._scan) reads about what the page needs, not
a fixed chunk: pulling the first 11 documents of a logical partition of 1,000 walks
QUERY_SCAN_FIRST_CHUNK_DOCS keys (it walked 256, so a page of 10 cost twice as much CPU at
100,000 items as at 1,000), and walking to the end still yields every document once, in key
order, across the growing chunks. Checked by counting what a real VersionStore's scan yields."""
import itertools

from regionlab.emulator.core.store import Version, VersionStore
from regionlab.emulator.service import queries
from regionlab.emulator.service.queries import QUERY_SCAN_CHUNK_DOCS, QUERY_SCAN_FIRST_CHUNK_DOCS, _Inputs

PK = '["p"]'
ITEMS = 1000


class CountingStore:
    """The real store, counting the versions its ordered walks hand out."""

    def __init__(self, store):
        self.store, self.walked = store, 0

    def get(self, key, lsn):
        return self.store.get(key, lsn)

    def scan(self, lsn, after_key=None, prefix=None):
        for v in self.store.scan(lsn, after_key=after_key, prefix=prefix):
            self.walked += 1
            yield v


class ReplicaSet:
    def __init__(self, store):
        self.store = store


def inputs() -> _Inputs:
    i = object.__new__(_Inputs)
    i.pk_json, i.accept = PK, None
    i.consistency, i.session, i.primary_ok = "Session", None, True
    return i


def filled(n: int) -> CountingStore:
    store = VersionStore()
    for k in range(n):
        store.add(Version(k + 1, (PK, f"d{k:04}"), {"id": f"d{k:04}"}, b"{}", f'"{k}"', 0, f"r{k}"), 0)
    store.add(Version(n + 1, ('["q"]', "other"), {"id": "other"}, b"{}", '"x"', 0, "rx"), 0)
    return CountingStore(store)


def test_a_page_of_ten_walks_the_first_chunk_only():
    store = filled(ITEMS)
    got = list(itertools.islice(inputs()._scan(ReplicaSet(store), ITEMS + 1, None, False), 11))
    assert [v.key[1] for v in got] == [f"d{k:04}" for k in range(11)]
    assert store.walked == QUERY_SCAN_FIRST_CHUNK_DOCS < QUERY_SCAN_CHUNK_DOCS


def test_walking_to_the_end_yields_every_document_once_in_order(monkeypatch):
    # between chunks the walk re-reads the replica's LSN; this store has one replica, at the top
    monkeypatch.setattr(queries, "choose_replica", lambda rs, *a: (None, ITEMS + 1))
    store = filled(ITEMS)
    got = [v.key[1] for v in inputs()._scan(ReplicaSet(store), ITEMS + 1, None, False)]
    assert got == [f"d{k:04}" for k in range(ITEMS)]
    assert store.walked == ITEMS            # every key of the partition once
