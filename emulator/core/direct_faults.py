"""Direct-mode faults, part of the fault catalogue (core/faults.py mixes them in):

    {"type": "replica_move", "region": "East US", "replica": 2, ...partition selectors, "to": 5?}
    {"type": "node_crash", "region": "East US", "node": 1}
    {"type": "direct_ports_blocked", "region": "East US"}      # no region: every region

* replica_move: the replica moves to another node of its region (one holding no replica of its
  set, so it needs nodes_per_region >= 5): its address changes, the old node answers 410.
  Healing moves it back.
* node_crash: the node stops listening and every replica on it is down; a primary on it is
  crashed like primary_crash (an election follows). Healing brings the node and its replicas back.
* direct_ports_blocked: every direct port of the region (or of all regions) refuses connections;
  the gateways are untouched.

Each is checked whole before any of it applies, and undone exactly by its heal.
"""
from .errors import bad_request
from .placement import ALL_REGIONS
from .replica import DOWN, PRIMARY, UP

DIRECT_FAULT_TYPES = ("replica_move", "node_crash", "direct_ports_blocked")


class DirectFaults:
    """Mixed into FaultRegistry: uses its `account`, `_region`, `_replica_index`."""

    def _selected_partitions(self, spec) -> list:
        region = self._region(spec)
        out = []
        for c, p in self.account.partitions():
            if spec.get("database") not in (None, c.db.id) or spec.get("container") not in (None, c.id):
                continue
            if spec.get("partition") not in (None, p.range_id) or region not in p.replica_sets:
                continue
            out.append((c, p))
        if not out:
            raise bad_request("The fault's database/container/partition selectors match no partition.")
        return out

    def _replica_move(self, spec) -> list:
        region = self._region(spec)
        idx = self._replica_index(spec)
        to = spec.get("to")
        placement = self.account.placement
        targets = self._selected_partitions(spec)
        try:
            for c, p in targets:                       # every move must be possible before any is made
                placement.move_target(region, c.rid, p.range_id, idx, to)
        except ValueError as e:
            raise bad_request(f"replica_move: {e}. A move needs a free node: run with "
                              "--nodes-per-region 5 or more.") from None
        undo = []
        for c, p in targets:
            old, _ = placement.move(region, c.rid, p.range_id, idx, to)
            undo.append(lambda c=c, p=p, old=old: _move_back(placement, region, c.rid, p.range_id, idx, old))
        return undo

    def _node_crash(self, spec) -> list:
        region = self._region(spec)
        placement = self.account.placement
        index = spec.get("node")
        try:
            node = placement.node(region, index)
        except ValueError:
            raise bad_request(f"node_crash: 'node' must be an integer 0-{placement.nodes_per_region - 1} "
                              f"(a node of {region}, see GET /topology); got {str(index)[:40]!r}.") from None
        if node.state != "up":
            raise bad_request(f"Node {index} of {region} is already down.")
        crashed = []
        for c, p, i in placement.held_by(region, index, self.account):
            rs = p.replica_sets[region]
            r = rs.replicas[i]
            if r.state != UP:
                continue                               # already down by another fault: not ours to heal
            if r.role == PRIMARY:
                self.account.crash_primary(rs)
            else:
                rs.set_replica_state(i, DOWN)
            crashed.append((rs, i))
        placement.set_node_state(region, index, "down")

        def heal() -> None:
            placement.set_node_state(region, index, "up")
            for rs, i in crashed:
                rs.set_replica_state(i, UP)
        return [heal]

    def _direct_ports_blocked(self, spec) -> list:
        region = ALL_REGIONS if spec.get("region") is None else self._region(spec)
        placement = self.account.placement
        placement.block(region)
        return [lambda: placement.unblock(region)]


def _move_back(placement, region: str, coll_rid: str, range_id: str, idx: int, old: int) -> None:
    """Heal a move: back to its old node, or (if another replica of the set took it meanwhile)
    to the next free one."""
    try:
        placement.move(region, coll_rid, range_id, idx, old)
    except ValueError:
        try:
            placement.move(region, coll_rid, range_id, idx)
        except ValueError:
            pass                                       # nowhere to go: it stays where it is
