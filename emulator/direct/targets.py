"""What a direct request names, resolved: the replica of a replica key on one node.

Theory of operation: a request names its replica by key (`colls/<rid>/pkranges/<range>/replicas/<i>`,
client/protocol/direct.py), never by a path. A node resolves the key to a `Target` (the
container, its partition, the region's replica set and the replica) and enforces what only a
replica can: that the replica is on this node, is up, and, for a write, is the primary (each
refusal a 410 with the substatus that says why, docs/direct-protocol.md).

Targets are cached per node by key, each with the placement version it was resolved at. That
version moves with every replica move, node state change, container or region that comes or goes
(core/placement.py `layout_changed`), so a hit of the current version is still placed here, in
the same container and replica set: a steady stream of requests resolves with one comparison.
Only a key that resolved is kept, and only one spelling resolves (the index is one digit), so
the cache holds at most one entry per replica on the node, whatever clients send.
"""
from regionlab.client.protocol import direct as D

from ..core.errors import CosmosError, bad_request
from ..core.replica import PRIMARY, UP
from ..service.call import Call
from ..core.limits import TARGETS_CACHE_MAX_ENTRIES
from .replies import shown

_INDEXES = {"0": 0, "1": 1, "2": 2, "3": 3}


def parse_replica_key(key) -> tuple | None:
    """(coll rid, range id, index) of a replica key, or None when it is not one."""
    if type(key) is not str:         # first: a list or map is not even hashable
        return None
    parts = key.split("/")
    if len(parts) != 6 or parts[0] != "colls" or parts[2] != "pkranges" or parts[4] != "replicas" \
            or parts[5] not in _INDEXES:
        return None
    return parts[1], parts[3], _INDEXES[parts[5]]


class Target:
    """The replica a request names, resolved on a node, with what its requests need of it."""
    __slots__ = ("key", "container", "partition", "rs", "replica", "token", "split", "pk_paths", "docs_segs",
                 "reader", "writer", "counts")

    def __init__(self, svc, key: str, container, partition, rs, replica):
        self.key = key
        self.container = container
        self.partition = partition
        self.rs = rs
        self.replica = replica
        # A container's partitions and partition key are fixed when it is made: only a split one
        # needs the range check, and every key has as many values as the definition has paths.
        self.split = len(container.partitions) > 1
        self.pk_paths = len(container.pk_def.paths)
        # The path segments of its container's documents, as a gateway request has them.
        self.docs_segs = ["dbs", container.db.id, "colls", container.id, "docs"]
        self.token = None                    # the last read's session token and what made it (point.py)
        # The calls its point reads and creates run under (point.py): documents.read_point takes
        # of a call its service, its region and the replica that serves the read; commit_staged
        # (given the operation) and Service.acknowledging its service and region: nothing of
        # the request, so one of each per replica serves them all, and a point request makes
        # no Call of its own. (Service.on_commit, the simulator's hook, would see this one
        # call for every write here; the simulator drives no direct node.)
        self.reader = Call.addressed(svc, "GET", self.docs_segs, {}, b"", "", None, key)
        self.reader.replica = replica
        self.writer = Call.addressed(svc, "POST", self.docs_segs, {}, b"", "", None, key)
        self.counts = svc.requests_served        # the count of its replies (adapter.py)


class Targets:
    """One node's resolver: replica key -> Target, cached by placement version."""
    __slots__ = ("svc", "account", "region", "node", "_cache")

    def __init__(self, svc, region: str, node: int):
        self.svc = svc                       # the region's Service its targets' requests run on
        self.account = svc.account
        self.region = region
        self.node = node
        self._cache: dict = {}               # replica key -> (placement version, Target)

    def resolve(self, key, write: bool) -> Target:
        """The replica `key` names, if this node holds it and it may serve the request (else
        400 for a key that is none, 410 with the substatus that says why)."""
        try:
            hit = self._cache.get(key)
        except TypeError:                    # a list or map for 'replica': _resolve answers the 400
            hit = None
        version = self.account.placement.version
        if hit is not None and hit[0] == version:
            target = hit[1]
        else:
            target = self._resolve(key)
            if len(self._cache) >= TARGETS_CACHE_MAX_ENTRIES:
                self._cache.clear()
            self._cache[key] = (version, target)
        replica = target.replica
        if replica.state != UP:
            raise _gone(D.SUB_REPLICA_DOWN, f"Replica {key} in {self.region} is down; refresh the addresses.")
        if write and replica.role != PRIMARY:
            raise _gone(D.SUB_NOT_PRIMARY, f"Replica {key} in {self.region} is a secondary; writes go to the "
                                           "primary. Refresh the addresses.")
        return target

    def _resolve(self, key) -> Target:
        parsed = parse_replica_key(key)
        if parsed is None:
            raise bad_request(f"'replica' must be a replica key colls/<rid>/pkranges/<range>/replicas/<0-3> "
                              f"from the address feed; got {shown(key, 120)}.")
        coll_rid, range_id, index = parsed
        account = self.account
        container = account.colls_by_rid.get(coll_rid)
        partition = None
        if container is not None:
            for p in container.partitions:
                if p.range_id == range_id:
                    partition = p
                    break
        rs = partition.replica_sets.get(self.region) if partition is not None else None
        if rs is None or account.placement.node_of(self.region, coll_rid, range_id, index) != self.node:
            raise _gone(D.SUB_REPLICA_NOT_HERE, f"Replica {key} is not on node {self.node} of {self.region} "
                                                "(it moved, or never was here); refresh the addresses.")
        return Target(self.svc, key, container, partition, rs, rs.replicas[index])


def _gone(sub: int, message: str) -> CosmosError:
    return CosmosError(410, sub, message)
