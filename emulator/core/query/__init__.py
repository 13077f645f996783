"""The Cosmos DB NoSQL query engine: pure Python, no I/O, no clock.

    q = compile_query("SELECT * FROM c WHERE c.n > @n", [{"name": "@n", "value": 1}])
    q.execute(documents, now_ms)      # final result list
    q.filter_matches(doc, now_ms)     # WHERE as a predicate (patch conditions)
    q.is_aggregate, q.has_order_by, q.index_hints

Pipeline: lexer -> parser (nodes) -> evaluate/projection/sources/plan
(closures) -> CompiledQuery. See each module's theory of operation.
"""

from regionlab.emulator.core.query.errors import QueryError
from regionlab.emulator.core.query.hints import IndexHint
from regionlab.emulator.core.query.query import CompiledQuery, compile_query
from regionlab.emulator.core.query.values import UNDEFINED

__all__ = ["CompiledQuery", "IndexHint", "QueryError", "UNDEFINED", "compile_query"]
