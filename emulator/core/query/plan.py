"""A compiled query: the pipeline that turns documents into results.

Theory of operation: `compile_plan` turns one `nodes.Query` (top level or
subquery) into a `Plan` whose `run(outer_row, documents, cap)` returns the
final result list. Stages, in the service's logical order:
  FROM/JOIN -> WHERE -> GROUP BY + aggregates -> ORDER BY -> SELECT
  -> DISTINCT -> OFFSET -> LIMIT / TOP (and `cap`, used by EXISTS and
  scalar subqueries that need only the first result).
Rows stream lazily; they are only materialised for ORDER BY and grouping,
and the run stops as soon as enough results exist. ORDER BY evaluates its
keys on the source row, before projection. A Plan is immutable after
compilation and can run any number of times.
"""

from __future__ import annotations

from dataclasses import dataclass

from regionlab.emulator.core.query import nodes as n
from regionlab.emulator.core.query.aggregate import new_accumulators
from regionlab.emulator.core.query.evaluate import AggregateSlots, Context, Scope, compile_expr, constant_of
from regionlab.emulator.core.query.grouping import check_grouped
from regionlab.emulator.core.query.ordering import sort_rows
from regionlab.emulator.core.query.projection import compile_projection
from regionlab.emulator.core.query.sources import compile_sources
from regionlab.emulator.core.query.values import UNDEFINED, canonical
from regionlab.emulator.core.limits import QUERY_COUNT_MAX



@dataclass
class Plan:
    produce: object
    where: object
    project: object  # row -> value, UNDEFINED means "no result for this row"
    order: list
    group_keys: list | None  # None: not an aggregate query
    aggregate_calls: list
    local_slots: int
    distinct: bool
    offset: int
    take: int | None
    levels: list | None = None  # the top level's FROM/JOIN expanders (sources.expand_rows)

    def run(self, outer_row: tuple, documents, cap: int | None) -> list:
        rows = self.produce(outer_row, documents)
        where = self.where
        if where is not None:
            rows = (row for row in rows if where(row) is True)
        if self.group_keys is not None:
            rows = self._grouped(outer_row, rows)
        elif self.order:
            rows = sort_rows(list(rows), self.order)
        return self._finish(rows, cap)

    def _grouped(self, outer_row: tuple, rows) -> list:
        groups: dict = {}
        for row in rows:
            self.group_add(groups, row)
        return self.group_rows(groups, outer_row)

    def group_add(self, groups: dict, row: tuple) -> None:
        """Feed one row (past WHERE) to its group's accumulators."""
        calls = self.aggregate_calls
        key = tuple(canonical(k(row)) for k in self.group_keys)
        group = groups.get(key)
        if group is None:
            group = groups[key] = (row, new_accumulators(calls))
        for accumulator, (_, argument) in zip(group[1], calls):
            accumulator.add(argument(row))

    def group_rows(self, groups: dict, outer_row: tuple) -> list:
        """One row per group, its aggregates' results appended, in order of first appearance."""
        keys = self.group_keys
        if not groups and not keys:
            empty_row = outer_row + (UNDEFINED,) * self.local_slots
            groups[()] = (empty_row, new_accumulators(self.aggregate_calls))
        return [row + tuple(acc.result() for acc in accs) for row, accs in groups.values()]

    def finish(self, rows, cap: int | None) -> list:
        """Projection, DISTINCT, OFFSET and LIMIT/TOP (and cap) over rows in final order."""
        return self._finish(rows, cap)

    def _finish(self, rows, cap: int | None) -> list:
        take = self.take if cap is None else (cap if self.take is None else min(cap, self.take))
        if take == 0:
            return []
        skip, seen, results = self.offset, set(), []
        project = self.project
        for row in rows:
            value = project(row)
            if value is UNDEFINED:
                continue
            if self.distinct:
                key = canonical(value)
                if key in seen:
                    continue
                seen.add(key)
            if skip:
                skip -= 1
                continue
            results.append(value)
            if take is not None and len(results) >= take:
                break
        return results


def compile_plan(query: n.Query, outer: Scope, ctx: Context, top_level: bool) -> Plan:
    scope, produce, levels = compile_sources(query, outer, ctx, top_level)
    where = compile_expr(query.where, scope, ctx) if query.where is not None else None
    if query.group_by:
        check_grouped(query, ctx)
    aggs = AggregateSlots(base=scope.size)
    project = compile_projection(query, scope, ctx, aggs)
    is_aggregate = bool(aggs.calls) or bool(query.group_by)
    if is_aggregate and query.order_by:
        raise ctx.error(query.order_by[0], "ORDER BY is not supported together with aggregates or GROUP BY")
    order = [(compile_expr(item.expr, scope, ctx), item.descending) for item in query.order_by]
    group_keys = [compile_expr(key, scope, ctx) for key in query.group_by] if is_aggregate else None
    offset, take = _paging(query, ctx)
    return Plan(produce, where, project, order, group_keys, aggs.calls, scope.size - outer.size,
                query.select.distinct, offset, take, levels)


def _paging(query: n.Query, ctx: Context) -> tuple[int, int | None]:
    offset = _count(query.offset, ctx, "OFFSET") if query.offset is not None else 0
    limits = [_count(node, ctx, word) for node, word in ((query.limit, "LIMIT"), (query.select.top, "TOP")) if node]
    return offset, (min(limits) if limits else None)


def _count(node: n.Node, ctx: Context, word: str) -> int:
    _, value = constant_of(node, ctx)
    if type(value) is not int or not 0 <= value <= QUERY_COUNT_MAX:
        raise ctx.error(node, f"{word} expects a non-negative integer, got {value!r}")
    return value


def subquery_compiler(query: n.Query, scope: Scope, ctx: Context):
    """The Context hook: compile a correlated subquery into run(row, cap)."""
    plan = compile_plan(query, scope, ctx, top_level=False)
    return lambda row, cap: plan.run(row, None, cap)
