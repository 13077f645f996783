"""Compiles expression nodes into closures `row -> value`.

Theory of operation: a row is a tuple holding the current value of every alias
in scope (FROM alias, JOIN aliases, then any enclosing query's aliases first
for a subquery). Names are resolved to tuple slots at compile time, parameters
are substituted as constants, and function names are looked up once, so
evaluating a closure never consults the syntax tree. A `Scope` maps alias to
slot; a `Context` carries what all closures of one compiled query share: the
query text (for error messages), the parameters, the clock cell that
`execute` fills with now_ms, and the hook that compiles subqueries.
Aggregate calls are only legal where an `AggregateSlots` collector is passed;
the collector records the aggregate and the call compiles into a read of the
slot where the aggregation stage will put its result (just past the row).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from regionlab.emulator.core.query import nodes as n
from regionlab.emulator.core.query import operators as ops
from regionlab.emulator.core.query.errors import QueryError
from regionlab.emulator.core.query.functions import lookup_function
from regionlab.emulator.core.query.like import like_matcher, match_like
from regionlab.emulator.core.query.values import UNDEFINED, canonical
from regionlab.emulator.core.limits import UDF_CALL_WORK_UNITS

AGGREGATE_NAMES = frozenset({"COUNT", "SUM", "MIN", "MAX", "AVG"})
# Operator chains longer than this compile into one loop instead of nested closures (shorter
# ones keep the specialised closures, which are faster): a chain's length is not bounded by
# the parser's nesting limit, so its closures must not nest once per link.
CHAIN_NESTED_MAX = 16
# The service's words for AVG(SUM(x)) or SUM((SELECT ...)).
NESTED_AGGREGATE_MESSAGE = "Cannot perform an aggregate function on an expression containing an aggregate or a subquery."


@dataclass
class Scope:
    names: dict = field(default_factory=dict)  # alias -> slot

    @property
    def size(self) -> int:
        return len(self.names)

    def extended(self, alias: str) -> "Scope":
        names = dict(self.names)
        names[alias] = len(names)
        return Scope(names)


@dataclass
class Context:
    text: str
    parameters: dict
    clock: list  # [now_ms], filled by execute before any closure runs
    compile_subquery: Callable | None = None
    work: list = field(default_factory=lambda: [0])  # rows made by FROM/JOIN (sources.py)
    # [f(name, args) -> value] for udf.name(...) calls, set by the caller before each evaluation
    # step (the service's, which runs the container's UDFs), or [None]: none can be called.
    udfs: list = field(default_factory=lambda: [None])
    has_udfs: bool = False

    def error(self, node: n.Node, what: str) -> QueryError:
        return QueryError.at(self.text, node.pos, what)


@dataclass
class AggregateSlots:
    base: int  # first slot past the row
    calls: list = field(default_factory=list)  # (name, argument closure)

    def add(self, name: str, argument) -> int:
        self.calls.append((name, argument))
        return self.base + len(self.calls) - 1


def constant_of(node: n.Node, ctx: Context):
    """(True, value) when node is a literal or a parameter, else (False, None)."""
    if isinstance(node, n.Literal):
        return True, node.value
    if isinstance(node, n.Param):
        return True, parameter_value(node, ctx)
    return False, None


def parameter_value(node: n.Param, ctx: Context):
    if node.name not in ctx.parameters:
        raise ctx.error(node, f"parameter {node.name} is referenced but was not supplied")
    return ctx.parameters[node.name]


def compile_expr(node: n.Node, scope: Scope, ctx: Context, aggs: AggregateSlots | None = None):
    builder = _BUILDERS.get(type(node))
    if builder is None:
        raise ctx.error(node, f"unsupported expression {type(node).__name__}")
    return builder(node, scope, ctx, aggs)


def _literal(node, scope, ctx, aggs):
    value = node.value
    return lambda row: value


def _param(node, scope, ctx, aggs):
    value = parameter_value(node, ctx)
    return lambda row: value


def _name(node, scope, ctx, aggs):
    slot = scope.names.get(node.name)
    if slot is None:
        raise ctx.error(node, f"identifier '{node.name}' could not be resolved; expected an alias from FROM or JOIN")
    return lambda row: row[slot]


def _member(node, scope, ctx, aggs):
    steps, root = _constant_path(node, ctx)
    if root is not None and root.name in scope.names:
        return _path_reader(scope.names[root.name], steps)
    keys = []                           # c.a[f(x)].b...: walked in a loop, at any length
    while isinstance(node, n.Member):
        keys.append(compile_expr(node.key, scope, ctx, aggs))
        node = node.target
    target = compile_expr(node, scope, ctx, aggs)
    if len(keys) == 1:
        (key,) = keys
        return lambda row: index_value(target(row), key(row))
    keys.reverse()

    def read_chain(row):
        value = target(row)
        for key in keys:
            value = index_value(value, key(row))
        return value

    return read_chain


def index_value(container, key):
    """`container[key]` under the dialect's rules: undefined when absent."""
    if type(container) is dict:
        return container.get(key, UNDEFINED) if type(key) is str else UNDEFINED
    if type(container) is list and type(key) is int and 0 <= key < len(container):
        return container[key]
    return UNDEFINED


def _constant_path(node: n.Node, ctx: Context):
    """(steps, root Name) when node is a name followed by constant keys."""
    steps = []
    while isinstance(node, n.Member):
        is_constant, key = constant_of(node.key, ctx)
        if not is_constant or type(key) not in (str, int):
            return None, None
        steps.append(key)
        node = node.target
    if not isinstance(node, n.Name):
        return None, None
    return tuple(reversed(steps)), node


def _path_reader(slot: int, steps: tuple):
    if len(steps) == 1 and type(steps[0]) is str:
        (key,) = steps

        def read_one(row):
            value = row[slot]
            return value.get(key, UNDEFINED) if type(value) is dict else UNDEFINED

        return read_one

    if len(steps) == 2 and type(steps[0]) is str and type(steps[1]) is str:
        first, second = steps

        def read_two(row):
            value = row[slot]
            value = value.get(first, UNDEFINED) if type(value) is dict else UNDEFINED
            return value.get(second, UNDEFINED) if type(value) is dict else UNDEFINED

        return read_two

    if all(type(step) is str for step in steps):
        def read_names(row):
            value = row[slot]
            for name in steps:
                if type(value) is not dict:
                    return UNDEFINED
                value = value.get(name, UNDEFINED)
            return value

        return read_names

    def read_path(row):
        value = row[slot]
        for step in steps:
            value = index_value(value, step)
        return value

    return read_path


def _unary(node, scope, ctx, aggs):
    chain = []                          # NOT NOT ... x, - - ... x: applied in a loop
    while isinstance(node, n.Unary) and len(chain) <= CHAIN_NESTED_MAX:
        chain.append(node.op)
        node = node.operand
    if len(chain) <= CHAIN_NESTED_MAX:
        operand = compile_expr(node, scope, ctx, aggs)
        for op in reversed(chain):
            operand = ops.make_unary(op, operand)
        return operand
    while isinstance(node, n.Unary):
        chain.append(node.op)
        node = node.operand
    operand = compile_expr(node, scope, ctx, aggs)
    steps = [ops.UNARY_VALUE[op] for op in reversed(chain)]

    def evaluate(row):
        value = operand(row)
        for step in steps:
            value = step(value)
        return value

    return evaluate


def _binary(node, scope, ctx, aggs):
    links = []                          # the left spine: (op, right) from the top down
    spine = node
    while isinstance(spine, n.Binary):
        links.append((spine.op, spine.right))
        spine = spine.left
    if len(links) > CHAIN_NESTED_MAX:
        return _binary_chain(spine, links, scope, ctx, aggs)
    if node.op in ops.FLIPPED:
        return _comparison(node, scope, ctx, aggs)
    left = compile_expr(node.left, scope, ctx, aggs)
    return ops.make_binary(node.op, left, compile_expr(node.right, scope, ctx, aggs))


def _binary_chain(first, links, scope, ctx, aggs):
    """A long left-deep chain (`1 + 1 + ...`, `a AND b AND ...`) as one loop over its links,
    so neither compiling nor evaluating it recurses once per link."""
    start = compile_expr(first, scope, ctx, aggs)
    steps = [ops.binary_step(op, compile_expr(right, scope, ctx, aggs)) for op, right in reversed(links)]

    def evaluate(row):
        value = start(row)
        for step in steps:
            value = step(value, row)
        return value

    return evaluate


def _comparison(node, scope, ctx, aggs):
    right_constant, right_value = constant_of(node.right, ctx)
    left_constant, left_value = constant_of(node.left, ctx)
    if right_constant and not left_constant:
        return ops.make_compare_constant(node.op, compile_expr(node.left, scope, ctx, aggs), right_value)
    if left_constant and not right_constant:
        right = compile_expr(node.right, scope, ctx, aggs)
        return ops.make_compare_constant(ops.FLIPPED[node.op], right, left_value)
    left = compile_expr(node.left, scope, ctx, aggs)
    return ops.make_compare(node.op, left, compile_expr(node.right, scope, ctx, aggs))


def _between(node, scope, ctx, aggs):
    value = compile_expr(node.value, scope, ctx, aggs)
    low = compile_expr(node.low, scope, ctx, aggs)
    high = compile_expr(node.high, scope, ctx, aggs)

    def evaluate(row):
        v = value(row)
        a, b = ops.compare(">=", v, low(row)), ops.compare("<=", v, high(row))
        if a is False or b is False:
            return False
        return True if (a is True and b is True) else UNDEFINED

    return ops.make_not(evaluate) if node.negated else evaluate


def _in(node, scope, ctx, aggs):
    value = compile_expr(node.value, scope, ctx, aggs)
    constants = [constant_of(item, ctx) for item in node.items]
    if all(is_constant for is_constant, _ in constants):
        members = frozenset(canonical(v) for _, v in constants)

        def evaluate(row):
            v = value(row)
            return UNDEFINED if v is UNDEFINED else canonical(v) in members
    else:
        items = [compile_expr(item, scope, ctx, aggs) for item in node.items]

        def evaluate(row):
            v = value(row)
            if v is UNDEFINED:
                return UNDEFINED
            key = canonical(v)
            return any(canonical(item(row)) == key for item in items)

    return ops.make_not(evaluate) if node.negated else evaluate


def _like(node, scope, ctx, aggs):
    value = compile_expr(node.value, scope, ctx, aggs)
    pattern_constant, pattern = constant_of(node.pattern, ctx)
    escape_constant, escape = (True, None) if node.escape is None else constant_of(node.escape, ctx)
    if pattern_constant and escape_constant:
        matcher = like_matcher(pattern, escape)
        evaluate = lambda row: matcher(value(row))  # noqa: E731
    else:
        pattern_fn = compile_expr(node.pattern, scope, ctx, aggs)
        escape_fn = (lambda row: None) if node.escape is None else compile_expr(node.escape, scope, ctx, aggs)
        evaluate = lambda row: match_like(value(row), pattern_fn(row), escape_fn(row))  # noqa: E731
    return ops.make_not(evaluate) if node.negated else evaluate


def _ternary(node, scope, ctx, aggs):
    branches = []                       # a ? b : c ? d : ... e, tried in a loop
    while isinstance(node, n.Ternary):
        branches.append((compile_expr(node.condition, scope, ctx, aggs), compile_expr(node.then, scope, ctx, aggs)))
        node = node.otherwise
    otherwise = compile_expr(node, scope, ctx, aggs)
    if len(branches) == 1:
        ((condition, then),) = branches
        return lambda row: then(row) if condition(row) is True else otherwise(row)

    def evaluate(row):
        for condition, then in branches:
            if condition(row) is True:
                return then(row)
        return otherwise(row)

    return evaluate


def _call(node, scope, ctx, aggs):
    if node.udf:
        return _udf_call(node, scope, ctx, aggs)
    name = node.name.upper()
    if name in AGGREGATE_NAMES:
        return _aggregate_call(node, name, scope, ctx, aggs)
    spec = lookup_function(name)
    if spec is None:
        raise ctx.error(node, f"unknown function '{node.name}'; expected a built-in system function")
    if not spec.min_args <= len(node.args) <= spec.max_args:
        expected = str(spec.min_args) if spec.min_args == spec.max_args else f"{spec.min_args} to {spec.max_args}"
        raise ctx.error(node, f"function {name} takes {expected} arguments, got {len(node.args)}")
    args = [compile_expr(arg, scope, ctx, aggs) for arg in node.args]
    return _apply(spec, args, ctx)


def _udf_call(node, scope, ctx, aggs):
    """udf.name(args): the caller's function runs it; each call counts UDF_CALL_WORK_UNITS, so
    a slice holds few of them (a call runs JavaScript, far more than a row's work)."""
    ctx.has_udfs = True
    args = [compile_expr(arg, scope, ctx, aggs) for arg in node.args]
    name, cell, work = node.name, ctx.udfs, ctx.work

    def evaluate(row):
        udfs = cell[0]
        if udfs is None:
            raise ctx.error(node, f"user-defined function udf.{name} cannot be called here; UDFs run in "
                                  "queries of a container's documents")
        work[0] += UDF_CALL_WORK_UNITS
        return udfs(name, [a(row) for a in args])
    return evaluate


def _apply(spec, args, ctx):
    fn = spec.fn
    if spec.needs_now:
        clock = ctx.clock
        return lambda row: fn(clock[0], *[arg(row) for arg in args])
    if len(args) == 1:
        (a,) = args
        return lambda row: fn(a(row))
    if len(args) == 2:
        a, b = args
        return lambda row: fn(a(row), b(row))
    return lambda row: fn(*[arg(row) for arg in args])


def _aggregate_call(node, name, scope, ctx, aggs):
    if aggs is None:
        raise ctx.error(node, f"aggregate {name} is only allowed in a SELECT list")
    if len(node.args) != 1:
        raise ctx.error(node, f"aggregate {name} takes exactly 1 argument, got {len(node.args)}")
    if _holds_aggregate_or_subquery(node.args[0]):
        raise ctx.error(node, NESTED_AGGREGATE_MESSAGE)
    argument = compile_expr(node.args[0], scope, ctx, None)
    slot = aggs.add(name, argument)
    return lambda row: row[slot]


def _holds_aggregate_or_subquery(node: n.Node) -> bool:
    return n.first(node, _is_aggregate_or_subquery) is not None


def _is_aggregate_or_subquery(node: n.Node) -> bool:
    return isinstance(node, n.Subquery) or (isinstance(node, n.Call) and not node.udf
                                            and node.name.upper() in AGGREGATE_NAMES)


def _array(node, scope, ctx, aggs):
    items = [compile_expr(item, scope, ctx, aggs) for item in node.items]

    def evaluate(row):
        return [v for v in (item(row) for item in items) if v is not UNDEFINED]

    return evaluate


def _object(node, scope, ctx, aggs):
    pairs = [(key, compile_expr(value, scope, ctx, aggs)) for key, value in node.pairs]

    def evaluate(row):
        out = {}
        for key, value in pairs:
            v = value(row)
            if v is not UNDEFINED:
                out[key] = v
        return out

    return evaluate


def _subquery(node, scope, ctx, aggs):
    run = ctx.compile_subquery(node.query, scope, ctx)
    if node.kind == "EXISTS":
        return lambda row: len(run(row, 1)) > 0
    if node.kind == "ARRAY":
        return lambda row: run(row, None)

    def scalar(row):
        results = run(row, 1)
        return results[0] if results else UNDEFINED

    return scalar


_BUILDERS = {
    n.Literal: _literal, n.Param: _param, n.Name: _name, n.Member: _member, n.Unary: _unary,
    n.Binary: _binary, n.Between: _between, n.In: _in, n.Like: _like, n.Ternary: _ternary,
    n.Call: _call, n.ArrayCtor: _array, n.ObjectCtor: _object, n.Subquery: _subquery,
}
