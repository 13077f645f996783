"""The direct protocol (`rlmp`): framing, handshake, names and limits (docs/direct-protocol.md).

Theory of operation: this module owns the wire contract between a direct-mode client and a
backend node, and nothing else: no sockets, no timers (sans-IO, like h11). Bytes go into a
`FrameDecoder`, which hands back whole frames (msgpack maps) or raises `ProtocolError`; `encode`
turns a map into a frame. The server (emulator/direct/, its session.py) and clients import it;
neither imports the other.

Two versions: in version 1 every frame is a map with a string "t"; version 2 keeps the maps for
the handshake and control frames but sends requests and replies as positional arrays
(`request`, `reply_fields`), which build, hash and pack no key strings. A connection
speaks the version the challenge named; the decoder accepts both shapes and the node refuses
a shape the connection's version does not use.

Invariant of the decoder (the fuzz test checks it): for any byte string, fed whole or in any
split, `feed` yields the same frames, then (if the bytes go bad) the same ProtocolError, and
raises nothing else. A ProtocolError carries the whole frames decoded before the bad bytes in
that call (`frames`); after it the decoder stays failed.
"""
import hashlib
import hmac
import base64
import struct

import msgpack

PROTOCOL = "rlmp"                        # never "rntbd": no official SDK may take it for its own
PROTOCOL_VERSIONS = (1, 2)               # what this side speaks, oldest first
COMPACT_VERSION = 2                      # from this version on, requests and replies are arrays

# ---- limits (units last) ------------------------------------------------------------------
LENGTH_PREFIX_BYTES = 4
FRAME_MAX_BYTES = 8 * 1024 * 1024        # an item is <= 2 MB, a page <= 4 MB, plus the envelope
# Before `ready` the peer is not authenticated and its frames (hello, auth) are a few hundred
# bytes: a node refuses a longer one from its length prefix, before reading it.
PRE_READY_FRAME_MAX_BYTES = 4 * 1024
# What one frame may hold, whatever its size: no array or map of a frame has more elements (a
# request is 8, an options map at most 12 names), so a frame of a million tiny entries is refused
# by the decoder instead of built. A node also caps every string of a request (replica key, item,
# pk, session, continuation...) as the gateway caps a request's head; bodies are bins.
CONTAINER_MAX_ELEMENTS = 64
STRING_MAX_BYTES = 64 * 1024             # the gateway's request-head limit (gateway/http.py HEAD_BYTES_MAX)
NONCE_BYTES = 32
IN_FLIGHT_PER_CONNECTION_MAX = 256
CONNECTIONS_PER_NODE_MAX = 512
HANDSHAKE_TIMEOUT_S = 5.0
IDLE_TIMEOUT_S = 60.0
FRAME_TIMEOUT_S = 10.0                   # a begun frame must be complete by then (tricklers)
HEARTBEAT_INTERVAL_S = 15.0
BUSY_RETRY_AFTER_MS = 5
REQUEST_ID_MAX = 2 ** 32 - 1

# ---- frame types ("t") --------------------------------------------------------------------
HELLO = "hello"
CHALLENGE = "challenge"
AUTH = "auth"
READY = "ready"
REQUEST = "req"
RESPONSE = "res"
PING = "ping"
PONG = "pong"
BYE = "bye"
ERROR = "error"

# ---- operations: op -> (HTTP method of the gateway equivalent, addresses an item) -----------
READ = "read"
CREATE = "create"
UPSERT = "upsert"
REPLACE = "replace"
DELETE = "delete"
PATCH = "patch"
BATCH = "batch"
QUERY = "query"
CHANGE_FEED = "change_feed"
READ_FEED = "read_feed"
OPERATIONS = {READ: ("GET", True), CREATE: ("POST", False), UPSERT: ("POST", False),
              REPLACE: ("PUT", True), DELETE: ("DELETE", True), PATCH: ("PATCH", True),
              BATCH: ("POST", False), QUERY: ("POST", False), CHANGE_FEED: ("GET", False),
              READ_FEED: ("GET", False)}
WRITE_OPERATIONS = frozenset((CREATE, UPSERT, REPLACE, DELETE, PATCH, BATCH))
OPERATION_CODES = (READ, CREATE, UPSERT, REPLACE, DELETE, PATCH, BATCH, QUERY, CHANGE_FEED, READ_FEED)
OPERATION_CODE = {op: code for code, op in enumerate(OPERATION_CODES)}     # version 2: op by number
POINT_OPERATIONS = frozenset((READ, CREATE, UPSERT, REPLACE, DELETE, PATCH, BATCH))

# Optional request fields, each carrying the gateway header of the same meaning.
REQUEST_OPTIONS = {
    "pk": "x-ms-documentdb-partitionkey",
    "session": "x-ms-session-token",
    "consistency": "x-ms-consistency-level",
    "if_match": "if-match",
    "if_none_match": "if-none-match",
    "continuation": "x-ms-continuation",
    "max_items": "x-ms-max-item-count",
    "activity_id": "x-ms-activity-id",
    "prefer": "prefer",
    "if_modified_since": "if-modified-since",
    "start_epk": "x-ms-start-epk",
    "end_epk": "x-ms-end-epk",
}

# ---- version 2: requests and replies as positional arrays ---------------------------------
# request: [REQUEST_CODE, id, op code, replica, item, pk, body, options]; item, pk and body may
# be nil, options is nil or a map of the other REQUEST_OPTIONS (session, consistency, ...).
REQUEST_CODE = 1
REQUEST_LENGTH = 8
# reply: [RESPONSE_CODE, then the fields of REPLY_FIELDS in order, then extra]; extra is nil or a
# map of EXTRA_REPLY_FIELDS (the rarer ones). A field that does not apply is nil.
RESPONSE_CODE = 2
REPLY_FIELDS = ("id", "status", "sub", "body", "charge", "session", "lsn", "quorum_lsn", "global_lsn",
                "item_lsn", "etag", "role", "activity_id")
EXTRA_REPLY_FIELDS = ("continuation", "item_count", "retry_after_ms")
REPLY_LENGTH = 1 + len(REPLY_FIELDS) + 1

# ---- status and substatus codes of this protocol --------------------------------------------
# Direct substatuses sit in a range of their own (21000+), clear of the service's numbers.
SUB_REPLICA_NOT_HERE = 21001             # 410: the replica moved off this node, or never was on it
SUB_NOT_PRIMARY = 21002                  # 410: a write sent to a secondary
SUB_REPLICA_DOWN = 21003                 # 410: the replica is down (crashed)
SUB_BUSY = 21004                         # 429: past max_in_flight; 503: past the connection cap
SUB_INSTANCE_MISMATCH = 21005            # 410: the node is another emulator's than its address named
SUB_BAD_FRAME = 21010                    # 400: not one msgpack map, or a bad length prefix
SUB_FRAME_TOO_LARGE = 21011              # 400: length prefix over max_frame_bytes
SUB_BAD_REQUEST_FRAME = 21012            # 400: a request with missing or mistyped fields
SUB_HANDSHAKE = 21013                    # 400/408: a frame out of place, or a handshake too slow
SUB_VERSION = 21014                      # 400: no protocol version in common
SUB_IDLE = 21015                         # 408: nothing arrived for idle_timeout_ms, or a frame stalled
SUB_REPLY_TOO_LARGE = 21016              # 413: the operation ran, but its reply exceeds FRAME_MAX_BYTES
SUB_PARTITION_KEY_RANGE_GONE = 1002      # 410: the key is outside the named replica's range
SUB_READ_SESSION_NOT_AVAILABLE = 1002    # 404: this replica is behind the session token

_LENGTH = struct.Struct(">I")
_pack_length = _LENGTH.pack
_unpack_length = _LENGTH.unpack_from


class ProtocolError(Exception):
    """The peer broke the protocol; the connection ends with an error frame of this status."""

    def __init__(self, status: int, substatus: int, message: str):
        super().__init__(message)
        self.status = status
        self.substatus = substatus
        self.message = message
        self.frames = []                 # frames decoded, in the same feed, before the error


# ---- frames ---------------------------------------------------------------------------------
_packer = msgpack.Packer(use_bin_type=True)
_pack = _packer.pack
_unpackb = msgpack.unpackb


# A server that queues a batch's frames and joins them once may append the prefix and the body
# separately: pack_length(len(body)), then body = pack(frame) (frames it knows are small enough).
pack = _pack
pack_length = _pack_length


def encode(frame: dict) -> bytes:
    """One frame: the length prefix and the msgpack map."""
    body = _pack(frame)
    n = len(body)
    if n > FRAME_MAX_BYTES:
        raise ValueError(f"a frame of {n} bytes exceeds FRAME_MAX_BYTES ({FRAME_MAX_BYTES})")
    return _pack_length(n) + body


def decode_body(body: bytes, string_max_bytes: int = FRAME_MAX_BYTES):
    """The frame held by one frame's body (a map with a string "t", or a version 2 array that
    starts with its integer frame code), or ProtocolError. No array or map in it may have more
    than CONTAINER_MAX_ELEMENTS elements, nor a string more than string_max_bytes bytes."""
    try:
        # msgpack's defaults otherwise: str keys and values, lists, strict map keys.
        frame = _unpackb(body, max_str_len=string_max_bytes, max_array_len=CONTAINER_MAX_ELEMENTS,
                         max_map_len=CONTAINER_MAX_ELEMENTS)
    except msgpack.ExtraData:
        raise ProtocolError(400, SUB_BAD_FRAME, "A frame holds more than one msgpack value.") from None
    except ValueError as e:
        if "exceeds max_" in str(e):     # msgpack's "<n> exceeds max_array_len(<limit>)"
            raise ProtocolError(400, SUB_BAD_FRAME, f"A frame holds a value past the protocol's limits ({e}): "
                                f"arrays and maps hold at most {CONTAINER_MAX_ELEMENTS} elements, strings at "
                                f"most {string_max_bytes} bytes; send data in 'body'.") from None
        raise ProtocolError(400, SUB_BAD_FRAME, f"A frame is not valid msgpack ({type(e).__name__}).") from None
    except (TypeError, msgpack.UnpackException, OverflowError, RecursionError) as e:
        raise ProtocolError(400, SUB_BAD_FRAME, f"A frame is not valid msgpack ({type(e).__name__}).") from None
    kind = type(frame)
    if kind is list:
        if frame and type(frame[0]) is int:
            return frame
    elif kind is dict and type(frame.get("t")) is str:
        return frame
    raise ProtocolError(400, SUB_BAD_FRAME, 'A frame must be a msgpack map with a string "t" (type), or an '
                                            'array that starts with its integer frame code (version 2).')


class FrameDecoder:
    """Bytes in, frames out. `pending` says whether a frame has begun and is incomplete (the
    caller's frame timer runs while it is).

    Every whole frame in the bytes at hand is decoded in one pass by offset (no copying of what
    follows); only an incomplete tail is kept, in a bytearray that grows until its frame is whole.
    `feed_first` decodes at most one frame under a smaller limit and keeps the rest: a server in
    its handshake, whose next frame's limit depends on what the first said."""
    __slots__ = ("_buf", "_need", "max_frame_bytes", "string_max_bytes", "failed", "pending")

    def __init__(self, max_frame_bytes: int = FRAME_MAX_BYTES, string_max_bytes: int = FRAME_MAX_BYTES):
        self._buf = bytearray()
        self._need = 0                   # bytes the kept tail needs before it can be decoded further
        self.max_frame_bytes = max_frame_bytes
        self.string_max_bytes = string_max_bytes
        self.failed = False
        # Whether _buf holds an incomplete frame: a plain attribute kept by feed, not a property,
        # since a server asks after every read.
        self.pending = False

    def feed(self, data: bytes) -> list:
        if self.failed:
            raise ProtocolError(400, SUB_BAD_FRAME, "The connection already broke the protocol.")
        buf = self._buf
        if buf:
            buf += data
            if len(buf) < self._need:
                return []                # the kept frame is still incomplete
            data = bytes(buf)
            buf.clear()
            self.pending = False
        size = len(data)                 # (buf is empty here: a kept tail has just moved into data)
        frames = []
        pos = 0
        limit = self.max_frame_bytes
        strings = self.string_max_bytes
        try:
            while size - pos >= LENGTH_PREFIX_BYTES:
                n = _unpack_length(data, pos)[0]
                if n == 0 or n > limit:
                    _refuse_length(n, limit)
                start = pos + LENGTH_PREFIX_BYTES
                end = start + n
                if end > size:
                    break
                frames.append(decode_body(data[start:end], strings))
                pos = end
        except ProtocolError as e:
            self.failed = True
            e.frames = frames            # the whole frames before the bad bytes still count
            raise
        if pos < size:
            buf += data[pos:]
            self._keep_tail()
        return frames

    def feed_first(self, data: bytes, limit: int) -> list:
        """The first whole frame of what was fed so far, if one is (at most `limit` bytes, checked
        from its length prefix as soon as that arrived); the rest is kept for the next feed."""
        if self.failed:
            raise ProtocolError(400, SUB_BAD_FRAME, "The connection already broke the protocol.")
        buf = self._buf
        buf += data
        frames = []
        if len(buf) >= LENGTH_PREFIX_BYTES:
            n = _unpack_length(buf, 0)[0]
            end = LENGTH_PREFIX_BYTES + n
            try:
                if n == 0 or n > limit:
                    _refuse_length(n, limit)
                if len(buf) >= end:
                    frames.append(decode_body(bytes(buf[LENGTH_PREFIX_BYTES:end]), self.string_max_bytes))
                    del buf[:end]
            except ProtocolError:
                self.failed = True
                raise
        self.pending = False
        if buf:
            self._keep_tail()
        return frames

    def _keep_tail(self) -> None:
        """_buf starts with an incomplete frame: how many bytes it needs before decoding goes on."""
        buf = self._buf
        self.pending = True
        self._need = (LENGTH_PREFIX_BYTES + _unpack_length(buf, 0)[0]) if len(buf) >= LENGTH_PREFIX_BYTES \
            else LENGTH_PREFIX_BYTES


def _refuse_length(n: int, limit: int):
    """The ProtocolError of a length prefix outside 1..limit."""
    if n == 0:
        raise ProtocolError(400, SUB_BAD_FRAME, "A frame's length prefix is 0.")
    raise ProtocolError(400, SUB_FRAME_TOO_LARGE, f"A frame of {n} bytes exceeds the limit of {limit} bytes.")


# ---- version 2 requests and replies ------------------------------------------------------------
def request(version: int, rid, op, replica, item=None, pk=None, body=None, **options):
    """A request frame (not yet encoded) in the shape `version` uses; `options` are the other
    REQUEST_OPTIONS (session, consistency, if_match, ...)."""
    if version >= COMPACT_VERSION:
        return [REQUEST_CODE, rid, OPERATION_CODE.get(op, op), replica, item, pk, body, options or None]
    frame = {"t": REQUEST, "id": rid, "op": op, "replica": replica}
    for name, value in (("item", item), ("pk", pk), ("body", body)):
        if value is not None:
            frame[name] = value
    frame.update(options)
    return frame


def reply_fields(frame) -> dict:
    """A reply of either version as a map of named fields (version 1's shape): nil fields are
    left out, except the body."""
    if type(frame) is dict:
        return frame
    out = {"t": RESPONSE}
    for name, value in zip(REPLY_FIELDS, frame[1:]):
        if value is not None or name == "body":
            out[name] = value
    extra = frame[REPLY_LENGTH - 1] if len(frame) >= REPLY_LENGTH else None
    if extra:
        out.update(extra)
    return out


def frame_type(frame) -> str | None:
    """The "t" of a frame of either version (REQUEST or RESPONSE for an array)."""
    if type(frame) is dict:
        return frame["t"]
    return {REQUEST_CODE: REQUEST, RESPONSE_CODE: RESPONSE}.get(frame[0])


# ---- handshake ------------------------------------------------------------------------------
def handshake_mac(key_b64: str, nonce: bytes) -> bytes:
    """HMAC-SHA256 of the server's nonce with the account key (the key never crosses the wire)."""
    return hmac.new(base64.b64decode(key_b64), nonce, hashlib.sha256).digest()


def mac_matches(key_b64: str, nonce: bytes, mac) -> bool:
    return isinstance(mac, bytes) and hmac.compare_digest(handshake_mac(key_b64, nonce), mac)


def choose_version(offered) -> int | None:
    """The highest version both sides speak, or None."""
    if not isinstance(offered, list):
        return None
    common = [v for v in offered if type(v) is int and v in PROTOCOL_VERSIONS]
    return max(common) if common else None


def hello(versions=PROTOCOL_VERSIONS, agent: str = "regionlab-test", instance: str | None = None) -> dict:
    """The client's first frame; `instance` is the emulator instance its address named
    (`parse_address`), which the node checks: None (an older client) skips the check."""
    frame = {"t": HELLO, "versions": list(versions), "agent": agent}
    if instance is not None:
        frame["instance"] = instance
    return frame


def instance_refused(frame) -> bool:
    """Whether an error frame is the node's refusal of the instance the hello named: the address
    is stale (its emulator restarted, or another emulator's node took its port); refresh it."""
    return type(frame) is dict and frame.get("t") == ERROR and frame.get("status") == 410 \
        and frame.get("sub") == SUB_INSTANCE_MISMATCH


# ---- replica keys and addresses ---------------------------------------------------------------
# An address names the emulator instance (one running emulator process) its replica belongs to,
# as the service's physical URIs name their app and service: rlmp://host:port/apps/<instance>/
# colls/.../replicas/<i>[p]/. Resource ids are sequential, so two emulators on one machine hold
# the same replica keys; the instance is what tells their nodes apart (docs/direct-protocol.md).
INSTANCE_SEGMENT = "apps"
INSTANCE_MAX_CHARS = 64                  # an instance id: 1-64 of [A-Za-z0-9._-]
_INSTANCE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def valid_instance(instance) -> bool:
    return type(instance) is str and 0 < len(instance) <= INSTANCE_MAX_CHARS and set(instance) <= _INSTANCE_CHARS


def replica_key(collection_rid: str, range_id: str, index: int) -> str:
    return f"colls/{collection_rid}/pkranges/{range_id}/replicas/{index}"


def replica_uri(host: str, port: int, key: str, primary: bool, instance: str | None = None) -> str:
    apps = f"{INSTANCE_SEGMENT}/{instance}/" if instance is not None else ""
    return f"{PROTOCOL}://{host}:{port}/{apps}{key}{'p' if primary else ''}/"


def parse_address(uri: str) -> tuple[str, int, str, str | None]:
    """(host, port, replica key, instance) of an address feed URI; instance None for an address
    that names none (an emulator that predates instances)."""
    prefix = PROTOCOL + "://"
    if not uri.startswith(prefix):
        raise ValueError(f"not an {PROTOCOL} address: {uri!r}")
    hostport, _, path = uri[len(prefix):].partition("/")
    host, _, port = hostport.rpartition(":")
    instance = None
    if path.startswith(INSTANCE_SEGMENT + "/"):
        parts = path.split("/", 2)
        instance, path = parts[1], parts[2] if len(parts) > 2 else ""
        if not valid_instance(instance):
            raise ValueError(f"not an {PROTOCOL} address (bad instance {str(instance)[:80]!r}): {uri!r}")
    key = path.rstrip("/")
    if key.endswith("p"):
        key = key[:-1]
    return host, int(port), key, instance


def parse_uri(uri: str) -> tuple[str, int, str]:
    """(host, port, replica key) of an address feed URI."""
    return parse_address(uri)[:3]


# ---- client helpers: request frames and reply fields ------------------------------------------
# A client builds its frames and reads replies only through these, so a change of the reply
# encoding (compact keys, a new version) is made here, once, for both sides.
def auth(mac: bytes) -> dict:
    return {"t": AUTH, "mac": mac}


def ping() -> dict:
    return {"t": PING}


def bye() -> dict:
    return {"t": BYE}


def request_frame(version: int, rid: int, op: str, replica: str, options: dict, body: bytes | None = None,
                  item: str | None = None):
    """A request frame in `version`'s shape; `options` are REQUEST_OPTIONS fields (names, not
    headers), the partition key ("pk") among them."""
    options = dict(options)
    pk = options.pop("pk", None)
    return request(version, rid, op, replica, item=item, pk=pk, body=body, **options)


def reply_id(frame):
    """The request id a reply (of either version) answers."""
    return frame.get("id") if type(frame) is dict else frame[1]


# Reply fields a client reads, by their names in docs/direct-protocol.md.
NAMED_REPLY_FIELDS = ("status", "sub", "body", "lsn", "quorum_lsn", "global_lsn", "item_lsn", "session",
                      "charge", "activity_id", "retry_after_ms", "etag", "continuation", "item_count", "role")
# Reply fields carried to the caller as the gateway header of the same meaning.
REPLY_HEADERS = (("session", "x-ms-session-token"), ("etag", "etag"),
                 ("continuation", "x-ms-continuation"), ("item_count", "x-ms-item-count"),
                 ("retry_after_ms", "x-ms-retry-after-ms"), ("item_lsn", "lsn"),
                 ("activity_id", "x-ms-activity-id"))


def named_reply(frame) -> dict:
    """A reply (or error) frame's fields, of either version, under their documented names
    (absent ones left out)."""
    fields = reply_fields(frame)
    return {name: fields[name] for name in NAMED_REPLY_FIELDS if fields.get(name) is not None or
            (name == "body" and name in fields)}


def error_fields(frame: dict) -> tuple[int, int, str]:
    """(status, substatus, message) of an error frame."""
    return int(frame.get("status") or 0), int(frame.get("sub") or 0), str(frame.get("message") or "")


def challenge_fields(frame: dict) -> dict:
    """The challenge's nonce and the node's limits, by their documented names."""
    names = ("version", "nonce", "node", "region", "instance", "max_in_flight", "max_frame_bytes",
             "idle_timeout_ms", "heartbeat_ms")
    return {n: frame.get(n) for n in names}
