"""Invariant: fed the same bytes, whole, byte by byte or in random pieces, the gateway's HTTP
parsing and h11 agree on every request (method, target, headers, body) or both refuse it;
the only exceptions are the documented differences in DIFFERENCES below, and there each side
does exactly what the table says.

The gateway's side is a real `Connection` (emulator/gateway/http.py: llhttp for heads, its own
body framing) driven by data_received on a transport that records what it writes; its handler
records the Request it is given and answers 200. h11 (python-hyper/h11) is the reference: a
sans-I/O HTTP/1.1 implementation that is not ours. Inputs are pipelines of one to three requests
from a grammar that knows which of its choices are valid, which are broken (both must refuse)
and which fall into a documented difference; a seeded corpus of tricky cases; and garbage.
Where both accept, each request must also be the one the grammar meant to send.
"""
import asyncio
import random

import h11
import pytest
from tiers import examples
from hypothesis import given, settings, strategies as st

from regionlab.emulator.service import responses
from regionlab.emulator.gateway.http import HttpServer
from regionlab.emulator.core.limits import REQUEST_HEAD_MAX_BYTES
from recording_transport import RecordingTransport

REFUSED = "refused"

# Where h11 and the gateway legitimately differ: (the gateway accepts, h11 accepts, why).
DIFFERENCES = {
    "unknown_method": (False, True, "llhttp knows a fixed list of methods (every one the service "
                                    "serves among them); h11 takes any token, e.g. BREW or get"),
    "extra_spaces": (True, False, "llhttp reads the request line on whitespace boundaries, as RFC "
                                  "9112 section 3 allows a recipient to; h11 wants exactly one SP"),
    "bare_lf": (False, True, "RFC 9112 section 2.2 lets a recipient accept a bare LF as a line "
                             "end; llhttp does not, which closes a request-smuggling door"),
    "control_in_value": (False, True, "RFC 9110 section 5.5 allows no control character in a field "
                                      "value but HTAB, and llhttp refuses them all; h11 refuses only "
                                      "NUL, CR, LF, VT and FF"),
    "obs_fold": (False, True, "RFC 9112 section 5.2 lets a server refuse a folded header line "
                              "with 400 or unfold it; llhttp refuses, h11 unfolds"),
    "duplicate_length": (False, True, "RFC 9110 section 8.6 lets a recipient refuse repeated "
                                      "Content-Length values or collapse identical ones; llhttp "
                                      "refuses, h11 collapses"),
    "length_and_chunked": (False, True, "RFC 9112 section 6.3: chunked overrides Content-Length, and "
                                        "such a request 'ought to be handled as an error' (request "
                                        "smuggling); the gateway refuses it, h11 lets chunked win"),
    "version": (False, True, "the service speaks HTTP/1.1 and 1.0; h11 takes any HTTP/d.d"),
    "not_origin_form": (False, True, "the gateway is an origin server, not a proxy: it serves "
                                     "paths; h11 also takes '*' and absolute URLs"),
    "space_before_extension": (True, False, "RFC 9112 section 7.1.1 allows whitespace between a "
                                            "chunk size and its ';' (BWS); h11 does not"),
    "malformed_trailer": (True, False, "the gateway reads and drops trailers (it uses none), "
                                       "checking only their framing; h11 parses them as fields"),
}

_TOKEN = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_PATH = "abcxyzABC0123456789-._~!$&'()*+,;=:@%"
_VALUE = [bytes([b]) for b in range(0x21, 0x7f)] + [b"\x80", b"\xc3\xa9", b"\xff", b" ", b"\t"]
_CONTROL = [bytes([b]) for b in (*range(0x00, 0x09), *range(0x0b, 0x0d), *range(0x0e, 0x20), 0x7f)]
_CONTROL_H11_REFUSES = (b"\x00", b"\x0b", b"\x0c")        # in a header value
_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


def _text(raw: bytes) -> str:
    """A header value as the gateway decodes it (UTF-8, else byte for byte)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


class _Wire:
    """One request as the grammar built it: its bytes (`encode`), what a server that accepts it
    reads (`meant`), whether it has a flaw both parsers must refuse (`broken`), and the
    documented difference it falls into, if any (`quirk`)."""

    def __init__(self):
        self.method, self.target, self.version = "GET", "/", "HTTP/1.1"
        self.sep = (" ", " ")                 # around the target
        self.fields: list = []                # (name bytes, value bytes)
        self.body = b""
        self.framing = b""                    # the body as sent (chunked or not)
        self.eol = b"\r\n"
        self.broken = False
        self.quirk = None

    def __repr__(self) -> str:
        return f"<{self.quirk or ('broken' if self.broken else 'valid')}: {self.encode()!r}>"

    def encode(self) -> bytes:
        line = f"{self.method}{self.sep[0]}{self.target}{self.sep[1]}{self.version}".encode("latin-1")
        lines = [line] + [name + b":" + value for name, value in self.fields]
        eols = [self.eol if i == self._bare_lf_at() else b"\r\n" for i in range(len(lines) + 1)]
        return b"".join(part + eol for part, eol in zip(lines + [b""], eols)) + self.framing

    def _bare_lf_at(self) -> int:
        return (len(self.fields) // 2) if self.eol != b"\r\n" else -1

    def meant(self):
        """(method, target, headers, body) as a server that accepts the request reads it."""
        headers: dict = {}
        for name, value in self.fields:
            key, text = name.decode().lower(), _text(value.replace(b"\r\n ", b" ")).strip(" \t")
            if key == "content-length":
                headers[key] = text.split(",")[0].strip()      # repeated, it is one length
                continue
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        return self.method, self.target, _normalized(headers), self.body


def _normalized(headers: dict) -> dict:
    # h11 lower-cases Transfer-Encoding's value; the gateway passes it on as sent. Both mean chunked.
    if "transfer-encoding" in headers:
        headers = dict(headers, **{"transfer-encoding": headers["transfer-encoding"].lower()})
    return headers


# ---- the grammar -----------------------------------------------------------------------------------
_NAMES = st.text(_TOKEN, min_size=1, max_size=8).filter(
    lambda n: n.lower() not in ("host", "content-length", "transfer-encoding", "connection", "upgrade"))
_VALUES = st.lists(st.sampled_from(_VALUE), max_size=10).map(b"".join)


@st.composite
def _target(draw, w: _Wire) -> None:
    segments = draw(st.lists(st.text(_PATH, max_size=6), max_size=3))
    target = "/" + "/".join(segments)
    if draw(st.booleans()):
        target += "?" + draw(st.text(_PATH + "/?", max_size=8))
    w.target = target
    flaw = draw(st.sampled_from([None] * 30 + ["control", "beyond_ascii", "space", "not_origin_form"]))
    if flaw == "control":
        ch = draw(st.sampled_from(_CONTROL + [b"\t"])).decode("latin-1")
        w.target, w.broken = target[:1] + ch + target[1:], True
    elif flaw == "beyond_ascii":
        w.target, w.broken = target + "\xe9", True    # sent as one byte 0xE9: percent-encode it
    elif flaw == "space":
        w.target, w.broken = target + " x", True
    elif flaw == "not_origin_form" and w.quirk is None:
        w.target = draw(st.sampled_from(["*", "http://example.com/dbs"]))
        w.quirk = flaw


@st.composite
def _head_fields(draw, w: _Wire, *, last: bool) -> None:
    hosts = 1
    if draw(st.integers(0, 9)) == 0:
        hosts = draw(st.sampled_from([0, 2]))
        w.broken = w.broken or w.version == "HTTP/1.1" or hosts == 2
    fields = [(b"Host", b"localhost:8081")] * hosts
    for _ in range(draw(st.integers(0, 3))):
        fields.append((draw(_NAMES).encode(), draw(st.sampled_from([b"", b" ", b"  "])) + draw(_VALUES)))
    if draw(st.integers(0, 7)) == 0:
        fields.append((b"Expect", b"100-continue"))
    if draw(st.integers(0, 9)) == 0:
        fields += [(b"Connection", b"upgrade"), (b"Upgrade", b"h2c")]
    if last and draw(st.integers(0, 5)) == 0:
        fields.append((b"Connection", b"close"))
    flaw = draw(st.sampled_from([None] * 24 + ["control", "bad_name", "obs_fold"]))
    if flaw == "control" and fields and w.quirk is None:
        i = draw(st.integers(0, len(fields) - 1))
        ch = draw(st.sampled_from(_CONTROL))
        fields[i] = (fields[i][0], fields[i][1] + ch + b"v")
        if ch in _CONTROL_H11_REFUSES:
            w.broken = True
        else:
            w.quirk = "control_in_value"
    elif flaw == "bad_name":
        fields.append((draw(st.sampled_from([b"", b"X Y", b"X\x7f", b"\xc3\xa9", b"X(Y)"])), b"v"))
        w.broken = True
    elif flaw == "obs_fold" and w.quirk is None:
        fields.append((b"X-Folded", b"a\r\n b"))
        w.quirk = flaw
    w.fields = fields


@st.composite
def _chunked(draw, w: _Wire) -> None:
    w.fields.append((b"Transfer-Encoding", draw(st.sampled_from([b"chunked", b"Chunked"]))))
    pieces = draw(st.lists(st.binary(min_size=1, max_size=20), max_size=4))
    framing = []
    for piece in pieces:
        size = draw(st.sampled_from(["%x", "%X", "0%x"])) % len(piece)
        ext = draw(st.sampled_from(["", "", ";a=1", ';name="v w"', ";x"]))
        trail = draw(st.sampled_from(["", "", " ", "\t"]))
        framing.append(f"{size}{ext}{trail}\r\n".encode() + piece + b"\r\n")
    trailers = draw(st.sampled_from([b"", b"", b"X-Trailer: 1\r\n"]))
    flaw = draw(st.sampled_from([None] * 18 + ["bad_size", "overrun", "bad_coding", "length_and_chunked",
                                              "space_before_extension", "malformed_trailer"]))
    if flaw == "bad_size":
        framing.append(draw(st.sampled_from([b"zz", b"", b"+5", b"0x1", b" 1", b"1_0"])) + b"\r\na\r\n")
        w.broken = True
    elif flaw == "overrun" and pieces:
        framing[-1] = framing[-1][:-2] + b"!\r\n"      # one byte more data than the size says
        w.broken = True
    elif flaw == "bad_coding":
        w.fields[-1] = (b"Transfer-Encoding", draw(st.sampled_from([b"gzip", b"gzip, chunked", b"chunked, gzip"])))
        w.broken = True
    elif flaw == "length_and_chunked" and w.quirk is None:
        w.fields.append((b"Content-Length", b"5"))
        w.quirk = flaw
    elif flaw == "space_before_extension" and w.quirk is None:
        framing.insert(0, b"1 ;a=1\r\n-\r\n")
        pieces.insert(0, b"-")
        w.quirk = flaw
    elif flaw == "malformed_trailer" and w.quirk is None:
        trailers = b"no colon here\r\n"
        w.quirk = flaw
    w.framing = b"".join(framing) + b"0\r\n" + trailers + b"\r\n"
    w.body = b"".join(pieces)


@st.composite
def _sized(draw, w: _Wire) -> None:
    body = draw(st.binary(max_size=30))
    w.fields.append((b"Content-Length", draw(st.sampled_from(["%d", "%d", "0%d"])).encode() % len(body)))
    flaw = draw(st.sampled_from([None] * 18 + ["bad_length", "conflicting", "duplicate_length"]))
    if flaw == "bad_length":
        w.fields[-1] = (b"Content-Length", draw(st.sampled_from([b"", b"+1", b"-1", b"1a", b"0x1"])))
        w.broken = True
    elif flaw == "conflicting":
        w.fields.append((b"Content-Length", b"%d" % (len(body) + 1)))
        w.broken = True
    elif flaw == "duplicate_length" and w.quirk is None:
        sent = w.fields[-1][1]
        if draw(st.booleans()):
            w.fields.append((b"Content-Length", sent))
        else:
            w.fields[-1] = (b"Content-Length", sent + b", " + sent)
        w.quirk = flaw
    w.body = w.framing = body


@st.composite
def wires(draw, *, last: bool) -> _Wire:
    """One request. A broken one has nothing documented in it, so both parsers must refuse it."""
    w = _Wire()
    kind = draw(st.sampled_from(["ok"] * 30 + ["unknown_method", "bad_method", "version", "bad_version",
                                              "extra_spaces", "bare_lf"]))
    w.method = draw(st.sampled_from(_METHODS))
    if kind == "unknown_method":
        w.method, w.quirk = draw(st.sampled_from(["BREW", "get", "X-CUSTOM"])), kind
    elif kind == "bad_method":
        w.method, w.broken = draw(st.sampled_from(["G@T", "GE(T)", "G\x00T", "\x16\x03"])), True
    elif kind == "version":
        w.version, w.quirk = draw(st.sampled_from(["HTTP/1.2", "HTTP/2.0", "HTTP/0.9"])), kind
    elif kind == "bad_version":
        w.version, w.broken = draw(st.sampled_from(["HTTP/1.1x", "HTTPS/1.1", "HTTP/11", "http/1.1", "HTTP/1"])), True
    elif kind == "extra_spaces":
        w.sep, w.quirk = draw(st.sampled_from([("  ", " "), (" ", "  ")])), kind
    elif kind == "bare_lf":
        w.eol, w.quirk = b"\n", kind
    elif last and draw(st.integers(0, 4)) == 0:
        w.version = "HTTP/1.0"
    draw(_target(w))
    draw(_head_fields(w, last=last))
    body = draw(st.sampled_from([None, None, "sized", "chunked"]))
    if body == "sized":
        draw(_sized(w))
    elif body == "chunked":
        draw(_chunked(w))
    return w


@st.composite
def pipelines(draw) -> list:
    n = draw(st.integers(1, 3))
    return [draw(wires(last=i == n - 1)) for i in range(n)]


# ---- the two parsers -------------------------------------------------------------------------------
def gateway(pieces: list) -> list:
    """What the gateway made of the bytes: each request its handler saw, then REFUSED if it
    answered a 4xx."""
    seen = []

    async def handler(req):
        seen.append((req.method, req.raw_path, _normalized(dict(req.headers)), req.body))
        return responses.Reply(200, {}, b"")

    async def feed():
        conn = HttpServer(handler)()
        transport = RecordingTransport()
        conn.connection_made(transport)
        for piece in pieces:
            if transport.closed or transport.eof:     # a refusal's lingering close: nothing more is parsed
                break
            conn.data_received(piece)
        return transport.written
    written = asyncio.run(feed())
    statuses = [int(line.split(b" ")[1]) for line in written.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")]
    assert all(s in (100, 200, 400) for s in statuses), statuses
    return seen + [REFUSED] if 400 in statuses else seen


def reference(pieces: list) -> list:
    """What h11 made of the same bytes, in the same form."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=REQUEST_HEAD_MAX_BYTES)
    seen, request, body = [], None, []
    for piece in pieces:
        conn.receive_data(piece)
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError:
                return seen + [REFUSED]
            if event is h11.NEED_DATA or event is h11.PAUSED:
                break
            assert not isinstance(event, h11.ConnectionClosed)       # no piece is empty
            if isinstance(event, h11.Request):
                request, body = event, []
            elif isinstance(event, h11.Data):
                body.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                headers: dict = {}
                for name, value in request.headers:
                    key, text = name.decode(), _text(value)
                    headers[key] = f"{headers[key]}, {text}" if key in headers else text
                seen.append((request.method.decode(), request.target.decode("latin-1"),
                             _normalized(headers), b"".join(body)))
                conn.send(h11.Response(status_code=200, headers=[("content-length", "0")]))
                conn.send(h11.EndOfMessage())
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return seen            # HTTP/1.0 or Connection: close: the connection ends
                conn.start_next_cycle()
    return seen


def _splits(data: bytes, rng: random.Random) -> dict:
    pieces, pos = [], 0
    while pos < len(data):
        n = rng.randint(1, 12)
        pieces.append(data[pos:pos + n])
        pos += n
    return {"whole": [data] if data else [], "byte by byte": [data[i:i + 1] for i in range(len(data))],
            "random pieces": pieces}


# ---- the properties -------------------------------------------------------------------------------
def _check_pipeline(ws: list, splits: dict) -> None:
    for how, pieces in splits.items():
        ours, theirs = gateway(pieces), reference(pieces)
        for i, w in enumerate(ws):
            mine, ref = ours[i] if i < len(ours) else None, theirs[i] if i < len(theirs) else None
            if w.broken:
                assert mine == ref == REFUSED, (how, i, w.encode(), ours, theirs)
                break
            if w.quirk is None:
                assert mine == ref == w.meant(), (how, i, w.encode(), ours, theirs)
                continue
            gateway_accepts, h11_accepts, _why = DIFFERENCES[w.quirk]
            assert (mine != REFUSED) == gateway_accepts and (ref != REFUSED) == h11_accepts, \
                (how, w.quirk, w.encode(), ours, theirs)
            assert (mine if gateway_accepts else ref) == w.meant(), (how, w.quirk, w.encode(), ours, theirs)
            break                           # past a difference the two streams are no longer comparable


@settings(max_examples=examples(400), deadline=None)
@given(pipelines(), st.randoms(use_true_random=False))
def test_generated_pipelines_are_read_alike_or_refused_alike_however_split(ws, rng):
    data = b"".join(w.encode() for w in ws)
    _check_pipeline(ws, _splits(data, rng))


@settings(max_examples=examples(300), deadline=None)
@given(st.one_of(st.binary(max_size=120),
                 st.lists(st.sampled_from([b"GET ", b"POST ", b"/", b"/dbs", b" HTTP/1.1", b"\r\n", b"\r\n\r\n",
                                           b"Host: x", b"Content-Length: 3", b"Transfer-Encoding: chunked",
                                           b"3\r\nabc\r\n", b"0\r\n\r\n", b":", b"\x00", b"\xff", b"\x16\x03"]),
                          max_size=14).map(b"".join)),
       st.randoms(use_true_random=False))
def test_garbage_is_read_alike_and_refused_no_later_than_h11_however_split(data, rng):
    """Garbage may end mid-request. h11 judges a head once it is whole; the gateway refuses at
    the first byte or line that cannot begin a request llhttp accepts (TLS, an unknown method),
    so where h11 is still waiting the gateway may already have refused, never the other way."""
    results = {how: (gateway(pieces), reference(pieces)) for how, pieces in _splits(data, rng).items()}
    for how, (ours, theirs) in results.items():
        accepted = [r for r in ours if r != REFUSED]
        assert accepted == [r for r in theirs if r != REFUSED], (how, data, ours, theirs)
        if ours[-1:] != [REFUSED]:
            assert theirs[-1:] != [REFUSED], (how, data, ours, theirs)
    assert len({repr(ours) for ours, _ in results.values()}) == 1, (data, results)


# ---- a seeded corpus of tricky cases -------------------------------------------------------------
H = b"Host: x\r\n"
GET = b"GET / HTTP/1.1\r\n" + H
POST = b"POST / HTTP/1.1\r\n" + H
CHUNKED = POST + b"Transfer-Encoding: chunked\r\n\r\n"
CORPUS = {
    # agreed: both read these the same way
    "pipelined after a chunked body": (None, CHUNKED + b"3;ext=1\r\nabc\r\n0\r\nX-T: 1\r\n\r\n" + GET + b"\r\n"),
    "header value of obs-text": (None, GET + b"X: \xc3\xa9\xff\r\n\r\n"),
    "empty header value": (None, GET + b"X:\r\nY: \r\n\r\n"),
    "whitespace around a value": (None, GET + b"X: \t a b \t\r\n\r\n"),
    "repeated header joined": (None, GET + b"X: 1\r\nx: 2\r\n\r\n"),
    "upgrade declined, body framed": (None, POST + b"Connection: upgrade\r\nUpgrade: h2c\r\n"
                                      b"Content-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\n" + H + b"\r\n"),
    "HTTP/1.0 without Host": (None, b"GET / HTTP/1.0\r\n\r\n"),
    "chunk size with trailing space": (None, CHUNKED + b"3 \r\nabc\r\n0\r\n\r\n"),
    "fragment in the target": (None, b"GET /a?b=c#frag HTTP/1.1\r\n" + H + b"\r\n"),
    # agreed: both refuse these
    "no Host in HTTP/1.1": (None, b"GET / HTTP/1.1\r\n\r\n"),
    "two Host headers": (None, b"GET / HTTP/1.1\r\nHost: a\r\nHOST: b\r\n\r\n"),
    "NUL in a value": (None, GET + b"X: a\x00b\r\n\r\n"),
    "bare CR in a value": (None, GET + b"X: a\rb\r\n\r\n"),
    "control character in the path": (None, b"GET /a\x01b HTTP/1.1\r\n" + H + b"\r\n"),
    "tab in the path": (None, b"GET /a\tb HTTP/1.1\r\n" + H + b"\r\n"),
    "UTF-8 in the path": (None, b"GET /\xc3\xa9 HTTP/1.1\r\n" + H + b"\r\n"),
    "non-token method": (None, b"G@T / HTTP/1.1\r\n" + H + b"\r\n"),
    "TLS client hello": (None, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"),
    "leading empty line": (None, b"\r\nGET / HTTP/1.1\r\n" + H + b"\r\n"),
    "space before the colon": (None, GET + b"X : a\r\n\r\n"),
    "empty header name": (None, GET + b": a\r\n\r\n"),
    "Content-Length and chunked": ("length_and_chunked", POST + b"Content-Length: 3\r\n"
                                   b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    "conflicting Content-Length": (None, POST + b"Content-Length: 1\r\nContent-Length: 2\r\n\r\nab"),
    "Transfer-Encoding not chunked": (None, POST + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"),
    "chunk data overruns its size": (None, CHUNKED + b"2\r\nabc\r\n0\r\n\r\n"),
    "chunk size with leading space": (None, CHUNKED + b" 3\r\nabc\r\n0\r\n\r\n"),
    "HTTP/0.9 simple request": (None, b"GET /\r\n\r\n"),
    "bad pipelined after a good one": (None, GET + b"\r\nGET / HTTP/1.1\r\nX: \x00\r\n" + H + b"\r\n"),
    # documented differences (DIFFERENCES)
    "lower-case method": ("unknown_method", b"get / HTTP/1.1\r\n" + H + b"\r\n"),
    "two spaces before the target": ("extra_spaces", b"GET  / HTTP/1.1\r\n" + H + b"\r\n"),
    "LF-only lines": ("bare_lf", b"GET / HTTP/1.1\n" + H.replace(b"\r\n", b"\n") + b"\n"),
    "LF-only header line": ("bare_lf", b"GET / HTTP/1.1\r\nHost: x\nX: y\r\n\r\n"),
    "control character in a value": ("control_in_value", GET + b"X: a\x01b\r\n\r\n"),
    "DEL in a value": ("control_in_value", GET + b"X: a\x7fb\r\n\r\n"),
    "folded header": ("obs_fold", GET + b"X: a\r\n b\r\n\r\n"),
    "same Content-Length twice": ("duplicate_length", POST + b"Content-Length: 1\r\nContent-Length: 1\r\n\r\na"),
    "HTTP/2.0 request line": ("version", b"GET / HTTP/2.0\r\n" + H + b"\r\n"),
    "absolute-form target": ("not_origin_form", b"GET http://x/dbs HTTP/1.1\r\n" + H + b"\r\n"),
    "asterisk target": ("not_origin_form", b"OPTIONS * HTTP/1.1\r\n" + H + b"\r\n"),
    "space before a chunk extension": ("space_before_extension", CHUNKED + b"3 ;a=1\r\nabc\r\n0\r\n\r\n"),
    "malformed trailer": ("malformed_trailer", CHUNKED + b"3\r\nabc\r\n0\r\nnot a field\r\n\r\n"),
}


@pytest.mark.parametrize("case", CORPUS.keys())
def test_tricky_cases_are_read_alike_or_differ_as_documented(case):
    quirk, data = CORPUS[case]
    for how, pieces in _splits(data, random.Random(case)).items():
        ours, theirs = gateway(pieces), reference(pieces)
        if quirk is None:
            assert ours == theirs, (how, ours, theirs)
            continue
        gateway_accepts, h11_accepts, _why = DIFFERENCES[quirk]
        assert (ours[:1] != [REFUSED]) == gateway_accepts, (how, ours)
        assert (theirs[:1] != [REFUSED]) == h11_accepts, (how, theirs)


def test_every_documented_difference_has_a_case_in_the_corpus():
    assert {quirk for quirk, _ in CORPUS.values()} - {None} == set(DIFFERENCES)
