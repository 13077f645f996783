"""The service's behaviours that SDK tests check (issue #26, section 2), each through the official
azure-cosmos SDK against a real regionlab (docs/service-edges.md lists them): a replace whose body
has a new id renames the item (point and batch; 409 when the new id is taken); an upsert with
If-Match creates a missing item (201) and checks the etag of an existing one; a point read names
the serving region's URL in Content-Location; a write naming (x-ms-cosmos-intended-collection-rid)
a container since deleted and re-created is 400/1024, and the SDK refreshes its cache and
retries; a container's indexing policy gets `/"_etag"/?` in its excludedPaths; an item missing a
level of a hierarchical key is 400, and so is a partition key of more than three paths (before a
409 for its id); database and container ids longer than 255 characters are 400; an autoscale
offer echoes its autoUpgradePolicy; batch refusals carry the service's texts; a container read
with quota and statistics headers reports usage, quotas, index progress and per-range statistics.
"""
import pytest
from azure.core import MatchConditions
from azure.cosmos import PartitionKey, ThroughputProperties, exceptions

from sdk_harness import make_client, wait_replicated


def served(emu, method: str, kind: str, status: int, substatus: int = 0) -> int:
    """How many requests of this kind every endpoint answered with this status."""
    return sum(s.requests_served[(method, kind, status, substatus)] for s in emu.emulator.services.values())


def test_a_replace_with_a_new_id_renames_the_item(container):
    old = container.create_item({"id": "a", "pk": "p", "n": 1})
    renamed = container.replace_item("a", {"id": "b", "pk": "p", "n": 2})
    assert renamed["id"] == "b" and renamed["n"] == 2 and renamed["_rid"] == old["_rid"]
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        container.read_item("a", partition_key="p")
    assert container.read_item("b", partition_key="p")["n"] == 2
    assert [d["id"] for d in container.query_items("SELECT * FROM c", partition_key="p")] == ["b"]


def test_a_rename_onto_an_existing_id_is_409_and_changes_nothing(container):
    container.create_item({"id": "a", "pk": "p", "n": 1})
    container.create_item({"id": "b", "pk": "p", "n": 2})
    with pytest.raises(exceptions.CosmosResourceExistsError):
        container.replace_item("a", {"id": "b", "pk": "p", "n": 3})
    assert container.read_item("a", partition_key="p")["n"] == 1
    assert container.read_item("b", partition_key="p")["n"] == 2


def test_a_batch_replace_with_a_new_id_renames_the_item(container):
    container.create_item({"id": "a", "pk": "p", "n": 1})
    results = container.execute_item_batch([("replace", ("a", {"id": "c", "pk": "p", "n": 5}))], partition_key="p")
    assert results[0]["statusCode"] == 200
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        container.read_item("a", partition_key="p")
    assert container.read_item("c", partition_key="p")["n"] == 5


def test_an_upsert_with_if_match_creates_a_missing_item(regionlab, container):
    stale = '"00000000-0000-0000-0000-000000000000"'
    created = container.upsert_item({"id": "a", "pk": "p", "n": 1}, etag=stale,
                                    match_condition=MatchConditions.IfNotModified)
    assert created["n"] == 1 and served(regionlab, "POST", "docs", 201) == 1
    # On an existing item If-Match applies: the stale etag is refused, the current one accepted.
    with pytest.raises(exceptions.CosmosAccessConditionFailedError):
        container.upsert_item({"id": "a", "pk": "p", "n": 2}, etag=stale, match_condition=MatchConditions.IfNotModified)
    container.upsert_item({"id": "a", "pk": "p", "n": 3}, etag=created["_etag"],
                          match_condition=MatchConditions.IfNotModified)
    assert container.read_item("a", partition_key="p")["n"] == 3


def test_a_point_read_names_the_serving_region_in_content_location(regionlab, container):
    container.create_item({"id": "a b", "pk": "p"})
    read = container.read_item("a b", partition_key="p")
    location = read.get_response_headers()["Content-Location"]
    east = regionlab.region_endpoints["East US"]
    assert location == east + "dbs/db/colls/items/docs/a%20b"
    wait_replicated(regionlab, "db", "items", "West US")     # a new client has no session to wait for
    with make_client(regionlab, preferred_locations=["West US"]) as west_client:
        west = west_client.get_database_client("db").get_container_client("items")
        location = west.read_item("a b", partition_key="p").get_response_headers()["Content-Location"]
    assert location.startswith(regionlab.region_endpoints["West US"])


def test_a_write_to_a_recreated_container_is_400_1024_and_the_sdk_refreshes(regionlab, container):
    container.create_item({"id": "a", "pk": "p"})               # the SDK caches the container's rid
    with make_client(regionlab) as other:
        db = other.get_database_client("db")
        db.delete_container("items")
        db.create_container("items", PartitionKey(path="/pk"))
    container.create_item({"id": "b", "pk": "p"})               # refused once, then retried
    assert served(regionlab, "POST", "docs", 400, 1024) == 1
    assert [d["id"] for d in container.query_items("SELECT * FROM c", partition_key="p")] == ["b"]


def test_a_container_created_without_etag_excluded_gets_it_appended(sdk_client):
    db = sdk_client.create_database("db")
    policy = {"indexingMode": "consistent", "automatic": True, "includedPaths": [{"path": "/*"}],
              "excludedPaths": [{"path": "/big/*"}]}
    created = db.create_container("c", PartitionKey(path="/pk"), indexing_policy=policy)
    expected = [{"path": "/big/*"}, {"path": '/"_etag"/?'}]
    assert created.read()["indexingPolicy"]["excludedPaths"] == expected
    # A policy that excludes it already keeps its list as given.
    policy["excludedPaths"] = [{"path": '/"_etag"/?'}, {"path": "/big/*"}]
    kept = db.create_container("d", PartitionKey(path="/pk"), indexing_policy=policy)
    assert kept.read()["indexingPolicy"]["excludedPaths"] == policy["excludedPaths"]


def test_hierarchical_keys_item_missing_a_level_and_too_many_paths_are_400(sdk_client):
    db = sdk_client.create_database("db")
    c = db.create_container("h", PartitionKey(path=["/city", "/zipcode"], kind="MultiHash"))
    c.create_item({"id": "null-is-a-value", "city": "Redmond", "zipcode": None})
    with pytest.raises(exceptions.CosmosHttpResponseError) as caught:
        c.create_item({"id": "incomplete", "city": "Vancouver"})
    assert caught.value.status_code == 400
    assert "Partition key provided either doesn't correspond to definition in the collection" in caught.value.message
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        c.read_item("incomplete", partition_key=["Vancouver", None])
    # More than three levels is refused before the id is looked at (the SDK's test reuses one).
    for kind in ("MultiHash", "Hash"):
        with pytest.raises(exceptions.CosmosHttpResponseError) as caught:
            db.create_container("h", PartitionKey(path=["/a", "/b", "/c", "/d"], kind=kind))
        assert caught.value.status_code == 400 and "Too many partition key paths" in caught.value.message


def test_database_and_container_ids_are_at_most_255_characters_item_ids_1023_bytes(sdk_client):
    long_id = "d" * 256
    for create in (sdk_client.create_database, lambda i: sdk_client.create_database("db").create_container(i, PartitionKey(path="/pk"))):
        with pytest.raises(exceptions.CosmosHttpResponseError) as caught:
            create(long_id)
        assert caught.value.status_code == 400
        assert "Ensure to provide a unique non-empty string less than '255' characters." in caught.value.message
    db = sdk_client.get_database_client("db")
    c = db.create_container("c" * 255, PartitionKey(path="/pk"))             # 255 is allowed
    # An item's id may be longer (the service's and the SDK's own test: up to 1023 bytes).
    assert c.create_item({"id": "i" * 300, "pk": "p"})["id"] == "i" * 300
    with pytest.raises(exceptions.CosmosHttpResponseError) as caught:
        c.create_item({"id": "i" * 1024, "pk": "p"})
    assert "Ensure to provide a unique non-empty string less than '1024' characters." in caught.value.message


def test_an_autoscale_offer_echoes_its_auto_upgrade_policy(sdk_client):
    db = sdk_client.create_database("db")
    c = db.create_container("c", PartitionKey(path="/pk"),
                            offer_throughput=ThroughputProperties(auto_scale_max_throughput=5000,
                                                                  auto_scale_increment_percent=2))
    offer = c.get_throughput()
    assert (offer.auto_scale_max_throughput, offer.auto_scale_increment_percent) == (5000, 2)
    assert offer.properties["content"]["offerAutopilotSettings"] == {
        "maxThroughput": 5000, "autoUpgradePolicy": {"throughputPolicy": {"incrementPercent": 2}}}
    c.replace_throughput(ThroughputProperties(auto_scale_max_throughput=7000, auto_scale_increment_percent=3))
    offer = c.get_throughput()
    assert (offer.auto_scale_max_throughput, offer.auto_scale_increment_percent) == (7000, 3)
    with pytest.raises(exceptions.CosmosHttpResponseError) as caught:
        db.create_container("d", PartitionKey(path="/pk"), offer_throughput=ThroughputProperties(
            auto_scale_max_throughput=5000, auto_scale_increment_percent=101))
    assert caught.value.status_code == 400 and "incrementPercent" in caught.value.message
    assert [p["id"] for p in db.list_containers()] == ["c"]              # nothing half-made


PK_MISMATCH_TEXT = ("Partition key provided either doesn't correspond to definition in the collection or "
                    "doesn't match partition key field values specified in the document.")


def test_batch_refusals_carry_the_service_texts(sdk_client):
    db = sdk_client.create_database("db")
    c = db.create_container("c", PartitionKey(path="/company"))
    refusals = [([], "Batch request has no operations."),
                ([("create", ({"id": f"i{n}", "company": "M"},)) for n in range(101)],
                 "Batch request has more operations than what is supported.")]
    for ops, text in refusals:
        with pytest.raises(exceptions.CosmosHttpResponseError) as caught:
            c.execute_item_batch(batch_operations=ops, partition_key="M")
        assert caught.value.status_code == 400 and text in caught.value.message
    h = db.create_container("h", PartitionKey(path=["/state", "/city", "/zip"], kind="MultiHash"))
    ops = [("create", ({"id": "a", "state": "WA", "city": "Redmond", "zip": "98052"},))]
    assert len(h.execute_item_batch(batch_operations=ops, partition_key=["WA", "Redmond", "98052"])) == 1
    for call in (lambda: h.execute_item_batch(batch_operations=ops, partition_key=["WA", "Redmond"]),
                 lambda: h.read_item("a", partition_key=["WA"])):
        with pytest.raises(exceptions.CosmosHttpResponseError) as caught:
            call()
        assert caught.value.status_code == 400 and PK_MISMATCH_TEXT in caught.value.message


def test_a_container_read_with_quota_and_statistics_reports_usage(sdk_client):
    c = sdk_client.create_database("db").create_container("c", PartitionKey(path="/pk"))
    for n in range(3):
        c.create_item({"id": str(n), "pk": f"p{n}", "pad": "x" * 1000})
    headers = {}
    props = c.read(populate_quota_info=True, populate_partition_key_range_statistics=True,
                   response_hook=lambda h, _: headers.update(h))
    usage = dict(part.split("=") for part in headers["x-ms-resource-usage"].strip(";").split(";"))
    quota = dict(part.split("=") for part in headers["x-ms-resource-quota"].strip(";").split(";"))
    assert usage["documentsCount"] == "3" and int(usage["documentsSize"]) >= 3        # KB, rounded up
    assert quota["documentsCount"] == "-1" and quota["collectionSize"] == "10485760"
    assert headers["x-ms-documentdb-collection-index-transformation-progress"] == "100"
    stats = props["statistics"]
    assert [s["id"] for s in stats] == ["0"] and stats[0]["documentCount"] == 3
    assert stats[0]["sizeInKB"] == int(usage["documentsSize"])
    plain = {}
    assert "statistics" not in c.read(response_hook=lambda h, _: plain.update(h))
    assert "x-ms-resource-usage" not in plain
