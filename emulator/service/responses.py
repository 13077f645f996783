"""Building replies the way the service shapes them: JSON bodies, feed envelopes, error bodies
with `x-ms-substatus`, and the headers every reply carries. A Reply is what every surface gets
back from the service; the gateway writes it as HTTP (gateway/wire.py), direct mode as a frame."""
import functools
import itertools
import operator
import uuid

from regionlab.client.protocol import headers as H
from regionlab.client.protocol.status import code_name

from ..core import jsontext
from ..core.errors import CosmosError
from ..core.limits import CHARGE_TEXTS_CACHE_MAX_ENTRIES

GATEWAY_VERSION = "2.0.0"
SERVICE_VERSION = "version=2.14.0.0"
JSON = "application/json"


_ACTIVITY_PREFIX = str(uuid.uuid4())[:24]
_LAST_TWO_DIGITS = [f"{i:02x}" for i in range(256)]


def activity_ids(prefix: str):
    """GUID-shaped activity ids for requests that bring none, without end: `prefix` (the first 24
    characters of a random uuid, one per process, or per direct node) and a 48-bit counter as 12
    hex digits (a uuid4 per request costs more than the rest of a point read's parsing). Made
    without a Python frame per id, `next(ids)`: blocks of 256 ids share their first 10 counter
    digits, and each id is one operator.add of its block and its last two. (A bound
    `block.__add__` is a slot wrapper: a third more per id.)"""
    blocks = map(f"{prefix}{{:010x}}".format, map((2 ** 40 - 1).__and__, itertools.count()))
    return itertools.chain.from_iterable(map(map, itertools.repeat(operator.add), map(itertools.repeat, blocks),
                                             itertools.repeat(_LAST_TWO_DIGITS)))


ACTIVITY_IDS = activity_ids(_ACTIVITY_PREFIX)     # the gateways': next(ACTIVITY_IDS) is a new id


def activity_id() -> str:
    return next(ACTIVITY_IDS)


dumps = jsontext.dumps_bytes          # compact JSON as bytes, the same as stored items




@functools.lru_cache(maxsize=CHARGE_TEXTS_CACHE_MAX_ENTRIES)
def charge_text(charge: float) -> str:
    """x-ms-request-charge's value ("5.56"); the few distinct charges are formatted once."""
    return f"{charge:.2f}"


def base_headers(activity_id: str, charge: float) -> dict:
    """The headers every reply carries whose value varies (CONSTANT_HEADERS come on top)."""
    return {H.ACTIVITY_ID: activity_id, H.REQUEST_CHARGE: charge_text(charge)}


def reply(status: int, body, activity_id: str, charge: float = 0.0, extra: dict | None = None) -> "Reply":
    """A reply with the headers every reply carries, then `extra`'s (which win)."""
    hdrs = base_headers(activity_id, charge)
    if extra:
        hdrs.update(extra)
    if body is None:
        return Reply(status, hdrs, b"")
    raw = body if isinstance(body, (bytes, bytearray)) else dumps(body)
    return Reply(status, hdrs, raw)


def feed_body(rid: str, key: str, items_raw: list) -> bytes:
    """A feed envelope from already-serialised items (no re-encoding of stored bodies)."""
    # rids and keys are ours (base64 and plain names): nothing in them needs JSON escaping
    return b"".join((f'{{"_rid":"{rid}","{key}":['.encode(), b",".join(items_raw),
                     f'],"_count":{len(items_raw)}}}'.encode()))


def error(err: CosmosError, activity_id: str, extra: dict | None = None) -> "Reply":
    hdrs = base_headers(activity_id, 0.0)
    hdrs[H.SUBSTATUS] = str(err.substatus)
    if err.retry_after_ms is not None:
        hdrs[H.RETRY_AFTER_MS] = str(int(err.retry_after_ms))
    if extra:
        hdrs.update(extra)
    body = {"code": code_name(err.status), "message": f"Message: {err.message}\r\nActivityId: {activity_id}"}
    r = Reply(err.status, hdrs, dumps(body))
    r.substatus = err.substatus
    r.definite = err.definite
    return r


class Reply:
    """A complete reply: status, headers (those every reply carries with the same value are the
    surface's: gateway/wire.py), body bytes (JSON unless content_type says otherwise)."""
    __slots__ = ("status", "headers", "body", "substatus", "definite", "fault", "content_type")

    def __init__(self, status: int, headers: dict, body: bytes, content_type: str | None = None):
        self.status = status
        self.headers = headers
        self.body = body
        self.substatus = 0          # an error's x-ms-substatus (also in headers), for counters
        # An error's CosmosError.definite: whether it certainly applied nothing (no header says
        # so on the wire; the simulator records it as the outcome its client would be owed).
        self.definite = True
        self.fault = None           # a request fault's drop: DROP_AFTER_APPLY or RESET (core/request_faults.py)
        self.content_type = content_type    # None: application/json
