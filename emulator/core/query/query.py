"""The public face of the engine: compile once, execute many times.

Theory of operation: `compile_query(text, parameters)` parses the text,
resolves names and parameters, and builds closures for every expression;
all errors surface here as QueryError. The resulting `CompiledQuery` is
immutable apart from its clock cell, which `execute` / `filter_matches` set to
the caller's now_ms before evaluating (the engine never reads a wall clock), and
its UDF cell (what udf.name(...) calls run, or nothing), set the same way,
so one compiled query may be cached and reused; calls must not interleave
across threads. Results may share structure with the input documents
(`SELECT *` returns the documents themselves): callers must not mutate them.
"""

from __future__ import annotations

from typing import Iterable

from regionlab.emulator.core.query import nodes as n
from regionlab.emulator.core.query.computed import fold
from regionlab.emulator.core.query.errors import QueryError
from regionlab.emulator.core.query.evaluate import AGGREGATE_NAMES, Context, Scope
from regionlab.emulator.core.query.hints import index_hints, leading_order_hint, where_equalities
from regionlab.emulator.core.query.parser import parse
from regionlab.emulator.core.query.plan import compile_plan, subquery_compiler
from regionlab.emulator.core.limits import PARSED_QUERIES_CACHE_MAX_ENTRIES, PARSED_QUERY_TEXT_MAX_CHARS

# Parse trees are immutable and do not depend on the parameters, so one text (a query sent
# with many parameter values: a partition-key query per user) is parsed once: parsing is ~75 %
# of compiling `SELECT * FROM c WHERE c.pk = @pk` (~200 of ~275 µs here).
_parsed: dict = {}          # text -> its tree, oldest first


def _parse(text: str):
    tree = _parsed.get(text)
    if tree is None:
        tree = parse(text)
        if len(text) <= PARSED_QUERY_TEXT_MAX_CHARS:
            if len(_parsed) >= PARSED_QUERIES_CACHE_MAX_ENTRIES:
                del _parsed[next(iter(_parsed))]
            _parsed[text] = tree
    return tree


def _parameter_map(parameters) -> dict:
    result = {}
    for entry in parameters or ():
        if not isinstance(entry, dict) or type(entry.get("name")) is not str or "value" not in entry:
            raise QueryError("each query parameter must be an object with a string 'name' and a 'value'", 0)
        result[entry["name"]] = entry["value"]
    return result


class CompiledQuery:
    def __init__(self, text: str, parameters: list | None = None, computed: dict | None = None):
        """computed: the container's computed properties (computed.definitions_of), folded in."""
        self.text = text
        self._ctx = Context(text, _parameter_map(parameters), [0], subquery_compiler)
        self._tree = fold(_parse(text), computed) if computed else _parse(text)
        self._plan = compile_plan(self._tree, Scope(), self._ctx, top_level=True)
        self.is_aggregate = self._plan.group_keys is not None
        self.has_order_by = bool(self._tree.order_by)
        self.index_hints = index_hints(self._tree, self._ctx)
        self.leading_order = leading_order_hint(self._tree, self._ctx)
        # {path: constant} when WHERE is only `path = constant` terms ANDed (None otherwise): a
        # scope that already fixes those paths (a partition key) makes the filter true for
        # every document in it.
        self.where_equalities = where_equalities(self._tree, self._ctx)
        self._doc_filter = self._simple_filter()
        # SELECT * over whole documents: each result *is* an input document (callers may reuse
        # its stored serialisation).
        self.returns_documents = self._tree.select.star and self._doc_filter is not None
        # A WHERE clause: each document loaded is one filter evaluation (the credits model).
        self.has_filter = self._plan.where is not None
        # Each result depends on one row and results come in input order, so a page can stop
        # anywhere and resume at a row's position (core/query_page.py); otherwise every input
        # row may matter to the first result.
        self.streams = not (self.is_aggregate or self.has_order_by or self._tree.select.distinct)
        # Aggregates over all rows (no GROUP BY) whose select list reads nothing but those
        # aggregates: a page may stop at any row and hand the accumulators to the next page.
        self.carries_partials = self._plan.group_keys == [] and _reads_only_aggregates(self._tree.select)
        self.has_udfs = self._ctx.has_udfs         # calls udf.name(...): the caller must set_udfs

    @property
    def plan(self):
        """The compiled pipeline (query/plan.py), for callers that run it in pages."""
        return self._plan

    @property
    def work(self) -> list:
        """The cell counting rows made by FROM/JOIN across every run of this query."""
        return self._ctx.work

    def set_clock(self, now_ms: int) -> None:
        """What GetCurrentDateTime() and friends read during the next evaluation steps."""
        self._ctx.clock[0] = now_ms

    def set_udfs(self, udfs) -> None:
        """What udf.name(...) calls during the next evaluation steps: f(name, args) -> value, or
        None (a call is then an error). Set before every step, as the clock: a cached query may
        serve several requests whose steps interleave."""
        self._ctx.udfs[0] = udfs

    def _simple_filter(self):
        """The WHERE closure when a document maps to exactly one row (FROM c)."""
        tree = self._tree
        source = tree.source
        if source is None or tree.joins or source.kind != "expr" or not isinstance(source.expr, n.Name):
            return None
        return self._plan.where or (lambda row: True)

    def execute(self, documents: Iterable[dict], now_ms: int, cap: int | None = None, udfs=None) -> list:
        """The final result list of the query over documents; with cap, only its first cap
        results (documents are then pulled lazily and the run stops early where it can)."""
        self._ctx.clock[0] = now_ms
        self._ctx.udfs[0] = udfs
        return self._plan.run((), documents, cap)

    def rows_needed(self, cap: int | None = None) -> int | None:
        """How many rows, taken in ORDER BY order after WHERE, decide the first `cap` results
        (all of them when cap is None). None when any row may matter: aggregates, DISTINCT,
        SELECT VALUE (a row whose value is undefined yields nothing), JOIN, no TOP/LIMIT/cap."""
        select = self._tree.select
        if self._doc_filter is None or self.is_aggregate or select.distinct or select.value:
            return None
        take = self._plan.take
        if cap is not None:
            take = cap if take is None else min(cap, take)
        return None if take is None else self._plan.offset + take

    def filter_matches(self, doc: dict, now_ms: int) -> bool:
        """True when the WHERE clause is true for doc (patch conditions)."""
        self._ctx.clock[0] = now_ms
        self._ctx.udfs[0] = None
        if self._doc_filter is not None:
            return self._doc_filter((doc,)) is True
        return bool(self._plan.run((), (doc,), 1))

    def __repr__(self) -> str:
        return f"CompiledQuery({self.text!r})"


def _reads_only_aggregates(select: n.Select) -> bool:
    """Whether the select list reads the row only inside aggregate calls (no property
    reference or subquery elsewhere)."""
    stack = [item.expr for item in select.items]
    while stack:
        node = stack.pop()
        if isinstance(node, (n.Name, n.Subquery)):
            return False
        if not (isinstance(node, n.Call) and not node.udf and node.name.upper() in AGGREGATE_NAMES):
            stack.extend(n.children(node))
    return True


def compile_query(text: str, parameters: list | None = None, computed: dict | None = None) -> CompiledQuery:
    if type(text) is not str:
        raise QueryError("query text must be a string", 0)
    return CompiledQuery(text, parameters, computed)
