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

Work: every row a FROM or JOIN produces, at any depth, adds one to the
context's work cell (`Context.work`), so the caller can bound a page by the
rows it made rather than by time. At the top level the same sources also
compile into `levels` (one value expander per FROM/JOIN), which
`expand_rows` walks as nested loops with a cursor (the element index at each
level): a page that stops inside one document's rows resumes at that cursor,
not by producing and skipping the rows before it.
"""

from __future__ import annotations

from regionlab.emulator.core.query import nodes as n
from regionlab.emulator.core.query.evaluate import Context, Scope, compile_expr
from regionlab.emulator.core.query.values import UNDEFINED


def compile_sources(query: n.Query, outer: Scope, ctx: Context, top_level: bool):
    """(scope, produce, levels) where produce(outer_row, documents) yields rows; levels (top
    level only, else None) are the value expanders `expand_rows` walks: doc -> values of the
    FROM alias, then row -> values of each JOIN alias."""
    if query.source is None:
        return outer, lambda outer_row, documents: iter((outer_row,)), None
    levels = None
    if top_level:
        produce = _container_source(query.source, ctx)
        levels = [_container_values(query.source, ctx)]
    else:
        produce = _nested_source(query.source, outer, ctx)
    scope = outer.extended(query.source.alias)
    for join in query.joins:
        expand = _join_source(join, scope, ctx)
        produce = _chain(produce, expand, ctx.work)
        if levels is not None:
            levels.append(expand)
        scope = scope.extended(join.alias)
    return scope, produce, levels


def _chain(produce, expand, work):
    def chained(outer_row, documents):
        for row in produce(outer_row, documents):
            for value in expand(row):
                work[0] += 1
                yield row + (value,)

    return chained


def expand_rows(levels: list, doc, start: tuple | None, cursor: list, work: list):
    """The rows document doc produces, in order, from cursor position `start` (inclusive; None:
    from its first row). While a row is out, cursor[i] holds its element index at level i."""
    return _expand(levels, 1, (), levels[0](doc), start, cursor, work)


def _expand(levels, depth, row, values, start, cursor, work):
    first = 0 if start is None else start[0]
    last_level = depth == len(levels)
    for i in range(first, len(values)):
        cursor[depth - 1] = i
        work[0] += 1
        here = row + (values[i],)
        if last_level:
            yield here
        else:
            inner = start[1:] if start is not None and i == first else None
            yield from _expand(levels, depth + 1, here, levels[depth](here), inner, cursor, work)


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


def _container_values(source: n.Source, ctx: Context):
    """doc -> the values the top-level FROM alias takes for it (a tuple or a list)."""
    if source.kind == "expr" and isinstance(source.expr, n.Name):
        return lambda doc: (doc,)
    read = compile_expr(source.expr, Scope({_root_name(source.expr).name: 0}), ctx)
    if source.kind == "in":
        return lambda doc: _elements(read((doc,)))

    def one(doc):
        value = read((doc,))
        return () if value is UNDEFINED else (value,)

    return one


def _nested_source(source: n.Source, outer: Scope, ctx: Context):
    expand = _join_source(source, outer, ctx)
    work = ctx.work

    def rows(outer_row, documents):
        for v in expand(outer_row):
            work[0] += 1
            yield outer_row + (v,)

    return rows


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
