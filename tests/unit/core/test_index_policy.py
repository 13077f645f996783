"""Proves the indexing-policy path rules of emulator/core/index_policy.py by example: pattern
parsing (`/?`, `/*`, `[]`, quoted segments, invalid patterns), which query paths a policy
indexes (wildcards, the more precise pattern winning a conflict, exclusion winning a tie,
indexingMode none, id and _ts always indexed), and compiling once per policy object."""
import pytest

from regionlab.emulator.core.index_policy import IndexPolicy, parse_pattern, policy_of

DEFAULT = {"indexingMode": "consistent", "includedPaths": [{"path": "/*"}],
           "excludedPaths": [{"path": '/"_etag"/?'}]}


def indexed(policy: dict, *paths) -> list:
    compiled = IndexPolicy(policy)
    return [compiled.indexes(p) for p in paths]


@pytest.mark.parametrize("text, segments, terminal", [
    ("/*", (), "*"),
    ("/?", (), "?"),
    ("/a/?", ("a",), "?"),
    ("/a/b/*", ("a", "b"), "*"),
    ("/tags/[]/?", ("tags", "[]"), "?"),
    ('/"_etag"/?', ("_etag",), "?"),
    ('/"a/b c"/d/?', ("a/b c", "d"), "?"),
    ('/"say \\"hi\\""/?', ('say "hi"',), "?"),
])
def test_patterns_parse(text, segments, terminal):
    pattern = parse_pattern(text)
    assert (pattern.segments, pattern.terminal) == (segments, terminal)


@pytest.mark.parametrize("text", ["", "a/?", "/a", "/a/", "/a/*/b/?", '/"open/?', "/a//?", None, 5])
def test_invalid_patterns_are_rejected(text):
    assert parse_pattern(text) is None


def test_default_policy_indexes_everything_but_etag():
    assert indexed(DEFAULT, ("a",), ("a", "b", "c"), ("tags", 0), ("_etag",), ("_etag", "x")) == \
        [True, True, True, False, True]


def test_scalar_terminal_matches_exactly_that_path():
    policy = {"includedPaths": [{"path": "/a/?"}], "excludedPaths": [{"path": "/*"}]}
    assert indexed(policy, ("a",), ("a", "b"), ("b",)) == [True, False, False]


def test_wildcard_covers_the_node_and_everything_below():
    policy = {"includedPaths": [{"path": "/a/*"}], "excludedPaths": [{"path": "/*"}]}
    assert indexed(policy, ("a",), ("a", "b"), ("a", "b", 3), ("ab",), ("b",)) == [True, True, True, False, False]


def test_array_segment_matches_any_index_and_numeric_segment_one():
    policy = {"includedPaths": [{"path": "/tags/[]/?"}, {"path": "/pos/1/?"}], "excludedPaths": [{"path": "/*"}]}
    assert indexed(policy, ("tags", 0), ("tags", 7), ("tags", "x"), ("pos", 1), ("pos", 0)) == \
        [True, True, False, True, False]


def test_more_precise_pattern_wins_a_conflict():
    policy = {"includedPaths": [{"path": "/*"}, {"path": "/food/ingredients/nutrition/*"}],
              "excludedPaths": [{"path": "/food/ingredients/*"}]}
    assert indexed(policy, ("food", "name"), ("food", "ingredients", "x"),
                   ("food", "ingredients", "nutrition", "kcal")) == [True, False, True]


def test_scalar_terminal_is_more_precise_than_wildcard_of_same_length():
    policy = {"includedPaths": [{"path": "/a/?"}], "excludedPaths": [{"path": "/a/*"}]}
    assert indexed(policy, ("a",), ("a", "b")) == [True, False]


def test_exclusion_wins_a_tie():
    policy = {"includedPaths": [{"path": "/a/?"}], "excludedPaths": [{"path": "/a/?"}]}
    assert indexed(policy, ("a",)) == [False]


def test_id_and_ts_are_always_indexed_unless_mode_is_none():
    nothing = {"includedPaths": [], "excludedPaths": [{"path": "/*"}]}
    assert indexed(nothing, ("id",), ("_ts",), ("a",)) == [True, True, False]
    none_mode = dict(DEFAULT, indexingMode="none")
    assert indexed(none_mode, ("id",), ("a",)) == [False, False]


def test_missing_or_odd_policy_falls_back_to_everything():
    assert indexed(None, ("a",)) == [True]
    assert indexed({"includedPaths": [{"path": "nonsense"}, "x"]}, ("a",)) == [False]


def test_policies_compile_once_per_object():
    policy = {"includedPaths": [{"path": "/*"}]}
    assert policy_of(policy) is policy_of(policy)
    assert policy_of(dict(policy)) is not policy_of(policy)
