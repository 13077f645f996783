"""Proves the built-in system functions, one case per behaviour.

Constant cases state the expected value by hand (what the service documents);
document cases compute it from DOCS in plain Python. The clock is the fixed
NOW_MS passed to execute, never the wall clock.
"""

from __future__ import annotations

import math

import pytest

from regionlab.emulator.core.query import compile_query
from query_corpus_data import DOCS, NOW_MS, ids, where
from query_reference import get

NOW_TEXT = "2023-11-14T22:13:20.0000000Z"


def v(text, expected):
    """`SELECT VALUE <text>` must give [expected] ([] when expected is None)."""
    return pytest.param(f"SELECT VALUE {text}", [] if expected is None else [expected], id=text[:80])


CONSTANT_CASES = [
    # type checks
    v("IS_DEFINED(1)", True), v("IS_DEFINED(undefined)", False), v("IS_NULL(null)", True),
    v("IS_NULL(undefined)", False), v('IS_STRING("x")', True), v("IS_NUMBER(true)", False),
    v("IS_NUMBER(1.5)", True), v("IS_BOOL(false)", True), v("IS_ARRAY([])", True), v("IS_OBJECT({})", True),
    v("IS_PRIMITIVE(null)", True), v("IS_PRIMITIVE([1])", False), v("is_number(3)", True),
    # strings
    v('CONTAINS("Hello", "ell")', True), v('CONTAINS("Hello", "ELL")', False), v('CONTAINS("Hello", "ELL", true)', True),
    v('CONTAINS(1, "1")', None), v('STARTSWITH("Hello", "He")', True), v('STARTSWITH("Hello", "he", true)', True),
    v('ENDSWITH("Hello", "lo")', True), v('ENDSWITH("Hello", "LO", false)', False), v('LOWER("ÀBC")', "àbc"),
    v('UPPER("straße")', "STRASSE"), v('LENGTH("naïve")', 5), v("LENGTH(5)", None),
    v('SUBSTRING("abcdef", 1, 3)', "bcd"), v('SUBSTRING("abc", 2, 10)', "c"), v('SUBSTRING("abc", 5, 1)', ""),
    v('CONCAT("a", "b", "c")', "abc"), v('CONCAT("a", 1)', None), v('INDEX_OF("abcabc", "c")', 2),
    v('INDEX_OF("abc", "z")', -1), v('INDEX_OF("abcabc", "c", 3)', 5), v('LEFT("abcdef", 2)', "ab"),
    v('RIGHT("abcdef", 2)', "ef"), v('LTRIM("  a ")', "a "), v('RTRIM("  a ")', "  a"), v('TRIM("  a ")', "a"),
    v('REPLACE("a-b-c", "-", "+")', "a+b+c"), v('REVERSE("abc")', "cba"), v('REPLICATE("ab", 3)', "ababab"),
    v("TOSTRING(12)", "12"), v("TOSTRING(1.5)", "1.5"), v("TOSTRING(true)", "true"), v("TOSTRING(null)", "null"),
    v('TOSTRING([1, "a"])', '[1,"a"]'), v('TOSTRING({"a": 1})', '{"a":1}'), v("TOSTRING(undefined)", None),
    v('StringToNumber("42")', 42), v('StringToNumber(" 1.5 ")', 1.5), v('StringToNumber("x")', None),
    v('StringToBoolean("true")', True), pytest.param('SELECT VALUE StringToNull("null")', [None], id="StringToNull"), v('StringToArray("[1,2]")', [1, 2]),
    v('StringToObject("{\\"a\\": 1}")', {"a": 1}), v('StringToNumber("NaN")', None),
    v('StringEquals("abc", "ABC", true)', True), v('StringEquals("abc", "ABC")', False),
    # arrays
    v('ARRAY_CONTAINS(["a", "b"], "b")', True), v("ARRAY_CONTAINS([1, 2], 3)", False),
    v("ARRAY_CONTAINS([1, 2], true)", False), v('ARRAY_CONTAINS([{"a": 1, "b": 2}], {"a": 1})', False),
    v('ARRAY_CONTAINS([{"a": 1, "b": 2}], {"a": 1}, true)', True), v("ARRAY_CONTAINS([[1]], [1])", True),
    v("ARRAY_LENGTH([1, 2, 3])", 3), v('ARRAY_LENGTH("abc")', None), v("ARRAY_SLICE([1, 2, 3, 4], 1)", [2, 3, 4]),
    v("ARRAY_SLICE([1, 2, 3, 4], 1, 2)", [2, 3]), v("ARRAY_SLICE([1, 2, 3, 4], -2)", [3, 4]),
    v("ARRAY_SLICE([1, 2, 3, 4], -2, 1)", [3]), v("ARRAY_SLICE([1, 2, 3], 5)", []),
    v("ARRAY_CONCAT([1], [2, 3], [])", [1, 2, 3]), v("ARRAY_CONCAT([1], 2)", None),
    v("ARRAY_CONTAINS_ANY([1, 2], 5, 2)", True), v("ARRAY_CONTAINS_ALL([1, 2], 1, 5)", False),
    v("SetIntersect([1, 2, 3], [2, 3, 4])", [2, 3]), v("SetUnion([1, 2], [2, 3])", [1, 2, 3]),
    # math
    v("ABS(-3)", 3), v("ABS(-2.5)", 2.5), v("CEILING(1.2)", 2), v("CEILING(-1.2)", -1), v("FLOOR(1.8)", 1),
    v("FLOOR(-1.2)", -2), v("ROUND(2.5)", 3), v("ROUND(-2.5)", -3), v("ROUND(2.4)", 2), v("POWER(2, 10)", 1024),
    v("POWER(2, -1)", 0.5), v("SQRT(16)", 4.0), v("SQRT(-1)", None), v("SIGN(-7)", -1), v("SIGN(0)", 0),
    v("TRUNC(-2.7)", -2), v("LOG(1)", 0.0), v("LOG(8, 2)", 3.0), v("LOG(0)", None), v("LOG10(1000)", 3.0),
    v("EXP(0)", 1.0), v("PI()", math.pi), v('ABS("x")', None), v("ATN2(35.175643, 129.44)", math.atan2(129.44, 35.175643)),
    v("NumberBin(17, 5)", 15), v("7 % 3", 1), v("-7 % 3", -1), v("7.5 % 2", 1.5), v("5 | 2", 7), v("6 & 3", 2),
    v("1 << 4", 16), v("-16 >> 2", -4), v("-1 >>> 28", 15), v("~0", -1),
    # dates
    v("GetCurrentDateTime()", NOW_TEXT), v("GetCurrentTimestamp()", NOW_MS), v("GetCurrentTicks()", NOW_MS * 10_000),
    v('DateTimeAdd("mm", 1, "2020-01-31T00:00:00.0000000Z")', "2020-02-29T00:00:00.0000000Z"),
    v('DateTimeAdd("yyyy", -1, "2020-02-29T12:00:00.0000000Z")', "2019-02-28T12:00:00.0000000Z"),
    v('DateTimeAdd("hh", 25, "2020-01-01T00:00:00Z")', "2020-01-02T01:00:00.0000000Z"),
    v('DateTimeAdd("ms", 1500, "2020-01-01T00:00:00.0000000Z")', "2020-01-01T00:00:01.5000000Z"),
    v('DateTimeAdd("day", 1, "not a date")', None), v('DateTimeAdd("fortnight", 1, "2020-01-01T00:00:00Z")', None),
    v('DateTimePart("yyyy", "2021-03-04T05:06:07.1234567Z")', 2021), v('DateTimePart("m", "2021-03-04T05:06:07Z")', 3),
    v('DateTimePart("dd", "2021-03-04T05:06:07Z")', 4), v('DateTimePart("hour", "2021-03-04T05:06:07Z")', 5),
    v('DateTimePart("mi", "2021-03-04T05:06:07Z")', 6), v('DateTimePart("ss", "2021-03-04T05:06:07Z")', 7),
    v('DateTimePart("ms", "2021-03-04T05:06:07.1234567Z")', 123), v('DateTimePart("mcs", "2021-03-04T05:06:07.1234567Z")', 123456),
    v('DateTimePart("ns", "2021-03-04T05:06:07.1234567Z")', 123456700),
    v('DateTimeDiff("yyyy", "2020-12-31T23:59:59Z", "2021-01-01T00:00:00Z")', 1),
    v('DateTimeDiff("month", "2020-01-31T00:00:00Z", "2020-03-01T00:00:00Z")', 2),
    v('DateTimeDiff("day", "2020-01-01T23:00:00Z", "2020-01-02T01:00:00Z")', 1),
    v('DateTimeDiff("hh", "2020-01-02T00:00:00Z", "2020-01-01T00:00:00Z")', -24),
    v('DateTimeDiff("ss", "2020-01-01T00:00:00Z", "2020-01-01T00:01:00.5Z")', 60),
    v("DateTimeFromParts(2020, 2, 29)", "2020-02-29T00:00:00.0000000Z"), v("DateTimeFromParts(2021, 2, 29)", None),
    v('DateTimeToTimestamp("1970-01-01T00:00:01.5Z")', 1500), v("TimestampToDateTime(0)", "1970-01-01T00:00:00.0000000Z"),
    v("DateTimeToTimestamp(GetCurrentDateTime())", NOW_MS),
]

DOCUMENT_CASES = [
    pytest.param("SELECT VALUE c.id FROM c WHERE IS_DEFINED(c.flag) = false", ids(where(lambda d: "flag" not in d)), id="is_defined"),
    pytest.param("SELECT VALUE c.id FROM c WHERE IS_STRING(c.n)", ids(where(lambda d: type(get(d, "n")) is str)), id="is_string"),
    pytest.param('SELECT VALUE c.id FROM c WHERE CONTAINS(c.name, "A", true)',
                 ids(where(lambda d: "a" in d.get("name", "").lower())), id="contains_ci"),
    pytest.param('SELECT VALUE c.id FROM c WHERE ARRAY_CONTAINS(c.tags, "green")', ids(where(lambda d: "green" in d.get("tags", []))), id="array_contains"),
    pytest.param('SELECT VALUE c.id FROM c WHERE ARRAY_CONTAINS(c.items, {"qty": 3}, true)',
                 ids(where(lambda d: any(i["qty"] == 3 for i in d["items"]))), id="array_contains_partial"),
    pytest.param("SELECT VALUE UPPER(c.name) FROM c WHERE c.pk = 'a'",
                 [d["name"].upper() for d in DOCS if d["pk"] == "a" and "name" in d], id="upper"),
    pytest.param("SELECT VALUE ARRAY_LENGTH(c.items) FROM c", [len(d["items"]) for d in DOCS], id="array_length"),
    pytest.param("SELECT VALUE c.id FROM c WHERE DateTimePart('m', c.created) = 3",
                 ids(where(lambda d: d["created"][5:7] == "03")), id="datetimepart"),
    pytest.param('SELECT VALUE c.id FROM c WHERE c.created < DateTimeAdd("yyyy", 1, GetCurrentDateTime())',
                 ids(where(lambda d: d["created"] < "2024-11-14T22:13:20.0000000Z")), id="created_before_now_plus_1y"),
    pytest.param("SELECT VALUE LENGTH(c.name) FROM c WHERE c.pk = 'b'",
                 [len(d["name"]) for d in DOCS if d["pk"] == "b" and "name" in d], id="length"),
    pytest.param("SELECT VALUE ROUND(c.score) FROM c WHERE c.pk = 'c'",
                 [math.floor(d["score"] + 0.5) for d in DOCS if d["pk"] == "c"], id="round"),
]


@pytest.mark.parametrize("text,expected", CONSTANT_CASES + DOCUMENT_CASES)
def test_function(text, expected):
    assert compile_query(text).execute(DOCS, NOW_MS) == expected


@pytest.mark.parametrize("text", ["SELECT VALUE CEILING(1.2)", "SELECT VALUE ROUND(2.5)", "SELECT VALUE ABS(-3)", "SELECT VALUE POWER(3, 2)"])
def test_integral_results_are_ints(text):
    (result,) = compile_query(text).execute([], NOW_MS)
    assert type(result) is int


def test_now_comes_from_the_caller():
    query = compile_query("SELECT VALUE GetCurrentTimestamp()")
    assert query.execute([], 5) == [5]
    assert query.execute([], 7) == [7]
