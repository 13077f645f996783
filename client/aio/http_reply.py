"""HTTP/1.1 replies, parsed without I/O: bytes go in, a finished reply comes out.

Theory of operation. One `ReplyParser` reads the reply to one request. `feed(data)` takes the
bytes as they arrive and answers None until the reply is complete, then `(status, headers,
body, keep_alive)`; `feed_eof()` says the peer closed (a body read to the end of the connection
is then complete; anything else unfinished is an error). Any malformed or oversized input raises
`ReplyError`, nothing else. The body is framed as RFC 9112 §6.3 says: none for 1xx/204/304 and
replies to HEAD, `Transfer-Encoding: chunked` (trailers read and dropped), `Content-Length`, else
until the connection closes (such a connection is not reused).

Header names are lower-cased (every reader in the client asks for lower-case names, the way
client/protocol/headers.py spells them); a repeated header's values are joined with ", ".
A reply that starts before its request was sent, or bytes after a complete reply, are errors
the connection reports (the parser reads one reply).
"""
REPLY_HEAD_BYTES_MAX = 256 * 1024        # compound session tokens of many ranges are long
REPLY_BODY_BYTES_MAX = 64 * 1024 * 1024  # a query or feed page is at most 4 MB
CHUNK_LINE_BYTES_MAX = 4 * 1024

_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _TRAILERS, _EOF, _DONE = range(7)
_NO_BODY = (204, 304)


class ReplyError(Exception):
    """The reply is not HTTP/1.1 this client can read."""


def parse_head(head: bytes) -> tuple[int, str, dict]:
    """(status, HTTP version, headers) of a reply head without its final CRLF CRLF."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:          # latin-1 decodes every byte; kept for clarity
        raise ReplyError("the reply head is not text") from None
    lines = text.split("\r\n")
    status_line = lines[0]
    if not status_line.startswith("HTTP/1.") or len(status_line) < 12 or status_line[12:13] not in ("", " "):
        raise ReplyError(f"not an HTTP/1.x status line: {status_line[:80]!r}")
    code = status_line[9:12]
    if not code.isdigit():
        raise ReplyError(f"bad status code in {status_line[:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name[-1] in " \t":
            raise ReplyError(f"bad header line {line[:80]!r}")
        name = name.lower()
        value = value.strip()
        if name in headers:
            headers[name] = headers[name] + ", " + value
        else:
            headers[name] = value
    return int(code), status_line[:8], headers


class ReplyParser:
    __slots__ = ("head_request", "status", "headers", "keep_alive", "_state", "_buf", "_left", "_pending")

    def __init__(self, head_request: bool = False):
        self.head_request = head_request
        self.status = 0
        self.headers: dict = {}
        self.keep_alive = True
        self._state = _HEAD
        self._buf = bytearray()
        self._left = 0                   # body bytes (or chunk bytes) still to come
        self._pending = b""              # chunked: bytes not yet decoded (a partial size line or chunk)

    @property
    def started(self) -> bool:
        return self._state != _HEAD or bool(self._buf)

    def feed(self, data: bytes):
        """None while the reply is incomplete; then (status, headers, body, keep_alive)."""
        if self._state == _HEAD:
            if self._buf:
                self._buf += data
                data = bytes(self._buf)
                self._buf = bytearray()
            end = data.find(b"\r\n\r\n")
            if end < 0:
                if len(data) > REPLY_HEAD_BYTES_MAX:
                    raise ReplyError(f"the reply head is over {REPLY_HEAD_BYTES_MAX} bytes")
                self._buf += data
                return None
            if end > REPLY_HEAD_BYTES_MAX:
                raise ReplyError(f"the reply head is over {REPLY_HEAD_BYTES_MAX} bytes")
            self._start_body(data[:end])
            if self._state == _LENGTH and len(data) - end - 4 == self._left:
                return self._finish(data[end + 4:])          # the common case: one read, whole
            data = data[end + 4:]
        elif self._state == _DONE:
            raise ReplyError("bytes after the end of the reply")
        return self._body(data)

    def feed_eof(self):
        """The peer closed: the reply if it ends here, else ReplyError."""
        if self._state == _EOF:
            return self._finish(bytes(self._buf))
        raise ReplyError("the connection closed before the reply was complete")

    # ---- framing -----------------------------------------------------------------------------
    def _start_body(self, head: bytes) -> None:
        status, version, headers = parse_head(head)
        if 100 <= status < 200:
            raise ReplyError(f"unexpected interim reply {status} (no request asks for one)")
        self.status, self.headers = status, headers
        connection = headers.get("connection", "").lower()
        if version == "HTTP/1.0":
            self.keep_alive = "keep-alive" in connection
        else:
            self.keep_alive = "close" not in connection
        if self.head_request or status in _NO_BODY:
            self._state, self._left = _LENGTH, 0
            return
        coding = headers.get("transfer-encoding")
        if coding is not None:
            if coding.lower().rsplit(",", 1)[-1].strip() != "chunked":
                raise ReplyError(f"unsupported transfer-encoding {coding!r}")
            self._state = _CHUNK_SIZE
            return
        length = headers.get("content-length")
        if length is None:
            self._state, self.keep_alive = _EOF, False
            return
        if not length.isdigit():
            raise ReplyError(f"bad content-length {length!r}")
        self._left = int(length)
        if self._left > REPLY_BODY_BYTES_MAX:
            raise ReplyError(f"the reply body is over {REPLY_BODY_BYTES_MAX} bytes")
        self._state = _LENGTH

    def _body(self, data: bytes):
        state = self._state
        if state == _LENGTH:
            self._buf += data
            if len(self._buf) < self._left:
                return None
            if len(self._buf) > self._left:
                raise ReplyError("bytes after the end of the reply")
            return self._finish(bytes(self._buf))
        if state == _EOF:
            self._buf += data
            if len(self._buf) > REPLY_BODY_BYTES_MAX:
                raise ReplyError(f"the reply body is over {REPLY_BODY_BYTES_MAX} bytes")
            return None
        return self._chunks(data)

    def _finish(self, body: bytes):
        self._state, self._buf = _DONE, bytearray()
        return self.status, self.headers, body, self.keep_alive

    # ---- chunked -----------------------------------------------------------------------------
    def _chunks(self, data: bytes):
        """Chunked bytes: the decoded body grows in _buf; what cannot be decoded yet waits in
        _pending for the next read."""
        rest = self._pending + data if self._pending else data
        self._pending = b""
        while True:
            if self._state == _CHUNK_SIZE:
                nl = rest.find(b"\r\n")
                if nl < 0:
                    return self._keep(rest, CHUNK_LINE_BYTES_MAX)
                size_text = rest[:nl].split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise ReplyError(f"bad chunk size {size_text[:20]!r}") from None
                if size < 0 or len(self._buf) + size > REPLY_BODY_BYTES_MAX:
                    raise ReplyError(f"the reply body is over {REPLY_BODY_BYTES_MAX} bytes")
                rest = rest[nl + 2:]
                self._left = size
                self._state = _CHUNK_DATA if size else _TRAILERS
            elif self._state == _CHUNK_DATA:
                if self._left:           # the chunk's data goes straight to the body
                    take = rest[:self._left]
                    self._buf += take
                    self._left -= len(take)
                    rest = rest[len(take):]
                    if self._left:
                        return None
                if len(rest) < 2:
                    return self._keep(rest, 2)
                if rest[:2] != b"\r\n":
                    raise ReplyError("a chunk does not end with CRLF")
                rest = rest[2:]
                self._state = _CHUNK_SIZE
            else:                        # trailers: lines up to an empty one, dropped
                nl = rest.find(b"\r\n")
                if nl < 0:
                    return self._keep(rest, REPLY_HEAD_BYTES_MAX)
                line, rest = rest[:nl], rest[nl + 2:]
                if not line:
                    if rest:
                        raise ReplyError("bytes after the end of the reply")
                    return self._finish(bytes(self._buf))

    def _keep(self, rest: bytes, limit: int):
        if len(rest) > limit:
            raise ReplyError("a chunk size or trailer line is too long")
        self._pending = rest
        return None
