"""One gateway request, parsed once: path segments, the serving region, headers, body.

Paths are normalised as the SDKs need (cosmos-wire §1): leading and trailing slashes trimmed,
each segment percent-decoded. The body is read here with the service's limits, before any
handler runs, so a client that disconnects or stalls mid-body never reaches the core.
"""
import asyncio
import uuid
from urllib.parse import unquote

from client.protocol import headers as H

from ..core.errors import CosmosError, bad_request, too_large
from ..core.validation import ValidationError, parse_json_body, ITEM_BYTES_MAX

REQUEST_BYTES_MAX = ITEM_BYTES_MAX + 512 * 1024     # an item plus JSON framing of a batch
BODY_TIMEOUT_S = 30.0
READ_CHUNK_BYTES = 256 * 1024


_ACTIVITY_PREFIX = str(uuid.uuid4())[:24]
_activity_seq = 0


def _activity_id() -> str:
    """A GUID-shaped activity id for requests that bring none: a per-process random prefix and a
    counter (uuid4 per request costs more than the rest of a point read's parsing)."""
    global _activity_seq
    _activity_seq += 1
    return f"{_ACTIVITY_PREFIX}{_activity_seq & 0xFFFFFFFFFFFF:012x}"


class Call:
    __slots__ = ("gw", "req", "method", "segs", "headers", "activity_id", "region", "raw")

    def __init__(self, gw, req):
        self.gw = gw
        self.req = req
        self.method = req.method
        path = req.raw_path
        if "?" in path:
            path = path.split("?", 1)[0]
        path = path.strip("/")
        segs = path.split("/") if path else []
        if "%" in path:
            segs = [unquote(s) for s in segs]
        self.segs = segs
        headers = self.headers = req.headers
        self.activity_id = headers.get(H.ACTIVITY_ID) or _activity_id()
        self.region = gw.serving_region()
        self.raw = b""

    def header(self, name: str, default=None):
        return self.headers.get(name, default)

    def flag(self, name: str) -> bool:
        v = self.headers.get(name)
        return v is not None and v.lower() == "true"

    async def read_body(self) -> bytes:
        length = self.req.content_length
        if length is not None and length > REQUEST_BYTES_MAX:
            raise too_large(f"Request size is too large: {length} bytes; the limit is "
                            f"{REQUEST_BYTES_MAX} bytes (an item may be at most {ITEM_BYTES_MAX}).")
        if not self.req.body_exists:
            return b""
        content = self.req.content
        if content.is_eof() and content.exception() is None:
            # The whole body came with the headers (small requests nearly always do): take it
            # without a timed wait, whose task and timer cost more than the rest of the read.
            self.raw = content.read_nowait()
            if len(self.raw) > REQUEST_BYTES_MAX:
                raise too_large(f"Request size is too large: more than {REQUEST_BYTES_MAX} bytes.")
            return self.raw
        try:
            self.raw = await asyncio.wait_for(self._read_limited(), BODY_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise CosmosError(408, 0, f"The request body did not arrive within {BODY_TIMEOUT_S:.0f} s.") from None
        return self.raw

    async def _read_limited(self) -> bytes:
        chunks, total = [], 0
        content = self.req.content
        while True:
            chunk = await content.read(READ_CHUNK_BYTES)
            if not chunk:
                break
            total += len(chunk)
            if total > REQUEST_BYTES_MAX:
                raise too_large(f"Request size is too large: more than {REQUEST_BYTES_MAX} bytes.")
            chunks.append(chunk)
        return b"".join(chunks)

    async def json_body(self, required: bool = True):
        raw = await self.read_body()
        if not raw:
            if required:
                raise bad_request("The request body is empty; a JSON body is required for this operation.")
            return None
        try:
            return parse_json_body(raw)
        except ValidationError as e:
            raise CosmosError(e.status, e.substatus, e.message) from None

    def int_header(self, name: str) -> int | None:
        v = self.headers.get(name)
        if v is None or v == "":
            return None
        try:
            return int(v)
        except ValueError:
            raise bad_request(f"Header {name} must be an integer, got '{v}'.") from None
