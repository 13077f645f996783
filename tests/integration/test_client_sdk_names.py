"""Proves the names the bundled client gained to match azure-cosmos's public surface, against a
real emulator: a multi-write container's conflicts feed (list_conflicts, query_conflicts) lists
the losing versions the SDK's list_conflicts lists; the container definition keywords reach the
service; the exception aliases of azure.cosmos.exceptions catch the client's errors; and
is_feed_range_subset works on the sync face. The surface as a whole is tests/sdk_surface.py's
list, held to docs/client.md by tests/unit/client/test_sdk_surface_list.py."""
import json

import pytest
from azure.cosmos import PartitionKey as SdkPartitionKey

from regionlab.client import ConsistencyLevel, CosmosClient, PartitionKey
from regionlab.client import exceptions
from sdk_harness import heal_fault, inject, make_client, no_lag
from test_sdk_multi_region import wait_converged

REGIONS = ("East US", "East US 2", "West US")
EAST, EAST2, WEST = REGIONS
NO_LAG = no_lag(REGIONS)


@pytest.mark.regionlab_config(multi_write=True, lag_ms=NO_LAG)
def test_the_conflicts_feed_lists_what_the_sdk_lists(regionlab):
    emu = regionlab
    with make_client(emu) as admin:
        admin.create_database("db").create_container("c", SdkPartitionKey(path="/pk"))
    cut = inject(emu, type="link_cut", **{"from": EAST, "to": EAST2})
    clients = {r: CosmosClient(emu.endpoint, credential=emu.key, preferred_locations=[r]) for r in (EAST, EAST2)}
    try:
        for region, client in clients.items():     # the same item written in two regions, each unaware
            client.get_database_client("db").get_container_client("c").upsert_item(
                {"id": "x", "pk": "p", "by": region})
        heal_fault(emu, cut)
        wait_converged(emu, "c")
        ours = clients[EAST].get_database_client("db").get_container_client("c")
        listed = list(ours.list_conflicts())
        queried = list(ours.query_conflicts("SELECT * FROM c WHERE c.resourceId != ''"))
        with make_client(emu) as sdk:
            theirs = list(sdk.get_database_client("db").get_container_client("c").list_conflicts())
    finally:
        for client in clients.values():
            client.close()
    assert len(listed) == 1 and [json.loads(c["content"])["by"] for c in listed] == \
        [json.loads(c["content"])["by"] for c in theirs]
    assert [c["id"] for c in queried] == [c["id"] for c in listed]


def test_container_definition_keywords_reach_the_service(regionlab):
    with CosmosClient(regionlab.endpoint, credential=regionlab.key,
                      consistency_level=ConsistencyLevel.Session) as client:
        db = client.create_database("db")
        c = db.create_container("c", PartitionKey(path="/pk"), default_ttl=-1,
                                computed_properties=[{"name": "cp_lower", "query": "SELECT VALUE LOWER(c.n) FROM c"}])
        props = c.read()
        assert props["defaultTtl"] == -1 and props["computedProperties"][0]["name"] == "cp_lower"
        with pytest.raises(NotImplementedError, match="global_secondary_index= is not supported"):
            db.create_container("g", PartitionKey(path="/pk"), global_secondary_index={"sourceContainerId": "c"})


def test_the_sdk_exception_names_catch_the_clients_errors(regionlab):
    with CosmosClient(regionlab.endpoint, credential=regionlab.key) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "1", "pk": "p"})
        with pytest.raises(exceptions.ResourceNotFoundError):
            c.read_item("2", partition_key="p")
        with pytest.raises(exceptions.ResourceExistsError):
            c.create_item({"id": "1", "pk": "p"})
        with pytest.raises(exceptions.HttpResponseError):
            c.create_item({"id": "1", "pk": "p"})
        whole = {"Range": {"min": "", "max": "FF", "isMinInclusive": True, "isMaxInclusive": False}}
        assert c.is_feed_range_subset(whole, c.feed_range_from_partition_key("p"))
