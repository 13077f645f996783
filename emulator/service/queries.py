"""SQL queries over items and metadata, run on the server (cosmos-wire §6), and query plans.

In the default query mode ("whole") the gateway never asks the SDK to plan a query: it runs
the whole query over every partition in scope and returns final results, paged by an opaque
continuation. In "service" mode a cross-partition query that needs client-side work (ORDER
BY, aggregates, GROUP BY, DISTINCT, TOP, OFFSET/LIMIT) is answered 400/1004 with its plan, as the
service does, and the SDK fans out the plan's rewritten query per partition key range, which
is served like any query; plan requests get the service-shaped plan in either mode
(core/query/execution_info.py, docs/queries.md). Scope, narrowest first:
the partition key header (one logical partition), the partition key range id header, the EPK
range headers; with none of them the query spans the whole container. Such a query on a
container of more than one partition key range needs `x-ms-documentdb-query-enablecrosspartition:
True` (the aio SDK sends it, the sync SDK only with enable_cross_partition_query=True) unless its
WHERE clause fixes the whole partition key; without it the answer is the service's 400.

Pages are cut by core/query_page.py: at the item count, before 4 MB, or at the work budget,
with a continuation that resumes by position (nothing is pinned between pages). Queries that
must read every input (ORDER BY, aggregates, GROUP BY, DISTINCT) run a page in slices of that
budget, yielding to the event loop between slices and stopping when the client has gone.
Each partition's documents come from its index planner (core/query_plan.py) when an index on
a hinted path beats a scan, and lazily, so a page stops loading documents once it has enough
results; the charge counts the documents loaded. Compiled queries are cached by request body
bytes (a repeated body is neither parsed nor compiled again) and by text and parameters
(COMPILED_QUERIES_CACHE_MAX_ENTRIES queries each, oldest evicted first; a body, or a text with
its parameters, over COMPILED_QUERY_TEXT_MAX_BYTES is compiled every time, so the cache stays
small; the engine keeps parse trees by text, so a text sent with new parameter values is only
compiled, not parsed). A query scoped to one partition
key whose WHERE clause asks only for that key (`WHERE c.pk = @pk`) serves the stored bodies
without parsing any (core/query_page.py `stream_page`, where_implied).
"""
import bisect
import itertools
import json

from regionlab.client.protocol import headers as H

from ..core import charge
from ..core import feed as feeds
from ..core import limits
from ..core import query_page as qp
from ..core import query_plan as planner
from ..core import throttle as th
from ..core.index import INDEX_BUILD_STEP_VERSIONS, build_step
from ..core.consistency import effective
from ..core.service_continuation import service_state
from ..core.container import canonical_pk_json
from ..core.documents import choose_replica, pk_values_of
from ..core.errors import CosmosError, bad_request
from ..core.validation import ValidationError, parse_json_body
from . import admission, partition_keys, query_metrics, responses
from .sessions import parse_session, refusal_headers, session_refused, token as session_token

QUERY_SCAN_CHUNK_DOCS = 256               # keys one ordered walk of a store takes at a time, at most
# The first walk takes this many and each next one twice as many, up to QUERY_SCAN_CHUNK_DOCS:
# a page of 10 of a logical partition of 10,000 items then loads 16 versions, not 256 (the
# walk's cost followed the partition's size up to the chunk: 2x the CPU of a 1k-item query).
QUERY_SCAN_FIRST_CHUNK_DOCS = 16
PK_INT_EXACT_MAX = 2 ** 53                # integers a partition key keeps exactly (container.canonical_pk_json)
_building: set = set()                    # stores whose new indexes the loop is building between requests

# Two maps to one set of compiled queries, each bounded by COMPILED_QUERIES_CACHE_MAX_ENTRIES: one
# map for both keys held only half as many queries, so a client cycling over 1,000 partition keys missed
# every time and compiled every query again (~275 µs each, and ~40 objects for the collector).
_compiled: dict = {}        # (text, parameters JSON) -> CompiledQuery, oldest first
_by_body: dict = {}         # request body bytes -> CompiledQuery, oldest first


def _remember(cache: dict, key, q) -> None:
    if len(cache) >= limits.COMPILED_QUERIES_CACHE_MAX_ENTRIES:
        del cache[next(iter(cache))]
    cache[key] = q


def _query_of(call, definitions=None):
    """The compiled query of the request body; a body seen before is not even parsed. The
    container's computed property definitions are part of what a query compiles to
    (core/query/computed.py)."""
    raw = call.raw
    key = (raw, _computed_key(definitions)) if definitions else raw
    q = _by_body.get(key)
    if q is None:
        if not raw:
            raise bad_request("The request body is empty; a query needs {\"query\": \"SELECT ...\"}.")
        try:
            body = parse_json_body(raw)
        except ValidationError as e:
            raise CosmosError(e.status, e.substatus, e.message) from None
        q = _compile(body, definitions)
        if len(raw) + _computed_chars(definitions) <= limits.COMPILED_QUERY_TEXT_MAX_BYTES:
            _remember(_by_body, key, q)
    return q


def _computed_key(definitions) -> tuple:
    return tuple((d["name"], d["query"]) for d in definitions)


def _computed_chars(definitions) -> int:
    """What a cache key holds of the computed properties (they count against the key's size)."""
    return sum(len(d["name"]) + len(d["query"]) for d in definitions) if definitions else 0


def _compile(body, definitions=None):
    from ..core.query import compile_query, computed, QueryError
    if not isinstance(body, dict) or not isinstance(body.get("query"), str):
        raise bad_request('A query body must be {"query": "SELECT ...", "parameters": [...]}.')
    if len(body["query"]) > limits.QUERY_TEXT_MAX_CHARS:
        raise bad_request(f"The query text is longer than {limits.QUERY_TEXT_MAX_CHARS} characters.")
    params = body.get("parameters")
    if params is not None and not isinstance(params, list):
        raise bad_request("Query parameters must be a list of {\"name\":\"@x\",\"value\":...}.")
    key = (body["query"], json.dumps(params, sort_keys=True) if params else "")
    if definitions:
        key += _computed_key(definitions)
    q = _compiled.get(key)
    if q is None:
        try:
            q = compile_query(body["query"], params, computed.definitions_of(definitions) if definitions else None)
        except QueryError as e:
            raise bad_request(f"Syntax error in query: {e}") from None
        if len(key[0]) + len(key[1]) + _computed_chars(definitions) <= limits.COMPILED_QUERY_TEXT_MAX_BYTES:
            _remember(_compiled, key, q)
    return q


def run_metadata_query(call, body, items: list) -> list:
    from ..core.query import QueryError
    try:
        return _compile(body).execute(items, call.svc.clock.now_ms())
    except QueryError as e:
        raise bad_request(f"Query failed: {e}") from None


def _scope(call, container):
    """(partition indexes, pk_json or None, (start_epk, end_epk) or None)."""
    if call.header(H.PARTITION_KEY) is not None:
        pk_json, values = partition_keys.required(call, container, full=False)
        if len(values) == len(container.pk_def.paths):
            return [container.partition_index(container.epk_of(pk_json, values))], pk_json, None
        from ..core.epk import effective_partition_key
        lo = effective_partition_key(container.pk_def, values)
        hi = lo + "FF"
        return [i for i, p in enumerate(container.partitions) if p.min_epk < hi and p.max_epk > lo], None, (lo, hi)
    indexes = list(range(len(container.partitions)))
    range_id = call.header(H.PK_RANGE_ID)
    if range_id is not None:
        indexes = [i for i, p in enumerate(container.partitions) if p.range_id == range_id]
        if not indexes:
            raise CosmosError(410, 1002, f"Partition key range '{range_id}' is gone; refresh the partition key ranges.")
    epk_range = None
    if (call.header(H.READ_KEY_TYPE) or "") == H.READ_KEY_TYPE_EPK_RANGE:
        epk_range = ((call.header(H.START_EPK) or "").upper(), (call.header(H.END_EPK) or "FF").upper())
    return indexes, None, epk_range


class _SessionRefused(Exception):
    """A partition in scope cannot serve the session yet: its 404/1002 with its session headers."""

    def __init__(self, err, headers: dict):
        super().__init__(err.message)
        self.err, self.headers = err, headers


def _reads(call, container, consistency, session):
    """(partitions in scope as [(replica set, visible LSN)], pk_json or None, key filter or None,
    each one's min EPK)."""
    indexes, pk_json, epk_range = _scope(call, container)
    reads = []
    for i in indexes:
        rs = container.partitions[i].for_read(call.region)
        try:
            reads.append((rs, choose_replica(rs, consistency, session, call.svc.primary_ok, call.pins())[1]))
        except CosmosError as e:
            if not session_refused(e):
                raise
            raise _SessionRefused(e, refusal_headers(call, container, rs)) from None
    accept = None
    if epk_range is not None:
        lo, hi = epk_range
        accept = lambda key: lo <= container.epk_of(key[0], pk_values_of(key[0])) < hi  # noqa: E731
    return reads, pk_json, accept, [container.partitions[i].min_epk for i in indexes]


class _Inputs:
    """The documents a query page reads, as (partition ordinal, version) in input order
    (core/query_page.py), from a position on. Stores are scanned in chunks growing from
    QUERY_SCAN_FIRST_CHUNK_DOCS to QUERY_SCAN_CHUNK_DOCS keys, each chunk by a fresh ordered walk after the last key at the replica's LSN of the
    moment, so a page that runs across event-loop slices sees writes made between them as
    they are, never a key list changing under its walk nor a version pruned under its LSN."""

    def __init__(self, call, container, query, consistency, session):
        self.container, self.query = container, query
        self.consistency, self.session = consistency, session
        self.primary_ok = call.svc.primary_ok       # a read-only endpoint never reads the primary
        self.region = call.region
        self.soon = call.svc.waits.soon             # where a store's new indexes are built meanwhile
        self.reads, self.pk_json, self.accept, self.range_mins = _reads(call, container, consistency, session)
        self.policy = container.definition.get("indexingPolicy")
        self.now_ms = call.svc.clock.now_ms()
        self.implied = container.pk_def.path_steps if self.pk_json is not None else ()
        # Every document in scope passes the WHERE clause when it asks only for the partition key
        # the scope fixes: a page then serves stored bodies without parsing them.
        self.where_implied = self.pk_json is not None and _fixed_by_key(query, self.implied, self.pk_json)
        self.tested = 0             # documents the planner loaded beyond those it yields
        self.walked = False         # an ORDER BY index walk chose some partition's documents
        self.read = None            # [documents, bytes] the page read, counted when metrics are asked for

    def documents(self, at=None, cap=None, planned=True):
        docs = self._live(at, cap, planned)
        return docs if self.read is None else self._counted(docs)

    def _counted(self, docs):
        read = self.read
        for part, v in docs:
            read[0] += 1
            read[1] += len(v.body or b"")
            yield part, v

    def _live(self, at, cap, planned):
        """From position `at` (None: the first document). With `planned`, each partition's
        planner may narrow its documents to index candidates (`cap` results wanted). An item
        past its time to live is not among them (core/ttl.py)."""
        found = self._documents(at, cap, planned)
        ttl = self.container.ttl
        if ttl is None:
            return found
        now_ms = ttl.now_ms(self.region)
        return ((part, v) for part, v in found if not ttl.expired_at(v, now_ms))

    def _documents(self, at, cap, planned):
        merged = None
        query, reads = self.query, self.reads
        if planned and at is None and len(reads) > 1 and query.leading_order is not None:
            merged = planner.merged_walk(query, [(rs.store, lsn) for rs, lsn in reads], self.policy,
                                         self.now_ms, self.pk_json, self.accept, cap, implied=self.implied)
        first = 0 if at is None else at.part
        for part in range(first, len(reads)):
            rs, lsn = reads[part]
            start, inclusive = (None, False) if at is None or part != at.part else (at.key, at.rows is not None)
            chosen = merged[part] if merged is not None else None
            if chosen is None and planned:
                chosen = planner.candidates(query, rs.store, lsn, self.policy, self.now_ms, self.pk_json,
                                            self.accept, cap, implied=self.implied)
                if chosen is None:
                    build_in_background(rs.store, self.soon)
            if chosen is not None:
                self.tested += chosen.loaded - len(chosen.versions)
                self.walked = self.walked or chosen.plan == "order"
                versions = chosen.versions
                if start is not None:
                    i = (bisect.bisect_left if inclusive else bisect.bisect_right)(versions, start, key=_key_of)
                    versions = versions[i:]
                yield from ((part, v) for v in versions)
            else:
                yield from ((part, v) for v in self._scan(rs, lsn, start, inclusive))

    def _scan(self, rs, lsn: int, after, inclusive: bool):
        store, prefix, accept = rs.store, self.pk_json, self.accept
        if inclusive:
            v = store.get(after, lsn)
            if v is not None and (accept is None or accept(v.key)):
                yield v
        size = QUERY_SCAN_FIRST_CHUNK_DOCS
        while True:
            chunk = list(itertools.islice(store.scan(lsn, after_key=after, prefix=prefix), size))
            for v in chunk:
                if accept is None or accept(v.key):
                    yield v
            if len(chunk) < size:
                return
            after = chunk[-1].key
            size = min(2 * size, QUERY_SCAN_CHUNK_DOCS)
            try:
                lsn = max(lsn, choose_replica(rs, self.consistency, self.session, self.primary_ok)[1])
            except CosmosError:
                pass                # keep reading where we were: that LSN is still retained


def _fixed_by_key(q, paths: tuple, pk_json: str) -> bool:
    """True when q's WHERE clause is exactly `pk path = value` for each partition key path and
    those values are the partition key pk_json names (as the store keys its documents). Only
    strings, booleans, null and exact integers: values whose query equality is their key's."""
    fixed = q.where_equalities
    if fixed is None or len(fixed) != len(paths) or not all(p in fixed for p in paths):
        return False
    values = [fixed[p] for p in paths]
    if not all(type(v) in (str, bool, type(None)) or (type(v) is int and abs(v) < PK_INT_EXACT_MAX) for v in values):
        return False
    return canonical_pk_json(values) == pk_json


def _key_of(version):
    return version.key


def _encoder(q):
    if q.returns_documents:
        return lambda value, v: v.body if v is not None else responses.dumps(value)
    return lambda value, v: responses.dumps(value)


async def query_documents(call, container):
    q = _query_of(call, container.definition.get("computedProperties"))
    _require_cross_partition_flag(call, container, q)
    consistency = effective(call.svc.account.consistency, call.header(H.CONSISTENCY_LEVEL))
    try:
        inputs = _Inputs(call, container, q, consistency, parse_session(call))
    except _SessionRefused as refused:
        return responses.error(refused.err, call.activity_id, refused.headers)
    started_ms = 0
    if call.flag(H.POPULATE_QUERY_METRICS):
        inputs.read = [0, 0]
        started_ms = call.svc.clock.now_ms()
    if call.svc.query_mode == "service" and len(inputs.reads) > 1:
        refused = _refusal(call, q)
        if refused is not None:
            return refused
    token = call.header(H.CONTINUATION)
    state = service_state(q, token, inputs.range_mins) if token else None
    if state is None:
        state = qp.decode_state(q, token, len(inputs.reads))
    size = feeds.page_size(call.int_header(H.MAX_ITEM_COUNT))
    stats = call.svc.query_work
    from ..core.query import QueryError
    udfs = None
    if q.has_udfs:
        from .udfs import UdfCalls
        udfs = await UdfCalls.open(call, container)
    try:
        if q.plan.levels is None:
            page = qp.constant_page(q, _encoder(q), call.svc.clock.now_ms(), udfs)
        elif q.streams:
            run = qp.StreamRun(q, inputs.documents(state.at), state, size, _encoder(q),
                               where_implied=inputs.where_implied)
            page = run.page() if await _run_slices(call, run, udfs) else None
        else:
            page = await _blocking_page(call, q, inputs, state, size, udfs)
    except QueryError as e:
        raise bad_request(f"Query failed: {e}") from None
    finally:
        if udfs is not None:
            udfs.close()
    if page is None:
        return responses.reply(499, None, call.activity_id)     # nobody is listening any more
    stats["work"] += page.work
    stats["pages"] += 1
    reads = inputs.reads
    touched = [rs for rs, _ in reads]
    raw = page.raw
    if not raw and page.state is None and _merged_across_ranges(call, inputs) and _merges_to_null(q):
        raw = [b"null"]        # what the SDK's merge of the ranges' answers gives (docs/queries.md)
    hdrs = {H.ITEM_COUNT: str(len(raw))}
    if page.state is not None:
        hdrs[H.CONTINUATION] = qp.encode_state(page.state)
    if touched:
        hdrs[H.SESSION_TOKEN] = ",".join(session_token(rs, lsn) for rs, lsn in reads)
        hdrs[H.ALT_CONTENT_PATH] = container.name_path
        hdrs[H.CONTENT_PATH] = container.rid
    loaded = page.loaded + inputs.tested
    _report(call, container, q, inputs, raw, started_ms, hdrs)
    ru = charge.query(loaded, len(raw), sum(map(len, raw)))
    admission.spread(call, container, touched, ru, len(raw), th.QUERY, loaded if q.has_filter else 0)
    return responses.reply(200, responses.feed_body(container.rid, "Documents", raw), call.activity_id, ru, hdrs)


CROSS_PARTITION_DISABLED = (     # the service's words
    "Cross partition query is required but disabled. Please set x-ms-documentdb-query-enablecrosspartition "
    "to true, specify x-ms-documentdb-partitionkey, or revise your query to avoid this exception.")


def _require_cross_partition_flag(call, container, q) -> None:
    """The service's 400 for a query that would span more than one partition key range when its
    request names no partition key, no range and no EPK range, and does not enable cross-partition
    queries. A container of one range answers it (as the service does: such queries "may have
    worked" until the container split), and so does a query whose WHERE clause fixes every
    partition key path to a constant (`c.pk = 'a' AND ...`), which the service routes to one range."""
    if (len(container.partitions) < 2 or call.flag(H.ENABLE_CROSS_PARTITION) or q.plan.levels is None
            or call.header(H.PARTITION_KEY) is not None or call.header(H.PK_RANGE_ID) is not None
            or (call.header(H.READ_KEY_TYPE) or "") == H.READ_KEY_TYPE_EPK_RANGE):
        return
    fixed = {hint.path for hint in q.index_hints if hint.op == "="}
    if all(path in fixed for path in container.pk_def.path_steps):
        return
    raise bad_request(CROSS_PARTITION_DISABLED)


def _report(call, container, q, inputs, raw, started_ms: int, hdrs: dict) -> None:
    """The query and index metrics headers, when the request asks for them (service/query_metrics.py)."""
    if inputs.read is not None:
        elapsed_ms = call.svc.clock.now_ms() - started_ms
        hdrs[H.QUERY_METRICS] = query_metrics.query_metrics(elapsed_ms, inputs.read[0], inputs.read[1], raw)
    if call.flag(H.POPULATE_INDEX_METRICS):
        pk_paths = container.pk_def.path_steps if inputs.pk_json is not None else ()
        hdrs[H.INDEX_UTILIZATION] = query_metrics.index_utilization(q, pk_paths, inputs.policy)


def _merged_across_ranges(call, inputs) -> bool:
    """Whether the query spans several partition key ranges with nothing narrowing it: against the
    service the SDK would run it per range and merge (in --query-mode service it does here)."""
    return (len(inputs.reads) > 1 and inputs.pk_json is None and inputs.accept is None
            and call.header(H.PK_RANGE_ID) is None)


def _merges_to_null(q) -> bool:
    from ..core.query import execution_info as ei
    return ei.merges_undefined_to_null(q)


async def _blocking_page(call, q, inputs, state, size, udfs=None):
    """A page of a query that must read all its inputs (or, for aggregates that carry their
    partials, up to the page's work budget); None when the client went away meanwhile."""
    at = state.at if isinstance(state, qp.PartialState) else None
    returned = state.returned if isinstance(state, qp.OrderState) else 0 if at is not None else state
    cap = returned + size + 1
    planned = True
    while True:
        run = qp.BlockingRun(q, inputs.documents(at, cap, planned), state, size, _encoder(q))
        if not await _run_slices(call, run, udfs):
            return None
        # An ORDER BY walk narrowed each partition to the rows that decide the first `cap`
        # results; if more rows now precede the position than earlier pages returned (writes
        # since), that may not cover this page: read everything instead.
        if planned and inputs.walked and run.before > q.plan.offset + returned:
            planned = False
            continue
        return run.page()


async def _run_slices(call, run, udfs=None) -> bool:
    """Run a page (core/query_page.py) one slice at a time, letting every other request in
    between; False when its client went away meanwhile. udfs: what its udf.name(...) calls run
    (service/udfs.py)."""
    stats = call.svc.query_work
    while True:
        done = run.step(call.svc.clock.now_ms(), udfs=udfs)
        stats["slices"] += 1
        if done:
            return True
        if run.work > limits.QUERY_REQUEST_MAX_WORK_UNITS:
            raise CosmosError(400, 0, f"The query needs more than {limits.QUERY_REQUEST_MAX_WORK_UNITS} work units "
                                      "(documents read and JOIN rows made) for one page of ORDER BY, "
                                      "aggregate, GROUP BY or DISTINCT results; narrow it with a filter "
                                      "or a partition key.")
        await call.svc.waits.turn()            # let every other request in before the next slice
        if call.lost():
            stats["abandoned"] += 1
            return False


QUERY_MODES = ("whole", "service")
NOT_SERVABLE = 1004          # CrossPartitionQueryNotServable: the SDK asks for a plan and fans out
NOT_SERVABLE_MESSAGE = (
    "The provided cross partition query can not be directly served by the gateway. This is a first "
    "chance (internal) exception that all newer clients will know how to handle gracefully. This "
    "exception is traced, but unless you see it bubble up as an exception (which only happens on older "
    "SDK clients), then you can safely ignore this message.")


def _refusal(call, q):
    """--query-mode service: a cross-partition query the service would not run whole in the
    gateway is answered 400/1004 with its plan (in `additionalErrorInfo`, as the JS SDK reads
    it), so the SDK plans it and queries each partition key range itself; None for a query
    the gateway runs (no ORDER BY, aggregate, GROUP BY, DISTINCT, TOP, OFFSET/LIMIT, or one
    regionlab does not plan: see core/query/execution_info.py)."""
    from ..core.query import execution_info as ei
    if not (ei.needs_pipeline(q) and ei.plannable(q)):
        return None
    reply = responses.error(CosmosError(400, NOT_SERVABLE, NOT_SERVABLE_MESSAGE), call.activity_id)
    body = json.loads(reply.body)
    body["additionalErrorInfo"] = json.dumps(ei.plan_of(q))
    reply.body = responses.dumps(body)
    return reply


async def query_plan(call, container):
    """The query plan (core/query/execution_info.py) of the query in the body."""
    from ..core.query import execution_info as ei
    body = call.json_body()
    q = _compile(body)
    supported = {f.strip().lower() for f in (call.header(H.SUPPORTED_QUERY_FEATURES) or "").split(",")}
    missing = [f for f in ei.features_needed(q) if f.lower() not in supported
               and not (f == ei.FEATURE_ORDER_BY and ei.FEATURE_MULTIPLE_ORDER_BY.lower() in supported)]
    if missing:
        raise bad_request("Query contains 1 or more unsupported features. Upgrade your SDK to a version "
                          f"that does support the requested features: Query contained {', '.join(missing)}, "
                          "which the calling client does not support.")
    if not ei.plannable(q):
        composed = ("Compositions of aggregates and other expressions are not allowed. "   # the service's words
                    if ei.composes_aggregates(q) else "")
        raise bad_request(f"{composed}regionlab does not plan an aggregate inside another expression (such as "
                          "COUNT(1) + 1 or {\"n\": COUNT(1)}), DISTINCT with GROUP BY or aggregates, or DISTINCT "
                          "with ORDER BY; send the query itself: the gateway runs it whole.")
    return responses.reply(200, ei.plan_of(q), call.activity_id)


def build_in_background(store, soon) -> None:
    """Finish the store's building indexes (core/index.py) one bounded step per turn of the
    surface (`soon`: service/waits.py; None builds on demand only), so a path first queried
    after a bulk load is indexed within seconds rather than after hundreds of scanning queries,
    and no step holds the loop longer than one query's."""
    indexes = store.indexes
    if soon is None or indexes is None or store in _building or all(ix.ready for ix in indexes.paths.values()):
        return
    _building.add(store)

    def step():
        building = [ix for ix in store.indexes.paths.values() if not ix.ready] if store.indexes else []
        if not building:
            _building.discard(store)
            return
        build_step(store, building[0], INDEX_BUILD_STEP_VERSIONS)
        soon(step)                         # the next turn: I/O and other requests come first
    soon(step)
