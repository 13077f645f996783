"""The direct protocol (`rlmp`): framing, handshake, names and limits (docs/direct-protocol.md).

Theory of operation: this module owns the wire contract between a direct-mode client and a
backend node, and nothing else: no sockets, no timers (sans-IO, like h11). Bytes go into a
`FrameDecoder`, which hands back whole frames (msgpack maps) or raises `ProtocolError`; `encode`
turns a map into a frame. The server (emulator/runtime/direct_server.py) and clients import it;
neither imports the other.

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
PROTOCOL_VERSIONS = (1,)                 # what this side speaks, oldest first

# ---- limits (units last) ------------------------------------------------------------------
LENGTH_PREFIX_BYTES = 4
FRAME_BYTES_MAX = 8 * 1024 * 1024        # an item is <= 2 MB, a page <= 4 MB, plus the envelope
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

# ---- status and substatus codes of this protocol --------------------------------------------
# Direct substatuses sit in a range of their own (21000+), clear of the service's numbers.
SUB_REPLICA_NOT_HERE = 21001             # 410: the replica moved off this node, or never was on it
SUB_NOT_PRIMARY = 21002                  # 410: a write sent to a secondary
SUB_REPLICA_DOWN = 21003                 # 410: the replica is down (crashed)
SUB_BUSY = 21004                         # 429: past max_in_flight; 503: past the connection cap
SUB_BAD_FRAME = 21010                    # 400: not one msgpack map, or a bad length prefix
SUB_FRAME_TOO_LARGE = 21011              # 400: length prefix over max_frame_bytes
SUB_BAD_REQUEST_FRAME = 21012            # 400: a request with missing or mistyped fields
SUB_HANDSHAKE = 21013                    # 400/408: a frame out of place, or a handshake too slow
SUB_VERSION = 21014                      # 400: no protocol version in common
SUB_IDLE = 21015                         # 408: nothing arrived for idle_timeout_ms, or a frame stalled
SUB_PARTITION_KEY_RANGE_GONE = 1002      # 410: the key is outside the named replica's range
SUB_READ_SESSION_NOT_AVAILABLE = 1002    # 404: this replica is behind the session token

_LENGTH = struct.Struct(">I")
_pack_length = _LENGTH.pack


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


def encode(frame: dict) -> bytes:
    """One frame: the length prefix and the msgpack map."""
    body = _pack(frame)
    n = len(body)
    if n > FRAME_BYTES_MAX:
        raise ValueError(f"a frame of {n} bytes exceeds FRAME_BYTES_MAX ({FRAME_BYTES_MAX})")
    return _pack_length(n) + body


def decode_body(body: bytes) -> dict:
    """The map held by one frame's body, or ProtocolError."""
    try:
        frame = _unpackb(body)           # msgpack's defaults: str keys and values, lists, strict map keys
    except msgpack.ExtraData:
        raise ProtocolError(400, SUB_BAD_FRAME, "A frame holds more than one msgpack value.") from None
    except (ValueError, TypeError, msgpack.UnpackException, OverflowError, RecursionError) as e:
        raise ProtocolError(400, SUB_BAD_FRAME, f"A frame is not valid msgpack ({type(e).__name__}).") from None
    if not isinstance(frame, dict) or not isinstance(frame.get("t"), str):
        raise ProtocolError(400, SUB_BAD_FRAME, 'A frame must be a msgpack map with a string "t" (type).')
    return frame


class FrameDecoder:
    """Bytes in, frames out. `pending` says whether a frame has begun and is incomplete (the
    caller's frame timer runs while it is)."""
    __slots__ = ("_buf", "_need", "max_frame_bytes", "failed")

    def __init__(self, max_frame_bytes: int = FRAME_BYTES_MAX):
        self._buf = bytearray()
        self._need = 0                   # body length of the frame in progress, 0 = reading a prefix
        self.max_frame_bytes = max_frame_bytes
        self.failed = False

    @property
    def pending(self) -> bool:
        return bool(self._buf)

    def feed(self, data: bytes) -> list:
        if self.failed:
            raise ProtocolError(400, SUB_BAD_FRAME, "The connection already broke the protocol.")
        buf = self._buf
        if not buf and len(data) > LENGTH_PREFIX_BYTES:
            n = _LENGTH.unpack_from(data)[0]
            if len(data) == LENGTH_PREFIX_BYTES + n and 0 < n <= self.max_frame_bytes:
                # The common case: exactly one whole frame arrived; decode it without buffering.
                try:
                    return [decode_body(data[LENGTH_PREFIX_BYTES:])]
                except ProtocolError:
                    self.failed = True
                    raise
        buf += data
        frames = []
        try:
            while True:
                if not self._need:
                    if len(buf) < LENGTH_PREFIX_BYTES:
                        break
                    n = _LENGTH.unpack_from(buf)[0]
                    if n == 0:
                        raise ProtocolError(400, SUB_BAD_FRAME, "A frame's length prefix is 0.")
                    if n > self.max_frame_bytes:
                        raise ProtocolError(400, SUB_FRAME_TOO_LARGE,
                                            f"A frame of {n} bytes exceeds the limit of {self.max_frame_bytes} bytes.")
                    self._need = n
                end = LENGTH_PREFIX_BYTES + self._need
                if len(buf) < end:
                    break
                frames.append(decode_body(bytes(buf[LENGTH_PREFIX_BYTES:end])))
                del buf[:end]
                self._need = 0
        except ProtocolError as e:
            self.failed = True
            buf.clear()
            e.frames = frames            # the whole frames before the bad bytes still count
            raise
        return frames


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


def hello(versions=PROTOCOL_VERSIONS, agent: str = "regionlab-test") -> dict:
    return {"t": HELLO, "versions": list(versions), "agent": agent}


# ---- replica keys and addresses ---------------------------------------------------------------
def replica_key(collection_rid: str, range_id: str, index: int) -> str:
    return f"colls/{collection_rid}/pkranges/{range_id}/replicas/{index}"


def replica_uri(host: str, port: int, key: str, primary: bool) -> str:
    return f"{PROTOCOL}://{host}:{port}/{key}{'p' if primary else ''}/"


def parse_uri(uri: str) -> tuple[str, int, str]:
    """(host, port, replica key) of an address feed URI."""
    prefix = PROTOCOL + "://"
    if not uri.startswith(prefix):
        raise ValueError(f"not an {PROTOCOL} address: {uri!r}")
    hostport, _, path = uri[len(prefix):].partition("/")
    host, _, port = hostport.rpartition(":")
    key = path.rstrip("/")
    if key.endswith("p"):
        key = key[:-1]
    return host, int(port), key


# ---- client helpers: request frames and reply fields ------------------------------------------
# A client builds its frames and reads replies only through these, so a change of the reply
# encoding (compact keys, a new version) is made here, once, for both sides.
def auth(mac: bytes) -> dict:
    return {"t": AUTH, "mac": mac}


def ping() -> dict:
    return {"t": PING}


def bye() -> dict:
    return {"t": BYE}


def request(rid: int, op: str, replica: str, options: dict, body: bytes | None = None,
            item: str | None = None) -> dict:
    """A request frame; `options` are REQUEST_OPTIONS fields (names, not headers)."""
    frame = dict(options)
    frame["t"] = REQUEST
    frame["id"] = rid
    frame["op"] = op
    frame["replica"] = replica
    if body is not None:
        frame["body"] = body
    if item is not None:
        frame["item"] = item
    return frame


def frame_type(frame: dict) -> str:
    return frame["t"]


def reply_id(frame: dict):
    return frame.get("id")


# Reply fields a client reads, by their names in docs/direct-protocol.md.
REPLY_FIELDS = ("status", "sub", "body", "lsn", "quorum_lsn", "global_lsn", "item_lsn", "session",
                "charge", "activity_id", "retry_after_ms", "etag", "continuation", "item_count", "role")
# Reply fields carried to the caller as the gateway header of the same meaning.
REPLY_HEADERS = (("session", "x-ms-session-token"), ("etag", "etag"),
                 ("continuation", "x-ms-continuation"), ("item_count", "x-ms-item-count"),
                 ("retry_after_ms", "x-ms-retry-after-ms"), ("item_lsn", "lsn"),
                 ("activity_id", "x-ms-activity-id"))


def reply_fields(frame: dict) -> dict:
    """A reply (or error) frame's fields under their documented names (absent ones left out)."""
    return {name: frame[name] for name in REPLY_FIELDS if name in frame}


def error_fields(frame: dict) -> tuple[int, int, str]:
    """(status, substatus, message) of an error frame."""
    return int(frame.get("status") or 0), int(frame.get("sub") or 0), str(frame.get("message") or "")


def challenge_fields(frame: dict) -> dict:
    """The challenge's nonce and the node's limits, by their documented names."""
    names = ("version", "nonce", "node", "region", "max_in_flight", "max_frame_bytes",
             "idle_timeout_ms", "heartbeat_ms")
    return {n: frame.get(n) for n in names}
