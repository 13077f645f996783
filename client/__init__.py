"""regionlab's bundled Cosmos DB client (sync face) and the wire contract (client.protocol).

    from client import CosmosClient, PartitionKey          # sync, thread-safe
    from client.aio import CosmosClient                    # asyncio core

The names are loaded on first use, so the emulator, which imports only client.protocol, does
not pull in the client's transports.
"""
_EXPORTS = {
    "CosmosClient": "client.sync", "DatabaseProxy": "client.sync", "ContainerProxy": "client.sync",
    "ItemPaged": "client.sync", "PartitionKey": "client.partition_key", "ThroughputProperties": "client.aio.offers",
    "CosmosHttpResponseError": "client.exceptions", "CosmosResourceNotFoundError": "client.exceptions",
    "CosmosResourceExistsError": "client.exceptions", "CosmosAccessConditionFailedError": "client.exceptions",
    "CosmosBatchOperationError": "client.exceptions", "CosmosClientTimeoutError": "client.exceptions",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'client' has no attribute {name!r}")
    import importlib
    return getattr(importlib.import_module(module), name)
