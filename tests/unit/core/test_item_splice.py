"""Proves that storing a create's body by splicing the system properties into the client's raw
JSON (validation.parse_item_body + documents.Writer) stores exactly the bytes encoding the
staged document again would: for random items sent compact as the SDKs send them, and for the
same items spelled any other accepted way (whitespace, escapes, number spellings), the stored
body equals jsontext.dumps_bytes of the staged document byte for byte and parses back to it;
that the splice is taken for SDK-style bodies; and that duplicate members are still a 400 with
the message parse_json_body gives. Hypothesis drives a real core account."""
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core_world import World
from regionlab.emulator.core.jsontext import dumps_bytes
from regionlab.emulator.core.store import etag_in
from regionlab.emulator.core.validation import ValidationError, parse_item_body, parse_json_body
from tiers import examples

SYSTEM = ("_rid", "_self", "_etag", "_ts", "_attachments", "_lsn")

scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=12)
ids = st.text(min_size=1, max_size=12).filter(lambda s: not any(c in s for c in "/\\?#") and s not in (".", ".."))
members = st.dictionaries(st.text(max_size=8).filter(lambda k: k not in SYSTEM + ("id", "pk")), values, max_size=5)


@st.composite
def items(draw):
    doc = {"id": draw(ids), "pk": "k"}
    doc.update(draw(members))
    return doc


@pytest.fixture(scope="module")
def world():
    w = World(regions=("East US",))
    return w, w.container()


def stored(world, raw: bytes):
    """The version a create of raw stages, as the gateway's stage_body stages it."""
    w, c = world
    doc, verbatim = parse_item_body(raw)
    _, v = w.writer(c, "k").create(doc, raw if verbatim else None)     # staged, never committed
    return doc, verbatim, v


def check_stored(doc: dict, v) -> None:
    assert v.body == dumps_bytes(v.doc)                     # what encoding the document gives
    assert json.loads(v.body) == v.doc
    assert {k: x for k, x in v.doc.items() if k not in SYSTEM} == doc
    assert etag_in(v.body) == v.etag                        # a settled version finds its etag again


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items())
def test_compact_bodies_are_stored_as_dumps_writes_them(world, doc):
    raw = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    parsed, verbatim, v = stored(world, raw)
    assert parsed == doc
    check_stored(doc, v)
    if raw.find(b"\\") < 0 and raw.find(b"-0") < 0:
        assert verbatim, "an SDK-style body without escapes is spliced, not encoded again"
    if verbatim:
        assert v.body.startswith(raw[:-1] + b',"_rid":')


def spelled(draw, value) -> str:
    """value as JSON, with whitespace, escapes and number spellings drawn."""
    ws = lambda: draw(st.sampled_from(["", "", " ", "\n", "\t", "\r\n  "]))  # noqa: E731
    if isinstance(value, dict):
        inner = ",".join(f"{ws()}{spelled(draw, k)}{ws()}:{ws()}{spelled(draw, x)}{ws()}" for k, x in value.items())
        return "{" + inner + ws() + "}"
    if isinstance(value, list):
        return "[" + ",".join(ws() + spelled(draw, x) + ws() for x in value) + ws() + "]"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return "-0" if value == 0 and draw(st.booleans()) else str(value)
    if isinstance(value, float):
        return draw(st.sampled_from([repr(value), "%.17e" % value, "%.17E" % value]))
    return json.dumps(value, ensure_ascii=draw(st.booleans()))


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items(), st.data())
def test_any_spelling_is_stored_as_dumps_writes_the_item(world, doc, data):
    raw = spelled(data.draw, doc).encode()
    parsed, verbatim, v = stored(world, raw)
    assert parsed == doc
    check_stored(doc, v)
    if verbatim:
        assert raw == json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


@pytest.mark.parametrize("raw, verbatim", [
    (b'{"id":"a","pk":"k","n":1.5,"s":"x y","t":[true,false,null],"o":{"p":[1,{"q":2}]}}', True),
    ('{"id":"a","pk":"k","s":"é—😀"}'.encode(), True),     # UTF-8 as itself, as dumps writes it
    (b'{"id":"a", "pk":"k"}', False),                       # whitespace outside strings
    (b' {"id":"a","pk":"k"}', False),
    (b'{"id":"a","pk":"k"}\n', False),
    (b'{"id":"a","pk":"k","s":"\\u00e9"}', False),          # an escape
    (b'{"id":"a","pk":"k","s":"\\"q\\""}', False),
    (b'{"id":"a","pk":"k","n":1E5}', False),                # Python writes 100000.0
    (b'{"id":"a","pk":"k","n":0.000001}', False),           # Python writes 1e-06
    (b'{"id":"a","pk":"k","n":-0}', False),                 # Python writes 0
    (b'{"id":"a","pk":"k","_etag":"forged","_ts":1}', True),   # parsed as sent; stored without them
])
def test_which_bodies_are_spliced(world, raw, verbatim):
    doc, seen, v = stored(world, raw)
    assert seen is verbatim
    assert v.body == dumps_bytes(v.doc)
    assert v.doc["_etag"] == v.etag and v.doc["_ts"] != 1


@pytest.mark.parametrize("raw", [b'{"id":"a","pk":"k","id":"b"}', b'{"id":"a","x":{"q":1,"q":2}}',
                                 b'{"id":"a","x":[{"q":1},{"r":1,"r":2}]}', b'{"id":"a","x":1,"y":2,"x":3}'])
def test_duplicate_members_are_still_refused(raw):
    with pytest.raises(ValidationError) as item:
        parse_item_body(raw)
    with pytest.raises(ValidationError) as plain:
        parse_json_body(raw)
    assert (item.value.status, item.value.message) == (plain.value.status, plain.value.message) == (
        400, item.value.message)
    assert "duplicate member name" in item.value.message


@pytest.mark.parametrize("raw", [b'{"id":"a","n":NaN}', b'{"id":"a","n":1e999}', b'{"id":"a"', b'\xff{}',
                                 b'{"id":"\\ud800"}', b"[" * 200 + b"]" * 200, b'{"id":"a"}{"id":"b"}',
                                 b'\xef\xbb\xbf{"id":"a"}', b'{"id":"a","x":' * 129 + b'1' + b'}' * 129,
                                 b'{"id":"a","x":"\\\\"' + b',"y":[' * 130 + b']' * 130 + b'}',
                                 b'{"id":"a","x":' + b'[' * 128 + b']' * 128 + b'}'])
def test_refusals_match_parse_json_body(raw):
    """Bad UTF-8, a BOM, bad JSON, NaN, overflow, a lone surrogate, too deep (in an object, in
    arrays past an escaped quote, and 129 levels): the same 400 as any other body."""
    with pytest.raises(ValidationError) as item:
        parse_item_body(raw)
    with pytest.raises(ValidationError) as plain:
        parse_json_body(raw)
    assert (item.value.status, item.value.message) == (plain.value.status, plain.value.message)


def test_nesting_up_to_the_limit_is_accepted():
    raw = b'{"id":"a","x":' + b'[' * 127 + b']' * 127 + b'}'            # 128 levels with the object
    assert parse_item_body(raw) == (parse_json_body(raw), True)
