"""FROM and JOIN: compiling sources into row producers.

Theory of operation: a query's rows are tuples; slots 0..k-1 belong to the
enclosing queries (empty at the top level), slot k to the FROM alias and the
next slots to each JOIN alias in order. `compile_sources` returns the scope
for the rest of the query and a function `(outer_row, documents) -> iterator
of rows`. At the top level the FROM names the container (any name works:
`FROM c`, `FROM root r`, `FROM Families f`), so each document is one row, or
`FROM x IN c.arr` yields one row per element. In a subquery the FROM
expression reads the enclosing row instead: `expr alias` binds one value and
`alias IN expr` iterates an array. A JOIN multiplies each row by the elements
it iterates; a source that is not an array contributes no rows. `(SELECT
...)` sources iterate a correlated subquery's results.
"""

from __future__ import annotations

from emulator.core.query import nodes as n
from emulator.core.query.evaluate import Context, Scope, compile_expr
from emulator.core.query.values import UNDEFINED


def compile_sources(query: n.Query, outer: Scope, ctx: Context, top_level: bool):
    """(scope, produce) where produce(outer_row, documents) yields rows."""
    if query.source is None:
        return outer, lambda outer_row, documents: iter((outer_row,))
    if top_level:
        produce = _container_source(query.source, ctx)
    else:
        produce = _nested_source(query.source, outer, ctx)
    scope = outer.extended(query.source.alias)
    for join in query.joins:
        expand = _join_source(join, scope, ctx)
        produce = _chain(produce, expand)
        scope = scope.extended(join.alias)
    return scope, produce


def _chain(produce, expand):
    def chained(outer_row, documents):
        for row in produce(outer_row, documents):
            for value in expand(row):
                yield row + (value,)

    return chained


def _root_name(node: n.Node) -> n.Name | None:
    while isinstance(node, n.Member):
        node = node.target
    return node if isinstance(node, n.Name) else None


def _container_source(source: n.Source, ctx: Context):
    if source.kind == "query":
        raise ctx.error(source, "a subquery in the top-level FROM clause is not supported; expected a container name")
    root = _root_name(source.expr)
    if root is None:
        raise ctx.error(source.expr, "expected a container name in the FROM clause")
    if source.kind == "expr" and isinstance(source.expr, n.Name):
        return lambda outer_row, documents: ((doc,) for doc in documents)
    read = compile_expr(source.expr, Scope({root.name: 0}), ctx)
    if source.kind == "in":
        return lambda outer_row, documents: ((v,) for doc in documents for v in _elements(read((doc,))))

    def rows(outer_row, documents):
        for doc in documents:
            value = read((doc,))
            if value is not UNDEFINED:
                yield (value,)

    return rows


def _nested_source(source: n.Source, outer: Scope, ctx: Context):
    expand = _join_source(source, outer, ctx)
    return lambda outer_row, documents: (outer_row + (v,) for v in expand(outer_row))


def _join_source(source: n.Source, scope: Scope, ctx: Context):
    """A function row -> iterable of values for the new alias."""
    if source.kind == "query":
        run = ctx.compile_subquery(source.query, scope, ctx)
        return lambda row: run(row, None)
    read = compile_expr(source.expr, scope, ctx)
    if source.kind == "in":
        return lambda row: _elements(read(row))

    def single(row):
        value = read(row)
        return () if value is UNDEFINED else (value,)

    return single


def _elements(value):
    return value if type(value) is list else ()
