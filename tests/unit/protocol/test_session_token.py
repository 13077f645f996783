"""Session tokens round-trip through format/parse, and parse, header parsing and merge agree with
the SDK's own VectorSessionToken and _session code on generated and hand-picked tokens."""

import pytest
from azure.cosmos import exceptions as sdk_exceptions
from azure.cosmos._constants import _Constants
from azure.cosmos._session import SessionContainer
from azure.cosmos._vector_session_token import VectorSessionToken
from hypothesis import given
from hypothesis import strategies as st

from regionlab.client.protocol.session_token import (
    VectorToken,
    format_session_header,
    format_vector,
    merge,
    parse_session_header,
    parse_vector,
)

_INTS = st.integers(-(2**63), 2**63 - 1)


@pytest.fixture(autouse=True, scope="module")
def _sdk_default_merge_rule():
    """The SDK reads its merge rule from the environment; compare against its default."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(_Constants.SESSION_TOKEN_FALSE_PROGRESS_MERGE_CONFIG, raising=False)
        yield


@st.composite
def vectors(draw, regions=None):
    ids = draw(st.sets(st.integers(-5, 50), max_size=4)) if regions is None else regions
    pairs = tuple(sorted((r, draw(_INTS)) for r in ids))
    return VectorToken(draw(st.integers(-3, 5)), draw(_INTS), pairs)


def sdk_view(s: str):
    """(version, global, sorted regions) as the SDK parses ``s``, or None if it rejects it."""
    token = VectorSessionToken.create(s)
    if token is None:
        return None
    return token.version, token.global_lsn, tuple(sorted(token.local_lsn_by_region.items()))


def our_view(t: VectorToken):
    return t.version, t.global_lsn, t.region_lsns


@given(vectors())
def test_vector_round_trip(t):
    assert parse_vector(format_vector(t)) == t


@given(st.dictionaries(st.text("0123456789abc", min_size=1, max_size=3), vectors(), max_size=5))
def test_header_round_trip(d):
    assert parse_session_header(format_session_header(d)) == d


@given(vectors())
def test_sdk_reads_what_we_write(t):
    assert sdk_view(format_vector(t)) == our_view(t)


@given(st.text("0123456789-#=: ,+_", max_size=20))
def test_whatever_we_accept_the_sdk_reads_the_same(s):
    try:
        ours = parse_vector(s)
    except ValueError:
        return
    assert sdk_view(s) == our_view(ours)


@pytest.mark.parametrize("s", ["", "5", "abc", "1#", "#1", "1#2#", "1#2#3", "1#2#3=", "1#2#=4",
                               "1#2#3=4=5", "1.5#2", "1#x", "1#2#a=1"])
def test_malformed_vectors_are_rejected_like_the_sdk(s):
    assert VectorSessionToken.create(s) is None
    with pytest.raises(ValueError):
        parse_vector(s)


@pytest.mark.parametrize("s", [" 1#2", "+1#2", "1_0#2", "1#2#3=4#3=5"])
def test_we_are_stricter_than_the_sdk_on_forms_it_never_sends(s):
    with pytest.raises(ValueError):
        parse_vector(s)


def test_examples():
    assert parse_vector("-1#42") == VectorToken(-1, 42, ())
    assert parse_vector("2#90#2=30#1=25") == VectorToken(2, 90, ((1, 25), (2, 30)))
    assert format_vector(VectorToken(0, -7, ((3, -1),))) == "0#-7#3=-1"
    assert parse_session_header("0:-1#42,1:-1#7") == {"0": VectorToken(-1, 42), "1": VectorToken(-1, 7)}


@pytest.mark.parametrize("header", ["0:-1#42,1:-1#7", "0:-1#42,junk,1:2#3#1=4", "a:b:c,0:1#2",
                                    "", "0:1#2,0:1#3", "x:-1#5#0=1#1=2"])
def test_header_parse_agrees_with_sdk(header):
    ours = parse_session_header(header)
    theirs = SessionContainer.parse_session_token({"x-ms-session-token": header})
    assert {k: our_view(v) for k, v in ours.items()} == {
        k: (v.version, v.global_lsn, tuple(sorted(v.local_lsn_by_region.items())))
        for k, v in theirs.items()}


def test_malformed_vector_in_header_raises_where_the_sdk_raises_500():
    with pytest.raises(sdk_exceptions.CosmosHttpResponseError):
        SessionContainer.parse_session_token({"x-ms-session-token": "0:abc"})
    with pytest.raises(ValueError):
        parse_session_header("0:abc")


def test_format_header_rejects_separators_in_range_ids():
    with pytest.raises(ValueError):
        format_session_header({"a,b": VectorToken(1, 2)})


def sdk_merge(a: VectorToken, b: VectorToken):
    """The SDK's merge of the same two tokens, or None if it raises."""
    try:
        merged = VectorSessionToken.create(format_vector(a)).merge(VectorSessionToken.create(format_vector(b)))
    except sdk_exceptions.CosmosHttpResponseError:
        return None
    return merged.version, merged.global_lsn, tuple(sorted(merged.local_lsn_by_region.items()))


def our_merge(a: VectorToken, b: VectorToken):
    try:
        return our_view(merge(a, b))
    except ValueError:
        return None


@given(st.data())
def test_merge_agrees_with_sdk_same_regions(data):
    regions = data.draw(st.sets(st.integers(0, 6), max_size=4))
    a, b = data.draw(vectors(regions)), data.draw(vectors(regions))
    assert our_merge(a, b) == sdk_merge(a, b) == our_merge(b, a)


@given(vectors(), vectors())
def test_merge_agrees_with_sdk_any_regions(a, b):
    assert our_merge(a, b) == sdk_merge(a, b)


def test_merge_examples_from_the_wire_notes():
    assert merge(parse_vector("-1#7"), parse_vector("-1#6")) == parse_vector("-1#7")
    merged = merge(parse_vector("1#100#1=20#2=30"), parse_vector("2#90#1=25#2=10"))
    assert format_vector(merged) == "2#90#1=25#2=30"
    with pytest.raises(ValueError):
        merge(parse_vector("1#1#1=1"), parse_vector("1#1#2=1"))


def test_vector_token_rejects_unsorted_or_duplicate_regions():
    with pytest.raises(ValueError):
        VectorToken(1, 1, ((2, 0), (1, 0)))
    with pytest.raises(ValueError):
        VectorToken(1, 1, ((1, 0), (1, 0)))
