"""Service-format query continuations (core/service_continuation.py): the backend form and the
gateway's composite form (range as an object or as JSON text) resume after TRC results in the
range holding the token's range min; anything else that looks like one is a clear 400, and
regionlab's own tokens are left to query_page."""
import json

import pytest

from regionlab.emulator.core.errors import CosmosError
from regionlab.emulator.core.query import compile_query
from regionlab.emulator.core.query_page import Position, StreamState
from regionlab.emulator.core.service_continuation import service_state

TOKEN = "-RID:~a0NPAOszCpOChB4AAAAAAA==#RT:1#TRC:{}#ISV:2#IEO:65567#QCF:8"
MINS = ["", "55555555555555555555555555555555", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"]


def test_the_backend_form_skips_the_results_already_returned():
    q = compile_query("SELECT * FROM c")
    assert service_state(q, TOKEN.format(7), MINS) == StreamState(None, 7, None)
    assert service_state(compile_query("SELECT TOP 10 * FROM c"), "+RID:x#RT:2#TRC:4", MINS) == StreamState(None, 4, 6)


@pytest.mark.parametrize("span", [{"min": MINS[1], "max": MINS[2]}, json.dumps({"min": MINS[1], "max": MINS[2]})])
def test_the_composite_form_resumes_in_its_range(span):
    token = json.dumps([{"token": TOKEN.format(3), "range": span}])
    assert service_state(compile_query("SELECT * FROM c"), token, MINS) == StreamState(Position(1, None, None), 3, None)


def test_grouped_queries_resume_by_count_and_order_by_is_refused():
    assert service_state(compile_query("SELECT DISTINCT VALUE c.a FROM c"), TOKEN.format(5), MINS) == 5
    with pytest.raises(CosmosError, match="cannot resume an ORDER BY query"):
        service_state(compile_query("SELECT * FROM c ORDER BY c.a"), TOKEN.format(5), MINS)


@pytest.mark.parametrize("token", ["-RID:~abc", "[{\"token\": 5}]", "[1, 2]", "{" * 5000, "+RID:~x#RT:1#TRC:-1"])
def test_a_malformed_service_token_is_a_clear_400(token):
    with pytest.raises(CosmosError) as refused:
        service_state(compile_query("SELECT * FROM c"), token, MINS)
    assert refused.value.status == 400 and "Invalid query continuation" in refused.value.message


def test_regionlab_tokens_are_not_taken():
    assert service_state(compile_query("SELECT * FROM c"), "eyJzIjpudWxsfQ==", MINS) is None
