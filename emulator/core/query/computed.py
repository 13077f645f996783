"""A container's computed properties (`computedProperties`): checked when the container is
created or replaced, and folded into every query that names one.

Theory of operation: a definition is `{"name": "cp_lower", "query": "SELECT VALUE LOWER(c.name)
FROM c"}`. `check` refuses a definition the service refuses (its documented rules: at most 20,
unique names that are not system properties, a query that is `SELECT VALUE <expression> FROM
<root>` with no JOIN, WHERE, GROUP BY, ORDER BY, TOP, DISTINCT, OFFSET/LIMIT, subquery,
aggregate, spatial, non-deterministic or user-defined function, and that names no other computed
property) with a ValueError saying what to fix. `fold` rewrites a query's syntax tree so that a
reference to a computed property of the root document (`c.cp_lower`, `c["cp_lower"]`) is the
definition's expression over that document: the property is computed per row, never stored, and
`SELECT *` (the stored document) does not show it, as the service does; `SELECT c.cp_lower`
names its result `cp_lower`. A computed property hides a stored property of the same name in
queries, as in the service. Pure: trees in, trees out; definitions are parsed once per
definition list (a bounded cache keyed by the list object, as index_policy.policy_of).
"""
from __future__ import annotations

from dataclasses import fields, replace

from regionlab.emulator.core.limits import (COMPUTED_DEFINITIONS_CACHE_MAX_ENTRIES, COMPUTED_PROPERTIES_MAX,
                                            COMPUTED_QUERY_TEXT_MAX_CHARS)
from regionlab.emulator.core.query import nodes as n
from regionlab.emulator.core.query.errors import QueryError
from regionlab.emulator.core.query.evaluate import AGGREGATE_NAMES
from regionlab.emulator.core.query.parser import parse

SYSTEM_PROPERTIES = frozenset({"id", "_rid", "_ts", "_etag", "_self", "_attachments"})
NONDETERMINISTIC = frozenset({"GETCURRENTDATETIME", "GETCURRENTTIMESTAMP", "GETCURRENTTICKS", "RAND",
                              "GETCURRENTDATETIMESTATIC", "GETCURRENTTIMESTAMPSTATIC", "GETCURRENTTICKSSTATIC"})
_REFUSED_CLAUSES = (("WHERE", lambda t: t.where is not None), ("GROUP BY", lambda t: t.group_by),
                    ("ORDER BY", lambda t: t.order_by), ("TOP", lambda t: t.select.top is not None),
                    ("DISTINCT", lambda t: t.select.distinct),
                    ("OFFSET LIMIT", lambda t: t.offset is not None or t.limit is not None),
                    ("JOIN", lambda t: t.joins))


def check(definitions, compile_query=None) -> dict:
    """{name: (expression, alias)} of valid definitions; ValueError naming the first fault.
    compile_query (core/query/query.py's, which folds with this module, so it is passed in)
    also refuses a definition whose query does not compile (an unknown function)."""
    if not isinstance(definitions, list):
        raise ValueError("computedProperties must be a list of {\"name\": ..., \"query\": ...} objects.")
    if len(definitions) > COMPUTED_PROPERTIES_MAX:
        raise ValueError(f"A container can have at most {COMPUTED_PROPERTIES_MAX} computed properties; "
                         f"{len(definitions)} were given.")
    names = [d.get("name") if isinstance(d, dict) else None for d in definitions]
    out = {}
    for definition, name in zip(definitions, names):
        if not isinstance(definition, dict) or type(name) is not str or type(definition.get("query")) is not str:
            raise ValueError("Each computed property needs a string \"name\" and a string \"query\".")
        if not name or "/" in name or name in SYSTEM_PROPERTIES:
            raise ValueError(f"The computed property name '{name}' is not allowed: it must be a non-empty "
                             "top-level property name and not a system property (id, _rid, _ts, _etag, "
                             "_self, _attachments).")
        if name in out:
            raise ValueError(f"The computed property name '{name}' is used more than once.")
        out[name] = _expression(name, definition["query"], set(names), compile_query)
    return out


def _expression(name: str, text: str, names: set, compile_query) -> tuple:
    where = f"The query of computed property '{name}'"
    if len(text) > COMPUTED_QUERY_TEXT_MAX_CHARS:
        raise ValueError(f"{where} is longer than {COMPUTED_QUERY_TEXT_MAX_CHARS} characters.")
    try:
        tree = parse(text)
    except QueryError as e:
        raise ValueError(f"{where} is not a valid query: {e}") from None
    source = tree.source
    if not tree.select.value or source is None or source.kind != "expr" or not isinstance(source.expr, n.Name):
        raise ValueError(f"{where} must be of the form 'SELECT VALUE <expression> FROM c', over the root item.")
    for clause, used in _REFUSED_CLAUSES:
        if used(tree):
            raise ValueError(f"{where} may not use {clause}.")
    expr = tree.select.items[0].expr
    fault = n.first(expr, lambda node: _refused(node, source.alias, names))
    if fault is not None:
        raise ValueError(f"{where} may not use {_describe(fault)}.")
    try:
        if compile_query is not None:
            compile_query(text)
    except QueryError as e:
        raise ValueError(f"{where} is not a valid query: {e}") from None
    return expr, source.alias


def _refused(node, alias: str, names: set) -> bool:
    if isinstance(node, n.Subquery):
        return True
    if isinstance(node, n.Call):
        upper = node.name.upper()
        return node.udf or upper in AGGREGATE_NAMES or upper in NONDETERMINISTIC or upper.startswith("ST_")
    return _member_name(node, alias) in names


def _describe(node) -> str:
    if isinstance(node, n.Subquery):
        return "a subquery"
    if isinstance(node, n.Call):
        kind = ("a user-defined function" if node.udf else "an aggregate function" if node.name.upper() in AGGREGATE_NAMES
                else "a spatial function" if node.name.upper().startswith("ST_") else "a non-deterministic function")
        return f"{kind} ({node.name})"
    return f"another computed property ({node.key.value})"


def _member_name(node, alias: str):
    """The property name when node is `alias.name` or `alias["name"]`, else None."""
    if (isinstance(node, n.Member) and isinstance(node.target, n.Name) and node.target.name == alias
            and isinstance(node.key, n.Literal) and type(node.key.value) is str):
        return node.key.value
    return None


_checked: dict = {}         # id(definition list) -> (list, {name: (expression, alias)})


def definitions_of(definitions: list) -> dict:
    """check(definitions), once per list object (a stored container definition is never changed
    in place: a replace stores a new one)."""
    entry = _checked.get(id(definitions))
    if entry is not None and entry[0] is definitions:
        return entry[1]
    checked = check(definitions)
    if len(_checked) >= COMPUTED_DEFINITIONS_CACHE_MAX_ENTRIES:
        del _checked[next(iter(_checked))]
    _checked[id(definitions)] = (definitions, checked)
    return checked


def fold(tree: n.Query, computed: dict) -> n.Query:
    """tree with each reference to a computed property of its root document replaced by the
    property's expression (over that document)."""
    source = tree.source
    if not computed or source is None or source.kind != "expr" or not isinstance(source.expr, n.Name):
        return tree
    alias = source.alias
    if n.first(tree, lambda node: _member_name(node, alias) in computed) is None and not _in_subqueries(tree):
        return tree

    def replace_node(old, new):
        name = _member_name(old, alias)
        if name in computed:
            expr, own_alias = computed[name]
            return _transform(expr, lambda o, e: n.Name(e.pos, alias) if isinstance(e, n.Name)
                              and e.name == own_alias else None)
        if isinstance(old, n.SelectItem) and old.alias is None:
            name = _member_name(old.expr, alias)
            if name in computed:
                return replace(new, alias=name)
        return None
    return _transform(tree, replace_node)


def _in_subqueries(tree) -> bool:
    """Whether the tree has subqueries (n.first does not enter them; fold must)."""
    return n.first(tree.select, lambda node: isinstance(node, n.Subquery)) is not None or any(
        n.first(part, lambda node: isinstance(node, n.Subquery)) is not None
        for part in (tree.where, *tree.joins, *tree.order_by, *tree.group_by) if part is not None)


def _child_nodes(node) -> list:
    out = []
    for field in fields(node):
        value = getattr(node, field.name)
        for part in value if isinstance(value, tuple) else (value,):
            if isinstance(part, tuple):              # ObjectCtor pairs: (name, node)
                part = part[1]
            if isinstance(part, n.Node):
                out.append(part)
    return out


def _transform(root, replace_node):
    """root rebuilt bottom-up, each node replaced by replace_node(old, rebuilt) unless that is
    None; iterative, since member and operator chains nest as deep as they are long."""
    done: dict = {}
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if not expanded:
            stack.append((node, True))
            stack.extend((child, False) for child in _child_nodes(node))
            continue
        rebuilt = _rebuilt(node, done)
        swapped = replace_node(node, rebuilt)
        done[id(node)] = rebuilt if swapped is None else swapped
    return done[id(root)]


def _rebuilt(node, done: dict):
    changes = {}
    for field in fields(node):
        value = getattr(node, field.name)
        if isinstance(value, n.Node):
            if done[id(value)] is not value:
                changes[field.name] = done[id(value)]
        elif isinstance(value, tuple):
            parts = tuple(_swap(part, done) for part in value)
            if any(a is not b for a, b in zip(parts, value)):
                changes[field.name] = parts
    return replace(node, **changes) if changes else node


def _swap(part, done: dict):
    if isinstance(part, n.Node):
        return done[id(part)]
    if isinstance(part, tuple) and len(part) == 2 and isinstance(part[1], n.Node):
        new = done[id(part[1])]
        return part if new is part[1] else (part[0], new)
    return part
