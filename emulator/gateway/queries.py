"""SQL queries over items and metadata, run entirely on the server (cosmos-wire §6).

The gateway never asks the SDK to plan a query: it runs the whole query over every partition
in scope and returns final results, paged by an opaque continuation. Scope, narrowest first:
the partition key header (one logical partition), the partition key range id header, the EPK
range headers; with none of them the query spans the whole container, whatever the
cross-partition flag says (the sync SDK never sends it).
"""
import base64
import json

from client.protocol import headers as H

from ..core import charge
from ..core import feed as feeds
from ..core.consistency import effective
from ..core.documents import choose_replica, pk_values_of
from ..core.errors import CosmosError, bad_request
from . import partition_keys, responses
from .sessions import parse_session

QUERY_TEXT_BYTES_MAX = 512 * 1024


def _compile(body):
    from ..core.query import compile_query, QueryError
    if not isinstance(body, dict) or not isinstance(body.get("query"), str):
        raise bad_request('A query body must be {"query": "SELECT ...", "parameters": [...]}.')
    if len(body["query"]) > QUERY_TEXT_BYTES_MAX:
        raise bad_request(f"The query text is longer than {QUERY_TEXT_BYTES_MAX} bytes.")
    params = body.get("parameters")
    if params is not None and not isinstance(params, list):
        raise bad_request("Query parameters must be a list of {\"name\":\"@x\",\"value\":...}.")
    try:
        return compile_query(body["query"], params)
    except QueryError as e:
        raise bad_request(f"Syntax error in query: {e}") from None


def _execute(q, items, now_ms):
    from ..core.query import QueryError
    try:
        return q.execute(items, now_ms)
    except QueryError as e:
        raise bad_request(f"Query failed: {e}") from None


def run_metadata_query(call, body, items: list) -> list:
    return _execute(_compile(body), items, call.gw.clock.now_ms())


def _encode_offset(n: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"offset": n}).encode()).decode()


def _decode_offset(token: str | None) -> int:
    if not token:
        return 0
    try:
        n = json.loads(base64.urlsafe_b64decode(token.encode()))["offset"]
        if isinstance(n, int) and n >= 0:
            return n
    except (ValueError, KeyError, TypeError):
        pass
    raise bad_request(f"Invalid query continuation '{token[:60]}': pass back the x-ms-continuation "
                      "value of the previous page unchanged.")


def _scope(call, container):
    """(partition indexes, pk_json or None, (start_epk, end_epk) or None)."""
    if call.header(H.PARTITION_KEY) is not None:
        pk_json, values = partition_keys.required(call, container, full=False)
        if len(values) == len(container.pk_def.paths):
            return [container.partition_index(container.epk_of(pk_json, values))], pk_json, None
        from ..core.epk import effective_partition_key, epk_successor
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


def scoped_documents(call, container, consistency, session):
    """The visible documents in scope, and the replica sets they were read at."""
    indexes, pk_json, epk_range = _scope(call, container)
    docs, touched = [], []
    for i in indexes:
        rs = container.partitions[i].for_read(call.region)
        _, lsn = choose_replica(rs, consistency, session)
        touched.append(rs)
        for v in rs.store.scan(lsn, prefix=pk_json):
            if epk_range is not None:
                e = container.epk_of(v.key[0], pk_values_of(v.key[0]))
                if not (epk_range[0] <= e < epk_range[1]):
                    continue
            docs.append(v.doc)
    return docs, touched


async def query_documents(call, container):
    body = await call.json_body()
    q = _compile(body)
    consistency = effective(call.gw.account.consistency, call.header(H.CONSISTENCY_LEVEL))
    session = parse_session(call)
    docs, touched = scoped_documents(call, container, consistency, session)
    results = _execute(q, docs, call.gw.clock.now_ms())
    start = _decode_offset(call.header(H.CONTINUATION))
    size = feeds.page_size(call.int_header(H.MAX_ITEM_COUNT))
    page = results[start:start + size]
    raw = [responses.dumps(r) for r in page]
    hdrs = {H.ITEM_COUNT: str(len(raw))}
    if start + size < len(results):
        hdrs[H.CONTINUATION] = _encode_offset(start + size)
    if touched:
        hdrs[H.SESSION_TOKEN] = ",".join(f"{rs.range_id}:{rs.epoch}#{rs.committed_lsn}" for rs in touched)
        hdrs[H.ALT_CONTENT_PATH] = container.name_path
    ru = charge.feed(len(docs), sum(map(len, raw)))
    return responses.reply(200, responses.feed_body(container.rid, "Documents", raw), call.activity_id, ru, hdrs)


async def query_plan(call, container):
    raise CosmosError(400, 0, "regionlab runs every query on the server and does not hand out query "
                              "plans; send the query itself (the Python SDK does so by default).")
