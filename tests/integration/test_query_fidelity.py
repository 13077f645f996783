"""The service's query behaviours that SDK tests check (issue #26, section 2; docs/service-edges.md),
each through the official azure-cosmos SDK against one real regionlab for the module: a query
spanning more than one partition key range needs the cross-partition flag (400 with the service's
words otherwise; a one-range container and a query fixing the partition key are served)."""
import pytest
from azure.cosmos import PartitionKey, exceptions

from regionlab.emulator.testing import running_emulator
from sdk_harness import make_client

DISABLED = "Cross partition query is required but disabled"


@pytest.fixture(scope="module")
def db():
    with running_emulator() as emu, make_client(emu) as client:
        database = client.create_database("db")
        multi = database.create_container("multi", PartitionKey(path="/pk"), offer_throughput=30_000)
        single = database.create_container("single", PartitionKey(path="/pk"))
        for c in (multi, single):
            for i in range(12):
                c.create_item({"id": f"i{i}", "pk": f"p{i % 6}", "n": i})
        database.emu = emu
        yield database


def test_a_multi_range_query_without_the_cross_partition_flag_is_400(db):
    multi = db.get_container_client("multi")
    assert len(list(multi.read_feed_ranges())) == 3
    with pytest.raises(exceptions.CosmosHttpResponseError) as refused:
        list(multi.query_items("SELECT * FROM c"))
    assert refused.value.status_code == 400 and DISABLED in refused.value.message
    assert len(list(multi.query_items("SELECT * FROM c", enable_cross_partition_query=True))) == 12
    assert len(list(multi.query_items("SELECT * FROM c", partition_key="p1"))) == 2
    # A WHERE clause that fixes the partition key routes the query to one range.
    assert [d["id"] for d in multi.query_items("SELECT * FROM c WHERE c.pk = 'p1' AND c.n > 2")] == ["i7"]


def test_a_one_range_container_answers_without_the_flag(db):
    assert len(list(db.get_container_client("single").query_items("SELECT * FROM c"))) == 12


def test_a_hierarchical_query_with_an_empty_prefix_is_400(db):
    h = db.create_container("h", PartitionKey(path=["/a", "/b"], kind="MultiHash"), offer_throughput=20_000)
    h.create_item({"id": "x", "a": "1", "b": "2"})
    with pytest.raises(exceptions.CosmosHttpResponseError) as refused:
        list(h.query_items("SELECT * FROM c", partition_key=[]))
    assert refused.value.status_code == 400 and DISABLED in refused.value.message
    assert [d["id"] for d in h.query_items("SELECT * FROM c", partition_key=["1"])] == ["x"]
