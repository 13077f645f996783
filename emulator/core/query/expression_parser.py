"""Recursive-descent parsing of scalar expressions.

Theory of operation: one method per precedence level, lowest first:
ternary `? :`, coalesce `??`, OR, AND, NOT, comparison (with IN, BETWEEN,
LIKE), `||`, `|`, `^`, `&`, shifts, `+ -`, `* / %`, unary `- + ~`, then
postfix member access and primaries. Binary levels are left-associative, the
ternary is right-associative. BETWEEN bounds are parsed one level above the
comparisons so that `x BETWEEN 1 AND 2 AND y` splits as expected.
The parser owns a cursor over the token list and nothing else; subqueries call
back into the clause parser (`parse_query_body`, provided by the subclass).
"""

from __future__ import annotations

from emulator.core.query import nodes as n
from emulator.core.query.errors import QueryError
from emulator.core.query.lexer import Token

COMPARISON_OPS = frozenset({"=", "!=", "<>", "<", "<=", ">", ">="})
# Binary levels from loosest to tightest, after comparison.
BINARY_LEVELS = (("||",), ("|",), ("^",), ("&",), ("<<", ">>", ">>>"), ("+", "-"), ("*", "/", "%"))


class ExpressionParser:
    def __init__(self, text: str, tokens: list[Token]):
        self.text = text
        self.tokens = tokens
        self.index = 0

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
    def parse_expression(self) -> n.Node:
        condition = self.parse_coalesce()
        if not self.at_op("?"):
            return condition
        self.advance()
        then = self.parse_expression()
        self.expect_op(":")
        otherwise = self.parse_expression()
        return n.Ternary(condition.pos, condition, then, otherwise)

    def parse_coalesce(self) -> n.Node:
        left = self.parse_or()
        while self.at_op("??"):
            self.advance()
            left = n.Binary(left.pos, "??", left, self.parse_or())
        return left

    def parse_or(self) -> n.Node:
        left = self.parse_and()
        while self.at_keyword("OR"):
            self.advance()
            left = n.Binary(left.pos, "OR", left, self.parse_and())
        return left

    def parse_and(self) -> n.Node:
        left = self.parse_not()
        while self.at_keyword("AND"):
            self.advance()
            left = n.Binary(left.pos, "AND", left, self.parse_not())
        return left

    def parse_not(self) -> n.Node:
        if self.at_keyword("NOT"):
            start = self.advance()
            return n.Unary(start.pos, "NOT", self.parse_not())
        return self.parse_comparison()

    def parse_comparison(self) -> n.Node:
        left = self.parse_binary(0)
        while True:
            if self.at_op(*COMPARISON_OPS):
                op = self.advance().value
                op = "!=" if op == "<>" else op
                left = n.Binary(left.pos, op, left, self.parse_binary(0))
                continue
            negated = False
            if self.at_keyword("NOT") and self.tokens[self.index + 1].value in ("IN", "BETWEEN", "LIKE"):
                self.advance()
                negated = True
            if self.at_keyword("IN"):
                left = self.parse_in(left, negated)
            elif self.at_keyword("BETWEEN"):
                left = self.parse_between(left, negated)
            elif self.at_keyword("LIKE"):
                left = self.parse_like(left, negated)
            else:
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

    def parse_binary(self, level: int) -> n.Node:
        if level == len(BINARY_LEVELS):
            return self.parse_unary()
        left = self.parse_binary(level + 1)
        while self.at_op(*BINARY_LEVELS[level]):
            op = self.advance().value
            left = n.Binary(left.pos, op, left, self.parse_binary(level + 1))
        return left

    def parse_unary(self) -> n.Node:
        if self.at_op("-", "+", "~"):
            start = self.advance()
            operand = self.parse_unary()
            if start.value == "-" and isinstance(operand, n.Literal) and type(operand.value) in (int, float):
                return n.Literal(start.pos, -operand.value)
            return n.Unary(start.pos, start.value, operand)
        return self.parse_postfix(self.parse_primary())

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
