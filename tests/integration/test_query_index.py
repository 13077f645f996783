"""Proves, through the official SDK against a real server, that the container's indexing
policy reaches the query planner and that the charge reflects the documents a query loaded:
the same equality query costs less on a container that indexes the path than on one whose
policy excludes it (which scans), both return the same documents, and a small page of a big
logical partition is charged for the page, not the partition.
"""
import pytest
from azure.cosmos import PartitionKey

from regionlab.emulator.testing import running_emulator
from sdk_harness import make_client

DOCS = 400
EXCLUDE_CAT = {"indexingMode": "consistent", "includedPaths": [{"path": "/*"}],
               "excludedPaths": [{"path": "/cat/?"}, {"path": '/"_etag"/?'}]}


@pytest.fixture(scope="module")
def containers():
    with running_emulator(partitions=2) as emu, make_client(emu) as client:
        db = client.create_database("idx")
        indexed = db.create_container("indexed", PartitionKey(path="/pk"))
        scanned = db.create_container("scanned", PartitionKey(path="/pk"), indexing_policy=EXCLUDE_CAT)
        for c in (indexed, scanned):
            for i in range(DOCS):
                c.create_item({"id": str(i), "pk": f"p{i % 4}", "cat": f"c{i % 100}", "n": i})
        yield indexed, scanned


def charged(container, sql, **kwargs) -> tuple[list, float]:
    items = list(container.query_items(sql, enable_cross_partition_query=True, **kwargs))
    return items, float(container.client_connection.last_response_headers["x-ms-request-charge"])


def test_indexed_equality_costs_less_than_a_scan(containers):
    indexed, scanned = containers
    sql = "SELECT VALUE c.n FROM c WHERE c.cat = 'c7'"
    charged(indexed, sql)                                   # the first use builds the index
    got_indexed, ru_indexed = charged(indexed, sql)
    got_scanned, ru_scanned = charged(scanned, sql)
    assert sorted(got_indexed) == sorted(got_scanned) == list(range(7, DOCS, 100))
    assert ru_indexed < ru_scanned


def test_a_small_page_is_charged_for_the_page(containers):
    indexed, _ = containers
    pager = indexed.query_items("SELECT * FROM c WHERE c.pk = 'p1'", partition_key="p1", max_item_count=5)
    first = next(pager.by_page())
    page = list(first)
    ru_page = float(indexed.client_connection.last_response_headers["x-ms-request-charge"])
    _, ru_all = charged(indexed, "SELECT * FROM c WHERE c.pk = 'p1'", partition_key="p1")
    assert len(page) == 5
    assert ru_page < ru_all
