"""Proves the account image round-trips in the core, in virtual time and without a file: the
commit hook hears exactly each region's committed versions (a transactional batch as one
commit), and an account rebuilt from the metadata image and those versions serves the same
items from every region, continues LSNs and rids, and without a hook nothing is reported."""
import json

from emulator.core import account_image
from emulator.core.store import Version

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
