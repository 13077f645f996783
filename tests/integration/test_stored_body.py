"""Proves on a real regionlab server that how a create's JSON was spelled never shows: the same
item sent compact, as azure-cosmos sends it (a body the server stores by splicing the system
properties into the client's text), and spelled with whitespace, escapes and other number
forms (a body the server encodes again) is stored, returned and charged identically: the create's
reply, a read's reply and the request charges are the same bytes and numbers, and an SDK
round trip returns the item it sent. Raw REST requests signed by hand, and the sync SDK."""
import json

import pytest

from sdk_harness import raw_request

DOCS = "/dbs/db/colls/c/docs"
PK_P = {"x-ms-documentdb-partitionkey": '["p"]'}
ITEMS = [
    {"pk": "p", "s": "words with spaces, a colon: and {braces} [brackets]", "n": 1.5, "i": -3},
    {"pk": "p", "t": True, "f": False, "z": None, "a": [1, 2.25, {"k": "v", "e": []}], "o": {"x": {"y": [[]]}}},
    {"pk": "p", "u": "é — 😀 中文", "big": 12345678901234567890123, "tiny": 1e-07, "neg": -0.0},
    {"pk": "p", "q": 'a "quoted" \\ back\\slash\n\ttab', "c": "\u0001"},
]


def _compact(doc: dict) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def _created_and_read(emu, id: str, raw: bytes):
    created = raw_request(emu, "POST", DOCS, raw, PK_P)
    assert created.status == 201, created
    read = raw_request(emu, "GET", f"{DOCS}/{id}", None, PK_P)
    assert read.status == 200, read
    return created, read


def _own_part(body: bytes, id: str) -> bytes:
    """The body up to its system properties, with the id made neutral."""
    return body[:body.rindex(b',"_rid":')].replace(f'"id":"{id}"'.encode(), b'"id":"?"')


@pytest.mark.parametrize("n", range(len(ITEMS)))
def test_compact_and_spelled_bodies_are_stored_and_charged_alike(regionlab, coll, n):
    doc = ITEMS[n]
    compact = _compact(dict(doc, id=f"c{n}"))
    spelled = json.dumps(dict(doc, id=f"s{n}"), indent=2, ensure_ascii=True).encode() + b"\n"
    c_created, c_read = _created_and_read(regionlab, f"c{n}", compact)
    s_created, s_read = _created_and_read(regionlab, f"s{n}", spelled)
    assert c_created.body == c_read.body and s_created.body == s_read.body
    assert _own_part(c_read.body, f"c{n}") == _own_part(s_read.body, f"s{n}")
    assert c_read.body == _compact(json.loads(c_read.body))      # what encoding the item gives
    assert list(json.loads(c_read.body)) == list(json.loads(s_read.body))     # the members' order
    for a, b in ((c_created, s_created), (c_read, s_read)):
        assert a.headers["x-ms-request-charge"] == b.headers["x-ms-request-charge"]


def test_number_spellings_are_stored_as_python_writes_them(regionlab, coll):
    _, read = _created_and_read(regionlab, "e", b'{"id":"e","pk":"p","n":1E2,"m":-0,"f":0.000001,"g":2.50}')
    assert _own_part(read.body, "e") == b'{"id":"?","pk":"p","n":100.0,"m":0,"f":1e-06,"g":2.5'


def test_sdk_round_trip_of_compact_items(regionlab, coll):
    for n, doc in enumerate(ITEMS):
        sent = dict(doc, id=f"k{n}")
        created = coll.create_item(sent)
        assert {k: v for k, v in created.items() if not k.startswith("_")} == sent
        assert coll.read_item(f"k{n}", partition_key="p") == created
        read = raw_request(regionlab, "GET", f"{DOCS}/k{n}", None, PK_P)
        assert read.body == _compact(created)
