"""The syntax tree of a query, as the parser builds it.

Theory of operation: plain frozen records, one per grammar form, each with the
offset (`pos`) of its first token so later stages can report errors in place.
The tree is built once by `parser`, read by `compiler` (which turns it into
closures) and by `hints`; nobody mutates it. Member access of every form
(`c.a`, `c["a"]`, `c.arr[0]`, `c[@p]`) is one node whose key is an expression;
`dotted` remembers the `.name` spelling because projection names depend on it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Node:
    pos: int


def children(node: Node) -> list:
    """The nodes directly below node, in field order (an ObjectCtor pair gives its value)."""
    out = []
    for field in fields(node):
        if field.name == "pos":
            continue
        value = getattr(node, field.name)
        for part in value if isinstance(value, tuple) else (value,):
            if isinstance(part, tuple):          # ObjectCtor pairs: (name, node)
                part = part[1]
            if isinstance(part, Node):
                out.append(part)
    return out


def first(node: Node, wanted) -> Node | None:
    """The first node of the tree (pre-order) for which wanted(node) holds, else None; a
    subquery is tested but not entered (its nodes belong to its own query). A loop with its
    own stack: operator and member chains nest as deep as they are long (docs/limits.md)."""
    stack = [node]
    while stack:
        node = stack.pop()
        if wanted(node):
            return node
        if not isinstance(node, Subquery):
            stack.extend(reversed(children(node)))
    return None


# ----------------------------------------------------------------- expressions
@dataclass(frozen=True)
class Literal(Node):
    value: object


@dataclass(frozen=True)
class Param(Node):
    name: str


@dataclass(frozen=True)
class Name(Node):
    name: str


@dataclass(frozen=True)
class Member(Node):
    target: Node
    key: Node
    dotted: bool = False


@dataclass(frozen=True)
class Unary(Node):
    op: str  # '-', '+', '~', 'NOT'
    operand: Node


@dataclass(frozen=True)
class Binary(Node):
    op: str  # 'AND', 'OR', '=', '!=', '<', ..., '+', '||', '??', '&', ...
    left: Node
    right: Node


@dataclass(frozen=True)
class Between(Node):
    value: Node
    low: Node
    high: Node
    negated: bool


@dataclass(frozen=True)
class In(Node):
    value: Node
    items: tuple
    negated: bool


@dataclass(frozen=True)
class Like(Node):
    value: Node
    pattern: Node
    escape: Node | None
    negated: bool


@dataclass(frozen=True)
class Ternary(Node):
    condition: Node
    then: Node
    otherwise: Node


@dataclass(frozen=True)
class Call(Node):
    name: str
    args: tuple
    udf: bool = False


@dataclass(frozen=True)
class ArrayCtor(Node):
    items: tuple


@dataclass(frozen=True)
class ObjectCtor(Node):
    pairs: tuple  # of (name, Node)


@dataclass(frozen=True)
class Subquery(Node):
    kind: str  # 'EXISTS' | 'ARRAY' | 'SCALAR'
    query: "Query"


# --------------------------------------------------------------------- clauses
@dataclass(frozen=True)
class SelectItem(Node):
    expr: Node
    alias: str | None


@dataclass(frozen=True)
class Select(Node):
    star: bool
    value: bool
    distinct: bool
    top: Node | None
    items: tuple  # of SelectItem; exactly one when value is True


@dataclass(frozen=True)
class Source(Node):
    """One FROM or JOIN input.

    kind 'in':   `alias IN expr` iterates the elements of an array;
    kind 'expr': `expr [AS] alias` binds one value (at the top level, the
                 container itself: one row per document);
    kind 'query': `(SELECT ...) [AS] alias` iterates a subquery's results.
    """

    kind: str
    alias: str
    expr: Node | None = None
    query: "Query | None" = None


@dataclass(frozen=True)
class OrderItem(Node):
    expr: Node
    descending: bool


@dataclass(frozen=True)
class Query(Node):
    select: Select
    source: Source | None
    joins: tuple = ()
    where: Node | None = None
    group_by: tuple = ()
    order_by: tuple = ()
    offset: Node | None = None
    limit: Node | None = None
