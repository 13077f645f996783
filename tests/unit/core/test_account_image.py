"""Proves the account image round-trips in the core, in virtual time and without a file: the
commit hook hears exactly each region's committed versions (a transactional batch as one
commit), and an account rebuilt from the metadata image and those versions serves the same
items from every region, continues LSNs and rids, and without a hook nothing is reported; a
region restored lagging gets exactly its backlog over the link, and the topology (regions added
and removed, their ids, the links) comes back whole."""
import json

import msgpack

from regionlab.emulator.core import account_image
from regionlab.emulator.core.store import Version

from core_world import World


def _durable_world():
    world = World()
    heard = []
    world.account.commit_hook = lambda c, p, rs, old, new: heard.append(
        (c.rid, p.range_id, rs.region, [(lsn, [v.key for v in vs]) for lsn, vs in rs.commits_between(old, new)]))
    changed = []
    world.account.metadata_hook = lambda: changed.append(1)
    return world, heard, changed


def test_commit_hook_hears_each_regions_commits_once_and_batches_whole():
    world, heard, changed = _durable_world()
    c = world.container(throughput=20_000)
    assert len(changed) == 2                      # the database, then the container
    world.write(c, "a", "create", {"id": "1", "pk": "a"})
    w = world.writer(c, "b")
    w.create({"id": "x", "pk": "b"})
    w.create({"id": "y", "pk": "b"})
    w.commit()
    world.settle()
    regions = [r.name for r in world.account.regions]
    for region in regions:                        # every region's commits, each heard once
        commits = [commit for _, _, r, cs in heard if r == region for commit in cs]
        assert sorted(len(keys) for _, keys in commits) == [1, 2], region     # the batch is one commit


def test_without_hooks_nothing_is_reported():
    world = World()
    c = world.container()
    assert all(p.durable is None for p in c.partitions)
    world.write(c, "a", "create", {"id": "1", "pk": "a"})


def test_restored_account_serves_every_region_and_continues_lsns_and_rids():
    world, _, _ = _durable_world()
    c = world.container(throughput=20_000)
    for i in range(30):
        world.write(c, f"k{i % 4}", "create", {"id": str(i), "pk": f"k{i % 4}", "v": i})
    world.write(c, "k1", "delete", "1")
    world.settle()
    image = json.loads(json.dumps(account_image.metadata(world.account)))   # as the file keeps it
    east = world.account.write_regions[0]
    parts = []
    for idx, p in enumerate(c.partitions):
        rs = p.replica_sets[east]
        rows = [account_image.item_record(v) for v in rs.store.scan(rs.committed_lsn)]
        parts.append((idx, rs.committed_lsn, dict(rs.progress), rows))

    again = World()
    account_image.restore_metadata(again.account, image)
    c2 = again.account.container(again.account.database("db"), "c")
    assert c2.rid == c.rid and len(c2.partitions) == len(c.partitions) and c2.offer_rid == c.offer_rid
    for idx, lsn, progress, rows in parts:
        versions = [account_image.version_from_record(r, json.loads(r[-1])) for r in rows]
        assert all(isinstance(v, Version) for v in versions)
        account_image.restore_partition(c2, idx, lsn, progress, versions)
    for region in [r.name for r in again.account.regions]:
        doc, _, _ = again.read(c2, region, "k2", "2")
        assert doc["v"] == 2 and doc["_rid"] == world.read(c, region, "k2", "2")[0]["_rid"]
        assert again.read(c2, region, "k1", "1")[0] is None
    _, v, lsn, rs = again.write(c2, "k2", "create", {"id": "new", "pk": "k2"})
    old_rs = c.partitions[int(rs.range_id)].replica_sets[east]
    assert lsn == old_rs.committed_lsn + 1
    assert v.rid not in {d.rid for p in c.partitions for d in p.replica_sets[east].store.scan(10**9)}


def _image_of(world, c):
    """What the file would keep: the metadata, each region's rows, and the write region's
    commits above the lowest region (the outbox), through JSON and msgpack as stored."""
    image = json.loads(json.dumps(account_image.metadata(world.account)))
    replicas = []
    low = {}
    for idx, p in enumerate(c.partitions):
        for region, rs in p.replica_sets.items():
            rows = [account_image.item_record(v) for v in rs.store.scan(rs.committed_lsn)]
            replicas.append((idx, region, rs.committed_lsn, json.loads(json.dumps(account_image.replica_state(rs))), rows))
            low[idx] = min(low.get(idx, rs.committed_lsn), rs.committed_lsn)
    hub = world.account.write_regions[0]
    outbox = {}
    for idx, p in enumerate(c.partitions):
        rs = p.replica_sets[hub]
        outbox[(c.rid, idx, hub)] = [(lsn, lsn) + account_image.commit_from_record(
            msgpack.unpackb(msgpack.packb(account_image.commit_record(vs, account_image.befores_of(rs, lsn, vs)))),
            json.loads) for lsn, vs in rs.commits_between(low[idx], rs.committed_lsn)]
    return image, replicas, outbox


def _restored(image, replicas, outbox, c_rid):
    again = World()
    account_image.restore_topology(again.account, image)
    account_image.restore_metadata(again.account, image)
    c2 = again.account.colls_by_rid[c_rid]
    for idx, region, lsn, state, rows in replicas:
        versions = [account_image.version_from_record(r, json.loads(r[-1])) for r in rows]
        account_image.restore_replica(c2, idx, region, lsn, state, versions)
    assert account_image.finish(again.account, outbox) == []
    return again, c2


def test_a_lagging_region_is_restored_lagging_and_gets_exactly_its_backlog_over_the_link():
    world, _, _ = _durable_world()
    c = world.container(throughput=20_000)
    for i in range(5):
        world.write(c, "a", "create", {"id": f"before{i}", "pk": "a"})
    world.settle()
    west = world.account.regions[-1].name
    east = world.account.write_regions[0]
    world.account.links[(east, west)].set_state("cut")
    for i in range(3):
        world.write(c, "a", "create", {"id": f"cut{i}", "pk": "a"})
    world.write(c, "a", "delete", "before1")
    world.settle()
    image, replicas, outbox = _image_of(world, c)
    # West's items are East's taken back to West's LSN by undoing the commits it lacks.
    for idx, p in enumerate(c.partitions):
        hub, rs = p.replica_sets[east], p.replica_sets[west]
        taken_back = account_image.state_at(list(hub.store.scan(hub.committed_lsn)),
                                            [(at, vs, bs) for _, at, vs, bs in outbox[(c.rid, idx, east)]],
                                            hub.committed_lsn, rs.committed_lsn)
        assert sorted((v.key, v.lsn) for v in taken_back) == sorted((v.key, v.lsn) for v in rs.store.scan(rs.committed_lsn))
    again, c2 = _restored(image, replicas, outbox, c.rid)
    assert again.account.links[(east, west)].backlog == 4          # 3 creates and the delete
    assert again.read(c2, west, "a", "cut0")[0] is None and again.read(c2, west, "a", "before1")[0] is not None
    assert again.read(c2, east, "a", "cut2")[0] is not None and again.read(c2, east, "a", "before1")[0] is None
    again.settle()
    assert again.read(c2, west, "a", "cut2")[0] is not None and again.read(c2, west, "a", "before1")[0] is None
    p = c2.partitions[int(c2.partitions[0].range_id)]
    assert len({rs.committed_lsn for rs in p.replica_sets.values()}) == 1


def test_topology_round_trips_with_region_ids_and_links():
    world, _, _ = _durable_world()
    c = world.container()
    world.account.add_region("North Europe")
    world.account.remove_region(world.account.regions[1].name)
    world.write(c, "a", "create", {"id": "x", "pk": "a"})
    world.settle()
    again, c2 = _restored(*_image_of(world, c), c.rid)
    assert [(r.name, r.id) for r in again.account.regions] == [(r.name, r.id) for r in world.account.regions]
    assert set(again.account.links) == set(world.account.links)
    assert set(c2.partitions[0].replica_sets) == {r.name for r in world.account.regions}
    assert again.read(c2, "North Europe", "a", "x")[0]["id"] == "x"


def test_a_restore_keeps_the_change_log_in_lsn_order_whatever_order_the_rows_come_in():
    """A file hands back its rows in no particular order; the store's change log must still be
    in LSN order, or a change feed resumed after a restart stops early."""
    world, _, _ = _durable_world()
    c = world.container(throughput=20_000)
    for i in range(40):
        world.write(c, f"k{i % 4}", "create", {"id": str(i), "pk": f"k{i % 4}", "v": i})
    world.settle()
    image = json.loads(json.dumps(account_image.metadata(world.account)))
    east = world.account.write_regions[0]
    again = World()
    account_image.restore_metadata(again.account, image)
    c2 = again.account.container(again.account.database("db"), "c")
    for idx, p in enumerate(c.partitions):
        rs = p.replica_sets[east]
        rows = [account_image.item_record(v) for v in rs.store.scan(rs.committed_lsn)][::-1]   # newest first
        versions = [account_image.version_from_record(r) for r in rows]
        account_image.restore_partition(c2, idx, rs.committed_lsn, dict(rs.progress), versions)
        store = c2.partitions[idx].replica_sets[east].store
        lsns = [lsn for lsn, _ in store.changes]
        assert lsns == sorted(lsns)
        middle = sorted(v.lsn for v in versions)[len(versions) // 2]
        assert [v.lsn for v in store.changes_after(middle, rs.committed_lsn)] == \
            sorted(v.lsn for v in versions if v.lsn > middle)
