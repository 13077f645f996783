"""Proves the public surface others code against: the patch-condition form,
filter_matches, index_hints, the flags, and the purity rule for the package.

Hints are checked against hand-written expectations; purity is checked by
parsing every module of emulator/core/query with `ast` and listing imports.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import regionlab.emulator.core.query as query_package
from regionlab.emulator.core.query import IndexHint, QueryError, compile_query

FORBIDDEN_MODULES = {"os", "time", "random", "asyncio", "socket", "threading", "subprocess"}


def test_patch_condition_form_without_select():
    condition = compile_query("FROM c WHERE c.stock > 0 AND c.status = 'open'")
    assert condition.filter_matches({"stock": 2, "status": "open"}, 0)
    assert not condition.filter_matches({"stock": 0, "status": "open"}, 0)
    assert not condition.filter_matches({"status": "open"}, 0)


def test_filter_matches_without_where_is_true():
    assert compile_query("SELECT * FROM c").filter_matches({}, 0)


def test_filter_matches_with_join_means_any_row_survives():
    query = compile_query("SELECT VALUE c FROM c JOIN t IN c.tags WHERE t = 'x'")
    assert query.filter_matches({"tags": ["a", "x"]}, 0)
    assert not query.filter_matches({"tags": ["a"]}, 0)


def test_filter_matches_uses_the_supplied_clock():
    query = compile_query("FROM c WHERE c.expires_ms > GetCurrentTimestamp()")
    assert query.filter_matches({"expires_ms": 100}, 50)
    assert not query.filter_matches({"expires_ms": 100}, 150)


@pytest.mark.parametrize("text,params,expected", [
    ("SELECT * FROM c WHERE c.a = 1", None, [IndexHint(("a",), "=", 1)]),
    ("SELECT * FROM c WHERE 5 < c.a.b", None, [IndexHint(("a", "b"), ">", 5)]),
    ("SELECT * FROM c WHERE c.pk = @pk AND c.n >= 3 AND c.n < 9", [{"name": "@pk", "value": "p"}],
     [IndexHint(("pk",), "=", "p"), IndexHint(("n",), ">=", 3), IndexHint(("n",), "<", 9)]),
    ("SELECT * FROM c WHERE c.n BETWEEN 1 AND 4", None, [IndexHint(("n",), ">=", 1), IndexHint(("n",), "<=", 4)]),
    ("SELECT * FROM c WHERE c.s IN ('x', 'y')", None, [IndexHint(("s",), "in", ("x", "y"))]),
    ("SELECT * FROM c WHERE c.a = 1 OR c.b = 2", None, []),
    ("SELECT * FROM c WHERE NOT (c.a = 1)", None, []),
    ("SELECT * FROM c WHERE c.a != 1", None, []),
    ("SELECT * FROM c WHERE c.arr[0] = 'z'", None, [IndexHint(("arr", 0), "=", "z")]),
    ("SELECT * FROM root r WHERE r.x = 1 ORDER BY r.y DESC, r.z", None,
     [IndexHint(("x",), "=", 1), IndexHint(("y",), "order_desc", None), IndexHint(("z",), "order_asc", None)]),
    ("SELECT * FROM t IN c.tags WHERE t.x = 1", None, []),
    ("SELECT * FROM c WHERE c.a = c.b", None, []),
])
def test_index_hints(text, params, expected):
    assert list(compile_query(text, params).index_hints) == expected


def test_hints_do_not_change_results():
    docs = [{"n": 1}, {"n": "1"}, {"n": None}, {}]
    assert compile_query("SELECT VALUE c.n FROM c WHERE c.n >= 1").execute(docs, 0) == [1]


def test_keywords_and_functions_are_case_insensitive():
    docs = [{"Name": "Ann"}, {"Name": "bob"}]
    text = "sElEcT vAlUe LoWeR(x.Name) FrOm x WhErE StartsWith(x.Name, 'A') oRdEr By x.Name DeSc"
    assert compile_query(text).execute(docs, 0) == ["ann"]


def test_execute_accepts_any_iterable():
    docs = ({"i": i} for i in range(5))
    assert compile_query("SELECT VALUE c.i FROM c WHERE c.i > 2").execute(docs, 0) == [3, 4]


def test_query_error_exported():
    with pytest.raises(QueryError):
        compile_query("SELECT FROM")


def _imports(path: pathlib.Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_package_is_pure():
    package_dir = pathlib.Path(query_package.__file__).parent
    for path in sorted(package_dir.glob("*.py")):
        assert not _imports(path) & FORBIDDEN_MODULES, path.name
        assert path.read_text().lstrip().startswith('"""'), f"{path.name} lacks a theory of operation"
