"""One direct-mode connection's protocol, sans-I/O: bytes in, frames to serve and bytes out.

Theory of operation (docs/direct-protocol.md): a `Session` owns everything the protocol says
about one connection and nothing about sockets, loops, clocks or the service, as h11 does for
HTTP. Its caller (connection.py) hands it the bytes that arrived (`receive`: the frames they
complete, in order, and the ProtocolError that ended them if they went bad; before `ready`, one
frame at a time, each at most PRE_READY_FRAME_MAX_BYTES, so the handshake's state decides how the
next is read), then each frame
(`frame`), whose transition answers control frames itself and hands back the requests it accepts.
What the session says goes to `out` (encoded frames) for the caller to send; once `state` is
CLOSED it has said its last frame (an error or a bye) and the caller closes.

States, and what moves them (the tables below; anything else in a state is that state's error):

    HELLO --hello--> AUTH --auth--> READY_MAPS (version 1) or READY_ARRAYS (version 2)
    READY_* --bye--> CLOSING --last request answered--> CLOSED
    any --protocol error, failed auth, timeout, fail()--> CLOSED (an error frame is the last)

In READY_* requests are multiplexed by id: the session checks each request's envelope (its id,
its operation, its options, the id not already in flight, the connection's in-flight cap) and
hands it on as the version 2 array `[REQUEST_CODE, id, op name, replica, item, pk, body, options]`
(a version 1 map is reshaped so), or as a `Refusal` to be answered by id. A request that does not
finish at once is `begin`-ed with whatever the caller needs to cancel it and `end`-ed when
answered; CLOSING waits for the last of them. Timeouts are decided by `tick(now)` and `expire(now)`,
which the caller's sweeper runs: arrivals and incomplete frames are only marked when bytes come
(no clock read per buffer), and stamped with the sweeper's time, so a deadline is seen at most
one sweep late, never early.
"""
from regionlab.client.protocol import direct as D

from ..core.errors import CosmosError, bad_request
from . import replies
from .replies import Refusal, shown

HELLO = "hello"                    # waiting for the client's hello
AUTH = "auth"                      # the challenge went out; waiting for the client's auth
READY_MAPS = "ready"               # version 1: requests and replies are maps
READY_ARRAYS = "ready (arrays)"    # version 2 (COMPACT_VERSION): requests and replies are arrays
CLOSING = "closing"                # the client said bye: what is in flight is answered, then bye
CLOSED = "closed"                  # the last frame (an error or a bye) is said; nothing more is read

HANDSHAKE_STATES = frozenset((HELLO, AUTH))
_REPLYING = frozenset((READY_MAPS, READY_ARRAYS, CLOSING))

# What a frame is, whatever the state: a map's "t" (REQUEST, PING, ...; any other text is just
# not in a table), or ARRAY for an array (version 2: a request is an array of code REQUEST_CODE).
ARRAY = list
_REQUEST_CODE = D.REQUEST_CODE
_REQUEST_LENGTH = D.REQUEST_LENGTH
_REQUEST_ID_MAX = D.REQUEST_ID_MAX
_OPERATIONS = D.OPERATIONS
_CODES = D.OPERATION_CODES
_N_CODES = len(D.OPERATION_CODES)
_pack = D.pack
_pack_length = D.pack_length
_COMPACT_VERSION = D.COMPACT_VERSION
_FRAME_MAX_BYTES = D.FRAME_MAX_BYTES
_PRE_READY_FRAME_MAX_BYTES = D.PRE_READY_FRAME_MAX_BYTES


class Limits:
    """What a node states in its challenge and holds its connections to (client/protocol/direct.py)."""
    __slots__ = ("node", "region", "instance", "key", "max_in_flight", "max_frame_bytes", "handshake_timeout_s",
                 "idle_timeout_s", "frame_timeout_s")

    def __init__(self, node: int, region: str, instance: str, key: str | None, *,
                 max_in_flight: int = D.IN_FLIGHT_PER_CONNECTION_MAX, max_frame_bytes: int = D.FRAME_MAX_BYTES,
                 handshake_timeout_s: float = D.HANDSHAKE_TIMEOUT_S, idle_timeout_s: float = D.IDLE_TIMEOUT_S,
                 frame_timeout_s: float = D.FRAME_TIMEOUT_S):
        self.node = node
        self.region = region
        self.instance = instance                 # the emulator instance a hello may name
        self.key = key                           # the account key the auth proves (None: no auth)
        self.max_in_flight = max_in_flight
        self.max_frame_bytes = max_frame_bytes
        self.handshake_timeout_s = handshake_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.frame_timeout_s = frame_timeout_s


class Session:
    def __init__(self, limits: Limits, nonce: bytes, now: float):
        self.limits = limits
        self.nonce = nonce                   # the challenge's: the caller draws it (os.urandom)
        self.decoder = D.FrameDecoder(limits.max_frame_bytes, D.STRING_MAX_BYTES)
        self.state = HELLO
        self._table = _TRANSITIONS[HELLO]    # the current state's transitions (_to keeps them)
        self.version = 0                     # the version the challenge named
        self.compact = False
        self.out: list = []                  # encoded frames to send, in order
        self.out_bytes = 0                   # bytes of the replies in `out` (the caller's flow control)
        self.in_flight: dict = {}            # request id -> the caller's handle, for requests not yet answered
        self.opened = self.last_rx = now
        self.received = False                # bytes came since the last tick
        self.frame_since = 0.0               # when the incomplete frame began (0: none)
        self.frame_began = False             # an incomplete frame began since the last tick

    def _to(self, state: str) -> None:
        self.state = state
        self._table = _TRANSITIONS[state]
        # Replies go out as version 2 arrays (unless too large): ready or closing, in version 2.
        self.compact = state in _REPLYING and self.version >= _COMPACT_VERSION

    # ---- bytes in -----------------------------------------------------------------------------
    def receive(self, data: bytes):
        """The frames `data` completes, in order; if the bytes went bad, the ProtocolError last
        (frame() ends the connection on it, after the frames before it were served)."""
        self.received = True
        if self.state in HANDSHAKE_STATES:
            return self._handshake_frames(data)
        decoder = self.decoder
        try:
            frames = decoder.feed(data)
        except D.ProtocolError as e:
            return [*e.frames, e]
        if decoder.pending or self.frame_since or self.frame_began:
            self._time_frame(bool(frames))
        return frames

    def _handshake_frames(self, data: bytes):
        """Before ready, one frame at a time, each at most PRE_READY_FRAME_MAX_BYTES: the peer is
        not authenticated, so a longer frame is refused from its length prefix, before it is read
        or decoded. The caller takes each frame before the next is decoded, so what follows the
        auth in the same bytes is decoded under the ready limits."""
        decoder = self.decoder
        completed = False
        while self.state in HANDSHAKE_STATES:
            try:
                got = decoder.feed_first(data, _PRE_READY_FRAME_MAX_BYTES)
            except D.ProtocolError as e:
                yield e
                return
            if not got:
                self._time_frame(completed)
                return
            data = b""
            completed = True
            yield got[0]
        if self.state != CLOSED:
            yield from self.receive(b"")

    def _time_frame(self, completed: bool) -> None:
        """The frame timer times the frame incomplete now: one that began in these bytes (after
        a frame they completed) starts it again, so a busy sender whose reads end mid-frame is
        not taken for a trickler; a trickler completes nothing."""
        if self.decoder.pending:
            if completed or not self.frame_since:
                self.frame_began = True
        else:                                # no frame is incomplete now
            self.frame_since = 0.0
            self.frame_began = False

    def frame(self, f):
        """Take one frame (or the ProtocolError that ended the bytes) in the current state: None
        when the session answered it itself (or ignored it, or ended the connection), else the
        request to serve (a list) or a Refusal to answer."""
        kind = type(f)
        if kind is dict:
            kind = f["t"]
        elif kind is not list:               # the ProtocolError receive() put last
            self.fail(f.status, f.substatus, f.message)
            return None
        handler = self._table.get(kind)
        if handler is None:
            return _OTHERWISE[self.state](self, _kind_name(kind))
        return handler(self, f)

    # ---- the handshake ------------------------------------------------------------------------
    def _hello(self, f: dict):
        limits = self.limits
        stated = f.get("instance")
        if stated is not None and stated != limits.instance:
            self._wrong_instance(stated)
            return None
        version = D.choose_version(f.get("versions"))
        if version is None:
            self.fail(400, D.SUB_VERSION, f"No protocol version in common: the node speaks "
                                          f"{list(D.PROTOCOL_VERSIONS)}, the client offered {shown(f.get('versions'), 60)}.")
            return None
        self.version = version
        self._to(AUTH)
        self.send({"t": D.CHALLENGE, "version": version, "nonce": self.nonce, "node": limits.node,
                   "region": limits.region, "instance": limits.instance, "max_in_flight": limits.max_in_flight,
                   "max_frame_bytes": limits.max_frame_bytes, "idle_timeout_ms": int(limits.idle_timeout_s * 1000),
                   "heartbeat_ms": int(D.HEARTBEAT_INTERVAL_S * 1000)})
        return None

    def _wrong_instance(self, stated) -> None:
        """A hello that names an emulator instance must name this one: resource ids are
        sequential, so another emulator on this machine holds the same replica keys, and a
        client whose address is stale (its emulator restarted, or this node took a port that
        emulator's node had) would be served another account's data. Refused 410 (refresh the
        addresses) and closed. A hello naming none (an older client) is not checked."""
        if type(stated) is not str:
            self.fail(400, D.SUB_HANDSHAKE, "A hello's 'instance' must be a string: the instance id of the "
                                            "address (rlmp://host:port/apps/<instance>/...).")
            return
        self.fail(410, D.SUB_INSTANCE_MISMATCH,
                  f"This node belongs to emulator instance {self.limits.instance!r}, not "
                  f"{stated[:D.INSTANCE_MAX_CHARS]!r} as the address said: the address is stale (its emulator "
                  "restarted, or another emulator now listens on its port); refresh the addresses.")

    def _auth(self, f: dict):
        key = self.limits.key
        if key is not None and not D.mac_matches(key, self.nonce, f.get("mac")):
            self.fail(401, 0, "Authentication failed: 'mac' must be HMAC-SHA256 of the challenge's nonce "
                              "with the account key.")
            return None
        self._to(READY_ARRAYS if self.version >= D.COMPACT_VERSION else READY_MAPS)
        self.send({"t": D.READY})
        return None

    def _out_of_place(self, kind: str):
        expected = D.HELLO if self.state == HELLO else D.AUTH
        self.fail(400, D.SUB_HANDSHAKE, f"Expected a '{expected}' frame during the handshake, got '{kind[:40]}'.")

    # ---- ready: control frames ----------------------------------------------------------------
    def _ping(self, f):
        self.send({"t": D.PONG})

    def _bye(self, f):
        self._to(CLOSING)
        if not self.in_flight:
            self.goodbye()

    def _not_allowed(self, kind: str):
        sub = D.SUB_HANDSHAKE if kind in (D.HELLO, D.AUTH) else D.SUB_BAD_FRAME
        self.fail(400, sub, f"A '{kind[:40]}' frame is not allowed on a ready connection.")

    def _maps_on_arrays(self, f):
        self.fail(400, D.SUB_BAD_FRAME, f"Protocol version {self.version} sends requests as arrays "
                                        "(docs/direct-protocol.md), not maps.")

    def _array_not_request(self, f):
        self.fail(400, D.SUB_BAD_FRAME, f"An array frame with code {shown(f[0], 20)} is not a request of "
                                        f"protocol version {self.version}.")

    def _ignored(self, f):
        return None

    # ---- ready: requests ----------------------------------------------------------------------
    def _array_request(self, f: list):
        """A request, [REQUEST_CODE, id, op code, replica, item, pk, body, options] (version 1's
        map reshaped so: _map_request): the request to serve with its op's name in place of its
        code, if its envelope lets it be served now; else its Refusal (or None when its id is
        unreadable: the connection ended)."""
        if f[0] != _REQUEST_CODE:
            return self._array_not_request(f)
        if len(f) != _REQUEST_LENGTH:
            rid = f[1] if len(f) > 1 else None
            if self._id_ok(rid):
                return Refusal(rid, None, None, CosmosError(
                    400, D.SUB_BAD_REQUEST_FRAME, f"A request is an array of {D.REQUEST_LENGTH} elements "
                                                  "[1, id, op, replica, item, pk, body, options]."))
            return None
        _, rid, op, _, _, _, _, options = f
        if type(rid) is not int or not 0 <= rid <= _REQUEST_ID_MAX:
            self._id_ok(rid)                 # ends the connection: there is no id to answer
            return None
        # A bool is not an op code (False == 0 is the read's code); a name is taken as a name.
        if type(op) is int and 0 <= op < _N_CODES:
            op = f[2] = _CODES[op]
        elif type(op) is not str or op not in _OPERATIONS:
            if options is None or type(options) is dict:
                message = f"Unknown operation {shown(op, 40)}; one of {', '.join(D.OPERATIONS)}."
                return Refusal(rid, op, options, CosmosError(400, D.SUB_BAD_REQUEST_FRAME, message), fatal=True)
        if options is not None and type(options) is not dict:
            return Refusal(rid, op, None, bad_request("A request's options must be a map or nil."))
        in_flight = self.in_flight
        if in_flight:
            if rid in in_flight:
                return Refusal(rid, op, options, CosmosError(
                    400, D.SUB_BAD_REQUEST_FRAME, f"Request id {rid} is already in flight on this connection."))
            if len(in_flight) >= self.limits.max_in_flight:
                return Refusal(rid, op, options, CosmosError(
                    429, D.SUB_BUSY, f"This connection has {self.limits.max_in_flight} requests in flight, the "
                                     "node's limit (max_in_flight); nothing of this request was applied.",
                    retry_after_ms=D.BUSY_RETRY_AFTER_MS))
        return f

    def _map_request(self, f: dict):
        """A version 1 request map: its own options map (the names that are not options mean
        nothing to the operation)."""
        return self._array_request([_REQUEST_CODE, f.get("id"), f.get("op"), f.get("replica"), f.get("item"),
                                    f.get("pk"), f.get("body"), f])

    def _id_ok(self, rid) -> bool:
        """Whether a request's id can be answered; if not, the connection ends."""
        if type(rid) is not int or not 0 <= rid <= _REQUEST_ID_MAX:
            self.fail(400, D.SUB_BAD_REQUEST_FRAME, f"A request needs an integer 'id' 0-{_REQUEST_ID_MAX}.")
            return False
        return True

    def refused(self, refusal: Refusal) -> None:
        """After a Refusal's answer went out: a fatal one (an unknown operation: the peer speaks
        another protocol than it negotiated) ends the connection."""
        if refusal.fatal:
            self.fail(400, D.SUB_BAD_REQUEST_FRAME, f"{refusal.error.message} The connection is closed.")

    # ---- multiplexing -------------------------------------------------------------------------
    def begin(self, rid: int, handle) -> None:
        """Request rid did not finish at once: in flight until end(rid); `handle` is the
        caller's (what it cancels when the connection ends)."""
        self.in_flight[rid] = handle

    def end(self, rid: int) -> None:
        """Request rid was answered (or given up); a closing session says bye after the last."""
        self.in_flight.pop(rid, None)
        if self.state == CLOSING and not self.in_flight:
            self.goodbye()

    # ---- bytes out ----------------------------------------------------------------------------
    def send(self, frame: dict) -> None:
        if self.state != CLOSED:
            self.out.append(D.encode(frame))

    def send_reply(self, res: list) -> None:
        """Queue a reply array (client/protocol/direct.py REPLY_FIELDS). A version 2 reply that
        fits a frame is queued as its length prefix and its body (the caller joins what is
        queued into one write): no frame of its own is made by concatenation."""
        if self.compact:
            body = _pack(res)
            n = len(body)
            if n <= _FRAME_MAX_BYTES:
                self.out += (_pack_length(n), body)
                self.out_bytes += n
                return
        if self.state != CLOSED:
            data = self.reply_bytes(res)
            self.out.append(data)
            self.out_bytes += len(data)

    def sent(self) -> None:
        """The caller took what was queued in `out` (sent or dropped it)."""
        self.out.clear()
        self.out_bytes = 0

    def reply_bytes(self, res: list) -> bytes:
        """A reply array's frame as this version frames it; one too large to frame is its
        413/SUB_REPLY_TOO_LARGE (replies.too_large)."""
        compact = self.version >= D.COMPACT_VERSION
        try:
            return D.encode(res if compact else D.reply_fields(res))
        except ValueError:
            small = replies.too_large(res, len(D.pack(res)))
        return D.encode(small if compact else D.reply_fields(small))

    def fail(self, status: int, sub: int, message: str) -> None:
        """End the connection: an error frame, the last."""
        if self.state != CLOSED:
            self.send({"t": D.ERROR, "status": status, "sub": sub, "message": message})
            self._to(CLOSED)

    def goodbye(self) -> None:
        """End the connection cleanly: a bye, the last frame."""
        if self.state != CLOSED:
            self.send({"t": D.BYE})
            self._to(CLOSED)

    # ---- time ---------------------------------------------------------------------------------
    def tick(self, now: float) -> None:
        """Stamp what was only marked since the last tick with the sweeper's time."""
        if self.received:
            self.received = False
            self.last_rx = now
        if self.frame_began:
            self.frame_began = False
            self.frame_since = now

    def expire(self, now: float) -> bool:
        """End the connection if a deadline passed (the handshake's, an incomplete frame's, or
        idleness with nothing in flight); whether it did."""
        limits = self.limits
        state = self.state
        if state == CLOSED:
            return False
        if state in HANDSHAKE_STATES:
            if now - self.opened > limits.handshake_timeout_s:
                self.fail(408, D.SUB_HANDSHAKE,
                          f"The handshake did not finish within {limits.handshake_timeout_s:g} s.")
        elif self.frame_since and now - self.frame_since > limits.frame_timeout_s:
            self.fail(408, D.SUB_IDLE, f"A frame was not complete within {limits.frame_timeout_s:g} s.")
        elif not self.in_flight and now - self.last_rx > limits.idle_timeout_s:
            self.fail(408, D.SUB_IDLE, f"Nothing arrived for {limits.idle_timeout_s:g} s (idle timeout); "
                                       "send pings to keep a connection open.")
        return self.state == CLOSED


def _kind_name(kind) -> str:
    """A frame kind as an error message names it."""
    return "array" if kind is ARRAY else kind


# ---- the transitions ------------------------------------------------------------------------------
# state -> {frame kind -> what the session does with it}; a kind a state does not list goes to
# that state's _OTHERWISE (an error, or nothing once the connection is closing or closed).
_READY_CONTROL = {D.PING: Session._ping, D.PONG: Session._ignored, D.BYE: Session._bye}
_TRANSITIONS = {
    HELLO: {D.HELLO: Session._hello},
    AUTH: {D.AUTH: Session._auth},
    READY_MAPS: {D.REQUEST: Session._map_request, ARRAY: Session._array_not_request, **_READY_CONTROL},
    READY_ARRAYS: {ARRAY: Session._array_request, D.REQUEST: Session._maps_on_arrays, **_READY_CONTROL},
    CLOSING: {},
    CLOSED: {},
}
_OTHERWISE = {
    HELLO: Session._out_of_place,
    AUTH: Session._out_of_place,
    READY_MAPS: Session._not_allowed,
    READY_ARRAYS: Session._not_allowed,
    CLOSING: Session._ignored,                 # the client said bye: what it sends after is ignored
    CLOSED: Session._ignored,
}
