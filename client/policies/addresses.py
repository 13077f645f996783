"""The direct-mode address cache: where each replica of a partition key range lives, per
(container, partition key range, region), filled from the gateway's address feed
(docs/direct-protocol.md, "The address feed").

Theory of operation (sans-IO; times are milliseconds the caller passes in). `parse_feed` turns
a feed body into ReplicaSets. The cache keeps them until a caller invalidates one: after a 410
(replica not here / not primary / down, or a node of another emulator instance than the address
named), a 410/1002 (the routing map changed), or a refused connection to the primary. Endpoints (node host:port) that refused a connection are marked down
for ENDPOINT_DOWN_MS; replica choices skip them, and skip replicas the feed lists as down. Reads
take replicas round-robin, so the load spreads over the set; `read_order` says which to try
after a 404/1002 (the other secondaries, then the primary, as the service's clients do).
"""
from dataclasses import dataclass, field

from regionlab.client.protocol import direct as D

ENDPOINT_DOWN_MS = 30_000                # a refused endpoint is skipped this long (then retried)
STATE_DOWN = "down"


@dataclass(frozen=True)
class Replica:
    index: int
    key: str                             # the replica key a request names
    host: str
    port: int
    primary: bool
    node: int | None
    region: str
    up: bool
    instance: str | None = None          # the emulator instance the address names (None: names none)

    @property
    def endpoint(self) -> tuple[str, int]:
        return self.host, self.port

    @property
    def pool_key(self) -> tuple[str, int, str | None]:
        """The connection pool's key: a node's host:port, and the instance it must belong to
        (after a restart on the same ports, the same host:port is another instance's node)."""
        return self.host, self.port, self.instance

    @property
    def role(self) -> str:
        return "primary" if self.primary else "secondary"


@dataclass
class ReplicaSet:
    range_id: str
    replicas: list[Replica]
    fetched_ms: float
    _next: int = field(default=0)

    @property
    def primary(self) -> Replica | None:
        return next((r for r in self.replicas if r.primary and r.up), None)


def parse_feed(body: dict, now_ms: float) -> dict[str, ReplicaSet]:
    """{range id: ReplicaSet} of an address feed body (replicas by index)."""
    sets: dict[str, list] = {}
    for a in body.get("Addresss") or []:
        if a.get("protocol") != D.PROTOCOL:
            continue
        host, port, key, instance = D.parse_address(a["physcialUri"])
        index = int(key.rsplit("/", 1)[1])
        sets.setdefault(str(a["partitionKeyRangeId"]), []).append(
            Replica(index, key, host, port, bool(a.get("isPrimary")), a.get("node"), a.get("region", ""),
                    a.get("state") != STATE_DOWN, instance))
    return {rid: ReplicaSet(rid, sorted(rs, key=lambda r: r.index), now_ms) for rid, rs in sets.items()}


class AddressCache:
    def __init__(self, endpoint_down_ms: float = ENDPOINT_DOWN_MS):
        self.endpoint_down_ms = endpoint_down_ms
        self._sets: dict[tuple, ReplicaSet] = {}      # (container, range id, region endpoint)
        self._down: dict[tuple, float] = {}            # (host, port) -> marked at ms
        self.refreshes = 0

    # ---- the cache -----------------------------------------------------------------------
    def get(self, container: str, range_id: str, region: str) -> ReplicaSet | None:
        return self._sets.get((container, range_id, region))

    def put(self, container: str, region: str, sets: dict[str, ReplicaSet]) -> None:
        self.refreshes += 1
        for range_id, rs in sets.items():
            self._sets[(container, range_id, region)] = rs

    def invalidate(self, container: str, range_id: str | None, region: str) -> None:
        for k in [k for k in self._sets if k[0] == container and k[2] == region
                  and (range_id is None or k[1] == range_id)]:
            del self._sets[k]

    def entries(self) -> int:
        return len(self._sets)

    # ---- endpoints -----------------------------------------------------------------------
    def mark_down(self, endpoint: tuple, now_ms: float) -> None:
        self._down[endpoint] = now_ms

    def mark_up(self, endpoint: tuple) -> None:
        self._down.pop(endpoint, None)

    def is_down(self, endpoint: tuple, now_ms: float) -> bool:
        at = self._down.get(endpoint)
        if at is None:
            return False
        if now_ms - at >= self.endpoint_down_ms:
            del self._down[endpoint]
            return False
        return True

    def usable(self, replica: Replica, now_ms: float) -> bool:
        return replica.up and not self.is_down(replica.endpoint, now_ms)

    # ---- choices -------------------------------------------------------------------------
    def write_target(self, rs: ReplicaSet, now_ms: float) -> Replica | None:
        p = rs.primary
        return p if p is not None and self.usable(p, now_ms) else None

    def read_order(self, rs: ReplicaSet, now_ms: float) -> list[Replica]:
        """Usable replicas for a read: the secondaries from the round-robin start, the primary
        last (it takes every write; a read tries it after the secondaries)."""
        usable = [r for r in rs.replicas if self.usable(r, now_ms)]
        secondaries = [r for r in usable if not r.primary]
        if secondaries:
            start = rs._next % len(secondaries)
            rs._next += 1
            secondaries = secondaries[start:] + secondaries[:start]
        return secondaries + [r for r in usable if r.primary]

    def quorum_pair(self, rs: ReplicaSet, now_ms: float) -> list[Replica]:
        """The two replicas of a quorum read (Strong, Bounded Staleness) and the rest in order."""
        return self.read_order(rs, now_ms)
