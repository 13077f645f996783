"""Effective partition keys (EPKs): partition key definitions, hashing, and range splits.

Theory of operation
-------------------
A container's partition key definition (`PartitionKeyDef`) names one path ("Hash") or up to
three ("MultiHash", hierarchical) and a hash version. A logical key is the list of values at
those paths, as decoded from the `x-ms-documentdb-partitionkey` header or taken from a document.
`effective_partition_key` maps that list to its EPK, an uppercase hex string. EPKs of one
container compare as plain strings; physical partitions own contiguous `[min, max)` EPK ranges
that cover `EPK_MIN` ("") to `EPK_MAX` ("FF") with no gap, initially as `split_ranges` cuts them.

Each component is first written in a binary form: a type marker byte (undefined 00, null 01,
false 02, true 03, number 05, string 08), then for numbers the IEEE-754 double (ints too) and
for strings the UTF-8 bytes plus a terminator.

* V2 Hash: MurmurHash3 x64-128 (seed 0) of the encoded components; the 128-bit result
  (h2 high, h1 low) printed big-endian with its top two bits cleared, so the first byte is at
  most 0x3F and every EPK sorts below "FF". 32 hex chars.
* MultiHash: the V2 hash of each component on its own, concatenated (32 hex chars each).
  A prefix of the components gives the prefix of the full EPK, so a prefix owns the range
  `[prefix_epk, prefix_epk + "FF")`.
* V1 Hash: MurmurHash3 x86-32 (seed 0) of the encoded component (strings cut to 100 chars,
  terminator 00), then the EPK is the order-preserving encoding of [hash as a number, value].
  Every V1 EPK starts with "05" (a number).

Invariants: the same key always gives the same EPK; EPKs are uppercase hex of whole bytes;
V2/MultiHash EPKs lie in ["", "40"); V1 EPKs in ["05", "06"). The only state is a bounded
memo of V2 string hashes: a pure function's results, safe to share between replicas.

Fidelity: EPKs match the official Python SDK (azure-cosmos 4.17.1) bit for bit, since the SDK
computes EPKs for change feed, feed ranges and prefix queries and we must agree with it. Where
that SDK differs from the .NET service we follow the SDK: V1 hashes an int as its value mod
2**32; V1 omits null from the encoded value (the hash still covers it); V1 truncates strings
by code point, not UTF-16 unit. V2 and MultiHash have no such quirks.

Cost per call (CPython 3.11.7, AMD EPYC, timeit, memo missed): V2 Hash of a short string
3.3 us, of a 36-char UUID 6.5 us, of an int 4.0 us; MultiHash of three short strings 11.7 us;
V1 of a short string 4.3 us. A memo hit costs 0.3 us per string component.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Sequence

EPK_MIN = ""
EPK_MAX = "FF"

KIND_HASH = "Hash"
KIND_MULTI_HASH = "MultiHash"
VERSION_DEFAULT = 1                 # the service's default when "version" is absent
MULTI_HASH_PATHS_MAX = 3
RANGE_COUNT_MAX = 4096              # most physical ranges split_ranges will cut
EPK_MEMO_ENTRIES_MAX = 16384        # string components whose V2 hash is remembered (~4 MB)

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
_HEX_DIGITS = frozenset("0123456789ABCDEFabcdef")
# V1 writes every string byte plus one; UTF-8 never holds 0xFF, so the map is total.
_V1_BYTE_SHIFT = bytes(min(b + 1, 0xFF) for b in range(256))


class _Undefined:
    """A key component that is absent from the document (the header writes it as `{}`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNDEFINED"


UNDEFINED = _Undefined()


# --- partition key definitions -------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PartitionKeyDef:
    paths: tuple[str, ...]
    kind: str = KIND_HASH
    version: int = VERSION_DEFAULT
    _segments: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)
    # The property name when the key is a single top-level property ("/pk" -> "pk"), else None.
    top_level_name: str | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "paths", tuple(self.paths))
        _check_def(self.paths, self.kind, self.version)
        segments = tuple(_parse_path(p) for p in self.paths)
        if len(set(segments)) != len(segments):
            raise ValueError(f"partitionKey.paths has duplicates: {list(self.paths)!r}")
        object.__setattr__(self, "_segments", segments)
        top = segments[0][0] if len(segments) == 1 and len(segments[0]) == 1 else None
        object.__setattr__(self, "top_level_name", top)

    @classmethod
    def from_json(cls, d: dict) -> PartitionKeyDef:
        if not isinstance(d, dict):
            raise ValueError("partitionKey must be a JSON object")
        paths = d.get("paths")
        if not isinstance(paths, list):
            raise ValueError("partitionKey.paths must be a non-empty list of paths like \"/pk\"")
        kind = d.get("kind", KIND_HASH)
        # MultiHash exists only in version 2, so an absent version cannot mean 1 there.
        default_version = 2 if kind == KIND_MULTI_HASH else VERSION_DEFAULT
        return cls(tuple(paths), kind, d.get("version", default_version))

    def to_json(self) -> dict:
        return {"paths": list(self.paths), "kind": self.kind, "version": self.version}

    @property
    def path_steps(self) -> tuple[tuple[str, ...], ...]:
        """Each path as its property names from the root: "/a/b" -> ("a", "b")."""
        return self._segments

    def values_from_document(self, doc: dict) -> list:
        return [_value_at(doc, segments) for segments in self._segments]


def _check_def(paths: tuple, kind: Any, version: Any) -> None:
    if kind not in (KIND_HASH, KIND_MULTI_HASH):
        raise ValueError(f"partitionKey.kind must be \"Hash\" or \"MultiHash\", not {kind!r}")
    if type(version) is not int or version not in (1, 2):
        raise ValueError(f"partitionKey.version must be 1 or 2, not {version!r}")
    if not paths:
        raise ValueError("partitionKey.paths must be a non-empty list of paths like \"/pk\"")
    if kind == KIND_HASH and len(paths) != 1:
        raise ValueError(f"a Hash partition key has exactly one path, got {len(paths)}")
    if kind == KIND_MULTI_HASH and len(paths) > MULTI_HASH_PATHS_MAX:
        raise ValueError(f"a MultiHash partition key has at most {MULTI_HASH_PATHS_MAX} paths, "
                         f"got {len(paths)}")
    if kind == KIND_MULTI_HASH and version != 2:
        raise ValueError("a MultiHash partition key requires version 2")


def _parse_path(path: Any) -> tuple[str, ...]:
    """Split "/a/b" into ("a", "b"); a segment may be quoted to hold "/": /"a/b"."""
    if not isinstance(path, str) or not path.startswith("/") or len(path) < 2:
        raise ValueError(f"partition key path must be a string like \"/pk\", not {path!r}")
    segments, rest = [], path
    while rest:
        rest = rest[1:]
        if rest[:1] in ('"', "'"):
            end = rest.find(rest[0], 1)
            if end < 0:
                raise ValueError(f"partition key path has an unclosed quote: {path!r}")
            segment, rest = rest[1:end], rest[end + 1:]
        else:
            end = rest.find("/")
            end = len(rest) if end < 0 else end
            segment, rest = rest[:end].strip(), rest[end:]
        if not segment or (rest and rest[0] != "/"):
            raise ValueError(f"partition key path has an empty or malformed segment: {path!r}")
        segments.append(segment)
    return tuple(segments)


def _value_at(doc: Any, segments: tuple[str, ...]) -> Any:
    """The value at a path; UNDEFINED if absent or not a scalar (objects, arrays)."""
    node = doc
    for segment in segments:
        if not isinstance(node, dict) or segment not in node:
            return UNDEFINED
        node = node[segment]
    return UNDEFINED if isinstance(node, (dict, list)) else node


# --- effective partition keys --------------------------------------------------------------

def effective_partition_key(pk_def: PartitionKeyDef, values: Sequence) -> str:
    """The EPK of a key given as its component list; fewer components than paths is a prefix
    (MultiHash only). The empty list (a system-key container's "no key") is EPK_MIN."""
    if not values:
        return EPK_MIN
    if pk_def.kind == KIND_MULTI_HASH:
        if len(values) > len(pk_def.paths):
            raise ValueError(f"{len(values)} partition key components for "
                             f"{len(pk_def.paths)} paths")
        return "".join([_v2_epk(v) for v in values])
    if len(values) != 1:
        raise ValueError(f"a Hash partition key has one component, got {len(values)}")
    if pk_def.version == 2:
        return _v2_epk(values[0])
    return _v1_epk(values[0])


def _v2_epk(value: Any) -> str:
    if type(value) is str:      # the common case; keyed on str alone, so True and 1 never mix
        return _v2_string_epk(value)
    return _v2_hash_hex(_encode_for_hash(value, _V2_STRING_END))


@lru_cache(maxsize=EPK_MEMO_ENTRIES_MAX)
def _v2_string_epk(value: str) -> str:
    return _v2_hash_hex(_MARK_STRING + value.encode() + _V2_STRING_END)


def _v2_hash_hex(encoded: bytes) -> str:
    h1, h2 = murmur3_x64_128(encoded)
    return f"{((h2 << 64) | h1) & _V2_MASK:032X}"


def _encode_for_hash(value: Any, string_end: bytes) -> bytes:
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


def _v1_epk(value: Any) -> str:
    if isinstance(value, str):
        value = value[:V1_STRING_CHARS_MAX]
    elif value == {} or value is UNDEFINED:
        value = UNDEFINED
    hashed = value
    if isinstance(value, int) and not isinstance(value, bool):
        hashed = float(value & _M32)  # the SDK's cast to uint32 (see module docstring)
    hash32 = murmur3_x86_32(_encode_for_hash(hashed, _V1_STRING_END))
    return (_encode_number(float(hash32)) + _encode_v1_value(value)).hex().upper()


def _encode_v1_value(value: Any) -> bytes:
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
        return _encode_number(_as_double(value))
    raise ValueError("a partition key component must be a string, number, bool, null or "
                     f"undefined, not {type(value).__name__}")


def _encode_number(number: float) -> bytes:
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


# --- MurmurHash3 (Austin Appleby, public domain), written for speed on Python ints ----------

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
    # fmix64 on both halves, inlined: calls cost as much as the arithmetic here.
    h1 = ((h1 ^ (h1 >> 33)) * 0xFF51AFD7ED558CCD) & m
    h1 = ((h1 ^ (h1 >> 33)) * 0xC4CEB9FE1A85EC53) & m
    h1 ^= h1 >> 33
    h2 = ((h2 ^ (h2 >> 33)) * 0xFF51AFD7ED558CCD) & m
    h2 = ((h2 ^ (h2 >> 33)) * 0xC4CEB9FE1A85EC53) & m
    h2 ^= h2 >> 33
    h1 = (h1 + h2) & m
    return h1, (h2 + h1) & m


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


# --- ranges --------------------------------------------------------------------------------

def split_ranges(pk_def: PartitionKeyDef, count: int) -> list[tuple[str, str]]:
    """`count` contiguous [min, max) ranges over EPK_MIN..EPK_MAX, each holding an equal
    share of the hash space that keys of this definition actually occupy."""
    if type(count) is not int or not 1 <= count <= RANGE_COUNT_MAX:
        raise ValueError(f"range count must be an int in 1..{RANGE_COUNT_MAX}, not {count!r}")
    if pk_def.kind == KIND_HASH and pk_def.version == 1:
        cut = _v1_boundary
    else:
        cut = _v2_boundary
    bounds = [EPK_MIN] + [cut(i, count) for i in range(1, count)] + [EPK_MAX]
    return list(zip(bounds[:-1], bounds[1:]))


def _v2_boundary(i: int, count: int) -> str:
    # Trailing zero bytes change no comparison against EPKs of 32+ chars; drop them to read well.
    text = f"{(i << V2_HASH_BITS) // count:0{V2_EPK_CHARS}X}"
    while text.endswith("00"):
        text = text[:-2]
    return text


def _v1_boundary(i: int, count: int) -> str:
    # A V1 EPK starts with its hash as a number; that encoding sorts like the hash itself, and
    # its last byte has the low bit clear, so no longer hash encoding has it as a prefix.
    return _encode_number(float(i * V1_HASH_SPACE // count)).hex().upper()


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
