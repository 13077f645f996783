"""regionlab's bundled Cosmos DB client (sync face) and the wire contract (client.protocol).

    from regionlab.client import CosmosClient, PartitionKey          # sync, thread-safe
    from regionlab.client.aio import CosmosClient                    # asyncio core

The names are loaded on first use, so the emulator, which imports only client.protocol, does
not pull in the client's transports.
"""
_EXPORTS = {
    "CosmosClient": "regionlab.client.sync", "DatabaseProxy": "regionlab.client.sync", "ContainerProxy": "regionlab.client.sync",
    "ItemPaged": "regionlab.client.sync", "PartitionKey": "regionlab.client.partition_key", "ThroughputProperties": "regionlab.client.aio.offers",
    "CosmosHttpResponseError": "regionlab.client.exceptions", "CosmosResourceNotFoundError": "regionlab.client.exceptions",
    "CosmosResourceExistsError": "regionlab.client.exceptions", "CosmosAccessConditionFailedError": "regionlab.client.exceptions",
    "CosmosBatchOperationError": "regionlab.client.exceptions", "CosmosClientTimeoutError": "regionlab.client.exceptions",
    "CosmosDict": "regionlab.client.aio.responses", "CosmosList": "regionlab.client.aio.responses",
    "DatabaseAccount": "regionlab.client.aio.client", "ConsistencyLevel": "regionlab.client.aio.client",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'regionlab.client' has no attribute {name!r}")
    import importlib
    return getattr(importlib.import_module(module), name)
