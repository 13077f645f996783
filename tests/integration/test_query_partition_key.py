"""Proves, through the official SDK against a real server, that a query scoped to one partition
key whose WHERE clause asks only for that key (the gateway serves such pages from the stored
bodies without parsing them) returns exactly the documents of that key, with partition key
values of different types that look alike ("5", 5, 5.0, true, null), page by page through its
continuations, each document once and as stored (system properties included); and that the
same query with one more condition, or a key other than the scope's, still filters.
"""
import pytest

KEYS = ["5", 5, True, None, "p"]
PER_KEY = 23


@pytest.fixture
def filled(container):
    for k in KEYS:
        for i in range(PER_KEY):
            container.create_item({"id": f"{k!r}-{i:02d}", "pk": k, "n": i})
    container.create_item({"id": "float-five", "pk": 5.0, "n": 99})     # the same key as 5
    return container


def _ids(items) -> list:
    return sorted(d["id"] for d in items)


@pytest.mark.parametrize("key", KEYS)
def test_the_scope_key_query_pages_every_document_of_its_key_once(filled, key):
    pager = filled.query_items("SELECT * FROM c WHERE c.pk = @pk", parameters=[{"name": "@pk", "value": key}],
                               partition_key=key, max_item_count=7)
    pages = [list(p) for p in pager.by_page()]
    got = [d for p in pages for d in p]
    want = [f"{key!r}-{i:02d}" for i in range(PER_KEY)] + (["float-five"] if key == 5 else [])
    assert _ids(got) == sorted(want) and len(got) == len(want)
    assert len(pages) >= 4 and all(len(p) <= 7 for p in pages)
    one = filled.read_item(got[0]["id"], partition_key=key)
    assert got[0] == one                               # the stored document, _etag and _ts included


def test_another_condition_or_another_key_still_filters(filled):
    more = filled.query_items("SELECT * FROM c WHERE c.pk = 'p' AND c.n < 3", partition_key="p")
    assert _ids(more) == ["'p'-00", "'p'-01", "'p'-02"]
    other = filled.query_items("SELECT * FROM c WHERE c.pk = 'q'", partition_key="p")
    assert list(other) == []
    typed = filled.query_items("SELECT * FROM c WHERE c.pk = '5'", partition_key=5)
    assert list(typed) == []                           # "5" is not 5
