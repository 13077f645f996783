"""A database: its containers and throughput. Names follow azure.cosmos.aio.DatabaseProxy."""
from regionlab.client.exceptions import CosmosResourceExistsError, CosmosResourceNotFoundError
from regionlab.client.protocol import headers as H

from .container import ContainerProxy
from .feed import AsyncItemPaged, metadata_feed
from .links import link_path
from . import options
from .offers import Throughput, throughput_headers
from .request import Request, request_options
from .responses import CosmosDict, as_dict, body_json, dumps


# A container definition's keywords and their JSON names, as azure-cosmos's create_container
_CONTAINER_FIELDS = {"indexing_policy": "indexingPolicy", "default_ttl": "defaultTtl",
                     "unique_key_policy": "uniqueKeyPolicy", "conflict_resolution_policy": "conflictResolutionPolicy",
                     "analytical_storage_ttl": "analyticalStorageTtl", "computed_properties": "computedProperties",
                     "vector_embedding_policy": "vectorEmbeddingPolicy", "change_feed_policy": "changeFeedPolicy",
                     "full_text_policy": "fullTextPolicy"}


def container_definition(id: str, partition_key, kwargs: dict) -> dict:
    """The container's JSON definition; its keywords are taken out of `kwargs`."""
    body = {"id": id, "partitionKey": dict(partition_key)}
    for name, field in _CONTAINER_FIELDS.items():
        value = kwargs.pop(name, None)
        if value is not None:
            body[field] = value
    return body


def offer_headers(offer_throughput) -> dict:
    return {H.CONTENT_TYPE: "application/json", **throughput_headers(offer_throughput)}


class DatabaseProxy(Throughput):
    def __init__(self, client, id: str):
        self.client = client
        self.id = id
        self.link = f"dbs/{id}"
        self._props: dict | None = None

    def __repr__(self):
        return f"<DatabaseProxy [{self.link}]>"

    @property
    def database_link(self) -> str:
        """The SDK's name for the link ("dbs/<id>")."""
        return self.link

    async def _send(self, req):
        return await self.client._pipeline.execute(req)

    async def read(self, **kwargs) -> CosmosDict:
        reply, diag = await self._send(Request("GET", link_path(self.link), "read_database",
                                               **request_options(kwargs, "read")))
        self._props = as_dict(reply, diag)
        return self._props

    async def _offer_resource(self) -> str:
        return (self._props or await self.read())["_self"]

    def get_container_client(self, container) -> ContainerProxy:
        return ContainerProxy(self.client, self, container if isinstance(container, str) else container["id"])

    async def create_container(self, id: str, partition_key, *, offer_throughput=None, return_properties=False,
                               **kwargs):
        """The container's proxy (with its properties and diagnostics), or (proxy, properties)
        with return_properties=True, as azure-cosmos's."""
        body = container_definition(id, partition_key, kwargs)
        req = Request("POST", link_path(self.link, "colls"), "create_container",
                      offer_headers(offer_throughput), dumps(body), is_write=True, idempotent=False,
                      **request_options(kwargs, "create_container"))
        reply, diag = await self._send(req)
        proxy = self.get_container_client(id)
        proxy._props = as_dict(reply, diag)
        return (proxy, proxy._props) if return_properties else proxy

    async def create_container_if_not_exists(self, id: str, partition_key, *, offer_throughput=None,
                                             return_properties=False, **kwargs):
        definition = dict(kwargs)
        container_definition(id, partition_key, definition)          # checks the keywords before any request
        request_options(definition, "create_container_if_not_exists")
        proxy = self.get_container_client(id)
        read_kwargs = {k: v for k, v in kwargs.items() if k in options.REQUEST_OPTIONS}
        try:
            await proxy.read(**read_kwargs)
        except CosmosResourceNotFoundError:
            try:
                return await self.create_container(id, partition_key, offer_throughput=offer_throughput,
                                                   return_properties=return_properties, **kwargs)
            except CosmosResourceExistsError:      # created meanwhile by someone else
                await proxy.read(**read_kwargs)
        return (proxy, proxy._props) if return_properties else proxy

    async def delete_container(self, container, **kwargs) -> CosmosDict:
        """An empty dict (falsy, like the SDK's None) that carries the diagnostics and charge."""
        cid = container if isinstance(container, str) else getattr(container, "id", None) or container["id"]
        req = Request("DELETE", link_path(self.link, "colls", cid), "delete_container", is_write=True,
                      **request_options(kwargs, "delete_container"))
        reply, diag = await self._send(req)
        return as_dict(reply, diag)

    def list_containers(self, max_item_count=None, **kwargs) -> AsyncItemPaged:
        return metadata_feed(self.client._pipeline, link_path(self.link, "colls"), "list_containers",
                             "DocumentCollections", max_item_count, kwargs)

    def query_containers(self, query=None, parameters=None, max_item_count=None, **kwargs) -> AsyncItemPaged:
        return metadata_feed(self.client._pipeline, link_path(self.link, "colls"), "query_containers",
                             "DocumentCollections", max_item_count, kwargs, query or "SELECT * FROM root r",
                             parameters)

    async def replace_container(self, container, partition_key, *, return_properties=False, **kwargs):
        """Replace a container's properties (PUT); as the SDK's, the partition key must be the one
        it has. Answers the container's proxy with the new properties (or (proxy, properties))."""
        cid = container if isinstance(container, str) else getattr(container, "id", None) or container["id"]
        body = container_definition(cid, partition_key, kwargs)
        req = Request("PUT", link_path(self.link, "colls", cid), "replace_container",
                      {H.CONTENT_TYPE: "application/json"}, dumps(body), is_write=True,
                      **request_options(kwargs, "replace_container"))
        reply, diag = await self._send(req)
        proxy = self.get_container_client(cid)
        proxy._props = as_dict(reply, diag)
        return (proxy, proxy._props) if return_properties else proxy
