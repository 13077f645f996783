"""Proves a batch or bulk reply that splices each stored body in as bytes (gateway/batch.py
encode_results) is byte for byte the JSON that encoding the parsed documents gives, for the
documents a client can send (hypothesis: nesting, unicode, escapes, floats, big integers) and
for every result shape (a body, no body, an error), on versions staged and committed by a real
core Writer; and that a re-encoded item never grows past REENCODED_GROWTH_MAX, the bound that
lets a small batch skip measuring each item."""
import json
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "core"))

from core_world import World  # noqa: E402
from regionlab.emulator.core import jsontext  # noqa: E402
from regionlab.emulator.core.validation import parse_json_body  # noqa: E402
from regionlab.emulator.service.batch import REENCODED_GROWTH_MAX, _result, encode_results  # noqa: E402

_scalars = (st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(st.characters(blacklist_categories=("Cs",)), max_size=12))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=12)
_docs = st.dictionaries(st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
                        .filter(lambda k: k not in ("id", "pk")), _values, max_size=6)


def _old_encoding(results: list, docs: dict) -> bytes:
    """What the reply was before splicing: each resourceBody the parsed document, encoded."""
    return jsontext.dumps_bytes([dict(r, resourceBody=docs[i]) if "resourceBody" in r else r
                                 for i, r in enumerate(results)])


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(_docs, min_size=1, max_size=5), st.integers(0, 3))
def test_spliced_reply_equals_the_encoded_documents(bodies, read_back):
    w = World(regions=("East US",))
    c = w.container()
    writer = w.writer(c, "p")
    results, versions = [], []
    for i, extra in enumerate(bodies):
        status, v = writer.create(dict(extra, id=f"d{i}", pk="p"))
        versions.append(v)
        results.append(_result(status, v, 5.71 + i))
    writer.commit()
    docs = {i: json.loads(v.body) for i, v in enumerate(versions)}
    # a later batch reads some of them back from the store (settled versions: no parsed doc kept)
    reader = w.writer(c, "p")
    for k in range(min(read_back, len(versions))):
        status, v = reader.read(f"d{k}")
        docs[len(results)] = v.doc
        results.append(_result(status, v, 1.0))
    results.append({"statusCode": 204, "requestCharge": 5.0, "eTag": versions[0].etag})   # a delete
    results.append({"statusCode": 409, "subStatusCode": 0, "requestCharge": 1.0, "message": 'Conflict "x"\n'})
    assert encode_results(results) == _old_encoding(results, docs)
    assert json.loads(encode_results(results))[0]["resourceBody"] == docs[0]


def test_a_result_with_more_members_keeps_them_before_its_body():
    w = World(regions=("East US",))
    c = w.container()
    writer = w.writer(c, "p")
    status, v = writer.create({"id": "a", "pk": "p", "s": "é\u2028\"\\"})
    r = _result(status, v, 6)                      # an int charge takes the general path
    r2 = dict(_result(status, v, 6.0), retryAfterMilliseconds=5)
    r2["resourceBody"] = r2.pop("resourceBody")
    r3 = dict(_result(status, v, 6.0), eTag=None)          # a version whose body keeps no _etag
    docs = {0: v.doc, 1: v.doc, 2: v.doc}
    assert encode_results([r, r2, r3]) == _old_encoding([r, r2, r3], docs)


def test_re_encoding_grows_at_most_by_the_bound():
    # The tokens that grow most when parsed and written again compactly; strings never grow.
    for text in ('{"a":1e15}', '[1e15,1e15,1E15]', '{"f":-1e15}', '[1e5]', '{"s":"\\u00e9\\/\\n"}', '[0.1e1]',
                 '{"x":[1e14,9e15,1e-5,5e-324]}'):
        grown = len(jsontext.dumps_bytes(parse_json_body(text.encode()))) / len(text)
        assert grown < REENCODED_GROWTH_MAX, text
