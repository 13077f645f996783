"""Request-body validation: id, size and depth checks give the service's statuses and clear
messages, and the fuzzer's single invariant holds: any bytes given to parse_json_body either
parse to plain JSON or raise ValidationError, nothing else (fed whole and prefix by prefix)."""

import json
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from regionlab.emulator.core.validation import (
    check_numbers_in_double_range, text_nests_at_most, ValidationError, check_depth, check_id,
    check_item_size, parse_json_body,
)
from tiers import examples
from regionlab.emulator.core.limits import ID_MAX_BYTES, ITEM_MAX_BYTES, ITEM_NESTING_MAX_LEVELS


def rejects(fn, *args, status=400, match=None):
    with pytest.raises(ValidationError, match=match) as e:
        fn(*args)
    assert e.value.status == status and e.value.definite
    return e.value


@pytest.mark.parametrize("good", ["a", "item 1", "ünï 😀", "x" * ID_MAX_BYTES, "a.b-c_d~e%20"])
def test_good_ids(good):
    check_id(good)


def test_missing_or_non_string_id_uses_the_service_message():
    for bad in (None, 5, 1.5, True, ["a"], {"a": 1}):
        err = rejects(check_id, bad)
        assert err.message == "The input content is invalid because the required properties - 'id; ' - are missing"


def test_bad_ids():
    rejects(check_id, "", match="empty")
    rejects(check_id, "x" * (ID_MAX_BYTES + 1), match="1024 bytes")
    rejects(check_id, "é" * 512, match="1024 bytes")     # 512 characters but 1024 bytes
    for ch in "/\\?#":
        err = rejects(check_id, f"a{ch}b")
        assert repr(ch) in err.message


def test_item_size():
    check_item_size(ITEM_MAX_BYTES)
    err = rejects(check_item_size, ITEM_MAX_BYTES + 1, status=413)
    assert err.message.startswith("Request size is too large")


def nested(depth: int, kind: str = "list"):
    value: object = 0
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    return value


def test_depth():
    check_depth(nested(ITEM_NESTING_MAX_LEVELS))
    check_depth(nested(ITEM_NESTING_MAX_LEVELS, "dict"))
    check_depth(42)
    rejects(check_depth, nested(ITEM_NESTING_MAX_LEVELS + 1), match="128")
    rejects(check_depth, nested(ITEM_NESTING_MAX_LEVELS + 1, "dict"))
    rejects(check_depth, nested(100_000))        # iterative: no RecursionError
    loop: list = []
    loop.append(loop)
    rejects(check_depth, loop)                   # terminates on cycles


def test_parse_accepts_plain_json():
    assert parse_json_body(b'{"id":"a","n":[1,2.5,null,true,"\\u00e9\\ud83d\\ude00"]}') == {
        "id": "a", "n": [1, 2.5, None, True, "é😀"]}
    assert parse_json_body("{\"id\":\"ü\"}".encode()) == {"id": "ü"}
    assert parse_json_body(json.dumps(nested(ITEM_NESTING_MAX_LEVELS)).encode()) == nested(ITEM_NESTING_MAX_LEVELS)


@pytest.mark.parametrize("raw,needle", [
    (b"", "line 1 column 1"),
    (b'{"a":1}\n{"b":2}', "Extra data at line 2 column 1"),
    (b"\xff\xfe{}", "not valid UTF-8"),
    (b'{"id":"\xc3"}', "not valid UTF-8"),
    (b"\xef\xbb\xbf{}", "BOM"),
    (b'{"n": NaN}', "NaN"),
    (b'{"n": -Infinity}', "Infinity"),
    (b'{"n": 1e400}', "out of range"),
    (b'{"a": 1, "a": 2}', "duplicate member name 'a'"),
    (b'{"a": "\\ud800"}', "surrogate"),
    (b'{"\\udc00": 1}', "surrogate"),
    (b"[" * 100_000, "nests deeper"),
    (b"[" * 100_000 + b"]" * 100_000, "nests deeper"),
    (b"[" * (ITEM_NESTING_MAX_LEVELS + 1) + b"]" * (ITEM_NESTING_MAX_LEVELS + 1), "nests deeper"),
    (b"1" * 5000, "not valid JSON"),       # more digits than int() accepts
])
def test_parse_rejects(raw, needle):
    err = rejects(parse_json_body, raw)
    assert needle in err.message


def test_a_trailing_comma_is_rejected_at_its_position():
    # Python's parser points at the closing brace up to 3.12 and at the comma since 3.13.
    err = rejects(parse_json_body, b'{"id": "a",}')
    assert re.search(r"line 1 column (12 \(char 11\)|11 \(char 10\))", err.message), err.message


def _is_plain_json(value) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if not all(isinstance(k, str) for k in node):
                return False
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif not (node is None or isinstance(node, (str, int, float, bool))):
            return False
    return True


def _parses_or_rejects(raw: bytes) -> None:
    try:
        value = parse_json_body(raw)
    except ValidationError as e:
        assert e.status == 400
        return
    assert _is_plain_json(value)
    json.dumps(value, allow_nan=False).encode("utf-8")      # serialisable again, strictly


@settings(max_examples=examples(400), deadline=None)
@given(st.binary(max_size=64))
@example(b"[" * 3000)
@example(b'"\\ud800"')
@example(b"-")
def test_fuzz_bytes_parse_or_raise_validation_error(raw):
    _parses_or_rejects(raw)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=15,
)


@settings(max_examples=examples(200), deadline=None)
@given(_json_values, st.booleans())
def test_fuzz_valid_json_whole_and_every_prefix(value, ascii_only):
    raw = json.dumps({"v": value}, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    for end in range(len(raw) + 1):
        _parses_or_rejects(raw[:end])


def test_check_numbers_in_double_range():
    largest = int(1.7976931348623157e308)          # the largest double, written out as an integer
    check_numbers_in_double_range({"n": largest, "s": "9" * 400, "a": [-largest, 1.5, True]})
    for beyond in ({"n": 2 ** 1024}, [1, [-(2 ** 1030)]]):
        err = rejects(check_numbers_in_double_range, beyond)
        assert "beyond the range of a double" in err.message


_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _nests_at_most_by_tokens(text: str, limit: int) -> bool:
    """The reference: walk the tokens (strings and brackets) one by one, as the check once did."""
    depth = 0
    for m in _TOKENS.finditer(text):
        token = m.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                return False
        elif token in "]}":
            depth -= 1
    return True


def _depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


_tricky = st.text(st.sampled_from('[]{}"\\a/é\n'), max_size=8)
_json = st.recursive(st.none() | st.integers() | _tricky,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_tricky, inner, max_size=3),
                     max_leaves=20)


@settings(max_examples=examples(300), deadline=None)
@given(_json, st.integers(0, 6), st.booleans(), st.integers(0, 400))
def test_the_nesting_check_is_the_depth_of_json_and_of_its_prefixes(value, limit, ascii_only, cut):
    """On JSON text (strings full of brackets, quotes and backslashes) the check is the real
    depth; on every prefix of it (what a parser reads before it stops at a bad byte) it agrees
    with walking the tokens one by one, as the check once did."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert text_nests_at_most(text, limit) == (_depth(value) <= limit) == _nests_at_most_by_tokens(text, limit)
    prefix = text[:cut]
    assert text_nests_at_most(prefix, limit) == _nests_at_most_by_tokens(prefix, limit)


@settings(max_examples=examples(300), deadline=None)
@given(st.text(st.sampled_from('[]{}"a,:é'), max_size=60), st.integers(0, 6))
@example('"a"b"[[[', 2)
def test_the_nesting_check_agrees_with_walking_the_tokens_on_any_text(text, limit):
    """Without a backslash (which outside a string ends any parse at once) any text at all:
    an unterminated string opens nothing, so the brackets after its quote count."""
    assert text_nests_at_most(text, limit) == _nests_at_most_by_tokens(text, limit)


@pytest.mark.parametrize("text, deep_enough", [('"\\"[[["', False), ('"\\\\"[[["', True),
                                               ('"\\\\\\"[[["', False), ('["\\\\"[[[]', True)])
def test_escaped_quotes_and_backslashes_inside_strings(text, deep_enough):
    assert text_nests_at_most(text, 2) is not deep_enough
    assert _nests_at_most_by_tokens(text, 2) is not deep_enough


def test_text_nests_at_most_counts_brackets_outside_strings_without_parsing():
    assert text_nests_at_most("[" * ITEM_NESTING_MAX_LEVELS + "]" * ITEM_NESTING_MAX_LEVELS)
    assert not text_nests_at_most("[" * (ITEM_NESTING_MAX_LEVELS + 1) + "]" * (ITEM_NESTING_MAX_LEVELS + 1))
    assert not text_nests_at_most("[" * 1_000_000)
    assert text_nests_at_most('["' + "[" * 1000 + '\\"[{"]')
    assert text_nests_at_most('{"a":' * 3 + "1" + "}" * 3, limit=3) and not text_nests_at_most("[[[[]]]]", limit=3)
