"""The asyncio core of the bundled client: `from client.aio import CosmosClient`."""
from regionlab.client.exceptions import (CosmosAccessConditionFailedError, CosmosBatchOperationError,
                               CosmosClientTimeoutError, CosmosHttpResponseError,
                               CosmosResourceExistsError, CosmosResourceNotFoundError)
from regionlab.client.partition_key import PartitionKey

from .client import CosmosClient
from .container import ContainerProxy
from .database import DatabaseProxy
from .offers import ThroughputProperties

__all__ = ["CosmosClient", "DatabaseProxy", "ContainerProxy", "PartitionKey", "CosmosHttpResponseError",
           "CosmosResourceNotFoundError", "CosmosResourceExistsError", "CosmosAccessConditionFailedError",
           "CosmosBatchOperationError", "CosmosClientTimeoutError", "ThroughputProperties"]
