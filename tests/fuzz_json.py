"""Hypothesis strategies for JSON-ish bodies, shared by the fuzz tests of every port (gateway,
control, direct): valid JSON values, and texts a parser must refuse cleanly (nesting thousands
deep, numbers past a double, NaN, lone surrogates, duplicate members, truncations)."""
import contextlib
import json
import sys

from hypothesis import strategies as st

IDS = ("a", "b", "n1")
PRODUCTION_RECURSION_LIMIT = 1000          # CPython's default


def texts(max_size=12):
    return st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=max_size)


NUMBERS = st.one_of(st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=False, allow_infinity=False),
                     st.sampled_from([0, -0.0, 2 ** 53 + 1, 1e308, -1e-308]))
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, texts(), st.sampled_from(IDS), st.just("p"))
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(texts(6), inner, max_size=4)),
                     max_leaves=12)
DEPTHS = st.one_of(st.integers(0, 8), st.sampled_from([63, 64, 65, 127, 128, 129, 400, 1000, 3000]))


def deep(depth: int, open_: str, close: str, inner: str) -> str:
    return open_ * depth + inner + close * depth


NASTY_JSON_TEXT = st.one_of(
    st.builds(deep, DEPTHS, st.just("["), st.just("]"), st.sampled_from(["1", '"p"', ""])),
    st.builds(deep, DEPTHS, st.just('{"a":'), st.just("}"), st.sampled_from(["1", "[]"])),
    st.sampled_from([str(2 ** 1024), "1e400", "-1e999", "NaN", "Infinity", '"\\ud800"', '"\\udc00x"',
                     "1" * 5000, '"' + "\\u0000" * 3 + '"', "[1,]", "{", '{"a":1,"a":2}', "\ufeff[]", ""]),
)


def json_text(value) -> str:
    return json.dumps(value)


def embed(outer: str, inner: str) -> str:
    """inner (any JSON-ish text) spliced in as one member or element of outer."""
    return outer.replace("@@", inner, 1)


JSONISH = st.one_of(st.builds(json_text, JSON), NASTY_JSON_TEXT,
                     st.builds(embed, st.sampled_from(['{"id":"a","pk":"p","x":@@}', "[@@]", '{"id":@@,"pk":"p"}',
                                                        '{"id":"a","pk":@@}', '[{"operationType":"Create","resourceBody":@@}]']),
                               NASTY_JSON_TEXT))


@contextlib.contextmanager
def production_recursion_limit():
    """Hypothesis raises the interpreter's recursion limit while it runs a test, and the limit is
    the process's, so the emulator's thread would get it too: a value nested deep enough to
    overflow the stack in production would pass here. The server runs with Python's default."""
    raised = sys.getrecursionlimit()
    sys.setrecursionlimit(PRODUCTION_RECURSION_LIMIT)
    try:
        yield
    finally:
        sys.setrecursionlimit(raised)
