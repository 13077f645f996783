"""One page of a SQL query over a container: where it resumes, what it may spend, where it stops.

Theory of operation. The caller feeds documents as (partition ordinal, version) in *input
order*: the partitions in scope in order, inside each by key (partition key JSON, id), the
order read-feed paging walks. Each document expands into rows (FROM and JOIN; see
query/sources.py `expand_rows`), each at a cursor (its element index at every level). A row's
`Position` (partition, key, cursor) orders all rows totally, in the order a scan makes them.

Work is counted in units, not time, so a page is deterministic and the core stays clock-free:
one unit per document loaded, one more per DOC_BYTES_PER_UNIT of its JSON (a stored document
is parsed from its body when a query loads it: store.Version), and one per row a FROM or JOIN
makes, in subqueries too. Every page runs in slices (`_Run.step`): a slice spends at most
QUERY_SLICE_MAX_WORK_UNITS units (about a millisecond of CPU on the reference machine:
bench/query_budget.py, docs/performance.md) and returns, and the caller lets every other
request in before the next (all regions share one event loop). A page's reading is one
generator that suspends between slices, so a slice resumes exactly where the last stopped;
evaluating one row's own expressions is not interruptible.

Streaming queries (no ORDER BY, aggregate, GROUP BY or DISTINCT: each result comes from one
row, in input order) page by position. A `StreamRun` runs from its continuation's position
and stops at max_items results, before a result that would take the page past
PAGE_MAX_BYTES (a page always holds at least one), or once it spent
QUERY_PAGE_MAX_WORK_UNITS units; its `StreamState` is where to resume, with the OFFSET still to
skip and the TOP/LIMIT still to take. A page that ran out of work may hold no results at all,
as the service's do; the SDKs follow the continuation.

Blocking queries (the rest) must see every row before the first result is known. Aggregates
over all rows whose select list reads nothing else (`carries_partials`: `SELECT VALUE
COUNT(1)`, `SELECT SUM(c.n) AS s, MAX(c.m) AS m`) end a page once it spent
QUERY_AGGREGATE_PAGE_MAX_WORK_UNITS units, empty, with a `PartialState`: the position of the
next row and each accumulator's state (query/aggregate.py), so the last page returns what one
page would have. (The SDKs' aggregate pipelines combine partial results from every page of
every partition key range, e.g. azure-cosmos's aggregate endpoint component, so the service may
return one per page; but a client that runs no query plan, as the Python SDK does not in the
default query mode, would return each partial as a result: here the partials ride the
continuation instead, whatever the client.) A state over QUERY_PARTIALS_MAX_BYTES (MAX over
long strings) does not: that page runs on. The other blocking queries (GROUP BY, ORDER BY,
DISTINCT) read all their inputs in one page, in slices; the caller refuses a page past
QUERY_REQUEST_MAX_WORK_UNITS. ORDER BY pages resume after the last row returned in the total
order (ORDER BY values, then position) and keep only the best rows the page needs; other pages
resume at a count of results already returned.

Nothing is pinned: each page reads the partitions as they are now. A document unchanged while
a query pages is returned exactly once (its position does not move); one created, changed or
deleted meanwhile is seen or not depending on whether its position (for ORDER BY, its value)
is ahead of the cursor, as the service's continuations resume by position too (an aggregate's
partials count the rows behind its position as they were read). Count continuations (GROUP
BY, DISTINCT): a change behind the cursor may shift a later page by one.
"""
from __future__ import annotations

import base64
import json
from typing import Callable, NamedTuple

from .errors import bad_request
from .query.aggregate import new_accumulators, resumed
from .query.ordering import sort_rows
from .query.sources import expand_rows
from .query.values import UNDEFINED, canonical, sort_key
from .validation import text_nests_at_most
from .limits import (PAGE_MAX_BYTES, QUERY_AGGREGATE_PAGE_MAX_WORK_UNITS, QUERY_PAGE_MAX_WORK_UNITS,
                     QUERY_PARTIALS_MAX_BYTES, QUERY_SLICE_MAX_WORK_UNITS)

# Parsing a stored document takes about as long as one unit of other work per 100 bytes of its
# JSON (bench/query_budget.py: nested documents of ~350 bytes; flat 1 KB ones parse faster).
DOC_BYTES_PER_UNIT = 100


def _load(v, work: list) -> dict:
    """The document of v, counting the work of parsing it."""
    body = v.body
    if body is not None:
        work[0] += len(body) // DOC_BYTES_PER_UNIT
    return v.doc


class Position(NamedTuple):
    part: int               # ordinal of the partition among those in scope
    key: tuple              # (partition key JSON, id) of the document
    rows: tuple | None      # cursor to resume at inside that document; None: after all of it


class StreamState(NamedTuple):
    at: Position | None     # None: from the first document
    skip: int               # OFFSET results still to skip
    take: int | None        # TOP/LIMIT results still to return (None: no limit)


class PartialState(NamedTuple):
    at: Position            # the next row to read
    partials: list          # each aggregate's accumulator state (query/aggregate.py partial())


class Page(NamedTuple):
    raw: list               # the results, serialised
    loaded: int             # documents loaded
    state: object | None    # what to resume at (StreamState, OrderState, PartialState, int), None when done
    work: int               # work units spent


Encode = Callable[[object, object], bytes]     # (result, version it came from) -> JSON bytes


def first_state(query) -> StreamState:
    return StreamState(None, query.plan.offset, query.plan.take)


def constant_page(query, encode: Encode, now_ms: int, udfs=None) -> Page:
    """The whole result of a query without FROM (one row, whatever the documents)."""
    return Page([encode(r, None) for r in query.execute((), now_ms, udfs=udfs)], 0, None, 0)


def _stored(row):
    return _STORED


_STORED = object()          # stream_page: "the result is the document as stored" (its body)
_ONE_ROW = ((None,),)       # the one row of a document not parsed
_FIRST_ROW = (0,)           # a position's cursor at that row: a page that stopped before it
_PAST_ROW = (1,)            # after it: a page whose work ran out right after it


class _Run:
    """A page run one slice at a time: `step()` until it returns True, then `page()`. The
    page's reading is a generator (`_read`) that suspends when the slice's work is spent and
    returns the results and the state to resume at (None: the query is done) when the page
    ends; `pause_at` and `page_end` are the work counts at which it must yield or end."""

    def __init__(self, query, page_work_max: int):
        self.query, self.plan = query, query.plan
        self.page_work_max = page_work_max
        self.loaded = 0
        self.work = 0           # units spent by this page
        self.slices = 0
        self.pause_at = self.page_end = 0
        self.result = None      # (results, state) once the page ended
        self._reading = None

    def step(self, now_ms: int, work_max: int = QUERY_SLICE_MAX_WORK_UNITS, udfs=None) -> bool:
        """Spend at most about work_max units; True once the page has ended. udfs: what the
        query's udf.name(...) calls run (CompiledQuery.set_udfs)."""
        if self.result is not None:
            return True
        self.query.set_clock(now_ms)
        self.query.set_udfs(udfs)
        work = self.query.work
        began = work[0]
        self.page_end = began + max(self.page_work_max - self.work, 0)
        self.pause_at = min(began + work_max, self.page_end)
        self.slices += 1
        try:
            next(self._reading)
        except StopIteration as ended:
            self.result = ended.value
        self.work += work[0] - began
        return self.result is not None


class StreamRun(_Run):
    """One page of a streaming query from inputs, which must start at state.at's document.

    With `where_implied` (the caller's scope guarantees every input passes WHERE) a query whose
    results are its input documents (`returns_documents`: SELECT * FROM c) takes each document
    as its stored body without parsing it. Work, positions and continuations are exactly those
    of parsing it (one document, one row), so pages and charges do not change."""

    def __init__(self, query, inputs, state: StreamState, max_items: int, encode: Encode,
                 page_work_max: int = QUERY_PAGE_MAX_WORK_UNITS, bytes_max: int = PAGE_MAX_BYTES,
                 where_implied: bool = False):
        super().__init__(query, page_work_max)
        self._reading = self._read(inputs, state, max_items, encode, bytes_max, where_implied)

    def page(self) -> Page:
        out, state = self.result
        return Page(out, self.loaded, state, self.work)

    def _read(self, inputs, state, max_items, encode, bytes_max, where_implied):
        query, plan = self.query, self.plan
        levels, where, project = plan.levels, plan.where, plan.project
        whole = where_implied and query.returns_documents
        work = query.work
        at, skip, take = state
        out, nbytes = [], 0
        cursor = [0] * len(levels)
        # One FROM and no JOIN (most queries): its values are the rows, walked without a generator.
        single = levels[0] if len(levels) == 1 else None
        if take == 0:
            return out, None
        last_part = last_key = None         # where the document read before v was
        for part, v in inputs:
            if part != last_part:
                if out:
                    # The service's gateway serves a cross-partition query one partition key range
                    # at a time: a page never spans two ranges (it resumes after the last one's end).
                    return out, StreamState(Position(last_part, last_key, None), skip, take)
                last_part = part
            last_key = v.key
            self.loaded += 1
            start = at.rows if at is not None and part == at.part and v.key == at.key else None
            test, make = where, project
            if whole and (start is None or start == _FIRST_ROW):
                work[0] += len(v.body) // DOC_BYTES_PER_UNIT + 2     # as _load and its one row count
                cursor[0] = 0
                rows, test, make = _ONE_ROW, None, _stored
            elif whole and start == _PAST_ROW:                    # its one row was the last page's
                work[0] += len(v.body) // DOC_BYTES_PER_UNIT + 1
                rows = ()
            else:
                doc = _load(v, work)
                values = single(doc) if single is not None else None
                if values is not None and start is None and len(values) == 1:
                    rows = ((values[0],),)
                    cursor[0] = 0
                    work[0] += 2                # the document and its one row
                else:
                    work[0] += 1
                    rows = expand_rows(levels, doc, start, cursor, work)
            for row in rows:
                if test is None or test(row) is True:
                    value = make(row)
                    if value is not UNDEFINED:
                        if skip:
                            skip -= 1
                        else:
                            raw = None if len(out) >= max_items else v.body if value is _STORED else encode(value, v)
                            if raw is None or (out and nbytes + len(raw) > bytes_max):
                                here = Position(part, v.key, tuple(cursor))     # this row comes next
                                return out, StreamState(here, skip, take)
                            out.append(raw)
                            nbytes += len(raw)
                            if take is not None:
                                take -= 1
                                if take == 0:
                                    return out, None
                if work[0] >= self.pause_at:
                    if work[0] >= self.page_end:
                        return out, StreamState(_next_row(part, v, cursor), skip, take)
                    yield
            if work[0] >= self.pause_at:
                if work[0] >= self.page_end:
                    return out, StreamState(Position(part, v.key, None), skip, take)
                yield
        return out, None


def _next_row(part: int, v, cursor: list) -> Position:
    """The position of the row after the one at cursor (in v's document)."""
    return Position(part, v.key, tuple(cursor[:-1]) + (cursor[-1] + 1,))


def stream_page(query, inputs, state: StreamState, max_items: int, encode: Encode, now_ms: int,
                work_max: int = QUERY_PAGE_MAX_WORK_UNITS, bytes_max: int = PAGE_MAX_BYTES,
                where_implied: bool = False) -> Page:
    """A whole page of a streaming query at once (StreamRun run through all its slices)."""
    run = StreamRun(query, inputs, state, max_items, encode, work_max, bytes_max, where_implied)
    while not run.step(now_ms):
        pass
    return run.page()


# ---- blocking queries ----------------------------------------------------------------------
_NEVER = float("inf")       # the work budget of a page that cannot end before its inputs do


class _Desc:
    """A sort key that orders in reverse (an ORDER BY ... DESC term inside one total key)."""
    __slots__ = ("key",)

    def __init__(self, key):
        self.key = key

    def __lt__(self, other):
        return other.key < self.key

    def __eq__(self, other):
        return self.key == other.key

    def __gt__(self, other):
        return other.key > self.key


class OrderState(NamedTuple):
    returned: int           # results returned by earlier pages
    values: list            # ORDER BY values of the last row returned (UNDEFINED kept)
    at: Position            # its position


def order_key(values: list, descending: list, at: Position) -> tuple:
    """The total order of ORDER BY pages: the terms in their directions, then the position."""
    terms = tuple(_Desc(sort_key(v)) if d else sort_key(v) for v, d in zip(values, descending))
    return terms + (at.part, at.key, at.rows)


class BlockingRun(_Run):
    """One page of a blocking query, run in slices (`_Run`). `state` is an OrderState for
    ORDER BY without DISTINCT, a PartialState for a query that `carries_partials` resumed
    mid-way, else the count of results returned by earlier pages (0 on the first). Only a
    query that carries partials ends a page at its work budget (`page_work_max`), with an
    empty page and a PartialState (unless its partials would pass QUERY_PARTIALS_MAX_BYTES);
    the others read every input in this page however long it takes (the caller bounds it)."""

    def __init__(self, query, inputs, state, max_items: int, encode: Encode,
                 page_work_max: int = QUERY_AGGREGATE_PAGE_MAX_WORK_UNITS):
        super().__init__(query, page_work_max if query.carries_partials else _NEVER)
        self.max_items, self.encode = max_items, encode
        self.state = state
        plan = self.plan
        self.by_position = bool(plan.order) and not plan.distinct
        returned = state.returned if isinstance(state, OrderState) else 0 if isinstance(state, PartialState) else state
        self.returned = returned
        self.want = None if plan.take is None else max(plan.take - returned, 0)
        page = max_items if self.want is None else min(max_items, self.want)
        self.skip = plan.offset if returned == 0 and not isinstance(state, OrderState) else 0
        self.keep = self.skip + page + 1        # one more than the page tells whether more follow
        self.page_items = page
        self.best: list = []                    # ORDER BY: (total key, value, row, version)
        self.bound = None                       # ORDER BY: the worst key kept once best is full
        self.rows: list = []                    # ORDER BY + DISTINCT: (row, version)
        self.groups: dict = {}
        self.seen: set = set()                  # DISTINCT without ORDER BY
        self.distinct_found: list = []          # (value, version) of the distinct results wanted
        self.distinct_count = 0
        self.after = None
        self.before = 0                         # ORDER BY rows at or before the position
        self.partial = None                     # the PartialState this page ended at
        at = None
        if isinstance(state, OrderState):
            self.after = order_key(state.values, [d for _, d in plan.order], state.at)
        elif isinstance(state, PartialState):
            at = state.at
            self.groups[()] = ((UNDEFINED,) * plan.local_slots, resumed(plan.aggregate_calls, state.partials))
        self._reading = self._read(inputs, at)

    def _read(self, inputs, at):
        levels, where, work = self.plan.levels, self.plan.where, self.query.work
        take = self._taker()
        cursor = [0] * len(levels)
        for part, v in inputs:
            self.loaded += 1
            work[0] += 1
            start = at.rows if at is not None and part == at.part and v.key == at.key else None
            for row in expand_rows(levels, _load(v, work), start, cursor, work):
                if (where is None or where(row) is True) and take(part, v, row, cursor):
                    return True             # enough read (DISTINCT found its page)
                if work[0] >= self.pause_at:
                    if work[0] >= self.page_end and self._ends_at(_next_row(part, v, cursor)):
                        return True
                    yield
            if work[0] >= self.pause_at:
                if work[0] >= self.page_end and self._ends_at(Position(part, v.key, None)):
                    return True
                yield
        return True

    def _ends_at(self, at: Position) -> bool:
        """Whether the page can end here with its partials (else it runs to its end)."""
        group = self.groups.get(())         # none until a row passed WHERE
        accumulators = group[1] if group is not None else new_accumulators(self.plan.aggregate_calls)
        partial = PartialState(at, [a.partial() for a in accumulators])
        if len(encode_state(partial)) > QUERY_PARTIALS_MAX_BYTES:
            self.page_work_max = self.page_end = _NEVER
            return False
        self.partial = partial
        return True

    def _taker(self):
        plan = self.plan
        if plan.group_keys is not None:
            return lambda part, v, row, cursor: plan.group_add(self.groups, row)
        if self.by_position:
            return self._take_ordered
        if plan.order:
            return lambda part, v, row, cursor: self.rows.append((row, v))
        return self._take_distinct

    def _take_ordered(self, part, v, row, cursor) -> bool:
        plan = self.plan
        terms = tuple(_Desc(sort_key(k(row))) if d else sort_key(k(row)) for k, d in plan.order)
        key = terms + (part, v.key, tuple(cursor))
        if self.after is not None and not self.after < key:
            self.before += 1        # at or before the last row returned: an earlier page's
            return False
        if self.bound is not None and not key < self.bound:
            return False            # behind the rows already kept: it cannot make this page
        value = plan.project(row)
        if value is UNDEFINED:
            return False
        best = self.best
        best.append((key, value, row, v))
        if len(best) >= 2 * self.keep + 64:     # keep the best few, amortised
            best.sort(key=_first)
            del best[self.keep:]
            self.bound = best[-1][0]
        return False

    def _take_distinct(self, part, v, row, cursor) -> bool:
        value = self.plan.project(row)
        if value is UNDEFINED:
            return False
        c = canonical(value)
        if c in self.seen:
            return False
        self.seen.add(c)
        index = self.distinct_count - self.plan.offset - self.returned
        self.distinct_count += 1
        if index >= 0:
            self.distinct_found.append((value, v))
            return len(self.distinct_found) >= self.page_items + 1      # enough: stop reading
        return False

    def page(self, bytes_max: int = PAGE_MAX_BYTES) -> Page:
        """The page, once step() returned True."""
        plan = self.plan
        if self.partial is not None:
            return Page([], self.loaded, self.partial, self.work)
        if self.by_position:
            self.best.sort(key=_first)
            ranked = self.best[self.skip:self.skip + self.page_items + 1]
            items = [(value, v) for _, value, _, v in ranked]
        elif plan.group_keys is not None:
            results = plan.finish(plan.group_rows(self.groups, ()), self.returned + self.page_items + 1)
            items = [(r, None) for r in results[self.returned:]]
        elif plan.order:
            ordered = sort_rows([row for row, _ in self.rows], plan.order)
            results = plan.finish(ordered, self.returned + self.page_items + 1)
            items = [(r, None) for r in results[self.returned:]]
        else:
            items = self.distinct_found
        raw, nbytes = [], 0
        for value, v in items[:self.page_items]:
            body = self.encode(value, v)
            if raw and nbytes + len(body) > bytes_max:
                break
            raw.append(body)
            nbytes += len(body)
        state = None
        if len(items) > len(raw) and (self.want is None or len(raw) < self.want):
            if self.by_position:        # items is not empty, so neither is raw
                key, _, row, v = ranked[len(raw) - 1]
                values = [k(row) for k, _ in plan.order]
                state = OrderState(self.returned + len(raw), values, Position(key[-3], key[-2], key[-1]))
            else:
                state = self.returned + len(raw)
        return Page(raw, self.loaded, state, self.work)


def _first(item):
    return item[0]


# ---- continuations -------------------------------------------------------------------------
def encode_state(state) -> str:
    """The opaque x-ms-continuation of a page's state (JSON in URL-safe base64)."""
    if isinstance(state, StreamState):
        at = None if state.at is None else [state.at.part, *state.at.key, state.at.rows]
        data = {"s": at, "skip": state.skip, "take": state.take}
    elif isinstance(state, OrderState):
        values = [[] if v is UNDEFINED else [v] for v in state.values]
        data = {"o": [state.returned, values, state.at.part, *state.at.key, state.at.rows]}
    elif isinstance(state, PartialState):
        data = {"p": [state.partials, state.at.part, *state.at.key, state.at.rows]}
    else:
        data = {"n": state}
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode()


def decode_state(query, token: str | None, parts: int):
    """The state a continuation names, checked against the query's kind and the number of
    partitions in scope; None for a first page (no token)."""
    if not token:
        return first_state(query) if query.streams else 0
    try:
        text = base64.urlsafe_b64decode(token.encode()).decode()
        if not text_nests_at_most(text):             # never parse a hostile depth (it recurses)
            raise ValueError("nested too deep")
        data = json.loads(text)
        state = _state_of(query, data, parts)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError):   # a token nested deep
        state = None
    if state is None:
        raise bad_request(f"Invalid query continuation '{token[:60]}': pass back the x-ms-continuation "
                          "value of the previous page of this same query unchanged.")
    return state


def _position_of(part, pk_json, id, rows, parts: int) -> Position | None:
    if type(part) is not int or not 0 <= part < parts or type(pk_json) is not str or type(id) is not str:
        return None
    if rows is not None and not (type(rows) is list and rows and all(type(i) is int and i >= 0 for i in rows)):
        return None
    return Position(part, (pk_json, id), None if rows is None else tuple(rows))


def _count(n) -> bool:
    return type(n) is int and n >= 0


def _state_of(query, data: dict, parts: int):
    if query.streams:
        at, skip, take = data["s"], data["skip"], data["take"]
        if not _count(skip) or not (take is None or _count(take)):
            return None
        if at is None:
            return StreamState(None, skip, take)
        position = _position_of(*at, parts)
        return None if position is None else StreamState(position, skip, take)
    plan = query.plan
    if plan.order and not plan.distinct and plan.group_keys is None:
        returned, values, *at = data["o"]
        position = _position_of(*at, parts)
        if not _count(returned) or position is None or position.rows is None or len(values) != len(plan.order):
            return None
        return OrderState(returned, [v[0] if v else UNDEFINED for v in values], position)
    if "p" in data:
        partials, *at = data["p"]
        position = _position_of(*at, parts)
        if not query.carries_partials or position is None:
            return None
        resumed(plan.aggregate_calls, partials)          # ValueError unless they are this query's
        return PartialState(position, partials)
    n = data["n"]
    return n if _count(n) else None
