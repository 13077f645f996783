"""Proves the query engine's stack stays bounded whatever the text: nesting up to
QUERY_NESTING_MAX_LEVELS compiles and runs within a fixed frame budget (measured with a profile
hook counting Python frames), one level more is a QueryError naming the limit, long operator
chains of any length work, and a chain compiled into one loop (past CHAIN_NESTED_MAX links)
gives exactly what the nested closures give (hypothesis, on random chains of every operator
over values of every type). Numbers past a double's range are a QueryError, not a crash.
"""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regionlab.emulator.core.query import QueryError, compile_query
from regionlab.emulator.core.query import evaluate
from tiers import examples
from regionlab.emulator.core.limits import QUERY_NESTING_MAX_LEVELS

# What one query may cost in Python frames at the nesting limit. Python's default recursion
# limit is 1000 and the gateway calls the engine about 60 frames deep: this leaves room.
QUERY_FRAMES_MAX = 700
DOC = {"id": "a", "n": 7, "t": True, "arr": [1, 2], "s": "x"}


def _forms(depth: int) -> dict:
    half = depth // 2
    return {
        "parentheses": "SELECT VALUE " + "(" * depth + "c.n" + ")" * depth + " FROM c",
        "arrays": "SELECT VALUE " + "[" * depth + "c" + "]" * depth + " FROM c",
        "objects": "SELECT VALUE " + '{"a":' * depth + "c" + "}" * depth + " FROM c",
        "calls": "SELECT VALUE " + "ABS(" * depth + "c.n" + ")" * depth + " FROM c",
        "member keys": "SELECT VALUE c" + "[" * depth + '"n"' + "]" * depth + " FROM c",
        "IN lists": "SELECT VALUE " + "c.n IN (" * half + "7" + ")" * half + " FROM c",   # link + list
        "ternary middles": "SELECT VALUE " + "c.t ? " * depth + "1" + " : 0" * depth + " FROM c",
        "comparison chain": "SELECT VALUE c.n " + "= 1 " * depth + "FROM c",
        "DISTINCT of deep values": "SELECT DISTINCT VALUE " + "[" * depth + "c" + "]" * depth + " FROM c",
        "ORDER BY": "SELECT * FROM c ORDER BY " + "(" * depth + "c.n" + ")" * depth,
        "scalar subqueries": "SELECT VALUE " + "(SELECT VALUE " * half + "c.n" + ")" * half + " FROM c",
        "EXISTS": "SELECT VALUE " + "EXISTS(SELECT * FROM x IN c.arr WHERE " * half + "true" + ")" * half + " FROM c",
        "ARRAY": "SELECT VALUE " + "ARRAY(SELECT VALUE " * half + "c" + ")" * half + " FROM c",
        "JOIN subqueries": "SELECT VALUE 1 FROM c JOIN " + "(SELECT VALUE 1 FROM y IN [1] JOIN " * (depth - 1)
                           + "(SELECT VALUE z FROM z IN c.arr) w" + ") q" * (depth - 1),
    }


class _FrameCounter:
    def __init__(self):
        self.depth = self.deepest = 0

    def __call__(self, frame, event, arg):
        if event == "call":
            self.depth += 1
            self.deepest = max(self.deepest, self.depth)
        elif event == "return":
            self.depth -= 1


def _frames_used(sql: str) -> int:
    counter = _FrameCounter()
    sys.setprofile(counter)
    try:
        compile_query(sql).execute([DOC, dict(DOC, n=8)], 0)
    finally:
        sys.setprofile(None)
    return counter.deepest


@pytest.mark.parametrize("form", _forms(2).keys())
def test_nesting_at_the_limit_runs_within_the_frame_budget(form):
    assert _frames_used(_forms(QUERY_NESTING_MAX_LEVELS)[form]) <= QUERY_FRAMES_MAX


@pytest.mark.parametrize("form", _forms(2).keys())
def test_nesting_past_the_limit_is_a_query_error_naming_it(form):
    with pytest.raises(QueryError, match=f"more than {QUERY_NESTING_MAX_LEVELS} levels deep"):
        compile_query(_forms(QUERY_NESTING_MAX_LEVELS + 2)[form])


def test_nesting_far_past_the_limit_stops_at_the_limit():
    with pytest.raises(QueryError, match="levels deep"):
        compile_query("SELECT VALUE " + "[" * 200_000 + " FROM c")


CHAINS = {
    "NOT": ("SELECT VALUE " + "NOT " * 5001 + "c.t FROM c", [False]),
    "+": ("SELECT VALUE " + "1+" * 50_000 + "c.n FROM c", [50_007]),
    "AND": ("SELECT VALUE " + "c.t AND " * 20_000 + "c.n = 7 FROM c", [True]),
    "mixed levels": ("SELECT VALUE " + "2 * 3 - 1 + c.n % 4 - " * 5000 + "0 FROM c", [8 - 4 * 4999]),
    "prefix minus": ("SELECT VALUE " + "- " * 5001 + "c.n FROM c", [-7]),
    "ternary else": ("SELECT VALUE " + "c.n = 8 ? 0 : " * 5000 + "c.s FROM c", ["x"]),
    "member": ("SELECT VALUE ARRAY_SLICE(c.arr, 0)" + "[c.missing]" * 5000 + " FROM c", []),
}


@pytest.mark.slow
@pytest.mark.parametrize("chain", CHAINS.keys())
def test_long_chains_work_within_the_frame_budget(chain):
    sql, expected = CHAINS[chain]
    assert compile_query(sql).execute([DOC], 0) == expected
    assert _frames_used(sql) <= 40


# ---- a folded chain means what the nested closures mean -----------------------------------------
OPERANDS = ["c.n", "c.t", "c.s", "c.arr", "c.missing", "null", "false", "0", "2.5", "-3", "'a'", "[]", "{}"]
BINARY_OPS = ["AND", "OR", "??", "=", "!=", "<", ">=", "+", "-", "*", "/", "%", "||", "&", "|", "^", "<<", ">>>"]
PREFIXES = ["", "NOT ", "- ", "~", "+"]


@st.composite
def chains(draw):
    links = draw(st.integers(evaluate.CHAIN_NESTED_MAX + 1, evaluate.CHAIN_NESTED_MAX + 8))
    text = draw(st.sampled_from(PREFIXES)) + draw(st.sampled_from(OPERANDS))
    for _ in range(links):
        text += f" {draw(st.sampled_from(BINARY_OPS))} {draw(st.sampled_from(PREFIXES))}{draw(st.sampled_from(OPERANDS))}"
    return text


@settings(max_examples=examples(300), deadline=None)
@given(expression=chains(), prefix_run=st.integers(0, evaluate.CHAIN_NESTED_MAX + 3))
def test_a_chain_in_one_loop_equals_the_nested_closures(expression, prefix_run):
    sql = "SELECT VALUE [" + "NOT " * prefix_run + "(" + expression + ")] FROM c"
    docs = [DOC, {"n": 0, "t": False, "s": "", "arr": []}, {}]
    try:
        folded = compile_query(sql).execute(docs, 0)
    except QueryError:
        return                           # e.g. a comparison chain past the nesting limit
    saved = evaluate.CHAIN_NESTED_MAX
    evaluate.CHAIN_NESTED_MAX = 10 ** 9  # every chain as nested closures
    try:
        nested = compile_query(sql).execute(docs, 0)
    finally:
        evaluate.CHAIN_NESTED_MAX = saved
    assert repr(folded) == repr(nested)


# ---- numbers -----------------------------------------------------------------------------------
@pytest.mark.parametrize("literal", [str(2 ** 1024), "1" + "0" * 5000, "1e400", "-1e999"])
def test_a_number_past_a_double_is_a_query_error(literal):
    with pytest.raises(QueryError, match="beyond the range of a double"):
        compile_query(f"SELECT VALUE {literal} FROM c")


def test_digits_outside_ascii_are_not_numbers():
    with pytest.raises(QueryError, match="unexpected character"):
        compile_query("SELECT VALUE \u00b2 FROM c")
    assert compile_query("SELECT VALUE 1" + "0" * 300 + " FROM c").execute([DOC], 0) == [10 ** 300]


def test_string_to_array_of_text_nested_deeper_than_an_item_is_undefined():
    deep = "[" * 5000 + "]" * 5000
    q = compile_query("SELECT VALUE [StringToArray(c.s), StringToObject(c.o), StringToNumber('1e400'), 1] FROM c")
    assert q.execute([{"s": deep, "o": '{"a":' * 5000 + "1" + "}" * 5000}], 0) == [[1]]
    assert _frames_used(f"SELECT VALUE StringToArray('{deep}') FROM c") <= 40
