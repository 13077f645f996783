"""The gateway's part of request faults (core/request_faults.py decides; this applies).

A request is classified (`op_of`: read, write, query or metadata) and, only when a fault of its
region has selectors, resolved to its database, container and partition (`target_of`: by name,
from its path and partition key or partition key range header; None for what it does not
name). An `error` effect is raised before the request runs; a delay holds the reply after it
ran (the request's replicas stay in flight meanwhile, see server.py); a drop or reset marks the
reply, which the surface then drops unanswered or resets part-way (gateway/http.py, direct mode),
or the simulator records as an answer its client never got.
"""
from regionlab.client.protocol import headers as H

from ..core.errors import CosmosError
from . import partition_keys
from .paths import rid_based as _rid_based

def op_of(call) -> str:
    """read, write, query or metadata. Every reply is logged under its op (request_log.py), so
    the common answers come first: a document read or write is told by its method, and only a
    POST to a documents feed (a create, or a query) reads headers."""
    segs = call.segs
    n = len(segs)
    if n < 5 or segs[2] == "users":
        return "metadata"
    sub = segs[4]
    if sub == "pkranges" or sub == "conflicts":
        return "metadata"
    method = call.method
    if sub == "operations" or n != 5 or method != "POST":
        return "read" if method == "GET" and sub != "operations" else "write"
    if (call.header(H.IS_QUERY_PLAN) is not None or call.flag(H.IS_QUERY)
            or (call.header(H.CONTENT_TYPE) or "").lower().startswith("application/query+json")):
        return "query"
    return "write"


def target_of(call) -> tuple:
    """(database id, container id, partition range id) the request addresses; None for each it
    does not (or that does not exist: the request itself will answer for that)."""
    segs = call.segs
    account = call.svc.account
    if len(segs) < 2 or segs[0] != "dbs":
        return None, None, None
    by_rid = _rid_based(segs[1])
    try:
        db = account.database(segs[1], by_rid)
        if len(segs) < 4 or segs[2] != "colls":
            return db.id, None, None
        c = account.container(db, segs[3], by_rid)
    except (CosmosError, KeyError):
        return None, None, None
    range_id = call.header(H.PK_RANGE_ID)
    if range_id is None and call.header(H.PARTITION_KEY) is not None:
        try:
            pk_json, values = partition_keys.required(call, c)
            range_id = c.partition_for_epk(c.epk_of(pk_json, values)).range_id
        except CosmosError:
            range_id = None
    return db.id, c.id, range_id


def decide(call):
    """The effect the region's request faults have on this call, or None."""
    table = call.svc.account.faults.requests
    op = op_of(call)
    if table.selects_partitions(call.region):
        return table.decide(call.region, op, *target_of(call))
    return table.decide(call.region, op)
