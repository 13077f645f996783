"""The rules a GROUP BY query's SELECT list and keys must follow, checked before compiling.

Theory of operation: the service rejects, with 400 BadRequest, a grouped query whose result
is not a function of its groups. `check_grouped(query, ctx)` applies the service's rules to
one `nodes.Query` that has a GROUP BY (top level or subquery) and raises QueryError naming
the first offence:

* `SELECT *` is not allowed with GROUP BY (the service: "'SELECT *' is not allowed with GROUP
  BY").
* Each select item (or the VALUE expression) may hold GROUP BY expressions, expressions over
  them (`UPPER(c.name)` with `GROUP BY c.name`, `{"k": c.k}` with `GROUP BY c.k`), aggregates
  over anything, literals and parameters. A property reference outside an aggregate that is
  not itself a GROUP BY expression is the service's error SC2102: "Property reference 'c.id'
  is invalid in the select list because it is not contained in either an aggregate function
  or the GROUP BY clause." A property path is one reference: `c.a.b` is not covered by
  `GROUP BY c.a` (the service names the whole path). A subquery in the select list is left
  to its own checks.
* A GROUP BY expression may not hold a subquery and must reference a property (the service's
  documented rules; aggregates in it are refused by the compiler, which allows them only in
  the select list).

Expressions are compared as trees, ignoring positions and the `c.a` / `c["a"]` spelling, and
function names case-insensitively, as the service compares them.
"""

from __future__ import annotations

from dataclasses import fields

from regionlab.emulator.core.query import nodes as n
from regionlab.emulator.core.query.evaluate import AGGREGATE_NAMES, Context

SELECT_STAR_MESSAGE = "'SELECT *' is not allowed with GROUP BY."
NOT_GROUPED_MESSAGE = ("Property reference '{}' is invalid in the select list because it is not contained in "
                       "either an aggregate function or the GROUP BY clause.")


def check_grouped(query: n.Query, ctx: Context) -> None:
    """Raise QueryError when a query with GROUP BY breaks one of the rules above."""
    for key in query.group_by:
        _check_key(key, ctx)
    select = query.select
    if select.star:
        raise ctx.error(select, SELECT_STAR_MESSAGE)
    for item in select.items:
        _check_item(item.expr, query.group_by, ctx)


def _check_key(key: n.Node, ctx: Context) -> None:
    subquery = n.first(key, lambda node: isinstance(node, n.Subquery))
    if subquery is not None:
        raise ctx.error(subquery, "a GROUP BY expression cannot contain a subquery.")
    if n.first(key, lambda node: isinstance(node, n.Name)) is None:
        raise ctx.error(key, "a GROUP BY expression must contain at least one property reference.")


def _check_item(node: n.Node, keys: tuple, ctx: Context) -> None:
    """Walk node top-down; stop at a GROUP BY expression, an aggregate or a subquery."""
    stack, paths = [node], {}
    while stack:
        node = stack.pop()
        if isinstance(node, (n.Literal, n.Param, n.Subquery)) or _is_aggregate(node):
            continue
        if any(same(node, key) for key in keys):
            continue
        if _is_path(node, paths):
            raise ctx.error(node, NOT_GROUPED_MESSAGE.format(_path_text(node)))
        stack.extend(reversed(n.children(node)))


def _is_aggregate(node: n.Node) -> bool:
    return isinstance(node, n.Call) and not node.udf and node.name.upper() in AGGREGATE_NAMES


def _is_path(node: n.Node, memo: dict) -> bool:
    """Whether node is a name followed by constant keys (`c`, `c.a`, `c["b"][0]`). Each member
    of a chain is decided once (memo by id), so a long chain costs linear time, not quadratic."""
    chain = []
    while isinstance(node, n.Member) and id(node) not in memo:
        chain.append(node)
        node = node.target
    ok = memo[id(node)] if isinstance(node, n.Member) else isinstance(node, n.Name)
    for member in reversed(chain):
        key = member.key
        ok = ok and isinstance(key, n.Literal) and type(key.value) in (str, int)
        memo[id(member)] = ok
    return ok


def _path_text(node: n.Node) -> str:
    """`c.a["b c"][0]`: the path node is (normalised), for the error message."""
    parts = []
    while isinstance(node, n.Member):
        value = node.key.value
        if type(value) is int:
            parts.append(f"[{value}]")
        elif node.dotted:
            parts.append(f".{value}")
        else:
            parts.append(f'["{value}"]')
        node = node.target
    return node.name + "".join(reversed(parts))


def same(a: n.Node, b: n.Node) -> bool:
    """Whether two expression trees mean the same expression (positions and the `.name` /
    `["name"]` spelling aside; function names compared case-insensitively)."""
    stack = [(a, b)]
    while stack:
        a, b = stack.pop()
        if type(a) is not type(b):
            return False
        if isinstance(a, n.Call):
            if a.name.upper() != b.name.upper() or a.udf != b.udf or len(a.args) != len(b.args):
                return False
            stack.extend(zip(a.args, b.args))
            continue
        if isinstance(a, n.ObjectCtor):
            if [k for k, _ in a.pairs] != [k for k, _ in b.pairs]:
                return False
            stack.extend((x, y) for (_, x), (_, y) in zip(a.pairs, b.pairs))
            continue
        for field in fields(a):
            if field.name in ("pos", "dotted"):
                continue
            x, y = getattr(a, field.name), getattr(b, field.name)
            if isinstance(x, n.Node) and isinstance(y, n.Node):
                stack.append((x, y))
            elif isinstance(x, tuple) and isinstance(y, tuple):
                if len(x) != len(y) or not all(isinstance(p, n.Node) and isinstance(q, n.Node) for p, q in zip(x, y)):
                    return False
                stack.extend(zip(x, y))
            elif isinstance(a, n.Literal):
                if type(x) is not type(y) or x != y:
                    return False
            elif x != y:
                return False
    return True
