"""SQL queries over items and metadata, run entirely on the server (cosmos-wire §6).

The gateway never asks the SDK to plan a query: it runs the whole query over every partition
in scope and returns final results, paged by an opaque continuation. Scope, narrowest first:
the partition key header (one logical partition), the partition key range id header, the EPK
range headers; with none of them the query spans the whole container, whatever the
cross-partition flag says (the sync SDK never sends it).

Each partition's documents come from its index planner (core/query_plan.py) when an index on
a hinted path beats a scan, and lazily, so a page stops loading documents once it has enough
results; the charge counts the documents loaded. Compiled queries are cached by request body
bytes (a repeated body is neither parsed nor compiled again) and by text and parameters
(COMPILED_QUERIES_MAX entries, oldest evicted first; queries over CACHED_QUERY_BYTES_MAX are
compiled every time, so the cache stays small).
"""
import base64
import json

from client.protocol import headers as H

from ..core import charge
from ..core import feed as feeds
from ..core import query_plan as planner
from ..core import throttle as th
from ..core.consistency import effective
from ..core.documents import choose_replica, pk_values_of
from ..core.errors import CosmosError, bad_request
from ..core.validation import ValidationError, parse_json_body
from . import admission, partition_keys, responses
from .sessions import parse_session, token as session_token

QUERY_TEXT_BYTES_MAX = 512 * 1024
QUERY_SNAPSHOT_TTL_MS = 5 * 60 * 1000     # how long a paged query's snapshot is kept between pages
COMPILED_QUERIES_MAX = 1024
CACHED_QUERY_BYTES_MAX = 8 * 1024

_compiled: dict = {}        # body bytes or (text, parameters JSON) -> CompiledQuery, oldest first


def _remember(key, q) -> None:
    if len(_compiled) >= COMPILED_QUERIES_MAX:
        del _compiled[next(iter(_compiled))]
    _compiled[key] = q


def _query_of(call):
    """The compiled query of the request body; a body seen before is not even parsed."""
    raw = call.raw
    q = _compiled.get(raw)
    if q is None:
        if not raw:
            raise bad_request("The request body is empty; a query needs {\"query\": \"SELECT ...\"}.")
        try:
            body = parse_json_body(raw)
        except ValidationError as e:
            raise CosmosError(e.status, e.substatus, e.message) from None
        q = _compile(body)
        if len(raw) <= CACHED_QUERY_BYTES_MAX:
            _remember(raw, q)
    return q


def _compile(body):
    from ..core.query import compile_query, QueryError
    if not isinstance(body, dict) or not isinstance(body.get("query"), str):
        raise bad_request('A query body must be {"query": "SELECT ...", "parameters": [...]}.')
    if len(body["query"]) > QUERY_TEXT_BYTES_MAX:
        raise bad_request(f"The query text is longer than {QUERY_TEXT_BYTES_MAX} bytes.")
    params = body.get("parameters")
    if params is not None and not isinstance(params, list):
        raise bad_request("Query parameters must be a list of {\"name\":\"@x\",\"value\":...}.")
    key = (body["query"], json.dumps(params, sort_keys=True) if params else "")
    q = _compiled.get(key)
    if q is None:
        try:
            q = compile_query(body["query"], params)
        except QueryError as e:
            raise bad_request(f"Syntax error in query: {e}") from None
        if len(body["query"]) <= CACHED_QUERY_BYTES_MAX:
            _remember(key, q)
    return q


def _execute(q, items, now_ms, cap=None):
    from ..core.query import QueryError
    try:
        return q.execute(items, now_ms, cap)
    except QueryError as e:
        raise bad_request(f"Query failed: {e}") from None


def run_metadata_query(call, body, items: list) -> list:
    return _execute(_compile(body), items, call.gw.clock.now_ms())


def _encode_continuation(offset: int, snapshot: dict) -> str:
    """The offset into the results, and the (epoch, LSN) each partition was read at: later pages
    read the same snapshot, so writes between pages cannot shift, skip or repeat results."""
    snap = ",".join([f'"{range_id}":[{epoch},{lsn}]' for range_id, (epoch, lsn) in snapshot.items()])
    raw = f'{{"offset":{offset},"snap":{{{snap}}}}}'       # JSON; range ids are digits
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _decode_continuation(token: str | None) -> tuple[int, dict | None]:
    if not token:
        return 0, None
    try:
        data = parse_json_body(base64.urlsafe_b64decode(token.encode()))
        n, snap = data["offset"], data.get("snap")
        if type(n) is int and n >= 0 and (snap is None or isinstance(snap, dict)):
            return n, snap
    except (ValueError, KeyError, TypeError, AttributeError, ValidationError):
        pass
    raise bad_request(f"Invalid query continuation '{token[:60]}': pass back the x-ms-continuation "
                      "value of the previous page unchanged.")


def _snapshot_lsn(rs, snapshot: dict) -> int:
    """The LSN a continued query reads partition rs at; errors if that snapshot is gone."""
    entry = snapshot.get(rs.range_id)
    if not (isinstance(entry, list) and len(entry) == 2 and all(isinstance(x, int) for x in entry)):
        raise bad_request("The query continuation does not match this container's partitions; "
                          "restart the query.")
    epoch, lsn = entry
    if epoch != rs.epoch or not (rs.pinned(lsn) or lsn >= rs.floor_lsn()):
        raise bad_request(f"The query continuation has expired (its snapshot of partition {rs.range_id} "
                          f"is older than {QUERY_SNAPSHOT_TTL_MS // 1000} s, or a failover rewrote "
                          "history since); restart the query.")
    if rs.committed_lsn < lsn:
        raise CosmosError(404, 1002, f"{rs.region} has not caught up with this query's snapshot of "
                                     f"partition {rs.range_id} (LSN {lsn}); retry.")
    return lsn


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


def scoped_documents(call, container, consistency, session, query=None, cap=None, snapshot=None):
    """(visible versions in scope, replica sets read, [documents the planner loaded beyond
    those it yields]). The versions come lazily, partition by partition in key order; with a
    query, each partition's planner may narrow them to index candidates (`cap` results
    wanted, None for all)."""
    indexes, pk_json, epk_range = _scope(call, container)
    reads = []
    for i in indexes:
        rs = container.partitions[i].for_read(call.region)
        lsn = _snapshot_lsn(rs, snapshot) if snapshot else choose_replica(rs, consistency, session)[1]
        reads.append((rs, lsn))
    accept = None
    if epk_range is not None:
        lo, hi = epk_range
        accept = lambda key: lo <= container.epk_of(key[0], pk_values_of(key[0])) < hi  # noqa: E731
    policy, now_ms, tested = container.definition.get("indexingPolicy"), call.gw.clock.now_ms(), [0]
    implied = container.pk_def.path_steps if pk_json is not None else ()

    def versions():
        merged = None           # one ORDER BY walk across all partitions, when it applies
        if query is not None and len(reads) > 1 and query.leading_order is not None:
            merged = planner.merged_walk(query, [(rs.store, lsn) for rs, lsn in reads], policy, now_ms,
                                         pk_json, accept, cap, implied=implied)
        for i, (rs, lsn) in enumerate(reads):
            if merged is not None:
                chosen = merged[i]
            else:
                chosen = None if query is None else planner.candidates(
                    query, rs.store, lsn, policy, now_ms, pk_json, accept, cap, implied=implied)
            if chosen is not None:
                tested[0] += chosen.loaded - len(chosen.versions)
                yield from chosen.versions
            elif accept is None:
                yield from rs.store.scan(lsn, prefix=pk_json)
            else:
                yield from (v for v in rs.store.scan(lsn, prefix=pk_json) if accept(v.key))
    return versions(), reads, tested


async def query_documents(call, container):
    q = _query_of(call)
    consistency = effective(call.gw.account.consistency, call.header(H.CONSISTENCY_LEVEL))
    session = parse_session(call)
    start, snapshot = _decode_continuation(call.header(H.CONTINUATION))
    size = feeds.page_size(call.int_header(H.MAX_ITEM_COUNT))
    cap = start + size + 1              # one more than the page tells whether another follows
    versions, reads, tested = scoped_documents(call, container, consistency, session, q, cap, snapshot)
    touched = [rs for rs, _ in reads]
    bodies = {}                         # id(document) -> its stored serialisation
    loaded = 0

    def docs():
        nonlocal loaded
        keep_bodies = q.returns_documents
        for v in versions:
            loaded += 1
            if keep_bodies:
                bodies[id(v.doc)] = v.body
            yield v.doc
    results = _execute(q, docs(), call.gw.clock.now_ms(), cap)
    page = results[start:start + size]
    raw = [bodies.get(id(r)) or responses.dumps(r) for r in page]
    hdrs = {H.ITEM_COUNT: str(len(raw))}
    if start + size < len(results):
        until_ms = call.gw.clock.now_ms() + QUERY_SNAPSHOT_TTL_MS
        for rs, lsn in reads:
            rs.pin(lsn, until_ms)
        hdrs[H.CONTINUATION] = _encode_continuation(start + size, {rs.range_id: [rs.epoch, lsn]
                                                                   for rs, lsn in reads})
    if touched:
        hdrs[H.SESSION_TOKEN] = ",".join(session_token(rs, lsn) for rs, lsn in reads)
        hdrs[H.ALT_CONTENT_PATH] = container.name_path
    loaded += tested[0]
    ru = charge.query(loaded, len(raw), sum(map(len, raw)))
    admission.spread(call, container, touched, ru, len(raw), th.QUERY, loaded if q.has_filter else 0)
    return responses.reply(200, responses.feed_body(container.rid, "Documents", raw), call.activity_id, ru, hdrs)


async def query_plan(call, container):
    raise CosmosError(400, 0, "regionlab runs every query on the server and does not hand out query "
                              "plans; send the query itself (the Python SDK does so by default).")
