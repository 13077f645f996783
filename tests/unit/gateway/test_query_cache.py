"""Proves the gateway's compiled-query lookup (gateway/queries._query_of) parses a query text once
however many parameter values arrive with it: bodies with more distinct @pk values than the
caches hold all compile from one kept parse tree, each still answers for its own value, a
repeated body is the same compiled query, and a text that does not parse is a 400 every time.
Driven through the real lookup with real request bodies; no server."""
import json

import pytest

from emulator.core.errors import CosmosError
from emulator.gateway import queries

TEXT = "SELECT VALUE c.id FROM c WHERE c.pk = @pk"
DOCS = [{"id": f"i{i}", "pk": f"p{i % 7}"} for i in range(21)]


class Call:
    __slots__ = ("raw",)

    def __init__(self, body: dict):
        self.raw = json.dumps(body).encode()


def body(pk: str, text: str = TEXT) -> Call:
    return Call({"query": text, "parameters": [{"name": "@pk", "value": pk}]})


def _clear() -> None:
    queries._compiled.clear()
    getattr(queries, "_parsed", {}).clear()


@pytest.fixture(autouse=True)
def empty_caches():
    _clear()
    yield
    _clear()


def test_distinct_parameter_values_compile_from_one_parse_tree():
    values = [f"p{i}" for i in range(queries.COMPILED_QUERIES_MAX + 200)]
    compiled = [queries._query_of(body(v)) for v in values]
    assert len({id(q._tree) for q in compiled}) == 1            # every value shares one tree
    assert list(queries._parsed) == [TEXT]                      # parsed once, kept by text
    for v, q in zip(values[:7], compiled):                      # and binds its own value
        assert q.execute(DOCS, 0) == [d["id"] for d in DOCS if d["pk"] == v]
    assert compiled[-1].execute(DOCS, 0) == []


def test_a_repeated_body_is_the_same_compiled_query_and_a_bad_text_is_a_400_each_time():
    first = queries._query_of(body("p1"))
    assert queries._query_of(body("p1")) is first
    for _ in range(2):
        with pytest.raises(CosmosError) as info:
            queries._query_of(body("p1", "SELECT VALUE c.id FROM c WHERE"))
        assert info.value.status == 400 and "Syntax error in query" in info.value.message
    assert list(queries._parsed) == [TEXT]
