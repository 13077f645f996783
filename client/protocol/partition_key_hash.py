"""The partition key hash: how one component of a logical partition key becomes its effective
partition key (EPK), as the service and the official SDKs compute it. The emulator (core/epk.py:
definitions, prefixes, ranges) and the client (partition_key.py: a key's range for bulk, change
feed and direct mode) both hash with this module, so they cannot disagree. `epk_successor`
bounds a single key's feed range, [epk, epk_successor(epk)), on both sides too.

Each component is first written in a binary form: a type marker byte (undefined 00, null 01,
false 02, true 03, number 05, string 08), then for numbers the IEEE-754 double (ints too) and
for strings the UTF-8 bytes plus a terminator.

* V2 (`v2_epk`): MurmurHash3 x64-128 (seed 0) of the encoded component; the 128-bit result
  (h2 high, h1 low) printed big-endian with its top two bits cleared, so the first byte is at
  most 0x3F and every EPK sorts below "FF". 32 hex chars. A MultiHash key is the V2 EPKs of its
  components, concatenated.
* V1 (`v1_epk`): MurmurHash3 x86-32 (seed 0) of the encoded component (strings cut to 100
  chars, terminator 00), then the EPK is the order-preserving encoding of [hash as a number,
  value] (`encode_number`). Every V1 EPK starts with "05" (a number).

Fidelity: bit for bit the official Python SDK's (azure-cosmos 4.17.1; tests/unit/core/test_epk.py
compares them on generated keys). Where that SDK differs from the .NET service we follow the SDK:
V1 hashes an int as its value mod 2**32; V1 omits null from the encoded value (the hash still
covers it); V1 truncates strings by code point, not UTF-16 unit. V2 has no such quirks.

A component that is not a string, number, bool, null or undefined (UNDEFINED, or `{}` as the
partition key header writes it), or a number beyond a double's range, is a ValueError.
"""
import struct

V1_STRING_CHARS_MAX = 100           # V1 hashes at most this many code points of a string
V1_STRING_BYTES_MAX = 100           # V1 EPK keeps a string whole up to this many UTF-8 bytes
V2_HASH_BITS = 126                  # V2 clears the top two bits of the 128-bit hash
V2_EPK_CHARS = 32
V1_HASH_SPACE = 1 << 32

_MARK_UNDEFINED = b"\x00"
_MARK_NULL = b"\x01"
_MARK_FALSE = b"\x02"
_MARK_TRUE = b"\x03"
_MARK_NUMBER = b"\x05"
_MARK_STRING = b"\x08"
_V1_STRING_END = b"\x00"
_V2_STRING_END = b"\xff"

_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF
_SIGN64 = 1 << 63
_V2_MASK = (1 << V2_HASH_BITS) - 1
_PACK_DOUBLE = struct.Struct("<d").pack
_UNPACK_U64 = struct.Struct("<Q").unpack
_UNPACK_BLOCKS_128 = struct.Struct("<QQ").iter_unpack
_UNPACK_BLOCKS_32 = struct.Struct("<I").iter_unpack
# V1 writes every string byte plus one; UTF-8 never holds 0xFF, so the map is total.
_V1_BYTE_SHIFT = bytes(min(b + 1, 0xFF) for b in range(256))


class _Undefined:
    """A key component that is absent from the document (the header writes it as `{}`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNDEFINED"


UNDEFINED = _Undefined()


def v2_epk(value) -> str:
    """The V2 EPK of one component: 32 uppercase hex chars, below "40"."""
    if type(value) is str:          # the common case first
        encoded = _MARK_STRING + value.encode() + _V2_STRING_END
    else:
        encoded = _encode_for_hash(value, _V2_STRING_END)
    h1, h2 = murmur3_x64_128(encoded)
    return f"{((h2 << 64) | h1) & _V2_MASK:032X}"


def v1_epk(value) -> str:
    """The V1 EPK of a (single-path) key's one component: uppercase hex, starting "05"."""
    if isinstance(value, str):
        value = value[:V1_STRING_CHARS_MAX]
    elif value == {} or value is UNDEFINED:
        value = UNDEFINED
    hashed = value
    if isinstance(value, int) and not isinstance(value, bool):
        hashed = float(value & _M32)  # the SDK's cast to uint32 (see module docstring)
    hash32 = murmur3_x86_32(_encode_for_hash(hashed, _V1_STRING_END))
    return (encode_number(float(hash32)) + _encode_v1_value(value)).hex().upper()


def _encode_for_hash(value, string_end: bytes) -> bytes:
    if value is True:
        return _MARK_TRUE
    if value is False:
        return _MARK_FALSE
    if value is None:
        return _MARK_NULL
    if value is UNDEFINED or value == {}:
        return _MARK_UNDEFINED
    if isinstance(value, str):
        return _MARK_STRING + value.encode() + string_end
    if isinstance(value, (int, float)):
        return _MARK_NUMBER + _PACK_DOUBLE(_as_double(value))
    raise ValueError("a partition key component must be a string, number, bool, null or "
                     f"undefined, not {type(value).__name__}")


def _as_double(value: int | float) -> float:
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"partition key number {value} is out of double range") from None


def _encode_v1_value(value) -> bytes:
    if value is True:
        return _MARK_TRUE
    if value is False:
        return _MARK_FALSE
    if value is None:
        return b""              # the SDK writes nothing for null here (see module docstring)
    if value is UNDEFINED:
        return _MARK_UNDEFINED
    if isinstance(value, str):
        utf8 = value.encode()
        if len(utf8) <= V1_STRING_BYTES_MAX:
            return _MARK_STRING + utf8.translate(_V1_BYTE_SHIFT) + _V1_STRING_END
        return _MARK_STRING + utf8[:V1_STRING_BYTES_MAX + 1].translate(_V1_BYTE_SHIFT)
    if isinstance(value, (int, float)):
        return encode_number(_as_double(value))
    raise ValueError("a partition key component must be a string, number, bool, null or "
                     f"undefined, not {type(value).__name__}")


def encode_number(number: float) -> bytes:
    """Order-preserving number encoding: marker, top 8 bits of the sign-flipped double, then
    7 bits per byte with the low bit set while more nonzero bits follow."""
    bits = _UNPACK_U64(_PACK_DOUBLE(number))[0]
    payload = bits ^ _SIGN64 if bits < _SIGN64 else (-bits) & _M64
    out = bytearray(_MARK_NUMBER)
    out.append(payload >> 56)
    rest = (payload << 8) & _M64
    if not rest:
        out.append(0)
    while rest:
        out.append((rest >> 56) | 1)
        rest = (rest << 7) & _M64
    out[-1] &= 0xFE
    return bytes(out)


# --- MurmurHash3 (Austin Appleby, public domain), on Python ints -----------------------------

def murmur3_x64_128(data: bytes, seed: int = 0) -> tuple[int, int]:
    """MurmurHash3_x64_128; returns (h1, h2), the low and high 64-bit halves.
    Masking after each product suffices: the low 64 bits of a product depend only on the
    low 64 bits of its factors, so rotations feed their unmasked bits straight in."""
    c1, c2, m = 0x87C37B91114253D5, 0x4CF5AD432745937F, _M64
    h1 = h2 = seed
    length = len(data)
    body = length & ~15
    if body:
        for k1, k2 in _UNPACK_BLOCKS_128(data[:body]):
            k1 = (k1 * c1) & m
            h1 ^= (((k1 << 31) | (k1 >> 33)) * c2) & m
            h1 = (((((h1 << 27) | (h1 >> 37)) & m) + h2) * 5 + 0x52DCE729) & m
            k2 = (k2 * c2) & m
            h2 ^= (((k2 << 33) | (k2 >> 31)) * c1) & m
            h2 = (((((h2 << 31) | (h2 >> 33)) & m) + h1) * 5 + 0x38495AB5) & m
    if length - body > 8:
        k2 = (int.from_bytes(data[body + 8:], "little") * c2) & m
        h2 ^= (((k2 << 33) | (k2 >> 31)) * c1) & m
    if length - body:
        k1 = (int.from_bytes(data[body:body + 8], "little") * c1) & m
        h1 ^= (((k1 << 31) | (k1 >> 33)) * c2) & m
    h1 ^= length
    h2 ^= length
    h1 = (h1 + h2) & m
    h2 = (h2 + h1) & m
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 = (h1 + h2) & m
    return h1, (h2 + h1) & m


def _fmix64(k: int) -> int:
    k = ((k ^ (k >> 33)) * 0xFF51AFD7ED558CCD) & _M64
    k = ((k ^ (k >> 33)) * 0xC4CEB9FE1A85EC53) & _M64
    return k ^ (k >> 33)


def murmur3_x86_32(data: bytes, seed: int = 0) -> int:
    c1, c2, m = 0xCC9E2D51, 0x1B873593, _M32
    h = seed
    length = len(data)
    body = length & ~3
    for (k,) in _UNPACK_BLOCKS_32(data[:body]):
        k = (k * c1) & m
        h ^= ((((k << 15) | (k >> 17)) & m) * c2) & m
        h = ((((h << 13) | (h >> 19)) & m) * 5 + 0xE6546B64) & m
    tail = data[body:]
    if tail:
        k = (int.from_bytes(tail, "little") * c1) & m
        h ^= ((((k << 15) | (k >> 17)) & m) * c2) & m
    h ^= length
    h = ((h ^ (h >> 16)) * 0x85EBCA6B) & m
    h = ((h ^ (h >> 13)) * 0xC2B2AE35) & m
    return h ^ (h >> 16)


_HEX_DIGITS = frozenset("0123456789ABCDEFabcdef")


def epk_successor(epk: str) -> str:
    """The smallest EPK after `epk`: the SDK sends a single key as [epk, epk_successor(epk)).
    Like the SDK's Range.add_to_effective_partition_key, add one to the last byte with carry;
    the successor of "" is "00" (as the SDK's partition_key module defines it). An all-"FF"
    key has no successor of the same length (the SDK wraps to zeros); that is an error here."""
    if not epk:
        return "00"
    if len(epk) % 2 or not _HEX_DIGITS.issuperset(epk):
        raise ValueError(f"EPK must be hex of whole bytes, got {epk!r}")
    successor = int(epk, 16) + 1
    if successor >> (4 * len(epk)):
        raise ValueError(f"EPK {epk!r} has no successor of the same length")
    return f"{successor:0{len(epk)}X}"
