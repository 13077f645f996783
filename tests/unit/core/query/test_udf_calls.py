"""Proves how the query engine calls user-defined functions (core/query/evaluate.py): a query
with `udf.name(...)` compiles (has_udfs), calls the function its caller set for the step with the
argument values (undefined included), uses what it returns like any value, counts
UDF_CALL_WORK_UNITS per call, and without a function set raises QueryError at the call's
position naming it (compiled queries are cached, so a step that sets none must not reach another
request's)."""
import pytest

from regionlab.emulator.core.limits import UDF_CALL_WORK_UNITS
from regionlab.emulator.core.query import QueryError, compile_query
from regionlab.emulator.core.query.values import UNDEFINED

DOCS = [{"id": "a", "x": 1}, {"id": "b", "x": 5}, {"id": "c"}]


def test_udf_calls_run_the_callers_function_with_the_argument_values():
    q = compile_query("SELECT VALUE udf.twice(c.x) FROM c WHERE udf.twice(c.x) > 2", None)
    assert q.has_udfs and not compile_query("SELECT VALUE c.x FROM c", None).has_udfs
    calls = []

    def udfs(name, args):
        calls.append((name, args))
        (x,) = args
        return UNDEFINED if x is UNDEFINED else x * 2
    before = q.work[0]
    assert q.execute(DOCS, 0, udfs=udfs) == [10]
    # Each document's WHERE, then the SELECT of the one that passed.
    assert calls == [("twice", [1]), ("twice", [5]), ("twice", [5]), ("twice", [UNDEFINED])]
    assert q.work[0] - before >= UDF_CALL_WORK_UNITS * len(calls)


def test_a_udf_call_without_a_function_is_a_query_error_at_its_position():
    q = compile_query("SELECT * FROM c WHERE udf.f(c.x)", None)
    q.execute(DOCS[:1], 0, udfs=lambda name, args: True)
    with pytest.raises(QueryError) as info:
        q.execute(DOCS[:1], 0)                       # the earlier function is not kept
    assert info.value.position == 22 and "udf.f" in str(info.value)
