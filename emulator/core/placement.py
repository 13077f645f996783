"""Which backend node of its region each replica lives on (direct mode, docs/direct-protocol.md).

Theory of operation: every region has `nodes_per_region` nodes, numbered from 0. The four
replicas of a replica set are placed on four distinct nodes, chosen by a hash of the seed, the
region, the container's rid and the range id: the same seed gives the same placement in the
live server and in the simulator, and nothing needs to be stored until a replica moves. A
`replica_move` fault moves one replica to a node of its region that holds no other replica of
its set. Nodes can be down (`node_crash`) and a region's direct ports can be blocked
(`direct_ports_blocked`); the shells listen on a node's port only while `listening()` says so.

Who changes what: the fault registry (core/faults.py) calls move/set_node_state/block; shells
hear about every change through `listeners` (fn(region)) and never change placement themselves.
"""
import hashlib

from .replica_set import REPLICA_COUNT

NODES_PER_REGION_DEFAULT = 4
NODES_PER_REGION_MIN = REPLICA_COUNT      # four replicas on four distinct nodes
NODES_PER_REGION_MAX = 64
ALL_REGIONS = "*"


class Node:
    __slots__ = ("region", "index", "state")

    def __init__(self, region: str, index: int):
        self.region = region
        self.index = index
        self.state = "up"

    def describe(self) -> dict:
        return {"node": self.index, "state": self.state}


class Placement:
    def __init__(self, nodes_per_region: int = NODES_PER_REGION_DEFAULT, seed: int = 0):
        if not NODES_PER_REGION_MIN <= nodes_per_region <= NODES_PER_REGION_MAX:
            raise ValueError(f"nodes per region must be {NODES_PER_REGION_MIN}-{NODES_PER_REGION_MAX} "
                             f"(a replica set's {REPLICA_COUNT} replicas need distinct nodes), got {nodes_per_region}")
        self.nodes_per_region = nodes_per_region
        self.seed = seed
        self._nodes: dict[str, list[Node]] = {}
        self._sets: dict[tuple, list[int]] = {}   # (region, coll rid, range id) -> node of each replica
        self.blocked: dict = {}                   # region (or ALL_REGIONS) -> how many faults block its ports
        self.listeners: list = []                 # fn(region): a node's state or a placement changed
        self.version = 0                          # counts changes, and layout_changed's (the shells cache on it)

    # ---- nodes ---------------------------------------------------------------------------
    def nodes(self, region: str) -> list[Node]:
        nodes = self._nodes.get(region)
        if nodes is None:
            nodes = self._nodes[region] = [Node(region, i) for i in range(self.nodes_per_region)]
        return nodes

    def node(self, region: str, index: int) -> Node:
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < self.nodes_per_region:
            raise ValueError(f"node must be 0-{self.nodes_per_region - 1}")
        return self.nodes(region)[index]

    def is_blocked(self, region: str) -> bool:
        return region in self.blocked or ALL_REGIONS in self.blocked

    def listening(self, region: str, index: int) -> bool:
        """Whether node `index` of region accepts connections (the region itself must be up too)."""
        return self.nodes(region)[index].state == "up" and not self.is_blocked(region)

    # ---- replicas ------------------------------------------------------------------------
    def replica_nodes(self, region: str, coll_rid: str, range_id: str) -> list[int]:
        """The node of each replica (by replica index) of one replica set."""
        key = (region, coll_rid, range_id)
        hit = self._sets.get(key)
        if hit is None:
            hit = self._sets[key] = self._initial(region, coll_rid, range_id)
        return hit

    def node_of(self, region: str, coll_rid: str, range_id: str, replica: int) -> int:
        return self.replica_nodes(region, coll_rid, range_id)[replica]

    def _initial(self, region: str, coll_rid: str, range_id: str) -> list[int]:
        # A seeded Fisher-Yates shuffle whose draws come from a hash: deterministic, no rng state.
        digest = hashlib.blake2b(f"{self.seed}|{region}|{coll_rid}|{range_id}".encode(), digest_size=32).digest()
        order = list(range(self.nodes_per_region))
        for i in range(len(order) - 1, 0, -1):
            j = int.from_bytes(digest[(i * 2) % 30:(i * 2) % 30 + 2], "big") % (i + 1)
            order[i], order[j] = order[j], order[i]
        return order[:REPLICA_COUNT]

    def move(self, region: str, coll_rid: str, range_id: str, replica: int, to: int | None = None) -> tuple[int, int]:
        """Move one replica to another node of its region; returns (old node, new node)."""
        old = self.node_of(region, coll_rid, range_id, replica)
        to = self.move_target(region, coll_rid, range_id, replica, to)
        self.replica_nodes(region, coll_rid, range_id)[replica] = to
        self._changed(region)
        return old, to

    def move_target(self, region: str, coll_rid: str, range_id: str, replica: int, to: int | None = None) -> int:
        """Where `move` would put the replica (ValueError if nowhere): `to` if it is free, else
        the next node (cyclically) that is up and holds no replica of this set."""
        nodes = self.replica_nodes(region, coll_rid, range_id)
        old = nodes[replica]
        if to is None:
            n = self.nodes_per_region
            free = [(old + k) % n for k in range(1, n)
                    if (old + k) % n not in nodes and self.nodes(region)[(old + k) % n].state == "up"]
            if not free:
                raise ValueError(f"no free node in {region} for replica {replica} (every up node holds one of its set)")
            return free[0]
        self.node(region, to)
        if to == old:
            raise ValueError(f"replica {replica} is already on node {to}")
        if to in nodes:
            raise ValueError(f"node {to} already holds a replica of this set")
        return to

    def set_node_state(self, region: str, index: int, state: str) -> None:
        self.node(region, index).state = state
        self._changed(region)

    def block(self, region: str) -> None:
        self.blocked[region] = self.blocked.get(region, 0) + 1
        self._changed(region)

    def unblock(self, region: str) -> None:
        n = self.blocked.get(region, 0) - 1
        if n > 0:
            self.blocked[region] = n
        else:
            self.blocked.pop(region, None)
        self._changed(region)

    def layout_changed(self) -> None:
        """A container or a region came or went (the account calls it): what a shell caches on
        `version`, a direct node's resolved replica keys, names replicas that may be gone."""
        self.version += 1

    def _changed(self, region: str) -> None:
        self.version += 1
        for fn in self.listeners:
            fn(region)

    def held_by(self, region: str, index: int, account) -> list:
        """(container, partition, replica index) of every replica on node `index` of region."""
        out = []
        for c, p in account.partitions():
            if region not in p.replica_sets:
                continue
            for i, n in enumerate(self.replica_nodes(region, c.rid, p.range_id)):
                if n == index:
                    out.append((c, p, i))
        return out
