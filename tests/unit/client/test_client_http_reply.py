"""Proves the gateway transport's sans-IO reply parser (client/aio/http_reply.py): content-length,
chunked (with extensions and trailers), until-EOF, 204/304 and HEAD bodies parse the same fed
whole and byte by byte; a repeated header is joined, names are lower case; Connection: close and
HTTP/1.0 end keep-alive. Its one invariant, fuzzed with hypothesis: any bytes either parse or
raise ReplyError, nothing else. And a request head with a CR or LF in a header is refused."""
import pytest
from hypothesis import given, settings, strategies as st

from regionlab.client.aio.http_pool import request_head
from regionlab.client.aio.http_reply import REPLY_HEAD_BYTES_MAX, ReplyError, ReplyParser
from tiers import examples


def parse(data: bytes, head_request=False, split=None):
    p = ReplyParser(head_request)
    pieces = [data] if split is None else [data[i:i + split] for i in range(0, len(data), split)]
    for piece in pieces:
        out = p.feed(piece)
        if out is not None:
            return out
    return p.feed_eof()


CASES = {
    "length": (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Ms-Request-Charge: 1\r\n\r\nhello",
               (200, {"content-length": "5", "x-ms-request-charge": "1"}, b"hello", True)),
    "chunked": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n",
                (200, {"transfer-encoding": "chunked"}, b"hello world", True)),
    "eof": (b"HTTP/1.1 200 OK\r\nA: 1\r\n\r\nuntil the end",
            (200, {"a": "1"}, b"until the end", False)),
    "no content": (b"HTTP/1.1 204 No Content\r\n\r\n", (204, {}, b"", True)),
    "close": (b"HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
              (404, {"connection": "close", "content-length": "2"}, b"{}", False)),
    "http/1.0": (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", (200, {"content-length": "0"}, b"", False)),
    "repeated": (b"HTTP/1.1 200 OK\r\nVary: a\r\nvary: b\r\nContent-Length: 0\r\n\r\n",
                 (200, {"vary": "a, b", "content-length": "0"}, b"", True)),
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("split", [None, 1, 7])
def test_replies_parse_the_same_whole_and_in_pieces(name, split):
    data, expected = CASES[name]
    assert parse(data, split=split) == expected


def test_a_reply_to_head_has_no_body_whatever_its_length_says():
    assert parse(b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", head_request=True)[2] == b""


@pytest.mark.parametrize("data", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",                      # cut in the body
    b"HTTP/1.1 200 OK\r\nContent-Le",                                        # cut in the head
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",        # cut in a chunk
    b"",                                                                     # closed before replying
])
def test_a_reply_cut_short_is_an_error_at_eof(data):
    p = ReplyParser()
    if data:
        assert p.feed(data) is None
    with pytest.raises(ReplyError):
        p.feed_eof()


@pytest.mark.parametrize("data", [
    b"SPDY/3 200 OK\r\n\r\n",
    b"HTTP/1.1 2x0 OK\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXX",
    b"HTTP/1.1 100 Continue\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab",                        # more than its length
])
def test_malformed_replies_raise_reply_error(data):
    with pytest.raises(ReplyError):
        parse(data)


def test_an_endless_head_is_refused_at_its_limit():
    p = ReplyParser()
    p.feed(b"HTTP/1.1 200 OK\r\n")
    with pytest.raises(ReplyError):
        for _ in range(REPLY_HEAD_BYTES_MAX // 1000 + 2):
            p.feed(b"x-long: " + b"a" * 990 + b"\r\n")


@settings(max_examples=examples(400), deadline=None)
@given(st.binary(max_size=300), st.integers(min_value=1, max_value=50))
def test_any_bytes_parse_or_raise_reply_error(data, split):
    for candidate in (data, b"HTTP/1.1 200 OK\r\n" + data, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + data):
        for size in (None, split):
            try:
                out = parse(candidate, split=size)
            except ReplyError:
                continue
            status, headers, body, keep_alive = out
            assert 200 <= status <= 999 and isinstance(body, bytes) and isinstance(headers, dict)


def test_a_header_with_a_line_break_is_refused_before_anything_is_sent():
    assert request_head("GET", "/dbs", "h:1", {"a": "b"}, None) == b"GET /dbs HTTP/1.1\r\nhost: h:1\r\na: b\r\n\r\n"
    assert request_head("POST", "/x", "h", {}, 2).endswith(b"content-length: 2\r\n\r\n")
    for bad in ({"a": "b\r\nx-ms-evil: 1"}, {"a\nb": "c"}, {"a": "b\rc"}):
        with pytest.raises(ValueError):
            request_head("GET", "/", "h", bad, None)
