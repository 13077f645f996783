"""One page of a SQL query over a container: where it resumes, what it may spend, where it stops.

Theory of operation. The caller feeds documents as (partition ordinal, version) in *input
order*: the partitions in scope in order, inside each by key (partition key JSON, id), the
order read-feed paging walks. Each document expands into rows (FROM and JOIN; see
query/sources.py `expand_rows`), each at a cursor (its element index at every level). A row's
`Position` (partition, key, cursor) orders all rows totally, in the order a scan makes them.

Work is counted in units, not time, so a page is deterministic and the core stays clock-free:
one unit per document loaded, one more per DOC_BYTES_PER_UNIT of its JSON (a stored document
is parsed from its body when a query loads it: store.Version), and one per row a FROM or JOIN
makes, in subqueries too.
QUERY_SLICE_MAX_WORK_UNITS units take about 50 ms on the reference machine (bench/query_budget.py,
docs/performance.md); evaluating one row's own expressions is not interruptible.

Streaming queries (no ORDER BY, aggregate, GROUP BY or DISTINCT: each result comes from one
row, in input order) page by position. `stream_page` runs from its continuation's position
and stops at max_items results, before a result that would take the page past
PAGE_MAX_BYTES (a page always holds at least one), or once it spent
QUERY_SLICE_MAX_WORK_UNITS units; its `StreamState` is where to resume, with the OFFSET still to
skip and the TOP/LIMIT still to take. A page that ran out of work may hold no results at all,
as the service's do; the SDKs follow the continuation.

Blocking queries (the rest) must see every row before the first result is known. A
`BlockingRun` reads all the inputs of one page in slices: `step` spends at most one slice
and returns, and the caller lets others run between slices (the gateway yields to its event
loop), stops when its client has gone, and refuses a page past QUERY_REQUEST_MAX_WORK_UNITS.
ORDER BY pages resume after the last row returned in the total order (ORDER BY values, then
position) and keep only the best rows the page needs; aggregate and DISTINCT pages resume at
a count of results already returned.

Nothing is pinned: each page reads the partitions as they are now. A document unchanged while
a query pages is returned exactly once (its position does not move); one created, changed or
deleted meanwhile is seen or not depending on whether its position (for ORDER BY, its value)
is ahead of the cursor, as the service's continuations resume by position too. Aggregate and
DISTINCT continuations are counts: a change behind the cursor may shift a later page by one.
"""
from __future__ import annotations

import base64
import json
from typing import Callable, NamedTuple

from .errors import bad_request
from .query.ordering import sort_rows
from .query.sources import expand_rows
from .query.values import UNDEFINED, canonical, sort_key
from .validation import text_nests_at_most
from .limits import PAGE_MAX_BYTES, QUERY_SLICE_MAX_WORK_UNITS

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


class Page(NamedTuple):
    raw: list               # the results, serialised
    loaded: int             # documents loaded
    state: object | None    # what to resume at (StreamState, OrderState, int), None when done
    work: int               # work units spent


Encode = Callable[[object, object], bytes]     # (result, version it came from) -> JSON bytes


def first_state(query) -> StreamState:
    return StreamState(None, query.plan.offset, query.plan.take)


def constant_page(query, encode: Encode, now_ms: int) -> Page:
    """The whole result of a query without FROM (one row, whatever the documents)."""
    return Page([encode(r, None) for r in query.execute((), now_ms)], 0, None, 0)


def _stored(row):
    return _STORED


_STORED = object()          # stream_page: "the result is the document as stored" (its body)
_ONE_ROW = ((None,),)       # the one row of a document not parsed
_FIRST_ROW = (0,)           # a position's cursor at that row: a page that stopped before it
_PAST_ROW = (1,)            # after it: a page whose work ran out right after it


def stream_page(query, inputs, state: StreamState, max_items: int, encode: Encode, now_ms: int,
                work_max: int = QUERY_SLICE_MAX_WORK_UNITS, bytes_max: int = PAGE_MAX_BYTES,
                where_implied: bool = False) -> Page:
    """One page of a streaming query from inputs, which must start at state.at's document.

    With `where_implied` (the caller's scope guarantees every input passes WHERE) a query whose
    results are its input documents (`returns_documents`: SELECT * FROM c) takes each document
    as its stored body without parsing it. Work, positions and continuations are exactly those
    of parsing it (one document, one row), so pages and charges do not change."""
    plan = query.plan
    levels, where, project = plan.levels, plan.where, plan.project
    whole = where_implied and query.returns_documents
    query.set_clock(now_ms)
    work = query.work
    began = work[0]
    limit = began + work_max
    at, skip, take = state
    out, nbytes, loaded = [], 0, 0
    cursor = [0] * len(levels)
    # One FROM and no JOIN (most queries): its values are the rows, walked without a generator.
    single = levels[0] if len(levels) == 1 else None
    if take == 0:
        return Page(out, 0, None, 0)
    for part, v in inputs:
        loaded += 1
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
                            return Page(out, loaded, StreamState(here, skip, take), work[0] - began)
                        out.append(raw)
                        nbytes += len(raw)
                        if take is not None:
                            take -= 1
                            if take == 0:
                                return Page(out, loaded, None, work[0] - began)
            if work[0] >= limit:
                after = Position(part, v.key, tuple(cursor[:-1]) + (cursor[-1] + 1,))
                return Page(out, loaded, StreamState(after, skip, take), work[0] - began)
        if work[0] >= limit:
            return Page(out, loaded, StreamState(Position(part, v.key, None), skip, take), work[0] - began)
    return Page(out, loaded, None, work[0] - began)


# ---- blocking queries ----------------------------------------------------------------------
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


class BlockingRun:
    """One page of a blocking query, run in slices: `step()` until it returns True, then
    `page()`. `state` is an OrderState for ORDER BY without DISTINCT, else the count of results
    returned by earlier pages (0 on the first)."""

    def __init__(self, query, inputs, state, max_items: int, encode: Encode):
        self.query, self.plan, self.max_items, self.encode = query, query.plan, max_items, encode
        self.state = state
        self.loaded = 0
        self.work = 0           # units spent by this run
        self.slices = 0
        self.done = False
        plan = self.plan
        self.by_position = bool(plan.order) and not plan.distinct
        returned = state.returned if isinstance(state, OrderState) else state
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
        if isinstance(state, OrderState):
            self.after = order_key(state.values, [d for _, d in plan.order], state.at)
        self._rows = self._walk(inputs)

    def _walk(self, inputs):
        levels, where, work = self.plan.levels, self.plan.where, self.query.work
        cursor = [0] * len(levels)
        for part, v in inputs:
            self.loaded += 1
            work[0] += 1
            for row in expand_rows(levels, _load(v, work), None, cursor, work):
                if where is None or where(row) is True:
                    yield part, v, row, cursor

    def step(self, now_ms: int, work_max: int = QUERY_SLICE_MAX_WORK_UNITS) -> bool:
        """Spend at most about work_max units; True once every input is read."""
        if self.done:
            return True
        self.query.set_clock(now_ms)
        work = self.query.work
        began = work[0]
        limit = began + work_max
        take = self._taker()
        self.slices += 1
        for item in self._rows:
            if take(*item):
                self.done = True
                break
            if work[0] >= limit:
                break
        else:
            self.done = True
        self.work += work[0] - began
        return self.done

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
    n = data["n"]
    return n if _count(n) else None
