"""Request heads parsed by llhttp (emulator/gateway/request_head.py): a well-formed head becomes
the Request the gateway reads (lower-case names, UTF-8 values, repeats joined, trailing
whitespace dropped); every head the service refuses is refused with 400 and a message that
says what to send instead, fed whole or a byte at a time; and one parser serves a connection's
heads in turn, a new one after a head with a body. Pure: no sockets, no loop."""
import pytest

from regionlab.emulator.gateway.request_head import TLS_HINT, BadRequest, HeadParser

H = b"Host: localhost:8081\r\n"


def _request(head: bytes, parser: HeadParser | None = None):
    parser = parser or HeadParser()
    parser.feed(head)
    return parser.request()


def _refusal(head: bytes, byte_by_byte: bool = False) -> BadRequest:
    parser = HeadParser()
    with pytest.raises(BadRequest) as e:
        for piece in ([head[i:i + 1] for i in range(len(head))] if byte_by_byte else [head]):
            parser.feed(piece)
        parser.request()
    return e.value


def test_a_head_becomes_the_request_the_gateway_reads():
    req = _request(b"POST /dbs/db/colls/c/docs?x=1 HTTP/1.1\r\n" + H + b"Content-Length: 12\r\n"
                   b"X-MS-Documentdb-PartitionKey: [\"\xc3\xa9\"] \t\r\nX-Raw: \xff\r\nAccept: a\r\naccept: b\r\n\r\n")
    assert (req.method, req.raw_path, req.version) == ("POST", "/dbs/db/colls/c/docs?x=1", "HTTP/1.1")
    assert req.headers == {"host": "localhost:8081", "content-length": "12",
                           "x-ms-documentdb-partitionkey": '["é"]', "x-raw": "\xff", "accept": "a, b"}
    assert (req.length, req.content_length, req.chunked, req.keep_alive) == (12, 12, False, True)


@pytest.mark.parametrize("head, keep_alive, connection", [
    (b"GET / HTTP/1.1\r\n" + H + b"\r\n", True, ""),
    (b"GET / HTTP/1.1\r\n" + H + b"Connection: close\r\n\r\n", False, "Connection: close\r\n"),
    (b"GET / HTTP/1.0\r\n\r\n", False, "Connection: close\r\n"),
    (b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", True, "Connection: keep-alive\r\n"),
])
def test_keep_alive_follows_the_version_and_the_connection_header(head, keep_alive, connection):
    req = _request(head)
    assert (req.keep_alive, req.connection) == (keep_alive, connection)


def test_a_chunked_request_says_so_and_has_no_length():
    req = _request(b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: Chunked\r\n\r\n")
    assert (req.chunked, req.length, req.content_length) == (True, 0, None)


REFUSED = {
    "control character in the path": (b"GET /a\x01b HTTP/1.1\r\n" + H + b"\r\n", "percent-encode"),
    "UTF-8 in the path": (b"GET /\xc3\xa9 HTTP/1.1\r\n" + H + b"\r\n", "percent-encode"),
    "control character in a value": (b"GET / HTTP/1.1\r\n" + H + b"X: a\x01b\r\n\r\n", "free of control characters"),
    "DEL in a value": (b"GET / HTTP/1.1\r\n" + H + b"X: a\x7f\r\n\r\n", "free of control characters"),
    "non-token method": (b"G@T / HTTP/1.1\r\n" + H + b"\r\n", "should start with a method such as GET"),
    "unknown method": (b"BREW / HTTP/1.1\r\n" + H + b"\r\n", "should start with a method such as GET"),
    "two Host headers": (b"GET / HTTP/1.1\r\n" + H + b"host: other\r\n\r\n", "2 Host headers; send exactly one"),
    "HTTP/1.1 without Host": (b"GET / HTTP/1.1\r\n\r\n", "must carry a Host header"),
    "bad version": (b"GET / HTTP/9.9\r\n" + H + b"\r\n", "Unsupported HTTP version"),
    "HTTP/2": (b"GET / HTTP/2.0\r\n" + H + b"\r\n", "Unsupported HTTP version HTTP/2.0"),
    "HTTP/2 preface": (b"PRI * HTTP/2.0\r\n\r\n", "Unsupported HTTP version HTTP/2.0"),
    "HTTP/0.9": (b"GET /\r\n\r\n", "Unsupported HTTP version HTTP/0.9"),
    "not a path": (b"GET http://x/dbs HTTP/1.1\r\n" + H + b"\r\n", "is not a path"),
    "bare LF": (b"GET / HTTP/1.1\n" + H + b"\r\n", "lines must end with CRLF"),
    "folded header": (b"GET / HTTP/1.1\r\n" + H + b"X: a\r\n b\r\n\r\n", "on one line"),
    "space before the colon": (b"GET / HTTP/1.1\r\n" + H + b"X : a\r\n\r\n", "'Name: value'"),
    "leading empty line": (b"\r\nGET / HTTP/1.1\r\n" + H + b"\r\n", "begins with an empty line"),
    "no version": (b"GET / FOO\r\n" + H + b"\r\n", "expected 'METHOD /path HTTP/1.1'"),
    "repeated Content-Length": (b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 1\r\nContent-Length: 1\r\n\r\n",
                                "send one Content-Length header"),
    "Content-Length not a number": (b"POST / HTTP/1.1\r\n" + H + b"Content-Length: +1\r\n\r\n",
                                    "send one Content-Length header"),
    "Content-Length and chunked": (b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 1\r\n"
                                   b"Transfer-Encoding: chunked\r\n\r\n", "both Content-Length and Transfer-Encoding"),
    "coding llhttp refuses": (b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: gzip\r\n\r\n", "send chunked"),
    "coding the service refuses": (b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: gzip, chunked\r\n\r\n",
                                   "send chunked"),
    "TLS": (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", TLS_HINT),
}


@pytest.mark.parametrize("byte_by_byte", [False, True], ids=["whole", "byte by byte"])
@pytest.mark.parametrize("case", REFUSED.keys())
def test_a_head_the_service_refuses_is_400_saying_what_to_send(case, byte_by_byte):
    head, needle = REFUSED[case]
    error = _refusal(head, byte_by_byte)
    assert error.status == 400 and needle in error.message, error.message


def test_tls_is_told_at_its_first_byte():
    with pytest.raises(BadRequest) as e:
        HeadParser().feed(b"\x16")
    assert e.value.message == TLS_HINT


def test_one_parser_serves_the_heads_of_a_connection_and_a_new_one_follows_a_body():
    heads = HeadParser()
    first = _request(b"GET /a HTTP/1.1\r\n" + H + b"\r\n", heads)
    kept = heads.parser
    second = _request(b"POST /b HTTP/1.1\r\n" + H + b"Content-Length: 3\r\n\r\n", heads)
    assert kept is not None and heads.parser is None       # llhttp would wait for the body
    third = _request(b"DELETE /c HTTP/1.1\r\n" + H + b"\r\n", heads)
    assert [r.raw_path for r in (first, second, third)] == ["/a", "/b", "/c"]
    assert second.headers == {"host": "localhost:8081", "content-length": "3"}
    assert third.headers == {"host": "localhost:8081"}


def test_after_a_refusal_the_parser_starts_afresh():
    heads = HeadParser()
    with pytest.raises(BadRequest):
        _request(b"GET / HTTP/1.1\r\n\r\n", heads)
    assert _request(b"GET /next HTTP/1.1\r\n" + H + b"\r\n", heads).raw_path == "/next"
