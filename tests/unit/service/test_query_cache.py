"""A client cycling one query text over 1,000 partition keys gets each compiled query back from
the gateway's cache the second time round (one map for both cache keys held 512, so every query
missed and was compiled again, ~275 µs and ~40 objects each); a new parameter value reuses the
text's parse tree; and the scope's partition key stands in for the WHERE clause only when that
clause is exactly `pk = value` with the scope's own key. Real compiled queries and bodies."""
import json

import pytest

from regionlab.emulator.core.container import canonical_pk_json
from regionlab.emulator.core.errors import CosmosError
from regionlab.emulator.core.query import compile_query
from regionlab.emulator.service import queries
from regionlab.emulator.service.queries import _fixed_by_key, _query_of
from regionlab.emulator.core.limits import COMPILED_QUERIES_CACHE_MAX_ENTRIES

TEXT = "SELECT * FROM c WHERE c.pk = @pk"


class Call:
    def __init__(self, raw: bytes):
        self.raw = raw


def _body(k: int) -> bytes:
    return json.dumps({"query": TEXT, "parameters": [{"name": "@pk", "value": f"p{k}"}]}).encode()


def test_a_thousand_partition_keys_cycled_are_compiled_once_each(monkeypatch):
    monkeypatch.setattr(queries, "_compiled", {})
    monkeypatch.setattr(queries, "_by_body", {})
    keys = 1000
    assert keys <= COMPILED_QUERIES_CACHE_MAX_ENTRIES
    first = [_query_of(Call(_body(k))) for k in range(keys)]
    again = [_query_of(Call(_body(k))) for k in range(keys)]
    assert all(a is b for a, b in zip(first, again))
    assert first[7].where_equalities == {("pk",): "p7"}


def test_the_cache_stays_bounded(monkeypatch):
    monkeypatch.setattr(queries, "_compiled", {})
    monkeypatch.setattr(queries, "_by_body", {})
    for k in range(COMPILED_QUERIES_CACHE_MAX_ENTRIES + 50):
        _query_of(Call(_body(k)))
    assert len(queries._by_body) == len(queries._compiled) == COMPILED_QUERIES_CACHE_MAX_ENTRIES


def test_new_parameter_values_reuse_the_parse_tree_and_answer_their_own():
    a = compile_query(TEXT, [{"name": "@pk", "value": "a"}])
    b = compile_query(TEXT, [{"name": "@pk", "value": "b"}])
    assert a._tree is b._tree
    docs = [{"id": "1", "pk": "a"}, {"id": "2", "pk": "b"}]
    assert a.execute(docs, 0) == [docs[0]] and b.execute(docs, 0) == [docs[1]]


def test_a_text_that_does_not_parse_is_a_400_every_time():
    bad = json.dumps({"query": "SELECT VALUE c.id FROM c WHERE", "parameters": []}).encode()
    for _ in range(2):
        with pytest.raises(CosmosError) as info:
            _query_of(Call(bad))
        assert info.value.status == 400 and "Syntax error in query" in info.value.message


PK = (("pk",),)


@pytest.mark.parametrize("text,value,implied", [
    ("SELECT * FROM c WHERE c.pk = @v", "p1", True),
    ("SELECT * FROM c WHERE @v = c['pk']", "p1", True),
    ("SELECT * FROM c WHERE c.pk = @v", "p2", False),                 # not the scope's key
    ("SELECT * FROM c WHERE c.pk = @v AND c.n = 1", "p1", False),     # asks something else too
    ("SELECT * FROM c WHERE c.pk = @v OR c.pk = 'x'", "p1", False),
    ("SELECT * FROM c WHERE c.pk != @v", "p1", False),
    ("SELECT * FROM c WHERE c.pk >= @v", "p1", False),
    ("SELECT * FROM c", "p1", False),
])
def test_the_scope_stands_in_for_a_where_on_its_own_key_only(text, value, implied):
    q = compile_query(text, [{"name": "@v", "value": value}])
    assert _fixed_by_key(q, PK, canonical_pk_json(["p1"])) is implied


@pytest.mark.parametrize("value,implied", [(5, True), (True, True), (None, True), (5.5, False),
                                           (2 ** 60, False), ({"a": 1}, False), ([1], False)])
def test_only_values_whose_equality_is_their_keys_stand_in(value, implied):
    q = compile_query("SELECT * FROM c WHERE c.pk = @v", [{"name": "@v", "value": value}])
    assert _fixed_by_key(q, PK, canonical_pk_json([value])) is implied
    assert not _fixed_by_key(q, PK, canonical_pk_json(["5"]))         # "5" is not 5


def test_a_hierarchical_key_needs_every_path():
    paths = (("t",), ("u",))
    both = compile_query("SELECT * FROM c WHERE c.u = 'b' AND c.t = 'a'")
    one = compile_query("SELECT * FROM c WHERE c.t = 'a'")
    assert _fixed_by_key(both, paths, canonical_pk_json(["a", "b"]))
    assert not _fixed_by_key(both, paths, canonical_pk_json(["b", "a"]))
    assert not _fixed_by_key(one, paths, canonical_pk_json(["a", "b"]))
