"""The SELECT list: compiling what each result looks like.

Theory of operation: `SELECT *` returns the single FROM value unchanged (only
legal with one source, no JOIN); `SELECT VALUE expr` returns the value itself,
and a row whose value is undefined produces no result; a list of items builds
an object. An item is named by its alias, else by the last property name of a
path (`c.a.b` -> "b", `c["x"]` -> "x", `c` -> "c"), else `$1`, `$2`, ... in
order among the unnamed items; the gateway returns aggregates the same way
(`SELECT COUNT(1) FROM c` -> `{"$1": n}`). Undefined members are left out, so
a row can project to `{}`. Aggregate calls compile to slot reads through the
`AggregateSlots` collector.
"""

from __future__ import annotations

from regionlab.emulator.core.query import nodes as n
from regionlab.emulator.core.query.evaluate import AggregateSlots, Context, Scope, compile_expr
from regionlab.emulator.core.query.values import UNDEFINED


def compile_projection(query: n.Query, scope: Scope, ctx: Context, aggs: AggregateSlots):
    select = query.select
    if select.star:
        if query.source is None or query.joins:
            raise ctx.error(select, "SELECT * is only valid with a single FROM source and no JOIN")
        slot = scope.names[query.source.alias]
        return lambda row: row[slot]
    if select.value:
        return compile_expr(select.items[0].expr, scope, ctx, aggs)
    fields = [(name, compile_expr(item.expr, scope, ctx, aggs)) for name, item in _named(select.items)]

    def build(row):
        out = {}
        for name, value in fields:
            v = value(row)
            if v is not UNDEFINED:
                out[name] = v
        return out

    return build


def _named(items) -> list:
    named, unnamed = [], 0
    for item in items:
        name = item.alias or _inferred_name(item.expr)
        if name is None:
            unnamed += 1
            name = f"${unnamed}"
        named.append((name, item))
    return named


def _inferred_name(expr: n.Node) -> str | None:
    if isinstance(expr, n.Name):
        return expr.name
    if isinstance(expr, n.Member) and isinstance(expr.key, n.Literal) and type(expr.key.value) is str:
        return expr.key.value
    return None
