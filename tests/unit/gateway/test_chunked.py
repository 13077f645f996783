"""The incremental chunked-body decoder (emulator/gateway/chunked.py): a body decodes to the same
bytes and end offset however it is split, byte by byte included; each byte is examined a bounded
number of times (its `scanned` counter stays within a small multiple of the bytes fed, so
decoding is linear); and any garbage either decodes or raises the protocol error, nothing else.
Pure: no sockets, no loop."""
import pytest
from hypothesis import given, settings, strategies as st

from regionlab.emulator.gateway.chunked import ChunkedBody
from regionlab.emulator.gateway.http import BadRequest
from tiers import examples
from regionlab.emulator.core.limits import (
    CHUNK_LINE_MAX_BYTES, CHUNK_TRAILER_MAX_BYTES, REQUEST_BODY_MAX_BYTES,
)

SCANS_PER_BYTE_MAX = 2       # a byte is searched once, and copied at most once into a line


def _encode(*pieces: bytes, trailers: bytes = b"") -> bytes:
    return b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n" + trailers + b"\r\n"


def _feed(data: bytes, sizes) -> tuple[ChunkedBody, int | None, int]:
    """Feed data cut into pieces of the given sizes (cycled); (decoder, end offset in data, fed)."""
    dec = ChunkedBody(REQUEST_BODY_MAX_BYTES, BadRequest)
    pos, i = 0, 0
    while pos < len(data):
        n = sizes[i % len(sizes)]
        piece = data[pos:pos + n]
        end = dec.feed(piece)
        if end is not None:
            return dec, pos + end, pos + len(piece)
        pos += len(piece)
        i += 1
    return dec, None, pos


def test_a_body_fed_byte_by_byte_is_decoded_with_each_byte_scanned_a_bounded_number_of_times():
    pieces = [bytes([65 + i % 26]) * (1 + i % 5) for i in range(2000)]    # many tiny chunks
    wire = _encode(*pieces, trailers=b"X-Trailer: 1\r\n")
    dec, end, fed = _feed(wire + b"GET / HTTP/1.1\r\n", [1])
    assert end == len(wire) and dec.done
    assert dec.body() == b"".join(pieces)
    assert dec.scanned <= SCANS_PER_BYTE_MAX * fed
    assert len(dec.line) == 0


def test_a_large_chunk_trickled_keeps_no_copy_of_what_came_before():
    data = b"z" * 100_000
    wire = _encode(data)
    dec, end, fed = _feed(wire, [7])
    assert end == len(wire) and dec.body() == data
    assert dec.scanned <= SCANS_PER_BYTE_MAX * fed


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=40), max_size=12),
       st.lists(st.integers(min_value=1, max_value=17), min_size=1, max_size=5))
def test_any_split_decodes_the_same_body_and_end(pieces, sizes):
    wire = _encode(*pieces)
    whole = ChunkedBody(REQUEST_BODY_MAX_BYTES, BadRequest)
    assert whole.feed(wire + b"next") == len(wire)
    dec, end, fed = _feed(wire + b"next", sizes)
    assert end == len(wire)
    assert dec.body() == whole.body() == b"".join(pieces)
    assert dec.scanned <= SCANS_PER_BYTE_MAX * fed


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=200), st.integers(min_value=1, max_value=9))
def test_garbage_either_decodes_or_raises_bad_request(garbage, size):
    for sizes in ([len(garbage) or 1], [size]):
        try:
            _feed(garbage, sizes)
        except BadRequest as e:
            assert e.status in (400, 413) and e.message


@pytest.mark.parametrize("wire, needle", [
    (b"zz\r\nab\r\n0\r\n\r\n", "bad chunk size"),
    (b"0x1a\r\n", "bad chunk size"),
    (b"2\r\nabc\r\n0\r\n\r\n", "does not end with CRLF"),
    (b"2\nab\r\n0\r\n\r\n", "CRLF"),
    (b"1" * (CHUNK_LINE_MAX_BYTES + 1), "size line is longer"),
    (b"0\r\n" + b"X: y\r\n" * (CHUNK_TRAILER_MAX_BYTES // 6 + 1), "trailers are longer"),
])
def test_malformed_framing_is_400_with_a_reason_whole_and_byte_by_byte(wire, needle):
    for sizes in ([len(wire)], [1]):
        with pytest.raises(BadRequest) as e:
            _feed(wire, sizes)
        assert e.value.status == 400 and needle in e.value.message


def test_a_body_over_the_limit_is_413_as_soon_as_its_size_line_says_so():
    dec = ChunkedBody(1000, BadRequest)
    assert dec.feed(b"3e8\r\n" + b"a" * 1000 + b"\r\n") is None
    with pytest.raises(BadRequest) as e:
        dec.feed(b"1\r\n")
    assert e.value.status == 413
