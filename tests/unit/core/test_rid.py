"""Resource ids have the service's byte layout: our rids parse back to their kind and counter, real
rids captured from the service parse to the right kind, and the SDK's IsNameBased logic treats
paths built from our rids as rid-based and paths built from names as name-based."""

import base64

import pytest
from azure.cosmos import _base as sdk_base
from hypothesis import given
from hypothesis import strategies as st

from regionlab.emulator.core import rid

_DB_N = st.integers(1, 2**32 - 1)
_COLL_N = st.integers(1, 2**31 - 1)
_CHILD_N = st.integers(1, 2**60 - 1)


def test_shapes():
    db = rid.database_rid(1)
    coll = rid.collection_rid(db, 1)
    doc = rid.document_rid(coll, 1)
    assert (db, coll, doc) == ("AAAAAQ==", "AAAAAYAAAAE=", "AAAAAYAAAAEBAAAAAAAAAA==")
    assert (len(db), len(coll), len(doc), len(rid.offer_rid(1))) == (8, 12, 24, 4)
    assert rid.pkrange_rid(coll, 1).endswith("UA==")


@pytest.mark.parametrize("real,kind", [
    ("gAAFAA==", "dbs"),
    ("gAAFAIAAAAE=", "colls"),
    ("gAAFAIAAAAEBAAAAAAAAAA==", "docs"),
    ("K4dvAIClggAEAAAAAAAAAA==", "docs"),
    ("Ym5oAJg+jk4=", "colls"),
    ("Ym5oAJg+jk4BAAAAAAAAgA==", "sprocs"),
    ("Ym5oAJg+jk4BAAAAAAAAcA==", "triggers"),
    ("Ym5oAJg+jk4BAAAAAAAAYA==", "udfs"),
    ("Ym5oAJg+jk4CAAAAAAAAUA==", "pkranges"),
    ("Ym5oAA==", "dbs"),
    ("Ym5oAAAAAAE=", "users"),
    ("7Kj5", "offers"),
])
def test_real_service_rids_parse_to_their_kind(real, kind):
    assert rid.parse_rid(real)[0] == kind


@given(_DB_N, _COLL_N, _CHILD_N, _CHILD_N, st.integers(1, 2**24 - 1))
def test_our_rids_round_trip(db_n, coll_n, doc_n, range_n, offer_n):
    db = rid.database_rid(db_n)
    coll = rid.collection_rid(db, coll_n)
    doc = rid.document_rid(coll, doc_n)
    pkr = rid.pkrange_rid(coll, range_n)
    offer = rid.offer_rid(offer_n)
    assert rid.parse_rid(db) == ("dbs", db_n.to_bytes(4, "big"))
    kind, raw = rid.parse_rid(coll)
    assert kind == "colls" and raw[:4] == rid.parse_rid(db)[1]
    assert int.from_bytes(raw[4:], "big") == coll_n | 0x8000_0000
    kind, raw = rid.parse_rid(doc)
    assert kind == "docs" and int.from_bytes(raw[8:], "little") == doc_n
    assert rid.parse_rid(pkr)[0] == "pkranges"
    assert rid.parse_rid(offer) == ("offers", offer_n.to_bytes(3, "little"))
    assert rid.parent_rid(doc) == coll and rid.parent_rid(pkr) == coll and rid.parent_rid(coll) == db
    assert rid.parent_rid(db) is None and rid.parent_rid(offer) is None
    for r in (db, coll, doc, pkr, offer):
        assert "/" not in r


@given(_DB_N, _COLL_N, _CHILD_N, st.text(min_size=1, max_size=10).filter(lambda s: "/" not in s))
def test_sdk_sees_our_rid_paths_as_rid_based_and_names_as_name_based(db_n, coll_n, doc_n, name):
    db = rid.database_rid(db_n)
    coll = rid.collection_rid(db, coll_n)
    doc = rid.document_rid(coll, doc_n)
    for link in (f"dbs/{db}", f"dbs/{db}/colls/{coll}", f"/dbs/{db}/colls/{coll}/docs/{doc}/"):
        assert sdk_base.IsNameBased(link) is False
        assert sdk_base.GetResourceIdOrFullNameFromLink(link) == link.strip("/").split("/")[-1]
    try:
        sdk_says = sdk_base.IsNameBased(f"dbs/{name}/colls/c")
    except ValueError:          # the SDK crashes on 8-char non-ASCII names; nothing to compare
        return
    looks_like_rid = len(name) == 8 and _is_db_rid_shaped(name)
    assert sdk_says is not looks_like_rid


def _is_db_rid_shaped(name: str) -> bool:
    try:
        return len(base64.b64decode(name.replace("-", "/"))) == 4
    except ValueError:
        return False


def test_names_that_look_like_rids_are_rid_based_to_the_sdk():
    assert sdk_base.IsNameBased("dbs/mydb/colls/c") is True
    assert sdk_base.IsNameBased("dbs/AAAAAQ==/colls/c") is False     # a db *named* like our rid 1


@pytest.mark.parametrize("bad", ["", "abc", "AAAAAA==", "AAAAAR==", "AAAA/Q==", "not a rid",
                                 "AAAAAYAAAAEBAAAAAAAAkA==", "AAAAAQAAAAEBAAAAAAAAAAAAAAA=",
                                 "AAAAAYAAAAE-AAAA", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"])
def test_parse_rejects(bad):
    with pytest.raises(ValueError):
        rid.parse_rid(bad)


def test_dash_stands_for_slash():
    raw = bytes([0xFF, 0xFF, 0xFF, 0xFF])
    db = rid.encode(raw)
    assert db == "-----w==" and rid.parse_rid(db) == ("dbs", raw)
    assert not sdk_base.IsNameBased(f"dbs/{db}/colls/x")


def test_counters_are_checked():
    with pytest.raises(ValueError):
        rid.database_rid(0)
    with pytest.raises(ValueError):
        rid.collection_rid(rid.database_rid(1), 2**31)
    with pytest.raises(ValueError):
        rid.document_rid(rid.database_rid(1), 1)        # a db rid is not a collection rid
    with pytest.raises(ValueError):
        rid.offer_rid(2**24)


def test_allocator_is_deterministic_and_per_parent():
    def run():
        a = rid.RidAllocator()
        d1, d2 = a.database(), a.database()
        c1, c2, c3 = a.collection(d1), a.collection(d1), a.collection(d2)
        return [d1, d2, c1, c2, c3, a.document(c1), a.document(c1), a.document(c3), a.pkrange(c1),
                a.offer(), a.offer()]
    first = run()
    assert first == run()
    assert len(set(first)) == len(first)
    assert first[4] == rid.collection_rid(first[1], 1)
