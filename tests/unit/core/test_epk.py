"""Proves emulator/core/epk.py hashes keys bit for bit like the official SDK (hypothesis keys vs azure-cosmos's PartitionKey), that split_ranges tiles ""..FF evenly, and that bad definitions are rejected."""
from bisect import bisect_right

import pytest
from azure.cosmos import _base as sdk_base
from azure.cosmos._cosmos_client_connection import CosmosClientConnection
from azure.cosmos._routing.routing_range import Range as SdkRange
from azure.cosmos.partition_key import PartitionKey as SdkPartitionKey
from azure.cosmos.partition_key import _Undefined as SdkUndefined
from hypothesis import given, settings
from hypothesis import strategies as st

from regionlab.emulator.core.epk import (
    EPK_MAX, EPK_MIN, UNDEFINED, PartitionKeyDef, effective_partition_key, split_ranges,
)
from regionlab.client.protocol.partition_key_hash import epk_successor
from tiers import examples

HASH_V1 = PartitionKeyDef(("/pk",), "Hash", 1)
HASH_V2 = PartitionKeyDef(("/pk",), "Hash", 2)
MULTI = PartitionKeyDef(("/tenant", "/user", "/session"), "MultiHash", 2)
SPREAD_KEYS = 2000
SPREAD_TOLERANCE = 0.3          # each range holds its share of keys within +-30% (> 5 sigma)

scalars = st.one_of(
    st.text(max_size=20),
    st.text(min_size=90, max_size=260),         # across V1's 100-char / 100-byte cut
    st.integers(min_value=-(2**53), max_value=2**53),
    st.integers(min_value=-(2**1023), max_value=2**1023),
    st.floats(),
    st.booleans(),
    st.none(),
    st.just(UNDEFINED),
    st.just({}),                                # the header's spelling of undefined
)


def sdk_epk(paths, kind: str, version: int, values: list) -> str:
    sdk_values = [{} if v is UNDEFINED else v for v in values]
    pk = SdkPartitionKey(path=paths, kind=kind, version=version)
    return str(pk._get_effective_partition_key_string(sdk_values)).upper()


# --- hashing against the SDK ---------------------------------------------------------------

@settings(max_examples=examples(300), deadline=None)
@given(scalars)
def test_hash_v2_matches_sdk(value):
    assert effective_partition_key(HASH_V2, [value]) == sdk_epk("/pk", "Hash", 2, [value])


@settings(max_examples=examples(300), deadline=None)
@given(scalars)
def test_hash_v1_matches_sdk(value):
    assert effective_partition_key(HASH_V1, [value]) == sdk_epk("/pk", "Hash", 1, [value])


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(scalars, min_size=1, max_size=3))
def test_multi_hash_and_its_prefixes_match_sdk(values):
    paths = list(MULTI.paths)
    assert effective_partition_key(MULTI, values) == sdk_epk(paths, "MultiHash", 2, values)


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(scalars, min_size=1, max_size=3))
def test_multi_hash_prefix_is_prefix_of_full_key(values):
    full = effective_partition_key(MULTI, values)
    for n in range(1, len(values)):
        assert full.startswith(effective_partition_key(MULTI, values[:n]))


@settings(max_examples=examples(100), deadline=None)
@given(scalars)
def test_epk_shape(value):
    v2 = effective_partition_key(HASH_V2, [value])
    assert len(v2) == 32 and v2 < "40" and v2 == v2.upper()
    v1 = effective_partition_key(HASH_V1, [value])
    assert v1.startswith("05") and len(v1) % 2 == 0 and v1 == v1.upper()


def test_known_vector_from_the_wire():
    # cosmos-wire.md section 7: change feed for "p1" on a V2 hash key, captured from the SDK.
    epk = effective_partition_key(HASH_V2, ["p1"])
    assert epk == "062B23DEC15212F01B9A85F4E93A940C"
    assert epk_successor(epk) == "062B23DEC15212F01B9A85F4E93A940D"


def test_header_forms():
    for pk_def in (HASH_V1, HASH_V2, MULTI):
        assert effective_partition_key(pk_def, [{}]) == effective_partition_key(pk_def, [UNDEFINED])
        assert effective_partition_key(pk_def, [5]) == effective_partition_key(pk_def, [5.0])
        assert effective_partition_key(pk_def, [None]) != effective_partition_key(pk_def, [{}])
        assert effective_partition_key(pk_def, []) == EPK_MIN


@pytest.mark.parametrize("pk_def, values", [
    (HASH_V2, ["a", "b"]),
    (HASH_V1, ["a", "b"]),
    (MULTI, ["a", "b", "c", "d"]),
    (HASH_V2, [[1, 2]]),
    (HASH_V2, [{"a": 1}]),
    (HASH_V1, [{"a": 1}]),
    (HASH_V2, [2**1100]),
    (HASH_V1, [2**1100]),
])
def test_bad_keys_raise_value_error(pk_def, values):
    with pytest.raises(ValueError):
        effective_partition_key(pk_def, values)


# --- successor ------------------------------------------------------------------------------

@settings(max_examples=examples(200), deadline=None)
@given(st.binary(min_size=1, max_size=48).filter(lambda b: b != b"\xff" * len(b)))
def test_successor_matches_sdk(raw):
    epk = raw.hex().upper()
    sdk = SdkRange(epk, epk, True, True).to_normalized_range()
    assert (sdk.min, sdk.max) == (epk, epk_successor(epk))
    assert epk < epk_successor(epk)


def test_successor_edges():
    assert epk_successor("") == "00"
    assert epk_successor("00FF") == "0100"
    assert epk_successor("3f") == "40"
    for bad in ("FF", "FFFF", "ABC", "0x12", "zz"):
        with pytest.raises(ValueError):
            epk_successor(bad)


# --- range splits ---------------------------------------------------------------------------

def spread_keys() -> list:
    return [f"key-{i}" for i in range(SPREAD_KEYS // 2)] + list(range(SPREAD_KEYS // 2))


def range_index(ranges: list, epk: str) -> int:
    i = bisect_right([lo for lo, _ in ranges], epk) - 1
    assert ranges[i][0] <= epk < ranges[i][1]
    return i


@pytest.mark.parametrize("pk_def", [HASH_V1, HASH_V2, MULTI], ids=["v1", "v2", "multi"])
def test_split_ranges_tile_the_space_evenly(pk_def):
    epks = [effective_partition_key(pk_def, [k]) for k in spread_keys()]
    for count in range(1, 9):
        ranges = split_ranges(pk_def, count)
        assert len(ranges) == count
        assert ranges[0][0] == EPK_MIN and ranges[-1][1] == EPK_MAX
        assert all(lo < hi for lo, hi in ranges)
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
        assert all(len(lo) % 2 == 0 and lo == lo.upper() for lo, _ in ranges)
        held = [0] * count
        for epk in epks:
            held[range_index(ranges, epk)] += 1
        share = len(epks) / count
        assert all(abs(n - share) <= SPREAD_TOLERANCE * share for n in held), held


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(scalars, min_size=1, max_size=3), st.integers(min_value=2, max_value=64))
def test_multi_hash_prefix_lands_in_its_full_keys_range(values, count):
    ranges = split_ranges(MULTI, count)
    full = range_index(ranges, effective_partition_key(MULTI, values))
    assert range_index(ranges, effective_partition_key(MULTI, values[:1])) == full


@pytest.mark.parametrize("count", [0, -1, 1.5, 10**9])
def test_split_ranges_rejects_bad_counts(count):
    with pytest.raises(ValueError):
        split_ranges(HASH_V2, count)


# --- definitions ----------------------------------------------------------------------------

def test_from_json_defaults_and_round_trip():
    assert PartitionKeyDef.from_json({"paths": ["/pk"]}) == HASH_V1
    assert PartitionKeyDef.from_json({"paths": ["/a", "/b"], "kind": "MultiHash"}).version == 2
    for pk_def in (HASH_V1, HASH_V2, MULTI):
        assert PartitionKeyDef.from_json(pk_def.to_json()) == pk_def
    assert HASH_V2.to_json() == {"paths": ["/pk"], "kind": "Hash", "version": 2}


@pytest.mark.parametrize("d", [
    None, [], {}, {"paths": []}, {"paths": "/pk"}, {"paths": [5]}, {"paths": ["pk"]},
    {"paths": ["/"]}, {"paths": ["/a//b"]}, {"paths": ["/a/"]}, {"paths": ['/"a']},
    {"paths": ["/a", "/b"]}, {"paths": ["/a", "/b"], "kind": "Hash", "version": 2},
    {"paths": ["/a", "/b", "/c", "/d"], "kind": "MultiHash", "version": 2},
    {"paths": ["/a", "/a"], "kind": "MultiHash", "version": 2},
    {"paths": ["/a", "/b"], "kind": "MultiHash", "version": 1},
    {"paths": ["/pk"], "kind": "Range"}, {"paths": ["/pk"], "version": 3},
    {"paths": ["/pk"], "version": "2"}, {"paths": ["/pk"], "version": True},
])
def test_from_json_rejects_bad_definitions(d):
    with pytest.raises(ValueError):
        PartitionKeyDef.from_json(d)


def test_values_from_document():
    pk_def = PartitionKeyDef(("/a/b", "/c", '/"d/e"'), "MultiHash", 2)
    assert pk_def.values_from_document({"a": {"b": 1}, "c": None, "d/e": "x"}) == [1, None, "x"]
    assert pk_def.values_from_document({}) == [UNDEFINED] * 3
    assert pk_def.values_from_document({"a": 5, "c": {"x": 1}, "d/e": [1]}) == [UNDEFINED] * 3


documents = st.recursive(
    st.one_of(st.text(max_size=5), st.integers(), st.booleans(), st.none()),
    lambda inner: st.dictionaries(st.sampled_from(["a", "b", "pk"]), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=examples(200), deadline=None)
@given(documents, st.sampled_from(["/pk", "/a", "/a/b", "/a/b/pk", '/"a"/b']))
def test_document_extraction_matches_sdk(doc, path):
    pk_def = PartitionKeyDef((path,), "Hash", 2)
    sdk = CosmosClientConnection._retrieve_partition_key(
        None, sdk_base.ParsePaths([path]), doc, False)
    expected = UNDEFINED if isinstance(sdk, SdkUndefined) else sdk
    assert pk_def.values_from_document(doc) == [expected]
