"""Fixtures of the integration suite: a sync SDK client for the `regionlab` fixture, and a fresh
container on it (`container` is db/items, `coll` db/c). The helpers they use live in
sdk_harness.py."""
import pytest
from azure.cosmos import PartitionKey

from sdk_harness import make_client


@pytest.fixture
def sdk_client(regionlab):
    with make_client(regionlab) as client:
        yield client


@pytest.fixture
def container(sdk_client):
    """A fresh container `db/items` with partition key /pk (one partition unless configured)."""
    db = sdk_client.create_database("db")
    return db.create_container("items", PartitionKey(path="/pk"))


@pytest.fixture
def coll(sdk_client):
    """A fresh container `db/c` with partition key /pk."""
    return sdk_client.create_database("db").create_container("c", PartitionKey(path="/pk"))
