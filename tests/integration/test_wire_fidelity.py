"""The service's behaviours that SDK tests check (issue #26, section 2), each through the official
azure-cosmos SDK (raw HTTP where the SDK cannot send the request) against a real regionlab:
a replace whose body has a new id renames the item (point and batch; 409 when the new id is
taken)."""
import pytest
from azure.cosmos import exceptions


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
