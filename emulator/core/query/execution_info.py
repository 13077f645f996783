"""The query plan the service hands to SDKs (its "partitioned query execution info").

Theory of operation: an SDK that plans a cross-partition query itself asks the gateway for a
plan (`x-ms-cosmos-is-query-plan-request`), then sends the plan's `rewrittenQuery` to every
partition key range and merges what comes back: it sorts by `orderByItems`, combines aggregate
partials, removes duplicates and applies TOP/OFFSET/LIMIT. `plan_of` builds that plan from a
compiled query, in the service's shape (queryInfo: distinctType, top, offset, limit, orderBy,
orderByExpressions, groupByExpressions, groupByAliases, aggregates,
groupByAliasToAggregateType, rewrittenQuery, hasSelectValue, dCountInfo; queryRanges). The
rewritten query is real SQL this engine (like the service's) runs per partition:

* ORDER BY: `SELECT <root>._rid, [{"item": e1}, ...] AS orderByItems, <payload> AS payload
  FROM ... WHERE ({documentdb-formattableorderbyquery-filter}) AND (<where>) ORDER BY ...`; the
  SDKs replace the placeholder with `true` (or a resume filter). The payload is the root
  alias for SELECT *, the VALUE expression, or an object of the select list by its names.
* `SELECT VALUE AGG(x)`: `SELECT VALUE [{"item": AGG(x)}] ...`; AVG sends its partial as
  `{"sum": SUM(x), "count": COUNT(x)}`, which the SDKs combine; MIN and MAX send
  `{"item": MAX(x), "item2": {"max": MAX(x), "count": COUNT(x)}}` (the Python SDK reads item,
  the JS SDK item2, which tells an empty partition from one whose maximum is null).
* GROUP BY, and aggregates outside SELECT VALUE (one group of everything): `SELECT
  [{"item": g1}, ...] AS groupByItems, <payload> AS payload FROM ... WHERE ... GROUP BY ...`
  (no groupByItems without GROUP BY). The payload is an object of the select list by its
  names (queryInfo.groupByAliases), each aggregate item sent as the partial above without
  the array (`{"n": {"item": COUNT(1)}}`), each other item as its value; or, for SELECT
  VALUE, the VALUE partial or expression itself. groupByAliasToAggregateType maps each name
  to its aggregate ("Count", ...) or null; the SDK merges the groups' partials per name.
* DISTINCT, TOP, OFFSET/LIMIT: the query without them; TOP, OFFSET and LIMIT become a per-
  partition `TOP offset+limit` (no partition needs to send more than that), except over
  groups, where every partition must send every group.

`plannable` says whether a query has one of these shapes; an aggregate inside another
expression (`COUNT(1) + 1`, `{"n": COUNT(1)}`), DISTINCT with GROUP BY or aggregates, and
DISTINCT with ORDER BY do not (the gateway then runs them whole in either query mode).
`needs_pipeline` says whether the service would refuse to run a query whole across partitions
(400/1004), i.e. whether it has ORDER BY, aggregates, DISTINCT, TOP, OFFSET/LIMIT or GROUP BY.
`features_needed` names what a client must list in `x-ms-cosmos-supported-query-features` to
get the plan, as the service asks: GroupBy for GROUP BY, NonValueAggregate for an aggregate
outside SELECT VALUE, Aggregate for a VALUE aggregate (the Python SDK lists neither GroupBy
nor NonValueAggregate, so the service refuses it those plans).
Expression texts are cut from the query text by its tokens, so the rewrite keeps the user's
spelling (parameters included: the SDKs send the parameters with the rewritten query).
"""
from __future__ import annotations

import json

from regionlab.emulator.core.query import nodes as n
from regionlab.emulator.core.query.lexer import tokenize
from regionlab.emulator.core.query.projection import _named

PLAN_VERSION = 2
ORDER_BY_FILTER = "{documentdb-formattableorderbyquery-filter}"
FULL_RANGE = {"min": "", "max": "FF", "isMinInclusive": True, "isMaxInclusive": False}
AGGREGATES = {"COUNT": "Count", "SUM": "Sum", "MIN": "Min", "MAX": "Max", "AVG": "Average"}
_CLAUSES = frozenset({"FROM", "WHERE", "GROUP", "ORDER", "OFFSET", "LIMIT"})
_OPEN, _CLOSE = frozenset("([{"), frozenset(")]}")
# The feature names of `x-ms-cosmos-supported-query-features` a plan needs.
FEATURE_ORDER_BY, FEATURE_MULTIPLE_ORDER_BY = "OrderBy", "MultipleOrderBy"
FEATURE_AGGREGATE, FEATURE_DISTINCT, FEATURE_TOP = "Aggregate", "Distinct", "Top"
FEATURE_OFFSET_LIMIT, FEATURE_GROUP_BY = "OffsetAndLimit", "GroupBy"
FEATURE_NON_VALUE_AGGREGATE = "NonValueAggregate"


def _tree(query):
    return query._tree


def _aggregate_name(expr) -> str | None:
    """The aggregate's name when expr is an aggregate call itself, else None."""
    if isinstance(expr, n.Call) and not expr.udf and expr.name.upper() in AGGREGATES:
        return expr.name.upper()
    return None


def _holds_aggregate(node) -> bool:
    """Whether an aggregate call appears anywhere in node (a subquery's own aggregates aside)."""
    return n.first(node, _aggregate_name) is not None


def _value_aggregate(tree) -> str | None:
    """The aggregate's name when the query is `SELECT VALUE AGG(x) ...`, else None."""
    select = tree.select
    if not select.value:
        return None
    return _aggregate_name(select.items[0].expr)


def merges_undefined_to_null(query) -> bool:
    """Whether the query is `SELECT VALUE MIN/MAX/AVG/SUM(x)` alone (no GROUP BY, TOP, OFFSET or
    LIMIT): across partition key ranges the SDK merges its per-range partials, and what the
    Python SDK's merge makes of an undefined result (nothing to aggregate, mixed types) is `null`
    (`[None]`, as azure-sdk-for-python's test_aggregate expects), where one range's own answer
    is no row at all."""
    tree = _tree(query)
    return (_value_aggregate(tree) in ("MIN", "MAX", "AVG", "SUM") and not tree.group_by
            and tree.select.top is None and tree.offset is None and tree.limit is None)


def _grouped(query) -> bool:
    """Whether the SDK merges the query's results by group: GROUP BY, or aggregates outside
    SELECT VALUE (the service plans `SELECT COUNT(1) FROM c` as one group of everything)."""
    tree = _tree(query)
    return bool(tree.group_by) or (query.is_aggregate and not tree.select.value)


def needs_pipeline(query) -> bool:
    tree = _tree(query)
    return bool(query.is_aggregate or tree.order_by or tree.select.distinct or tree.select.top is not None
                or tree.offset is not None or tree.limit is not None)


def plannable(query) -> bool:
    tree = _tree(query)
    if tree.source is None:
        return False
    if _grouped(query):
        select = tree.select
        if select.distinct or select.star or tree.order_by:
            return False
        return all(_aggregate_name(item.expr) is not None or not _holds_aggregate(item.expr)
                   for item in select.items)
    if query.is_aggregate:
        return _value_aggregate(tree) is not None and not tree.select.distinct
    return not (tree.order_by and tree.select.distinct)


def composes_aggregates(query) -> bool:
    """Whether a select item holds an aggregate inside another expression (`COUNT(1) + 1`,
    `{"n": COUNT(1)}`): the service's plan generator refuses these ("Compositions of aggregates
    and other expressions are not allowed.")."""
    return any(_holds_aggregate(item.expr) and _aggregate_name(item.expr) is None
               for item in _tree(query).select.items)


def features_needed(query) -> list[str]:
    tree = _tree(query)
    out = []
    if tree.order_by:
        out.append(FEATURE_MULTIPLE_ORDER_BY if len(tree.order_by) > 1 else FEATURE_ORDER_BY)
    if tree.group_by:
        out.append(FEATURE_GROUP_BY)
    if any(_holds_aggregate(item.expr) for item in tree.select.items):
        out.append(FEATURE_AGGREGATE if tree.select.value else FEATURE_NON_VALUE_AGGREGATE)
    if tree.select.distinct:
        out.append(FEATURE_DISTINCT)
    if tree.select.top is not None:
        out.append(FEATURE_TOP)
    if tree.offset is not None or tree.limit is not None:
        out.append(FEATURE_OFFSET_LIMIT)
    return out


def plan_of(query) -> dict:
    """The service-shaped plan of a plannable query."""
    tree = _tree(query)
    pieces = _Pieces(query.text)
    plan = query.plan
    aggregate = _value_aggregate(tree)
    grouped = _grouped(query)
    offset = plan.offset if tree.offset is not None else None
    limit = plan.take if tree.limit is not None else None
    top = plan.take if tree.select.top is not None and tree.limit is None else None
    order = [item.descending for item in tree.order_by]
    aliases = _aliases(tree) if grouped else {}
    info = {
        "distinctType": ("Ordered" if tree.order_by else "Unordered") if tree.select.distinct else "None",
        "top": top, "offset": offset, "limit": limit,
        "orderBy": ["Descending" if d else "Ascending" for d in order],
        "orderByExpressions": pieces.order_texts(),
        "groupByExpressions": pieces.group_texts(),
        "groupByAliases": list(aliases),
        "aggregates": [AGGREGATES[aggregate]] if aggregate else [],
        "groupByAliasToAggregateType": aliases,
        "rewrittenQuery": (_rewrite_grouped(tree, pieces, aggregate) if grouped
                           else _rewrite(tree, pieces, plan, aggregate)),
        "hasSelectValue": bool(tree.select.value),
        "dCountInfo": None,
        "hasNonStreamingOrderBy": False,
    }
    return {"partitionedQueryExecutionInfoVersion": PLAN_VERSION, "queryInfo": info, "queryRanges": [FULL_RANGE]}


def _aliases(tree) -> dict:
    """{select-list name: its aggregate type or None} of a grouped non-VALUE query."""
    if tree.select.value:
        return {}
    out = {}
    for name, item in _named(tree.select.items):
        agg = _aggregate_name(item.expr)
        out[name] = AGGREGATES[agg] if agg else None
    return out


def _partial(aggregate: str, arg: str) -> str:
    """The object a partition sends for AGG(arg): {"item": ...} (and "item2" for MIN/MAX)."""
    if aggregate == "AVG":
        return f'{{"item": {{"sum": SUM({arg}), "count": COUNT({arg})}}}}'
    if aggregate in ("MIN", "MAX"):
        low = aggregate.lower()
        return (f'{{"item": {aggregate}({arg}), '
                f'"item2": {{"{low}": {aggregate}({arg}), "count": COUNT({arg})}}}}')
    return f'{{"item": {aggregate}({arg})}}'


def _call_argument(text: str) -> str:
    """The argument text of a call's text `NAME(arg)`."""
    return text[text.index("(") + 1:text.rindex(")")].strip()


def _rewrite(tree, pieces: "_Pieces", plan, aggregate: str | None) -> str:
    per_partition = None
    if plan.take is not None:
        per_partition = plan.offset + plan.take
    top = f"TOP {per_partition} " if per_partition is not None else ""
    rest = pieces.from_through_where()
    if aggregate is not None:
        return f'SELECT {top}VALUE [{_partial(aggregate, pieces.value_aggregate_argument())}] {rest}'
    if tree.order_by:
        root = tree.source.alias
        items = ", ".join(f'{{"item": {t}}}' for t in pieces.order_texts())
        where = pieces.where_text()
        cond = f"({ORDER_BY_FILTER})" + (f" AND ({where})" if where else "")
        return (f"SELECT {top}{root}._rid, [{items}] AS orderByItems, {_payload(tree, pieces)} AS payload "
                f"{pieces.from_text()} WHERE {cond} ORDER BY {pieces.order_clause()}")
    distinct = "DISTINCT " if tree.select.distinct else ""
    return f"SELECT {distinct}{top}{pieces.select_list()} {rest}"


def _rewrite_grouped(tree, pieces: "_Pieces", aggregate: str | None) -> str:
    """`SELECT [groupByItems,] payload FROM ... GROUP BY ...`: one row per group per partition.
    No TOP: a group's rows may sit in every partition, so each must send all its groups."""
    keys = ""
    if tree.group_by:
        keys = "[" + ", ".join(f'{{"item": {t}}}' for t in pieces.group_texts()) + "] AS groupByItems, "
    texts = pieces.select_item_texts(tree.select.items)
    if tree.select.value:
        payload = f"[{_partial(aggregate, _call_argument(texts[0]))}]" if aggregate else texts[0]
    else:
        fields_ = []
        for (name, item), text in zip(_named(tree.select.items), texts):
            agg = _aggregate_name(item.expr)
            fields_.append(f"{json.dumps(name)}: {_partial(agg, _call_argument(text)) if agg else text}")
        payload = "{" + ", ".join(fields_) + "}"
    return f"SELECT {keys}{payload} AS payload {pieces.from_through_where()}"


def _payload(tree, pieces: "_Pieces") -> str:
    select = tree.select
    if select.star:
        return tree.source.alias
    texts = pieces.select_item_texts(select.items)
    if select.value:
        return texts[0]
    names = [name for name, _ in _named(select.items)]
    return "{" + ", ".join(f"{json.dumps(name)}: {t}" for name, t in zip(names, texts)) + "}"


class _Pieces:
    """The top-level clauses of a query's text, found by its tokens at bracket depth 0."""

    def __init__(self, text: str):
        self.text = text
        self.tokens = tokenize(text)
        self.at: dict = {}          # clause keyword -> index of its token (first at depth 0)
        depth = 0
        for i, t in enumerate(self.tokens):
            if t.kind == "op" and t.value in _OPEN:
                depth += 1
            elif t.kind == "op" and t.value in _CLOSE:
                depth -= 1
            elif depth == 0 and t.kind == "keyword" and t.value in _CLAUSES | {"SELECT", "VALUE", "TOP"}:
                self.at.setdefault(t.value, i)

    def _span(self, first: int, stop: int) -> str:
        """The text of tokens[first:stop]."""
        if stop <= first:
            return ""
        end = self.tokens[stop - 1]
        return self.text[self.tokens[first].pos:end.pos + len(end.text)].strip()

    def _next_clause(self, after: int) -> int:
        later = [i for kw, i in self.at.items() if kw in _CLAUSES and i > after]
        return min(later) if later else len(self.tokens) - 1

    def _segments(self, first: int, stop: int) -> list[tuple[int, int]]:
        out, depth, start = [], 0, first
        for i in range(first, stop):
            t = self.tokens[i]
            if t.kind == "op" and t.value in _OPEN:
                depth += 1
            elif t.kind == "op" and t.value in _CLOSE:
                depth -= 1
            elif depth == 0 and t.kind == "op" and t.value == ",":
                out.append((start, i))
                start = i + 1
        out.append((start, stop))
        return out

    def _list_start(self) -> int:
        """Index of the first token of the select list (after DISTINCT, TOP n, VALUE)."""
        i = self.at["SELECT"] + 1
        if self.tokens[i].value == "DISTINCT" and self.tokens[i].kind == "keyword":
            i += 1
        if self.tokens[i].value == "TOP" and self.tokens[i].kind == "keyword":
            i += 2
        if self.tokens[i].value == "VALUE" and self.tokens[i].kind == "keyword":
            i += 1
        return i

    def select_list(self) -> str:
        """The select list as written, `VALUE` included (without DISTINCT and TOP)."""
        i = self.at["SELECT"] + 1
        if self.tokens[i].value == "DISTINCT" and self.tokens[i].kind == "keyword":
            i += 1
        if self.tokens[i].value == "TOP" and self.tokens[i].kind == "keyword":
            i += 2
        return self._span(i, self.at["FROM"])

    def select_item_texts(self, items) -> list[str]:
        """Each select item's expression, its alias left off."""
        out = []
        for (first, stop), item in zip(self._segments(self._list_start(), self.at["FROM"]), items):
            if stop - first > 2 and self.tokens[stop - 2].value == "AS" and self.tokens[stop - 2].kind == "keyword":
                stop -= 2
            elif item.alias is not None and stop - first > 1 and self.tokens[stop - 1].kind == "ident":
                stop -= 1
            out.append(self._span(first, stop))
        return out

    def value_aggregate_argument(self) -> str:
        """The argument text of `SELECT VALUE AGG(arg)`."""
        first = self._list_start() + 2          # past the function name and "("
        return self._span(first, self.at["FROM"] - 1)

    def from_text(self) -> str:
        """FROM and its JOINs, up to WHERE or the next clause."""
        start = self.at["FROM"]
        return self._span(start, self._next_clause(start))

    def where_text(self) -> str:
        if "WHERE" not in self.at:
            return ""
        start = self.at["WHERE"]
        return self._span(start + 1, self._next_clause(start))

    def from_through_where(self) -> str:
        """FROM, JOINs, WHERE and GROUP BY, as written (ORDER BY, OFFSET and LIMIT left off)."""
        start = self.at["FROM"]
        stops = [self.at[kw] for kw in ("ORDER", "OFFSET", "LIMIT") if kw in self.at]
        return self._span(start, min(stops) if stops else len(self.tokens) - 1)

    def order_clause(self) -> str:
        if "ORDER" not in self.at:
            return ""
        start = self.at["ORDER"] + 2               # past ORDER BY
        return self._span(start, self._next_clause(start - 1))

    def group_texts(self) -> list[str]:
        """Each GROUP BY expression as written."""
        if "GROUP" not in self.at:
            return []
        start = self.at["GROUP"] + 2               # past GROUP BY
        return [self._span(first, stop) for first, stop in self._segments(start, self._next_clause(start - 1))]

    def order_texts(self) -> list[str]:
        if "ORDER" not in self.at:
            return []
        start = self.at["ORDER"] + 2
        out = []
        for first, stop in self._segments(start, self._next_clause(start - 1)):
            if self.tokens[stop - 1].kind == "keyword" and self.tokens[stop - 1].value in ("ASC", "DESC"):
                stop -= 1
            out.append(self._span(first, stop))
        return out
