"""A database: its containers and throughput. Names follow azure.cosmos.aio.DatabaseProxy."""
from regionlab.client.exceptions import CosmosResourceExistsError, CosmosResourceNotFoundError
from regionlab.client.protocol import headers as H

from .container import ContainerProxy
from .feed import AsyncItemPaged
from .links import link_path
from .offers import Throughput, throughput_headers
from .request import Request, request_options
from .responses import CosmosDict, as_dict, body_json, dumps


def metadata_feed(pipeline, path: str, operation: str, key: str, max_item_count, kwargs,
                  query=None, parameters=None) -> AsyncItemPaged:
    """The pages of a databases or containers feed (`key`: "Databases", "DocumentCollections"):
    read whole (GET), or a SQL query over it (POST application/query+json)."""
    options = request_options(kwargs)
    body = None if query is None else dumps({"query": query, "parameters": list(parameters or [])})

    async def fetch(continuation):
        h = {H.MAX_ITEM_COUNT: str(max_item_count)} if max_item_count else {}
        if body is not None:
            h.update({H.CONTENT_TYPE: "application/query+json", H.IS_QUERY: "True"})
        if continuation:
            h[H.CONTINUATION] = continuation
        req = Request("GET" if body is None else "POST", path, operation, h, body, is_feed=True, **options)
        reply, diag = await pipeline.execute(req)
        return (body_json(reply) or {}).get(key, []), reply.headers.get(H.CONTINUATION), diag, reply.headers
    return AsyncItemPaged(fetch)


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
                                               **request_options(kwargs)))
        self._props = as_dict(reply, diag)
        return self._props

    async def _offer_resource(self) -> str:
        return (self._props or await self.read())["_self"]

    def get_container_client(self, container) -> ContainerProxy:
        return ContainerProxy(self.client, self, container if isinstance(container, str) else container["id"])

    async def create_container(self, id: str, partition_key, *, offer_throughput=None, default_ttl=None,
                               indexing_policy=None, unique_key_policy=None,
                               conflict_resolution_policy=None, **kwargs) -> ContainerProxy:
        body = {"id": id, "partitionKey": dict(partition_key)}
        for key, value in (("defaultTtl", default_ttl), ("indexingPolicy", indexing_policy),
                           ("uniqueKeyPolicy", unique_key_policy),
                           ("conflictResolutionPolicy", conflict_resolution_policy)):
            if value is not None:
                body[key] = value
        req = Request("POST", link_path(self.link, "colls"), "create_container",
                      offer_headers(offer_throughput), dumps(body), is_write=True, idempotent=False,
                      **request_options(kwargs))
        reply, diag = await self._send(req)
        proxy = self.get_container_client(id)
        proxy._props = as_dict(reply, diag)
        return proxy

    async def create_container_if_not_exists(self, id: str, partition_key, **kwargs) -> ContainerProxy:
        proxy = self.get_container_client(id)
        try:
            await proxy.read(**kwargs)
            return proxy
        except CosmosResourceNotFoundError:
            pass
        try:
            return await self.create_container(id, partition_key, **kwargs)
        except CosmosResourceExistsError:      # created meanwhile by someone else
            await proxy.read(**kwargs)
            return proxy

    async def delete_container(self, container, **kwargs) -> CosmosDict:
        """An empty dict (falsy, like the SDK's None) that carries the diagnostics and charge."""
        cid = container if isinstance(container, str) else getattr(container, "id", None) or container["id"]
        req = Request("DELETE", link_path(self.link, "colls", cid), "delete_container", is_write=True,
                      **request_options(kwargs))
        reply, diag = await self._send(req)
        return as_dict(reply, diag)

    def list_containers(self, max_item_count=None, **kwargs) -> AsyncItemPaged:
        return metadata_feed(self.client._pipeline, link_path(self.link, "colls"), "list_containers",
                             "DocumentCollections", max_item_count, kwargs)

    def query_containers(self, query=None, parameters=None, max_item_count=None, **kwargs) -> AsyncItemPaged:
        return metadata_feed(self.client._pipeline, link_path(self.link, "colls"), "query_containers",
                             "DocumentCollections", max_item_count, kwargs, query or "SELECT * FROM root r",
                             parameters)

    async def replace_container(self, container, partition_key, *, default_ttl=None, indexing_policy=None,
                                conflict_resolution_policy=None, **kwargs) -> ContainerProxy:
        """Replace a container's properties (PUT); as the SDK's, the partition key must be the one
        it has. Answers the container's proxy with the new properties."""
        cid = container if isinstance(container, str) else getattr(container, "id", None) or container["id"]
        body = {"id": cid, "partitionKey": dict(partition_key)}
        for key, value in (("defaultTtl", default_ttl), ("indexingPolicy", indexing_policy),
                           ("conflictResolutionPolicy", conflict_resolution_policy)):
            if value is not None:
                body[key] = value
        req = Request("PUT", link_path(self.link, "colls", cid), "replace_container",
                      {H.CONTENT_TYPE: "application/json"}, dumps(body), is_write=True, **request_options(kwargs))
        reply, diag = await self._send(req)
        proxy = self.get_container_client(cid)
        proxy._props = as_dict(reply, diag)
        return proxy
