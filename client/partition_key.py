"""Partition key definitions and their effective partition keys (EPKs) as the client needs them.

`PartitionKey(path=...)` mirrors `azure.cosmos.PartitionKey`. `epk_of` hashes a logical key the
way the service does for V2 Hash and MultiHash definitions (MurmurHash3 x64-128, seed 0, over
the binary encoding: type byte, then the double or the UTF-8 bytes and a 0xFF terminator; the top
two bits cleared), so the client can find a key's partition key range for change feed scoping
and session tokens. The client keeps its own copy (it never imports the emulator); a test checks
it against the official SDK's hashing.
"""
import json
import struct

NONE = object()          # the "no partition key" marker of a system-key container

_UNDEFINED, _NULL, _FALSE, _TRUE, _NUMBER, _STRING = 0x00, 0x01, 0x02, 0x03, 0x05, 0x08
_STRING_END = 0xFF
_MASK64 = (1 << 64) - 1
_C1, _C2 = 0x87C37B91114253D5, 0x4CF5AD432745937F


class PartitionKey(dict):
    """A container's partition key definition; a dict like the SDK's (it is sent as JSON)."""

    def __init__(self, path, kind: str | None = None, version: int = 2):
        paths = [path] if isinstance(path, str) else list(path)
        kind = kind or ("MultiHash" if len(paths) > 1 else "Hash")
        super().__init__(paths=paths, kind=kind, version=version)

    @property
    def path(self):
        return self["paths"][0] if len(self["paths"]) == 1 else self["paths"]

    @property
    def kind(self) -> str:
        return self["kind"]

    @property
    def version(self) -> int:
        return self["version"]


_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))     # json.dumps(separators=) builds one per call


def header_value(value) -> str:
    """The x-ms-documentdb-partitionkey text for a key: one value or a hierarchical list."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    return _COMPACT_JSON.encode(values)


def value_in(doc: dict, paths: list[str]):
    """The document's key at the definition's paths (a list for MultiHash); KeyError if absent."""
    values = []
    for path in paths:
        node = doc
        for segment in path.strip("/").split("/"):
            node = node[segment.strip("\"'")]
        values.append(node)
    return values[0] if len(values) == 1 else values


def epk_of(values: list) -> str:
    """The EPK of a logical key (its component values) under a V2 Hash or MultiHash definition."""
    if len(values) == 1:
        return _v2_epk(values[0])
    return "".join(_v2_epk(v) for v in values)


def _v2_epk(value) -> str:
    h1, h2 = _murmur3_x64_128(_encode(value))
    raw = bytearray(h2.to_bytes(8, "big") + h1.to_bytes(8, "big"))
    raw[0] &= 0x3F
    return raw.hex().upper()


def _encode(value) -> bytes:
    if value is None:
        return bytes([_NULL])
    if value is True:
        return bytes([_TRUE])
    if value is False:
        return bytes([_FALSE])
    if isinstance(value, (int, float)):
        return bytes([_NUMBER]) + struct.pack("<d", float(value))
    if isinstance(value, str):
        return bytes([_STRING]) + value.encode("utf-8") + bytes([_STRING_END])
    if isinstance(value, dict) and not value:
        return bytes([_UNDEFINED])
    raise TypeError(f"a partition key value must be a string, number, bool or None, not {type(value).__name__}")


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK64


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK64
    return k ^ (k >> 33)


def _mix_k1(k1: int) -> int:
    return (_rotl((k1 * _C1) & _MASK64, 31) * _C2) & _MASK64


def _mix_k2(k2: int) -> int:
    return (_rotl((k2 * _C2) & _MASK64, 33) * _C1) & _MASK64


def _murmur3_x64_128(data: bytes, seed: int = 0) -> tuple[int, int]:
    h1 = h2 = seed
    blocks = len(data) // 16
    for i in range(blocks):
        k1, k2 = struct.unpack_from("<QQ", data, i * 16)
        h1 ^= _mix_k1(k1)
        h1 = (_rotl(h1, 27) + h2) & _MASK64
        h1 = (h1 * 5 + 0x52DCE729) & _MASK64
        h2 ^= _mix_k2(k2)
        h2 = (_rotl(h2, 31) + h1) & _MASK64
        h2 = (h2 * 5 + 0x38495AB5) & _MASK64
    tail = data[blocks * 16:]
    k1 = int.from_bytes(tail[:8], "little") if tail else 0
    k2 = int.from_bytes(tail[8:], "little") if len(tail) > 8 else 0
    if len(tail) > 8:
        h2 ^= _mix_k2(k2)
    if tail:
        h1 ^= _mix_k1(k1)
    h1 ^= len(data)
    h2 ^= len(data)
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    return h1, h2
