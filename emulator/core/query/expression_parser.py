"""Recursive-descent parsing of scalar expressions.

Theory of operation: precedence levels, lowest first: ternary `? :`, coalesce
`??`, OR, AND, NOT, comparison (with IN, BETWEEN, LIKE), `||`, `|`, `^`, `&`,
shifts, `+ -`, `* / %`, unary `- + ~`, then postfix member access and
primaries. `??`/OR/AND and the levels above comparison are each one
precedence-climbing loop; binary levels are left-associative, the ternary is
right-associative. Prefix operators (NOT, `- + ~`) are collected in a loop.
So a long operator chain costs no stack, and only nesting (brackets, calls,
subqueries, a ternary's middle branch, comparison chains) goes deeper, which `enter`
bounds at QUERY_NESTING_MAX_LEVELS. BETWEEN bounds are parsed one level above the
comparisons so that `x BETWEEN 1 AND 2 AND y` splits as expected.
The parser owns a cursor over the token list and nothing else; subqueries call
back into the clause parser (`parse_query_body`, provided by the subclass).
"""

from __future__ import annotations

from regionlab.emulator.core.query import nodes as n
from regionlab.emulator.core.query.errors import QueryError
from regionlab.emulator.core.query.lexer import Token
from regionlab.emulator.core.limits import QUERY_NESTING_MAX_LEVELS

COMPARISON_OPS = frozenset({"=", "!=", "<>", "<", "<=", ">", ">="})
# Binary levels from loosest to tightest, after comparison.
BINARY_LEVELS = (("||",), ("|",), ("^",), ("&",), ("<<", ">>", ">>>"), ("+", "-"), ("*", "/", "%"))
_BINARY_LEVEL = {op: level for level, ops in enumerate(BINARY_LEVELS) for op in ops}
_LOGICAL_KEYWORDS = {"OR": 1, "AND": 2}      # `??` is level 0, the loosest


class ExpressionParser:
    def __init__(self, text: str, tokens: list[Token]):
        self.text = text
        self.tokens = tokens
        self.index = 0
        self.depth = -1          # the top-level expression is depth 0

    # ------------------------------------------------------------- cursor
    @property
    def token(self) -> Token:
        return self.tokens[self.index]

    def advance(self) -> Token:
        token = self.tokens[self.index]
        if token.kind != "eof":
            self.index += 1
        return token

    def at_op(self, *ops: str) -> bool:
        return self.token.kind == "op" and self.token.value in ops

    def at_keyword(self, *words: str) -> bool:
        return self.token.kind == "keyword" and self.token.value in words

    def error(self, expected: str, token: Token | None = None) -> QueryError:
        token = token or self.token
        found = "end of query" if token.kind == "eof" else repr(token.text)
        return QueryError.at(self.text, token.pos, f"expected {expected}, found {found}")

    def expect_op(self, op: str) -> Token:
        if not self.at_op(op):
            raise self.error(f"'{op}'")
        return self.advance()

    def expect_keyword(self, word: str) -> Token:
        if not self.at_keyword(word):
            raise self.error(word)
        return self.advance()

    def expect_ident(self, what: str) -> Token:
        if self.token.kind != "ident":
            raise self.error(what)
        return self.advance()

    # -------------------------------------------------------- expressions
    def enter(self) -> None:
        """One level deeper into nested expressions: brackets, calls, subqueries, the branches
        of a ternary. Past QUERY_NESTING_MAX_LEVELS the query is refused with a message rather
        than allowed to exhaust the interpreter's stack in any later stage."""
        self.depth += 1
        if self.depth > QUERY_NESTING_MAX_LEVELS:
            raise QueryError.at(self.text, self.token.pos, f"the query nests expressions more than "
                                f"{QUERY_NESTING_MAX_LEVELS} levels deep (parentheses, arrays, objects, "
                                "function calls, subqueries, the middle of a ternary or chained comparisons)")

    def parse_expression(self) -> n.Node:
        self.enter()
        branches = []                   # a ? b : c ? d : e, the else-chain read in a loop
        node = self.parse_logical(0)
        while self.at_op("?"):
            self.advance()
            then = self.parse_expression()
            self.expect_op(":")
            branches.append((node, then))
            node = self.parse_logical(0)
        for condition, then in reversed(branches):
            node = n.Ternary(condition.pos, condition, then, node)
        self.depth -= 1
        return node

    def _logical_level(self) -> int | None:
        token = self.token
        if token.kind == "op" and token.value == "??":
            return 0
        if token.kind == "keyword":
            return _LOGICAL_KEYWORDS.get(token.value)
        return None

    def parse_logical(self, min_level: int) -> n.Node:
        """`??`, OR, AND by precedence climbing: one loop, left-associative."""
        left = self.parse_not()
        while True:
            level = self._logical_level()
            if level is None or level < min_level:
                return left
            op = self.advance().value
            left = n.Binary(left.pos, op, left, self.parse_logical(level + 1))

    def parse_not(self) -> n.Node:
        starts = []
        while self.at_keyword("NOT"):
            starts.append(self.advance())
        node = self.parse_comparison()
        for start in reversed(starts):          # a loop, not recursion: NOT NOT ... x may be long
            node = n.Unary(start.pos, "NOT", node)
        return node

    def parse_comparison(self) -> n.Node:
        left = self.parse_binary(0)
        links = 0           # a comparison chain nests left-deep: each link counts as a level
        while True:
            if self.at_op(*COMPARISON_OPS):
                self.enter()
                links += 1
                op = self.advance().value
                op = "!=" if op == "<>" else op
                left = n.Binary(left.pos, op, left, self.parse_binary(0))
                continue
            negated = False
            if self.at_keyword("NOT") and self.tokens[self.index + 1].value in ("IN", "BETWEEN", "LIKE"):
                self.advance()
                negated = True
            if self.at_keyword("IN", "BETWEEN", "LIKE"):
                self.enter()
                links += 1
            if self.at_keyword("IN"):
                left = self.parse_in(left, negated)
            elif self.at_keyword("BETWEEN"):
                left = self.parse_between(left, negated)
            elif self.at_keyword("LIKE"):
                left = self.parse_like(left, negated)
            else:
                self.depth -= links
                return left

    def parse_in(self, value: n.Node, negated: bool) -> n.Node:
        self.advance()
        self.expect_op("(")
        items = [self.parse_expression()]
        while self.at_op(","):
            self.advance()
            items.append(self.parse_expression())
        self.expect_op(")")
        return n.In(value.pos, value, tuple(items), negated)

    def parse_between(self, value: n.Node, negated: bool) -> n.Node:
        self.advance()
        low = self.parse_binary(0)
        self.expect_keyword("AND")
        high = self.parse_binary(0)
        return n.Between(value.pos, value, low, high, negated)

    def parse_like(self, value: n.Node, negated: bool) -> n.Node:
        self.advance()
        pattern = self.parse_binary(0)
        escape = None
        if self.at_keyword("ESCAPE"):
            self.advance()
            escape = self.parse_binary(0)
        return n.Like(value.pos, value, pattern, escape, negated)

    def parse_binary(self, min_level: int) -> n.Node:
        """The operator levels above comparison by precedence climbing: left-associative, and
        one Python frame per level actually used rather than one per level that exists."""
        left = self.parse_unary()
        while True:
            token = self.token
            level = _BINARY_LEVEL.get(token.value) if token.kind == "op" else None
            if level is None or level < min_level:
                return left
            self.advance()
            left = n.Binary(left.pos, token.value, left, self.parse_binary(level + 1))

    def parse_unary(self) -> n.Node:
        starts = []
        while self.at_op("-", "+", "~"):
            starts.append(self.advance())
        node = self.parse_postfix(self.parse_primary())
        for start in reversed(starts):          # a loop, not recursion: - - ... x may be long
            if start.value == "-" and isinstance(node, n.Literal) and type(node.value) in (int, float):
                node = n.Literal(start.pos, -node.value)
            else:
                node = n.Unary(start.pos, start.value, node)
        return node

    def parse_postfix(self, target: n.Node) -> n.Node:
        while True:
            if self.at_op("."):
                self.advance()
                name = self.token
                if name.kind not in ("ident", "keyword"):
                    raise self.error("a property name after '.'")
                self.advance()
                target = n.Member(target.pos, target, n.Literal(name.pos, name.text), True)
            elif self.at_op("["):
                self.advance()
                key = self.parse_expression()
                self.expect_op("]")
                target = n.Member(target.pos, target, key, False)
            else:
                return target
