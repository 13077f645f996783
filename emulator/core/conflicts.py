"""Multi-write conflict resolution and the conflicts feed.

Theory of operation: when two regions accept writes to the same item concurrently, every
region resolves the pair the same way, so all regions converge on the same winner whatever
the order in which the writes arrive. The container's conflictResolutionPolicy decides:
LastWriterWins on `/_ts` (the default) compares the writes' timestamps; LastWriterWins on a
custom numeric path compares that property (higher wins; a write without it loses to one with
it), then the timestamp. Ties fall to the region order, then the region's write sequence, so
the order is total. Losers are recorded once each in the container's conflicts feed.
"""
import json

from .limits import CONFLICTS_KEPT_MAX
from .ttl import EXPIRE_OP

_MISSING = float("-inf")


def resolver_for(definition: dict, region_order: dict):
    """fn(current, incoming) -> True when incoming wins."""
    policy = definition.get("conflictResolutionPolicy") or {}
    path = policy.get("conflictResolutionPath") or "/_ts"
    segments = [s for s in path.split("/") if s] if path != "/_ts" else None

    def rank(v):
        value = _MISSING
        if segments is not None and v.doc is not None:
            node = v.doc
            for seg in segments:
                node = node.get(seg) if isinstance(node, dict) else None
            if isinstance(node, (int, float)) and not isinstance(node, bool):
                value = node
        return (value, v.ts_ms, region_order.get(v.origin, -1), v.oseq)

    return lambda current, incoming: rank(incoming) > rank(current)


class ConflictLog:
    def __init__(self, container_rid: str):
        self.container_rid = container_rid
        self.entries: list[dict] = []
        self._seen: set = set()
        self.recorded = 0               # entries ever recorded: ids stay unique past the kept window
        self.on_record = None           # fn(ident, entry) for each new entry: a durable account keeps it

    def record(self, loser, winner) -> None:
        ident = (loser.key, loser.origin, loser.oseq)
        if ident in self._seen:
            return
        self._seen.add(ident)
        self.recorded += 1
        n = self.recorded
        self.entries.append({
            "id": str(n), "_rid": f"{self.container_rid}conflict{n}", "resourceType": "document",
            "operationType": "delete" if loser.op == EXPIRE_OP else loser.op, "resourceId": loser.rid,
            "content": json.dumps(loser.doc if not loser.deleted else {"id": loser.key[1]}),
            "conflict_lsn": loser.lsn, "_ts": loser.ts,
            "regionlab": {"loserRegion": loser.origin, "winnerRegion": winner.origin,
                          "partitionKey": loser.key[0]}})
        if len(self.entries) > CONFLICTS_KEPT_MAX:
            del self.entries[0]
        if self.on_record is not None:
            self.on_record(ident, self.entries[-1])
