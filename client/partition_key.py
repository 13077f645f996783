"""Partition key definitions and their effective partition keys (EPKs) as the client needs them.

`PartitionKey(path=...)` mirrors `azure.cosmos.PartitionKey`. `epk_of` hashes a logical key the
way the service does for V2 Hash and MultiHash definitions, with the wire contract's hash
(protocol/partition_key_hash.py, which the emulator uses too), so the client can find a key's
partition key range for bulk, change feed scoping, direct mode, session tokens and the circuit
breaker (`RangeMap`: a container's ranges, looked up by EPK).
"""
import json
from bisect import bisect_right

from regionlab.client.protocol.partition_key_hash import v2_epk

NONE = object()          # the "no partition key" marker of a system-key container


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
    return "".join([v2_epk(v) for v in values])


class RangeMap:
    """A container's partition key ranges (the `PartitionKeyRanges` of GET .../pkranges), looked
    up by EPK."""

    def __init__(self, ranges: list[dict]):
        rows = sorted((r["minInclusive"], r["maxExclusive"], r["id"]) for r in ranges)
        self._lows = [lo for lo, _, _ in rows]
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    def range_of(self, epk: str) -> str:
        i = bisect_right(self._lows, epk) - 1
        if i < 0:
            raise ValueError(f"no partition key range holds EPK {epk!r}")
        lo, hi, rid = self._rows[i]
        if not lo <= epk < hi:
            raise ValueError(f"no partition key range holds EPK {epk!r}")
        return rid

    def range_of_key(self, pk_header: str) -> str:
        """The range holding a logical key given as its x-ms-documentdb-partitionkey text."""
        if len(self._rows) == 1:         # one range holds every key: no hashing
            return self._rows[0][2]
        return self.range_of(epk_of(json.loads(pk_header)))
