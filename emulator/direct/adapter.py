"""Request frames to service calls, replies to reply arrays: the adapter between a node and its
region's Service.

Theory of operation: a request the session accepted (session.py: `[REQUEST_CODE, id, op,
replica, item, pk, body, options]`) names a replica and an operation, not a path. `serve`
resolves the replica on its node (targets.py), checks the request's fields (their types, and
that a partition key hashes into the replica's range, as a replica enforces: refused up front,
a replies.Refusal), and turns the request into the Call the gateway would make for the same
operation (client/protocol/direct.py OPERATIONS: the method, the headers its optional fields
stand for, the path segments of the replica's container), counted under the operation and the
replica key. It runs it through `Service.handle` and its path dispatch (`_run`: the plain path),
or, for a point read or create while no request fault is on, through point.py (the fast path:
the same answers in fewer steps). Either answers at once (the reply array) or, when the request
waits (a write's quorum, a latency fault's hold), hands back a replies.Waiting whose coroutine
the caller finishes in a task (`finish` then makes its reply). A batch runs the path dispatch
under the frame limit (`_framed`): a reply too large to frame is answered 413/
SUB_REPLY_TOO_LARGE by the service itself, so that it is counted as what the client gets.

Every reply, served or refused, is counted once, in the region Service's `requests_served`, by
(op, replica key, status, substatus or the request fault that lost it); a refusal, which reached
no replica, with None for the key (and "other" for an operation that is none), so no client can
grow the count without bound. plane.py sums it by region and by replica.
"""
import uuid

from regionlab.client.protocol import direct as D
from regionlab.client.protocol import headers as H

from ..core.errors import CosmosError, bad_request
from ..service import partition_keys, responses, routes
from ..service.call import Call
from ..core.limits import DIRECT_REPLY_BODY_MAX_BYTES
from . import point, replies

_ACTIVITY_PREFIX = str(uuid.uuid4())[:24]     # the nodes' own, so their ids never equal the gateway's
# The activity ids of requests that bring none: next(_ACTIVITIES) (responses.activity_ids).
_ACTIVITIES = responses.activity_ids(_ACTIVITY_PREFIX)
# The gateway headers an operation implies, beyond its method.
_OP_HEADERS = {
    D.UPSERT: {H.IS_UPSERT: "true"},
    D.BATCH: {H.IS_BATCH: "true", H.BATCH_ATOMIC: "true"},
    D.QUERY: {H.IS_QUERY: "true", H.CONTENT_TYPE: "application/query+json"},
    D.CHANGE_FEED: {H.A_IM: H.A_IM_INCREMENTAL},
}
# Pages scoped to the named replica's partition key range.
_SCOPED_FEEDS = frozenset((D.QUERY, D.CHANGE_FEED, D.READ_FEED))
_OPERATIONS = D.OPERATIONS
_ITEM_OPERATIONS = frozenset(op for op, (_, has_item) in D.OPERATIONS.items() if has_item)
_CREATES = frozenset((D.CREATE, D.UPSERT))
_READ = D.READ
_WRITES = D.WRITE_OPERATIONS
_pk_parsed = partition_keys.parsed           # a partition key's parse, when cached
_PK = H.PARTITION_KEY
_ACTIVITY_ID = H.ACTIVITY_ID


def serve(node, req: list, fast: bool, last: list):
    """Run an accepted request on node: its reply array, or a replies.Waiting, replies.Lost (a
    request fault lost the reply) or replies.Refusal (the replica may not serve it, or a field is
    bad). `fast` (no request fault is on): a point read or create takes point.py's path. `last`
    is [key, target] of the replica the reads of the bytes being handled last resolved to: they
    reuse it (nothing that moves a replica or changes its state runs between them)."""
    _, rid, op, key, item, pk, body, options = req
    try:
        if node.unavailable:
            raise node.unavailable_error()
        if op != _READ:
            target = node.targets.resolve(key, op in _WRITES)
        elif key == last[0]:
            target = last[1]
        else:
            target = last[1] = node.targets.resolve(key, False)
            last[0] = key
        headers = option_headers(options) if options else None
        if pk is None:
            if headers is not None:
                pk = headers.get(_PK)
        elif type(pk) is not str:
            raise bad_request("Request field 'pk' must be a string.")
        parsed = None
        if pk is not None:
            parsed = _pk_parsed(pk) or partition_keys.parse(pk)
            if target.split:
                _check_range(target, parsed)
        if op in _ITEM_OPERATIONS and (type(item) is not str or not item):
            raise bad_request(f"Operation '{op}' needs the item's id in 'item'.")
        if body is None:
            body = b""
        elif type(body) is not bytes:
            raise bad_request("'body' must be the JSON request body as bytes (a msgpack bin).")
    except CosmosError as e:
        return replies.Refusal(rid, op, options, e)
    activity = (headers.get(_ACTIVITY_ID) if headers is not None else None) or next(_ACTIVITIES)
    if fast:
        if op == _READ:
            return point.read(target, rid, item, headers, parsed, activity)
        if op in _CREATES:
            return point.create(target, rid, op, body, headers, parsed, activity)
    if headers is None:
        headers = {}
    if pk is not None:
        headers[_PK] = pk
    return _run(_call(node.svc, op, item, target, headers, body, activity), target, rid)


def _run(call, target, rid: int):
    """The plain path: Service.handle, its first step inline."""
    replica = target.replica
    replica.in_flight += 1                   # until its reply goes out: read routing sees it
    coro = call.svc.handle(call)
    try:
        waiting = coro.send(None)
    except StopIteration as done:
        replica.in_flight -= 1
        return _array(done.value, call, target, rid)
    return replies.Waiting(coro, waiting, call, target, rid)


def _check_range(target, parsed: tuple) -> None:
    """A request's partition key must hash into the named replica's range (else the client's
    routing map is stale: 410/1002). A key of the wrong number of values is left to the
    service's 400."""
    container = target.container
    pk_json, values = parsed
    if len(values) != target.pk_paths:
        return
    if container.partitions[container.partition_index(container.epk_of(pk_json, values))] is not target.partition:
        raise CosmosError(410, D.SUB_PARTITION_KEY_RANGE_GONE,
                          f"The partition key {pk_json[:80]} is not in range {target.partition.range_id}; "
                          "refresh the partition key ranges and addresses.")


def finish(w: replies.Waiting, result) -> list:
    """The reply (as serve's) of a Waiting whose coroutine gave `result`."""
    if type(result) is list:
        return result
    return _array(result, w.call, w.target, w.rid)


def _array(reply: responses.Reply, call, target, rid: int):
    res = replies.of_reply(rid, reply, target, call.activity_id)
    if reply.fault is not None:
        return replies.Lost(res, reply.fault)
    return res


def _call(svc, op: str, item, target, headers: dict, body: bytes, activity: str) -> Call:
    """The Call the gateway would make for the same operation, counted as (op, replica key)."""
    extra = _OP_HEADERS.get(op)
    if extra:
        headers.update(extra)
    if op in _SCOPED_FEEDS:
        headers[H.PK_RANGE_ID] = target.partition.range_id
    segs = [*target.docs_segs, item] if op in _ITEM_OPERATIONS else target.docs_segs
    call = Call.addressed(svc, _OPERATIONS[op][0], segs, headers, body, activity, None, target.key,
                          _framed if op == D.BATCH else None, (op, target.key))
    if op == _READ:
        call.replica = target.replica        # a point read is served by the replica it names
    return call


async def _framed(call) -> responses.Reply:
    """A batch: the service's path dispatch, under the frame limit."""
    reply = await routes.dispatch(call)
    body = reply.body
    if body and len(body) > DIRECT_REPLY_BODY_MAX_BYTES:
        return replies.too_large_reply(reply, len(body), call.activity_id)
    return reply


def option_headers(options: dict) -> dict:
    """The gateway headers of a request's optional fields, each a string (max_items may be an
    integer), or 400. Names that are not options (a version 1 map's own fields) mean nothing."""
    headers = {}
    known = D.REQUEST_OPTIONS
    for name, value in options.items():
        header = known.get(name)
        if header is None:
            continue
        if type(value) is int and name == "max_items":
            value = str(value)
        elif not isinstance(value, str):
            raise bad_request(f"Request field '{name}' must be a string.")
        headers[header] = value
    return headers


def refused(svc, refusal) -> list:
    """The reply array of a request refused before it reached a replica, counted."""
    options = refusal.options
    activity = options.get("activity_id") if type(options) is dict else None
    if not isinstance(activity, str):
        activity = next(_ACTIVITIES)
    op = refusal.op
    err = refusal.error
    svc.requests_served[(op if type(op) is str and op in _OPERATIONS else "other", None, err.status,
                         err.substatus)] += 1
    return replies.refusal(refusal.rid, err, activity)
