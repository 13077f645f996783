"""Replica placement and the direct-mode faults in virtual time: four replicas on four distinct
nodes, the same placement from the same seed, replica_move / node_crash / direct_ports_blocked
applied whole and healed exactly, a refused fault changing nothing; and a replica-pinned read
(read_at) that answers 404/1002 at once when its replica is behind the session."""
import pytest

from regionlab.client.protocol.session_token import VectorToken
from regionlab.emulator.core.documents import read_at
from regionlab.emulator.core.errors import CosmosError
from regionlab.emulator.core.placement import Placement
from regionlab.emulator.core.replica import DOWN, PRIMARY, UP

from core_world import World

EAST = "East US"


def test_four_replicas_on_four_distinct_nodes_deterministic_from_the_seed():
    for seed in range(20):
        a, b = Placement(6, seed), Placement(6, seed)
        for rng in ("0", "1", "2"):
            nodes = a.replica_nodes(EAST, "rid", rng)
            assert len(set(nodes)) == 4 and all(0 <= n < 6 for n in nodes)
            assert nodes == b.replica_nodes(EAST, "rid", rng)
    spreads = {tuple(Placement(6, s).replica_nodes(EAST, "rid", "0")) for s in range(20)}
    assert len(spreads) > 5, "different seeds must spread replicas differently"
    with pytest.raises(ValueError):
        Placement(3)


def test_replica_move_goes_to_a_free_node_and_heals_back():
    w = World(nodes_per_region=5)
    c = w.container()
    p = c.partitions[0]
    placement = w.account.placement
    before = list(placement.replica_nodes(EAST, c.rid, p.range_id))
    heard = []
    placement.listeners.append(heard.append)
    fid = w.account.faults.inject({"type": "replica_move", "region": EAST, "replica": 1})
    after = placement.replica_nodes(EAST, c.rid, p.range_id)
    assert after[1] not in before and after[:1] + after[2:] == before[:1] + before[2:]
    assert len(set(after)) == 4 and heard == [EAST]
    w.account.faults.heal(fid)
    assert placement.replica_nodes(EAST, c.rid, p.range_id) == before


def test_replica_move_with_no_free_node_is_refused_and_changes_nothing():
    w = World()                                          # 4 nodes: every one holds a replica
    c = w.container()
    before = list(w.account.placement.replica_nodes(EAST, c.rid, "0"))
    with pytest.raises(CosmosError) as e:
        w.account.faults.inject({"type": "replica_move", "region": EAST, "replica": 0})
    assert e.value.status == 400 and "--nodes-per-region 5" in e.value.message
    assert w.account.placement.replica_nodes(EAST, c.rid, "0") == before and not w.account.faults.active


def test_node_crash_downs_its_replicas_elects_a_new_primary_and_heals():
    w = World(election_ms=10)
    c = w.container()
    rs = c.partitions[0].replica_sets[EAST]
    placement = w.account.placement
    primary_node = placement.node_of(EAST, c.rid, "0", rs.primary.index)
    old_primary = rs.primary.index
    fid = w.account.faults.inject({"type": "node_crash", "region": EAST, "node": primary_node})
    assert rs.replicas[old_primary].state == DOWN and not placement.listening(EAST, primary_node)
    w.advance(20)
    assert rs.primary.index != old_primary and rs.primary.role == PRIMARY and not rs.electing
    with pytest.raises(CosmosError):
        w.account.faults.inject({"type": "node_crash", "region": EAST, "node": primary_node})
    with pytest.raises(CosmosError):
        w.account.faults.inject({"type": "node_crash", "region": EAST, "node": 9})
    for missing in ({}, {"node": "1"}):                 # the message says what 'node' must be
        with pytest.raises(CosmosError, match=r"'node' must be an integer 0-3 \(a node of East US"):
            w.account.faults.inject({"type": "node_crash", "region": EAST, **missing})
    w.account.faults.heal(fid)
    assert all(r.state == UP for r in rs.replicas) and placement.listening(EAST, primary_node)


def test_direct_ports_blocked_per_region_or_all_and_nested_faults_heal_in_turn():
    w = World()
    placement = w.account.placement
    a = w.account.faults.inject({"type": "direct_ports_blocked", "region": EAST})
    b = w.account.faults.inject({"type": "direct_ports_blocked"})
    assert not placement.listening(EAST, 0) and not placement.listening("West US", 0)
    w.account.faults.heal(b)
    assert not placement.listening(EAST, 0) and placement.listening("West US", 0)
    w.account.faults.heal(a)
    assert placement.listening(EAST, 0)
    with pytest.raises(CosmosError):
        w.account.faults.inject({"type": "direct_ports_blocked", "region": "Mars"})


def test_read_at_serves_its_own_replica_and_refuses_a_session_it_lacks_at_once():
    w = World(intra_region_delay_ms=50)
    c = w.container()
    wr = w.writer(c, "p")
    wr.create({"id": "a", "pk": "p"})
    lsn = wr.commit()
    rs = wr.rs
    lagging = next(r for r in rs.replicas if r.role != PRIMARY)
    session = {"0": VectorToken(0, lsn)}
    with pytest.raises(CosmosError) as e:
        read_at(rs, rs.primary, '["p"]', "a", "Session", session)   # not committed yet: no quorum
    assert (e.value.status, e.value.substatus) == (404, 1002)
    w.advance(50)
    version, seen = read_at(rs, lagging, '["p"]', "a", "Session", session)
    assert version.doc["id"] == "a" and seen == lsn
    rs.set_replica_delay(lagging.index, 1000)
    wr = w.writer(c, "p")
    wr.upsert({"id": "a", "pk": "p", "v": 2})
    lsn2 = wr.commit()
    w.advance(60)                                               # quorum without the slow one
    newer = {"0": VectorToken(0, lsn2)}
    with pytest.raises(CosmosError) as e:
        read_at(rs, lagging, '["p"]', "a", "Session", newer)
    assert (e.value.status, e.value.substatus) == (404, 1002)
    version, seen = read_at(rs, lagging, '["p"]', "a", "Eventual", None)
    assert seen == lsn and "v" not in version.doc               # eventual: what it has
