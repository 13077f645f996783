"""HTTP/1.1 request heads, parsed by llhttp (Node.js's parser, through the `httptools` bindings).

Why a library: the request line and the header block are where servers get smuggled past and
confused; llhttp is fuzzed and kept by people whose job that is. What stays here is what the
service decides about a head llhttp found well formed: the versions it speaks (1.1 and 1.0),
targets in origin form, exactly one Host (required in 1.1), no Transfer-Encoding but chunked,
and the words of each refusal, which say what to send instead.

Theory of operation. A connection (gateway/http.py) owns one `HeadParser` and frames each head
(it ends at the first blank line) and feeds it here, each byte once: the method as it arrives,
so that a client speaking TLS or garbage is told at once, then each line once it has ended, so
that a bad line is refused as soon as it is whole and llhttp never reports a header in pieces.
A head that arrives whole, the common case, is fed in one step. `request()` then returns the
`Request` the gateway reads. Any defect raises `BadRequest` with its status and message, and
nothing of the request reaches the gateway.

llhttp is fed heads and nothing else: the body is framed by the connection (Content-Length, or
gateway/chunked.py). httptools reports no offset at which a message ends, so a parser fed a
body would run on into the next pipelined request; framing the body ourselves keeps one request
at a time and the exact byte counts a refusal needs. After a head without a body llhttp waits
for the next head, so its parser is kept for the connection's next request; after a head with
a body (it would wait for that body) or an upgrade, the next head gets a new parser.
"""
import httptools

from ..core.cache import Cache
from ..core.limits import HEADER_NAMES_CACHE_MAX_BYTES

VERSIONS = ("1.1", "1.0")
CONNECTION_CLOSE = "Connection: close\r\n"          # a reply's Connection line
CONNECTION_KEEP_ALIVE = "Connection: keep-alive\r\n"
_TLS_HANDSHAKE = b"\x16"
_QUOTED_CHARS_MAX = 80              # of a request line quoted back in a refusal
TLS_HINT = ("This port speaks plain HTTP, not TLS: use http:// (regionlab serves no HTTPS), "
            "or turn off the SDK's endpoint certificate check only if you front it with TLS.")


class BadRequest(Exception):
    """A request refused before the gateway sees it. `discard`: body bytes the client is still
    sending, read and dropped after the reply so that it can read the reply."""

    def __init__(self, status: int, message: str, discard: int = 0):
        super().__init__(message)
        self.status = status
        self.message = message
        self.discard = discard


class Request:
    """One request, complete: what the gateway's Call reads."""
    __slots__ = ("method", "raw_path", "version", "headers", "body", "keep_alive", "chunked", "length",
                 "connection", "lost", "conn")

    def __init__(self, method: str, raw_path: str, version: str, headers: dict):
        self.method = method
        self.raw_path = raw_path
        self.version = version
        self.headers = headers
        self.body = b""
        connection = headers.get("connection")
        if version == "HTTP/1.1":
            self.keep_alive = connection is None or "close" not in connection.lower()
            self.connection = "" if self.keep_alive else CONNECTION_CLOSE     # the reply's Connection line
        else:
            self.keep_alive = connection is not None and "keep-alive" in connection.lower()
            self.connection = CONNECTION_KEEP_ALIVE if self.keep_alive else CONNECTION_CLOSE
        self.chunked = False
        self.length = 0
        self.lost = False       # the client closed (or half-closed) the connection while this ran
        self.conn = None        # the Connection it came on (set when it runs)

    @property
    def content_length(self) -> int | None:
        return self.length if "content-length" in self.headers else None


_NAMES = Cache(HEADER_NAMES_CACHE_MAX_BYTES)    # header name as sent -> lower-case name (llhttp checked it is a token)


class _Head:
    """What llhttp reports of the head being parsed: it calls on_url, on_header and
    on_headers_complete back. The callbacks it may look for and that are not wanted are None
    here, so that httptools finds them without an AttributeError for each."""
    __slots__ = ("url", "headers", "hosts_repeated", "complete")
    on_message_begin = on_body = on_message_complete = on_chunk_header = on_chunk_complete = None

    def __init__(self):
        self.clear()

    def clear(self) -> None:
        self.url: list = []             # the target, in the pieces llhttp reported it
        self.headers: dict = {}         # lower-case name -> value (repeats joined with ", ")
        self.hosts_repeated = 0         # Host header lines after the first
        self.complete = False           # llhttp saw the blank line that ends the head

    def on_url(self, piece: bytes) -> None:
        self.url.append(piece)

    def on_header(self, name: bytes, value: bytes) -> None:
        key = _NAMES.get(name)
        if key is None:
            key = _NAMES.put(name, name.decode("ascii").lower(), 2 * len(name))
        # UTF-8 is what clients put in a value beyond ASCII (e.g. a partition key); anything
        # else is taken byte for byte. llhttp drops the whitespace before a value, not after it.
        try:
            text = value.decode().rstrip(" \t")
        except UnicodeDecodeError:
            text = value.decode("latin-1").rstrip(" \t")
        headers = self.headers
        if key in headers:
            headers[key] = f"{headers[key]}, {text}"
            if key == "host":
                self.hosts_repeated += 1
            return
        headers[key] = text

    def on_headers_complete(self) -> None:
        self.complete = True


class HeadParser:
    """The request heads of one connection, parsed one at a time: `feed` the head's bytes, then
    take its `request()`."""
    __slots__ = ("head", "parser", "start")

    def __init__(self):
        self.head = _Head()
        self.parser = None              # llhttp's, made for the first head and kept while in step
        self.start = b""                # the first bytes of the head, to quote back in a refusal

    def feed(self, data) -> None:
        """The next bytes of the head, never beyond its blank line. Raises BadRequest."""
        start = self.start
        if not start:
            if data[:1] in (b"\r", b"\n"):
                # llhttp skips empty lines before a request line; the service does not.
                raise BadRequest(400, "The request begins with an empty line: send the request line "
                                      "('METHOD /path HTTP/1.1') first.")
            self.start = bytes(data[:_QUOTED_CHARS_MAX])
        elif len(start) < _QUOTED_CHARS_MAX:
            self.start = start + data[:_QUOTED_CHARS_MAX - len(start)]
        parser = self.parser
        if parser is None:
            parser = self.parser = httptools.HttpRequestParser(self.head)
        try:
            parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            pass            # Upgrade or CONNECT: llhttp stops at the head's end, as does what it is fed
        except httptools.HttpParserError as e:
            message = _refusal(e, self.start)
            self.reset()
            raise BadRequest(400, message) from None

    def request(self) -> Request:
        """The request whose whole head was fed. Raises BadRequest."""
        try:
            req = self._request(self.head, self.parser)
        except BadRequest:
            self.reset()
            raise
        self.head.clear()
        self.start = b""
        parser = self.parser
        # llhttp is fed heads only: after one that announces no body it waits for the next head,
        # so it is kept; one with a body (framed by the connection) or an upgrade leaves it behind.
        if req.chunked or req.length or parser.should_upgrade() or not parser.should_keep_alive():
            self.parser = None
        return req

    def _request(self, head: _Head, parser) -> Request:
        version = parser.get_http_version()
        if version not in VERSIONS:
            raise BadRequest(400, f"Unsupported HTTP version HTTP/{version}; regionlab speaks HTTP/1.1.")
        if not head.complete:           # llhttp paused before the blank line it was fed
            raise BadRequest(400, "Malformed HTTP head: it ended before its header block did.")
        url = head.url
        target = (url[0] if len(url) == 1 else b"".join(url)).decode("latin-1")
        if not target.startswith("/"):
            raise BadRequest(400, f"The request target {target[:_QUOTED_CHARS_MAX]!r} is not a path: send "
                                  "'METHOD /path HTTP/1.1' (regionlab is an origin server, not a proxy).")
        headers = head.headers
        if head.hosts_repeated:
            raise BadRequest(400, f"The request carries {head.hosts_repeated + 1} Host headers; send exactly one.")
        if version == "1.1" and "host" not in headers:
            raise BadRequest(400, "An HTTP/1.1 request must carry a Host header naming the server it is "
                                  "sent to (e.g. 'Host: localhost:8081').")
        req = Request(parser.get_method().decode("ascii"), target, "HTTP/" + version, headers)
        te = headers.get("transfer-encoding")
        if te is not None:
            # llhttp has refused Content-Length with it, and codings that do not end in chunked.
            if te.lower() != "chunked":
                raise BadRequest(400, f"Unsupported Transfer-Encoding {te[:40]!r}; send chunked or a Content-Length.")
            req.chunked = True
        else:
            length = headers.get("content-length")
            if length is not None:
                req.length = int(length)        # llhttp has checked it is one decimal number
        return req

    def reset(self) -> None:
        """Forget a head begun: its bytes were dropped."""
        self.head.clear()
        self.parser = None
        self.start = b""


# What a person should change, by the words of llhttp's reason (its error codes are not exposed
# by httptools); the first match wins, and the reason itself is quoted too.
_ADVICE = (
    ("can't be present with", "A request may not carry both Content-Length and Transfer-Encoding: "
                              "send one of them ({reason})."),
    ("Content-Length", "Invalid Content-Length ({reason}): send one Content-Length header, the size of "
                       "the body in bytes."),
    ("Transfer-Encoding", "Unsupported Transfer-Encoding ({reason}); send chunked or a Content-Length."),
    ("CR", "Malformed HTTP head ({reason}): lines must end with CRLF."),
    ("LF", "Malformed HTTP head ({reason}): lines must end with CRLF."),
    ("version", "Unsupported HTTP version in {line!r} ({reason}); regionlab speaks HTTP/1.1."),
    ("header", "Malformed HTTP header ({reason}): each header line must be 'Name: value' on one line, "
               "the name a token and the value free of control characters."),
)


def _refusal(error: Exception, start: bytes) -> str:
    """The message of a 400 for a head llhttp refused; start: the first bytes of the head."""
    reason = str(error) or type(error).__name__
    line = start.split(b"\n", 1)[0].rstrip(b"\r").decode("latin-1")
    if isinstance(error, httptools.HttpParserInvalidMethodError):
        if start[:1] == _TLS_HANDSHAKE:
            return TLS_HINT
        return (f"This is not an HTTP/1.1 request: {line!r} should start with a method such as GET or "
                "POST, in capitals.")
    if isinstance(error, httptools.HttpParserInvalidURLError):
        return (f"Malformed request target in {line!r} ({reason}): a path is ASCII without spaces or "
                "control characters; percent-encode anything else.")
    for needle, advice in _ADVICE:
        if needle in reason:
            return advice.format(reason=reason, line=line)
    return (f"Malformed HTTP request line {line!r} ({reason}): expected 'METHOD /path HTTP/1.1', then "
            "header lines 'Name: value', each ending in CRLF.")
