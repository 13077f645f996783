"""Index hints: the parts of a query a sorted index could answer.

Theory of operation: purely advisory, derived from the syntax tree once at
compile time. The engine never uses them; a storage layer may use them to
pre-select candidate documents, but it must still run the query on those
candidates, because hints describe only some conjuncts and ignore the
service's type rules (`c.n > 5` also excludes strings, nulls, missing values).

`index_hints` is a tuple of `IndexHint(path, op, value)`:
* path  - tuple of property names (str) and array indexes (int) from the
          document root, e.g. `c.a.b[0]` -> ("a", "b", 0);
* op    - "=", "<", "<=", ">", ">=" for a top-level WHERE conjunct
          `path op constant` (either side; BETWEEN gives ">=" and "<=");
          "in" for `path IN (constants)` (value is a tuple);
          "order_asc" / "order_desc" for each ORDER BY path (value None);
* value - the literal or parameter value compared against.
Only queries whose FROM binds whole documents (`FROM c`, `FROM root r`)
produce hints; conjuncts under OR or NOT produce none.
"""

from __future__ import annotations

from typing import NamedTuple

from regionlab.emulator.core.query import nodes as n
from regionlab.emulator.core.query.evaluate import Context, constant_of
from regionlab.emulator.core.query.operators import FLIPPED

RANGE_OPS = frozenset({"=", "<", "<=", ">", ">="})


class IndexHint(NamedTuple):
    path: tuple
    op: str
    value: object


def index_hints(query: n.Query, ctx: Context) -> tuple:
    source = query.source
    if source is None or source.kind != "expr" or not isinstance(source.expr, n.Name):
        return ()
    alias = source.alias
    hints: list[IndexHint] = []
    for conjunct in _conjuncts(query.where):
        hints.extend(_conjunct_hints(conjunct, alias, ctx))
    for item in query.order_by:
        path = _path(item.expr, alias, ctx)
        if path is not None:
            hints.append(IndexHint(path, "order_desc" if item.descending else "order_asc", None))
    return tuple(hints)


def where_equalities(query: n.Query, ctx: Context) -> dict | None:
    """{path: value} when the WHERE clause is nothing but `path = constant` conjuncts (FROM a
    whole document, each path once), so that a document passes it exactly when it holds those
    values there; None for any other WHERE clause, or none."""
    source = query.source
    if query.where is None or source is None or source.kind != "expr" or not isinstance(source.expr, n.Name):
        return None
    fixed = {}
    for conjunct in _conjuncts(query.where):
        if not (isinstance(conjunct, n.Binary) and conjunct.op == "="):
            return None
        hint = _comparison_hint(conjunct, source.alias, ctx)
        if not hint or hint[0].path in fixed:
            return None
        fixed[hint[0].path] = hint[0].value
    return fixed


def leading_order_hint(query: n.Query, ctx: Context) -> IndexHint | None:
    """The hint of the first ORDER BY item when it is a document path, else None: rows come
    out in its order, so a sorted index walked that way meets the top rows first."""
    source = query.source
    if not query.order_by or source is None or source.kind != "expr" or not isinstance(source.expr, n.Name):
        return None
    first = query.order_by[0]
    path = _path(first.expr, source.alias, ctx)
    return None if path is None else IndexHint(path, "order_desc" if first.descending else "order_asc", None)


def _conjuncts(node):
    """The top-level AND terms of node, left to right; a loop, since AND chains may be long."""
    out, stack = [], [node]
    while stack:
        node = stack.pop()
        if isinstance(node, n.Binary) and node.op == "AND":
            stack.append(node.right)
            stack.append(node.left)
        elif node is not None:
            out.append(node)
    return out


def _conjunct_hints(node, alias: str, ctx: Context) -> list:
    if isinstance(node, n.Binary) and node.op in RANGE_OPS:
        return _comparison_hint(node, alias, ctx)
    if isinstance(node, n.Between) and not node.negated:
        path = _path(node.value, alias, ctx)
        (low_ok, low), (high_ok, high) = constant_of(node.low, ctx), constant_of(node.high, ctx)
        if path is not None and low_ok and high_ok:
            return [IndexHint(path, ">=", low), IndexHint(path, "<=", high)]
    if isinstance(node, n.In) and not node.negated:
        path = _path(node.value, alias, ctx)
        constants = [constant_of(item, ctx) for item in node.items]
        if path is not None and all(ok for ok, _ in constants):
            return [IndexHint(path, "in", tuple(v for _, v in constants))]
    return []


def _comparison_hint(node: n.Binary, alias: str, ctx: Context) -> list:
    for path_side, value_side, op in ((node.left, node.right, node.op), (node.right, node.left, FLIPPED[node.op])):
        path = _path(path_side, alias, ctx)
        is_constant, value = constant_of(value_side, ctx)
        if path is not None and is_constant:
            return [IndexHint(path, op, value)]
    return []


def _path(node, alias: str, ctx: Context) -> tuple | None:
    steps = []
    while isinstance(node, n.Member):
        is_constant, key = constant_of(node.key, ctx)
        if not is_constant or type(key) not in (str, int):
            return None
        steps.append(key)
        node = node.target
    if not (isinstance(node, n.Name) and node.name == alias) or not steps:
        return None
    return tuple(reversed(steps))
