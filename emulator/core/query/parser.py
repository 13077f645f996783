"""Parses a whole query: primaries, subqueries and the SELECT clauses.

Theory of operation: `parse(text)` tokenizes, then walks the grammar

    SELECT [DISTINCT] [TOP n] (* | VALUE expr | item [, item]...)
    [FROM source [JOIN source]...] [WHERE expr] [GROUP BY expr [, expr]...]
    [ORDER BY expr [ASC|DESC] [, ...]] [OFFSET n LIMIT m]

and returns a `nodes.Query`, or raises QueryError naming the position and
what was expected. A text that starts with FROM (a patch condition such as
`FROM c WHERE c.n > 1`) parses as `SELECT * FROM ...`. A source is `alias IN expr`, `expr [AS] alias` or
`(SELECT ...) [AS] alias`. Scalar-expression levels live in
`expression_parser`; this module adds the primaries (literals, parameters,
names, calls, constructors, subqueries) and the clauses. No name resolution
happens here: that is the compiler's job.
"""

from __future__ import annotations

from regionlab.emulator.core.query import nodes as n
from regionlab.emulator.core.query.expression_parser import ExpressionParser
from regionlab.emulator.core.query.lexer import tokenize
from regionlab.emulator.core.query.values import UNDEFINED

_CONSTANTS = {"TRUE": True, "FALSE": False, "NULL": None}


def parse(text: str) -> n.Query:
    parser = Parser(text, tokenize(text))
    if parser.at_keyword("FROM"):
        # Patch conditions arrive as "FROM c WHERE ..." with no SELECT list.
        query = parser.parse_query_body(n.Select(parser.token.pos, True, False, False, None, ()))
    else:
        query = parser.parse_query_body()
    if parser.token.kind != "eof":
        raise parser.error("end of query")
    return query


class Parser(ExpressionParser):
    # ------------------------------------------------------------ primaries
    def parse_primary(self) -> n.Node:
        token = self.token
        if token.kind in ("number", "string"):
            self.advance()
            return n.Literal(token.pos, token.value)
        if token.kind == "param":
            self.advance()
            return n.Param(token.pos, token.value)
        if token.kind == "ident":
            return self.parse_name_or_call()
        if token.kind == "keyword":
            return self.parse_keyword_primary()
        if self.at_op("("):
            return self.parse_parenthesized()
        if self.at_op("["):
            return self.parse_array()
        if self.at_op("{"):
            return self.parse_object()
        raise self.error("an expression")

    def parse_keyword_primary(self) -> n.Node:
        token = self.token
        if token.value in _CONSTANTS:
            self.advance()
            return n.Literal(token.pos, _CONSTANTS[token.value])
        if token.value == "UNDEFINED":
            self.advance()
            return n.Literal(token.pos, UNDEFINED)
        if token.value in ("EXISTS", "ARRAY") and self.tokens[self.index + 1].value == "(":
            self.advance()
            self.expect_op("(")
            query = self.parse_subquery()
            self.expect_op(")")
            return n.Subquery(token.pos, token.value, query)
        if token.value == "UDF":
            self.advance()
            self.expect_op(".")
            name = self.expect_ident("a user-defined function name")
            return n.Call(token.pos, name.value, self.parse_arguments(), udf=True)
        raise self.error("an expression")

    def parse_name_or_call(self) -> n.Node:
        token = self.advance()
        if self.at_op("("):
            return n.Call(token.pos, token.value, self.parse_arguments())
        return n.Name(token.pos, token.value)

    def parse_arguments(self) -> tuple:
        self.expect_op("(")
        args = []
        if not self.at_op(")"):
            args.append(self.parse_expression())
            while self.at_op(","):
                self.advance()
                args.append(self.parse_expression())
        self.expect_op(")")
        return tuple(args)

    def parse_parenthesized(self) -> n.Node:
        start = self.advance()
        if self.at_keyword("SELECT"):
            query = self.parse_subquery()
            self.expect_op(")")
            return n.Subquery(start.pos, "SCALAR", query)
        inner = self.parse_expression()
        self.expect_op(")")
        return inner

    def parse_array(self) -> n.Node:
        start = self.advance()
        items = []
        if not self.at_op("]"):
            items.append(self.parse_expression())
            while self.at_op(","):
                self.advance()
                items.append(self.parse_expression())
        self.expect_op("]")
        return n.ArrayCtor(start.pos, tuple(items))

    def parse_object(self) -> n.Node:
        start = self.advance()
        pairs = []
        while not self.at_op("}"):
            if pairs:
                self.expect_op(",")
            key = self.token
            if key.kind not in ("ident", "keyword", "string"):
                raise self.error("a property name in an object constructor")
            self.advance()
            self.expect_op(":")
            pairs.append((key.value if key.kind == "string" else key.text, self.parse_expression()))
        self.advance()
        return n.ObjectCtor(start.pos, tuple(pairs))

    # -------------------------------------------------------------- clauses
    def parse_subquery(self) -> n.Query:
        """A nested SELECT counts one nesting level itself (its expressions one more): it costs
        every later stage more stack than a bracket does."""
        self.enter()
        query = self.parse_query_body()
        self.depth -= 1
        return query

    def parse_query_body(self, select: n.Select | None = None) -> n.Query:
        if select is None:
            select = self.parse_select(self.expect_keyword("SELECT").pos)
        source, joins = None, []
        if self.at_keyword("FROM"):
            self.advance()
            source = self.parse_source()
            while self.at_keyword("JOIN"):
                self.advance()
                joins.append(self.parse_source())
        where = self.parse_where()
        group_by = self.parse_group_by()
        order_by = self.parse_order_by()
        offset, limit = self.parse_offset_limit()
        return n.Query(select.pos, select, source, tuple(joins), where, group_by, order_by, offset, limit)

    def parse_select(self, pos: int) -> n.Select:
        distinct = top = None
        if self.at_keyword("DISTINCT"):
            self.advance()
            distinct = True
        if self.at_keyword("TOP"):
            self.advance()
            top = self.parse_count("a number after TOP")
        if self.at_op("*"):
            pos = self.advance().pos
            return n.Select(pos, True, False, bool(distinct), top, ())
        if self.at_keyword("VALUE"):
            self.advance()
            expr = self.parse_expression()
            return n.Select(pos, False, True, bool(distinct), top, (n.SelectItem(expr.pos, expr, None),))
        items = [self.parse_select_item()]
        while self.at_op(","):
            self.advance()
            items.append(self.parse_select_item())
        return n.Select(pos, False, False, bool(distinct), top, tuple(items))

    def parse_select_item(self) -> n.SelectItem:
        expr = self.parse_expression()
        return n.SelectItem(expr.pos, expr, self.parse_alias(required=False))

    def parse_alias(self, required: bool) -> str | None:
        if self.at_keyword("AS"):
            self.advance()
            return self.expect_ident("an alias name after AS").value
        if self.token.kind == "ident":
            return self.advance().value
        if required:
            raise self.error("an alias")
        return None

    def parse_count(self, what: str) -> n.Node:
        token = self.token
        if token.kind == "number" or token.kind == "param":
            return self.parse_primary()
        raise self.error(what)

    def parse_source(self) -> n.Source:
        token = self.token
        if token.kind == "ident" and self.tokens[self.index + 1].value == "IN":
            self.advance()
            self.advance()
            return n.Source(token.pos, "in", token.value, expr=self.parse_expression())
        if self.at_op("(") and self.tokens[self.index + 1].value == "SELECT":
            self.advance()
            query = self.parse_subquery()
            self.expect_op(")")
            return n.Source(token.pos, "query", self.parse_alias(required=True), query=query)
        if token.kind != "ident":
            raise self.error("a collection name or alias")
        expr = self.parse_postfix(self.parse_name_or_call())
        alias = self.parse_alias(required=False)
        if alias is None:
            alias = _default_alias(expr)
        return n.Source(token.pos, "expr", alias, expr=expr)

    def parse_where(self) -> n.Node | None:
        if not self.at_keyword("WHERE"):
            return None
        self.advance()
        return self.parse_expression()

    def parse_group_by(self) -> tuple:
        if not self.at_keyword("GROUP"):
            return ()
        self.advance()
        self.expect_keyword("BY")
        keys = [self.parse_expression()]
        while self.at_op(","):
            self.advance()
            keys.append(self.parse_expression())
        return tuple(keys)

    def parse_order_by(self) -> tuple:
        if not self.at_keyword("ORDER"):
            return ()
        self.advance()
        self.expect_keyword("BY")
        items = [self.parse_order_item()]
        while self.at_op(","):
            self.advance()
            items.append(self.parse_order_item())
        return tuple(items)

    def parse_order_item(self) -> n.OrderItem:
        expr = self.parse_expression()
        descending = False
        if self.at_keyword("ASC", "DESC"):
            descending = self.advance().value == "DESC"
        return n.OrderItem(expr.pos, expr, descending)

    def parse_offset_limit(self) -> tuple:
        if not self.at_keyword("OFFSET"):
            return None, None
        self.advance()
        offset = self.parse_count("a number after OFFSET")
        self.expect_keyword("LIMIT")
        return offset, self.parse_count("a number after LIMIT")


def _default_alias(expr: n.Node) -> str:
    """`FROM c` is aliased c; `FROM c.kids` is aliased kids."""
    if isinstance(expr, n.Member) and expr.dotted:
        return expr.key.value
    if isinstance(expr, n.Name):
        return expr.name
    return "$s"
