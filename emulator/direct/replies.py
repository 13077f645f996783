"""Reply arrays: what every direct request is answered with (docs/direct-protocol.md, "Replies").

Theory of operation: a reply is built as the version 2 array from the start,
`[RESPONSE_CODE, id, status, sub, body, charge, session, lsn, quorum_lsn, global_lsn, item_lsn,
etag, role, activity_id, extra]` (client/protocol/direct.py REPLY_FIELDS); a version 1 session
sends the same fields as a map (session.py). The LSNs are those of the replica the request named
(its own, its set's quorum LSN, its partition's global LSN), so a client can judge a read quorum
as the service's direct clients do. Three sources: the fast path's own array (point.py), a
service Reply's headers (everything else, errors included), and a refusal before any replica was
reached (no LSNs to report). Serving a request gives its array, a `Lost` one (a request fault
lost it), or a `Waiting` (its reply comes once what it waits for did).
"""
from regionlab.client.protocol import direct as D
from regionlab.client.protocol import headers as H

from ..core.errors import CosmosError
from ..service import responses

RES = D.RESPONSE_CODE
# What a request that failed inside regionlab (not the client's mistake) is answered, as the
# service answers it (service/service.py).
INTERNAL = CosmosError(500, 0, "Internal error in regionlab; see the server log.", definite=False)
_EXTRA_HEADERS = ((H.CONTINUATION, "continuation"), (H.ITEM_COUNT, "item_count"),
                  (H.RETRY_AFTER_MS, "retry_after_ms"))


def shown(value, chars: int) -> str:
    """A client's value as an error message quotes it: a scalar's repr cut to `chars`, an array or
    map by its kind and size only. A decoded frame may nest 1,024 deep (msgpack's own limit), past
    Python's recursion limit for repr, and a repr of a long string or list costs its whole length
    before it is cut."""
    kind = type(value)
    if kind is str or kind is bytes:
        text = repr(value[:chars])
        return text if len(value) <= chars else text + "..."
    if kind is list or kind is dict:
        return f"{'an array' if kind is list else 'a map'} of {len(value)} element(s)"
    return repr(value)[:chars]


class Lost:
    """A reply a request fault lost (core/request_faults.py `drop`): the request ran, its client
    never gets `res`; `fault` says how (DROP_AFTER_APPLY or RESET)."""
    __slots__ = ("res", "fault")

    def __init__(self, res: list, fault: str):
        self.res = res
        self.fault = fault


class Refusal:
    """A request answered by id without reaching a replica (duplicate id, busy, bad fields,
    unknown operation); `fatal`: the connection ends after the answer."""
    __slots__ = ("rid", "op", "options", "error", "fatal")

    def __init__(self, rid: int, op, options, error: CosmosError, fatal: bool = False):
        self.rid = rid
        self.op = op
        self.options = options
        self.error = error
        self.fatal = fatal


class Waiting:
    """A request that did not finish in its first step: its coroutine (what the caller's task
    finishes; its first step yielded `waiting`) and what its reply is made from. Its replica is
    in flight until the caller's task is done (then `finish`, or cancelled)."""
    __slots__ = ("coro", "waiting", "call", "target", "rid")

    def __init__(self, coro, waiting, call, target, rid: int):
        self.coro = coro
        self.waiting = waiting
        self.call = call
        self.target = target
        self.rid = rid


def of_reply(rid: int, reply: responses.Reply, target, activity: str) -> list:
    """The reply array of a service Reply (feeds, queries, batches, errors) at the target replica."""
    get = reply.headers.get
    extra = None
    for header, name in _EXTRA_HEADERS:
        v = get(header)
        if v is not None:
            if extra is None:
                extra = {}
            extra[name] = v if name == "continuation" else int(v)
    lsn = get(H.LSN)
    replica = target.replica
    return [RES, rid, reply.status, reply.substatus, reply.body or None, float(get(H.REQUEST_CHARGE, 0.0)),
            get(H.SESSION_TOKEN), replica.applied_lsn, target.rs.committed_lsn, target.partition.global_lsn,
            int(lsn) if lsn is not None else None, get(H.ETAG), replica.role, activity, extra]


def refusal(rid: int, err: CosmosError, activity: str) -> list:
    """The reply array of a request refused before it reached a replica (no LSNs to report)."""
    body = responses.error(err, activity).body
    extra = {"retry_after_ms": int(err.retry_after_ms)} if err.retry_after_ms is not None else None
    return [RES, rid, err.status, err.substatus, body, 0.0, None, None, None, None, None, None, None, activity, extra]


def too_large_error(size: int) -> CosmosError:
    """What a reply of `size` bytes that cannot be framed is answered instead: it ran, only its
    reply cannot be framed (docs/direct-protocol.md)."""
    return CosmosError(413, D.SUB_REPLY_TOO_LARGE, (
        f"The reply ({size} bytes) exceeds the direct protocol's frame limit ({D.FRAME_MAX_BYTES} bytes). "
        "The operation ran (a batch's writes are applied); read the items back in smaller requests, "
        "or send this one through the gateway."))


def too_large_reply(reply: responses.Reply, size: int, activity: str) -> responses.Reply:
    """The service Reply in place of one of `size` bytes: the same headers (LSN, session,
    charge), the error as its status and body, no etag."""
    err = too_large_error(size)
    headers = {k: v for k, v in reply.headers.items() if k != H.ETAG}
    return responses.error(err, activity, headers)


def too_large(res: list, size: int) -> list:
    """The reply array in place of one of `size` bytes that cannot be framed after all (its
    envelope pushed it over): the same LSNs, session and charge, the error as its body."""
    err = too_large_error(size)
    small = list(res)
    small[2], small[3], small[4] = err.status, err.substatus, responses.error(err, res[13] or "").body
    small[11] = None                         # no etag: the body is the error
    return small
