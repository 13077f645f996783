"""Computed properties (core/query/computed.py): definitions are checked by the service's rules,
and a query naming one computes it per row from the definition's expression, under any alias,
inside expressions and subqueries, and however long the query's chains are."""
import pytest

from regionlab.emulator.core.query import compile_query
from regionlab.emulator.core.query.computed import check

DOCS = [{"id": "1", "g": "AbC", "v": 3, "tags": ["x"]}, {"id": "2", "g": "x", "v": 5, "tags": []}]
COMPUTED = check([{"name": "cp_lower", "query": "SELECT VALUE LOWER(c.g) FROM c"},
                  {"name": "cp_sq", "query": "SELECT VALUE POWER(r.v, 2) FROM root r"},
                  {"name": "cp_obj", "query": "SELECT VALUE {\"n\": c.v} FROM c"}])


def run(sql: str) -> list:
    return compile_query(sql, None, COMPUTED).execute(DOCS, 0)


def test_a_query_computes_the_property_per_row():
    assert run("SELECT VALUE c.id FROM c WHERE c.cp_lower = 'abc'") == ["1"]
    assert run("SELECT c.cp_lower, c['cp_sq'] FROM c") == [{"cp_lower": "abc", "cp_sq": 9},
                                                         {"cp_lower": "x", "cp_sq": 25}]
    assert run("SELECT VALUE x.id FROM x ORDER BY x.cp_sq DESC") == ["2", "1"]
    assert run("SELECT VALUE c.cp_obj.n FROM c") == [3, 5]
    assert run("SELECT VALUE ARRAY(SELECT VALUE c.cp_lower FROM t IN c.tags) FROM c") == [["abc"], []]


def test_select_star_shows_the_stored_document_only():
    assert run("SELECT * FROM c WHERE c.id = '1'") == [DOCS[0]]


def test_a_long_chain_is_folded_without_recursion():
    chain = " + ".join(["c.cp_sq"] * 5000)
    assert run(f"SELECT VALUE {chain} FROM c WHERE c.id = '1'") == [9 * 5000]


@pytest.mark.parametrize("definition,fault", [
    ({"name": "_ts", "query": "SELECT VALUE 1 FROM c"}, "system property"),
    ({"name": "a", "query": "SELECT VALUE c.x FROM c ORDER BY c.x"}, "may not use ORDER BY"),
    ({"name": "a", "query": "SELECT DISTINCT VALUE c.x FROM c"}, "may not use DISTINCT"),
    ({"name": "a", "query": "SELECT TOP 1 VALUE c.x FROM c"}, "may not use TOP"),
    ({"name": "a", "query": "SELECT VALUE ST_DISTANCE(c.a, c.b) FROM c"}, "spatial function"),
    ({"name": "a", "query": "SELECT VALUE udf.f(c.x) FROM c"}, "user-defined function"),
    ({"name": "a", "query": "SELECT VALUE c.x FROM c IN c.tags"}, "over the root item"),
    ({"name": "a", "query": "SELEC VALUE 1"}, "is not a valid query"),
    ({"name": "a", "query": "SELECT VALUE NOSUCH(c.x) FROM c"}, "is not a valid query"),
    ({"name": "a"}, "a string \"query\""),
])
def test_a_bad_definition_says_what_to_fix(definition, fault):
    with pytest.raises(ValueError, match=None) as refused:
        check([definition], compile_query)
    assert fault in str(refused.value)
