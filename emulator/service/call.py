"""One request to the service, parsed once: path segments, the serving region, headers, body.

Paths are normalised as the SDKs need (cosmos-wire §1): leading and trailing slashes trimmed,
each segment percent-decoded. The surface has already read the whole body within the service's
size limit (gateway/http.py, direct mode's framing), so a client that disconnects or stalls
mid-body never gets this far.
"""
from urllib.parse import unquote

from regionlab.client.protocol import headers as H

from ..core.errors import CosmosError, bad_request
from ..core.read_routing import ConnectionPins
from ..core.validation import ValidationError, parse_item_body, parse_json_body
from .responses import ACTIVITY_IDS


class Call:
    """One request to the service, from any surface. `source` is the surface's own request (the
    HTTP layer's, or direct mode's frame), read for two things only: whether its client went
    away while the call ran (`lost`) and the client connection it came on (`conn`, whose read
    pins it keeps); the simulator passes None.

    A surface that names its resources otherwise than by a path (direct mode names a replica)
    makes its calls with `addressed`, and may say what the service runs for the call (`route`,
    instead of dispatching on the path) and what its reply is counted as (`counted_as`, instead
    of the method and the resource kind)."""
    __slots__ = ("svc", "source", "method", "path", "link", "segs", "headers", "header", "activity_id", "region",
                 "raw", "replica", "serving", "route", "counted_as")

    def __init__(self, svc, method: str, path: str, headers: dict, body: bytes, source=None):
        self.svc = svc
        self.source = source
        self.method = method
        self.path = path                 # as sent: percent-encoded, with its query string
        if "?" in path:
            path = path.split("?", 1)[0]
        path = self.link = path.strip("/")    # the resource's link: no query, no outer slashes
        segs = path.split("/") if path else []
        if "%" in path:
            segs = [unquote(s) for s in segs]
        self.segs = segs
        self.headers = headers
        # header(name, default=None): the headers' own get, not a method wrapping it; a request
        # asks for a header 7-10 times, and a Python call costs more than the lookup it wraps.
        self.header = headers.get
        self.activity_id = headers.get(H.ACTIVITY_ID) or next(ACTIVITY_IDS)
        self.region = svc.region or svc.account.hub_region
        self.raw = body
        self.replica = None          # direct mode names the replica that serves a read (emulator/direct)
        self.serving = ()          # replicas serving this call's read, in flight until its reply goes out
        self.route = None
        self.counted_as = None

    @classmethod
    def addressed(cls, svc, method: str, segs: list, headers: dict, body: bytes, activity_id: str, source,
                  path: str, route=None, counted_as: tuple | None = None) -> "Call":
        """A call whose surface resolved what it addresses itself: `segs` are the segments a path
        to it would have, `path` what the surface logs it as. `route`, when given, is the
        coroutine function Service.handle runs for the call in place of its path dispatch
        (route(call) -> Reply); `counted_as` the first two fields of its reply's count in
        requests_served (by default the method and the resource kind)."""
        call = cls.__new__(cls)
        call.svc = svc
        call.source = source
        call.method = method
        call.path = path
        call.link = path.split("?", 1)[0].strip("/")
        call.segs = segs
        call.headers = headers
        call.header = headers.get
        call.activity_id = activity_id
        call.region = svc.region or svc.account.hub_region
        call.raw = body
        call.replica = None
        call.serving = ()
        call.route = route
        call.counted_as = counted_as
        return call

    def lost(self) -> bool:
        """Whether the client went away while this call ran (a long query stops then)."""
        source = self.source
        return source is not None and source.lost

    def pins(self):
        """The read-routing pins of the client connection this call came on (strategy
        `connections`, core/read_routing.py), made at its first read; None off a connection,
        and once it has closed (its pins are released then: a read finishing later pins nothing)."""
        source = self.source
        conn = source.conn if source is not None else None
        if conn is None or conn.transport is None:
            return None
        pins = conn.pins
        if pins is None:
            pins = conn.pins = ConnectionPins()
        return pins

    def flag(self, name: str) -> bool:
        v = self.headers.get(name)
        return v is not None and v.lower() == "true"

    def json_body(self, required: bool = True):
        return json_of(self.raw, required)

    def int_header(self, name: str) -> int | None:
        v = self.headers.get(name)
        if v is None or v == "":
            return None
        try:
            return int(v)
        except ValueError:
            raise bad_request(f"Header {name} must be an integer, got '{v}'.") from None


def json_of(raw: bytes, required: bool = True):
    """A request body's JSON value, or the 400 that says what is wrong with it (None for an
    empty body that is not required)."""
    if not raw:
        if required:
            raise bad_request("The request body is empty; a JSON body is required for this operation.")
        return None
    try:
        return parse_json_body(raw)
    except ValidationError as e:
        raise CosmosError(e.status, e.substatus, e.message) from None


def item_of(raw: bytes):
    """json_of(raw) of an item's body, with parse_item_body's verdict: (value, whether raw can
    be stored as it is, the system properties spliced in)."""
    if not raw:
        raise bad_request("The request body is empty; a JSON body is required for this operation.")
    try:
        return parse_item_body(raw)
    except ValidationError as e:
        raise CosmosError(e.status, e.substatus, e.message) from None
