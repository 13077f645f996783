"""Proves malformed queries fail at compile time with QueryError, and that the
error names where (line/column and offset) and what was expected.

Each bad query states the offset where the problem starts; the test checks the
exception's `position`, that the message spells out that place, and that the
message mentions the expected thing. Also checks nothing else escapes.
"""

from __future__ import annotations

import pytest

from regionlab.emulator.core.query import QueryError, compile_query

BAD = [
    # (query, offset of the problem, a word the message must contain)
    ("SELEC * FROM c", 0, "SELECT"),
    ("SELECT * FROM c WHER c.x = 1", 21, "end of query"),  # WHER is an alias of c
    ("SELECT * FROM c WHERE", 21, "expression"),
    ("SELECT * FROM c WHERE c.x = ", 28, "expression"),
    ("SELECT * FROM c WHERE (c.x = 1", 30, "')'"),
    ("SELECT c.a, FROM c", 12, "expression"),
    ("SELECT * FROM c WHERE c.x = 'abc", 28, "unterminated"),
    ("SELECT * FROM c WHERE c.x # 1", 26, "unexpected character"),
    ("SELECT * FROM c WHERE c.x BETWEEN 1 OR 2", 36, "AND"),
    ("SELECT * FROM c WHERE c.x IN 1, 2", 29, "'('"),
    ("SELECT * FROM c ORDER c.x", 22, "BY"),
    ("SELECT * FROM c OFFSET 1", 24, "LIMIT"),
    ("SELECT TOP x * FROM c", 11, "TOP"),
    ("SELECT * FROM c WHERE NOFUNC(c.x)", 22, "unknown function"),
    ("SELECT * FROM c WHERE UPPER(c.x, 1) = 'A'", 22, "arguments"),
    ("SELECT * FROM c WHERE d.x = 1", 22, "could not be resolved"),
    ("SELECT * FROM c WHERE c.x = @missing", 28, "@missing"),
    ("SELECT * FROM c JOIN t IN c.tags", 7, "SELECT *"),
    ("SELECT * FROM c WHERE COUNT(1) > 1", 22, "aggregate"),
    ("SELECT VALUE COUNT(1) FROM c ORDER BY c.x", 38, "ORDER BY"),
    ("SELECT * FROM c OFFSET -1 LIMIT 1", 23, "OFFSET"),
    ("SELECT * FROM c WHERE c.x = 1 extra", 30, "end of query"),
    ("SELECT\n  *\nFROM c\nWHERE c.x ==", 29, "expression"),
    ("SELECT * FROM c WHERE c.", 24, "property name"),
    ("SELECT * FROM (SELECT * FROM c) x", 14, "subquery"),
    ("", 0, "SELECT"),
]


@pytest.mark.parametrize("text,offset,word", BAD, ids=[b[0][:60] or "empty" for b in BAD])
def test_bad_query_raises_with_position(text, offset, word):
    with pytest.raises(QueryError) as info:
        compile_query(text, None)
    error = info.value
    assert error.position == offset
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    assert f"line {line}, column {column}" in str(error)
    assert word.lower() in str(error).lower()


def test_multiline_position_names_the_right_line():
    with pytest.raises(QueryError) as info:
        compile_query("SELECT *\nFROM c\nWHERE c.x = = 1")
    assert "line 3, column 13" in str(info.value)


@pytest.mark.parametrize("parameters", [[{"value": 1}], [{"name": "@x"}], ["@x"], [{"name": 5, "value": 1}]])
def test_malformed_parameters(parameters):
    with pytest.raises(QueryError):
        compile_query("SELECT * FROM c", parameters)


def test_query_error_is_a_value_error_for_the_gateway():
    assert issubclass(QueryError, ValueError)


@pytest.mark.parametrize("text", [
    "SELECT VALUE c.a.b.c[0][1] FROM c",
    "SELECT VALUE 'x' || 1 FROM c",
    "SELECT VALUE c.x / 0 FROM c",
    "SELECT VALUE SUBSTRING(c.s, 'a', 1) FROM c",
    "SELECT VALUE DateTimeAdd('dd', 1e300, '2020-01-01') FROM c",
    "SELECT VALUE POWER(10, 100000) FROM c",
    "SELECT VALUE REPLICATE('x', 1e12) FROM c",
])
def test_type_errors_at_runtime_are_undefined_not_exceptions(text):
    docs = [{"a": {"b": 1}, "x": 3, "s": "abc"}, {"a": [1]}, {}]
    assert compile_query(text).execute(docs, 0) == []
