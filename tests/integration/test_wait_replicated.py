"""The harness's wait_replicated (sdk_harness.py) waits for every partition of a region that is
still behind when it is called, and returns once each has caught up: the real emulator, with
the link to West US slowed so that every partition's commits are in flight when the wait arms
(checked first), and the write region's LSNs compared after it returns.
"""
import pytest
from azure.cosmos import PartitionKey

from sdk_harness import make_client, wait_replicated

LAG_MS = 1000       # far longer than the writes and the check take: the wait arms while West US is behind


def _lsns(emu, region: str) -> list:
    """(write region's committed LSN, region's committed LSN) per partition."""
    def read(account):
        src = account.write_regions[0]
        return [(p.replica_sets[src].committed_lsn, p.replica_sets[region].committed_lsn)
                for p in account.databases["db"].containers["items"].partitions]
    return emu.call(read)


@pytest.mark.regionlab_config(partitions=3)
def test_waits_for_every_partition_that_is_behind(regionlab):
    regionlab.faults.link_lag("East US", "West US", LAG_MS, one_way=True)
    with make_client(regionlab) as client:
        c = client.create_database("db").create_container("items", PartitionKey(path="/pk"))
        for i in range(30):
            c.upsert_item({"id": str(i), "pk": str(i)})
        behind = _lsns(regionlab, "West US")
        assert len(behind) == 3 and all(dst < src for src, dst in behind), behind
        wait_replicated(regionlab, "db", "items", "West US")
        assert all(dst >= src for (src, _), (_, dst) in zip(behind, _lsns(regionlab, "West US")))
