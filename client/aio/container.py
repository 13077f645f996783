"""A container's items: point operations, queries, read-all, delete by partition key,
transactional batch, change feed and throughput. Names and arguments follow
azure.cosmos.aio.ContainerProxy."""
import asyncio
import dataclasses
import uuid

from regionlab.client import partition_key as pkmod
from regionlab.client.diagnostics import Diagnostics
from regionlab.client.exceptions import CosmosBatchOperationError, CosmosResourceNotFoundError
from regionlab.client.protocol import auth, headers as H, status as S

from . import bulk
from .batch_operations import from_batch_tuple
from .changefeed import ChangeFeed, feed_range_bounds
from .feed import AsyncItemPaged, metadata_feed
from .links import item_path, link_path
from .offers import Throughput
from .request import NOT_GIVEN, Request, request_options
from .responses import CosmosDict, CosmosList, as_dict, body_json, dumps

QUERY_CONTENT_TYPE = "application/query+json"
PATCH_CONTENT_TYPE = "application/json-patch+json"


class ContainerProxy(Throughput):
    def __init__(self, client, database, id: str):
        self.client = client
        self.database = database
        self.id = id
        self.link = f"{database.link}/colls/{id}"
        self._props: dict | None = None
        self._ranges: list | None = None
        self._name_based = auth.is_name_based(self.link)     # then an item's signed link is its path

    def __repr__(self):
        return f"<ContainerProxy [{self.link}]>"

    @property
    def container_link(self) -> str:
        """The SDK's name for the link ("dbs/<db>/colls/<id>")."""
        return self.link

    # ---- plumbing ----------------------------------------------------------------------
    async def _send(self, req: Request):
        return await self.client._pipeline.execute(req)

    async def _doc(self, method, path, operation, pk, body=None, headers=None, is_write=False,
                   idempotent=True, item_id=None, options=None):
        """One item operation; `options`: request_options of the caller's keywords."""
        signed = {} if item_id is None or not self._name_based else {"resource_type": "docs",
                                              "resource_link": f"{self.link}/docs/{item_id}"}
        req = Request(method, path, operation, dict(headers or {}),
                      None if body is None else dumps(body), is_write=is_write, is_document=True,
                      idempotent=idempotent, collection=self.link,
                      partition_key=None if pk is None else pkmod.header_value(pk),
                      **(options or {}), **signed)
        reply, diag = await self._send(req)
        return as_dict(reply, diag)

    async def read(self, *, populate_partition_key_range_statistics=None, populate_quota_info=None,
                   **kwargs) -> CosmosDict:
        headers = {}
        if populate_partition_key_range_statistics:
            headers[H.POPULATE_PARTITION_STATISTICS] = "true"
        if populate_quota_info:
            headers[H.POPULATE_QUOTA_INFO] = "true"
        req = Request("GET", link_path(self.link), "read_container", headers,
                      **request_options(kwargs, "read"))
        reply, diag = await self._send(req)
        self._props = as_dict(reply, diag)
        return self._props

    async def _properties(self) -> dict:
        return self._props if self._props is not None else await self.read()

    async def _pk_of(self, body: dict, partition_key=NOT_GIVEN):
        """The partition key a write goes to: the caller's partition_key= when given (the
        service refuses a body that disagrees: 400/1001), else the body's value at the
        container's paths (read once)."""
        if partition_key is not NOT_GIVEN:
            return partition_key
        paths = (await self._properties())["partitionKey"]["paths"]
        try:
            return pkmod.value_in(body, paths)
        except (KeyError, TypeError):
            return [{}] if len(paths) == 1 else [{} for _ in paths]

    def _write_headers(self, kwargs, upsert=False) -> dict:
        h = {H.CONTENT_TYPE: "application/json"}
        if upsert:
            h[H.IS_UPSERT] = "True"
        no_response = kwargs.get("no_response")
        if no_response if no_response is not None else self.client.no_response_on_write:
            h[H.PREFER] = H.PREFER_RETURN_MINIMAL
        return h

    # ---- items -----------------------------------------------------------------------------
    async def create_item(self, body: dict, *, partition_key=NOT_GIVEN, enable_automatic_id_generation=False,
                          indexing_directive=None, **kwargs) -> CosmosDict:
        """partition_key=: where the item goes (as the Java and .NET SDKs' createItem take it;
        azure-cosmos 4.17.1 has no such keyword), sent instead of the value parsed from the body."""
        options = request_options(kwargs, "create_item")
        body = body if "id" in body or not enable_automatic_id_generation else {**body, "id": str(uuid.uuid4())}
        headers = self._write_headers(kwargs)
        if indexing_directive:               # documents.IndexingDirective, sent as the SDK sends it
            headers[H.INDEXING_DIRECTIVE] = str(indexing_directive)
        return await self._doc("POST", link_path(self.link, "docs"), "create", await self._pk_of(body, partition_key),
                               body, headers, True, False, options=options)

    async def upsert_item(self, body: dict, *, partition_key=NOT_GIVEN, **kwargs) -> CosmosDict:
        options = request_options(kwargs, "upsert_item")
        return await self._doc("POST", link_path(self.link, "docs"), "upsert", await self._pk_of(body, partition_key),
                               body, self._write_headers(kwargs, upsert=True), True, True, options=options)

    async def replace_item(self, item, body: dict, *, partition_key=NOT_GIVEN, **kwargs) -> CosmosDict:
        options = request_options(kwargs, "replace_item")
        item_id = item["id"] if isinstance(item, dict) else item
        return await self._doc("PUT", item_path(self.link, item_id), "replace", await self._pk_of(body, partition_key),
                               body, self._write_headers(kwargs), True, True, options=options)

    async def read_item(self, item, partition_key, **kwargs) -> CosmosDict:
        options = request_options(kwargs, "read_item")
        item_id = item["id"] if isinstance(item, dict) else item
        return await self._doc("GET", item_path(self.link, item_id), "read", partition_key,
                               item_id=item_id, options=options)

    async def delete_item(self, item, partition_key, **kwargs) -> CosmosDict:
        options = request_options(kwargs, "delete_item")
        item_id = item["id"] if isinstance(item, dict) else item
        return await self._doc("DELETE", item_path(self.link, item_id), "delete", partition_key,
                               headers=self._write_headers(kwargs), is_write=True, idempotent=False,
                               options=options)

    async def patch_item(self, item, partition_key, patch_operations: list, *, filter_predicate=None,
                         **kwargs) -> CosmosDict:
        options = request_options(kwargs, "patch_item")
        item_id = item["id"] if isinstance(item, dict) else item
        body = {"operations": patch_operations}
        if filter_predicate:
            body["condition"] = filter_predicate
        headers = self._write_headers(kwargs)
        headers[H.CONTENT_TYPE] = PATCH_CONTENT_TYPE
        return await self._doc("PATCH", item_path(self.link, item_id), "patch", partition_key, body,
                               headers, True, False, options=options)

    async def delete_all_items_by_partition_key(self, partition_key, **kwargs) -> CosmosDict:
        """An empty dict (falsy, like the SDK's None) that carries the diagnostics and charge."""
        options = request_options(kwargs, "delete_all_items_by_partition_key")
        answer = await self._doc("POST", link_path(self.link, "operations", "partitionkeydelete"),
                                 "delete_by_partition_key", partition_key, None,
                                 {H.CONTENT_TYPE: "application/json"}, True, True, options=options)
        return CosmosDict({}, answer._headers, answer.diagnostics)

    # ---- feeds -------------------------------------------------------------------------------
    def query_items(self, query: str, parameters=None, partition_key=None,
                    enable_cross_partition_query=None, max_item_count=None, *, enable_scan_in_query=None,
                    continuation_token=None, **kwargs) -> AsyncItemPaged:
        """A query's pages. Without partition_key it runs across partitions whatever
        enable_cross_partition_query says (the aio SDK sends the flag itself then, and the
        service runs such a query whole: docs/queries.md)."""
        return self._query_items(query, parameters, partition_key, partition_key is None, max_item_count,
                                 enable_scan_in_query, continuation_token, kwargs)

    def _query_items(self, query, parameters, partition_key, cross_partition: bool, max_item_count,
                     enable_scan_in_query, continuation_token, kwargs) -> AsyncItemPaged:
        """query_items, with the cross-partition flag as the caller's face decides it: the sync
        SDK sends it only when asked (enable_cross_partition_query=True), and the service then
        refuses a query over several ranges without it (400), so the sync client does too."""
        options = request_options(kwargs, "query_items")
        body = dumps({"query": query, "parameters": list(parameters or [])})
        headers = {H.CONTENT_TYPE: QUERY_CONTENT_TYPE, H.IS_QUERY: "True"}
        if cross_partition:
            headers[H.ENABLE_CROSS_PARTITION] = "True"
        if enable_scan_in_query:
            headers[H.ENABLE_SCAN_IN_QUERY] = "True"
        return self._paged("POST", "query", body, headers, partition_key, max_item_count, options,
                           continuation_token)

    def read_all_items(self, max_item_count=None, **kwargs) -> AsyncItemPaged:
        return self._paged("GET", "read_feed", None, {}, None, max_item_count,
                           request_options(kwargs, "read_all_items"))

    def _paged(self, method, operation, body, headers, pk, max_item_count, options,
               continuation_token=None) -> AsyncItemPaged:
        if max_item_count:
            headers[H.MAX_ITEM_COUNT] = str(max_item_count)
        pk_text = None if pk is None else pkmod.header_value(pk)

        async def fetch(continuation):
            h = dict(headers)
            if continuation:
                h[H.CONTINUATION] = continuation
            req = Request(method, link_path(self.link, "docs"), operation, h, body, is_document=True,
                          is_feed=True, collection=self.link, partition_key=pk_text, **options)
            reply, diag = await self._send(req)
            return (body_json(reply) or {}).get("Documents", []), reply.headers.get(H.CONTINUATION), \
                diag, reply.headers
        return AsyncItemPaged(fetch, continuation_token)

    def list_conflicts(self, max_item_count=None, **kwargs) -> AsyncItemPaged:
        """The conflicts feed of a multi-write container: the versions that lost (docs/design.md,
        "Multi-write")."""
        return metadata_feed(self.client._pipeline, link_path(self.link, "conflicts"), "list_conflicts",
                             "Conflicts", max_item_count, kwargs)

    def query_conflicts(self, query, parameters=None, enable_cross_partition_query=None, partition_key=None,
                        max_item_count=None, **kwargs) -> AsyncItemPaged:
        """A SQL query over the conflicts feed (the whole container's: partition_key= and
        enable_cross_partition_query= are taken as the SDK takes them and change nothing)."""
        return metadata_feed(self.client._pipeline, link_path(self.link, "conflicts"), "query_conflicts",
                             "Conflicts", max_item_count, kwargs, query, parameters)

    async def _partition_key_ranges(self, options=None) -> CosmosList:
        req = Request("GET", link_path(self.link, "pkranges"), "read_pkranges", {H.MAX_ITEM_COUNT: "-1"},
                      **(options or {}))
        reply, diag = await self._send(req)
        self._ranges = CosmosList((body_json(reply) or {}).get("PartitionKeyRanges", []), reply.headers, diag)
        return self._ranges

    async def read_feed_ranges(self, *, force_refresh=False, **kwargs) -> CosmosList:
        """The container's feed ranges, read from the service every time (so force_refresh=,
        which makes the SDK bypass its cache, changes nothing)."""
        ranges = await self._partition_key_ranges(request_options(kwargs, "read_feed_ranges"))
        return CosmosList([{"Range": {"isMaxInclusive": False, "isMinInclusive": True, "max": r["maxExclusive"],
                                      "min": r["minInclusive"]}} for r in ranges], ranges._headers, ranges.diagnostics)

    async def feed_range_from_partition_key(self, partition_key) -> dict:
        """The feed range of one logical partition (as azure-cosmos's: [epk, epk])."""
        paths = (await self._properties())["partitionKey"]["paths"]
        values = list(partition_key) if isinstance(partition_key, (list, tuple)) else [partition_key]
        if len(values) > len(paths):
            raise ValueError(f"partition key {partition_key!r} has more values than the container's paths {paths}")
        epk = pkmod.epk_of(values)
        return {"Range": {"min": epk, "max": epk, "isMinInclusive": True, "isMaxInclusive": True}}

    @staticmethod
    def is_feed_range_subset(parent_feed_range: dict, child_feed_range: dict) -> bool:
        low, high = feed_range_bounds(parent_feed_range)
        child_low, child_high = feed_range_bounds(child_feed_range)
        return low <= child_low and child_high <= high

    async def read_items(self, items, **kwargs) -> CosmosList:
        """The items of (id, partition key) pairs, read concurrently; missing ones are left out
        (as azure-cosmos's; no order is promised, here it is the input's). The list's diagnostics
        hold every read's attempts, so its request_charge is theirs in all."""
        request_options(kwargs, "read_items")
        pipeline = self.client._pipeline
        diag = Diagnostics("read_items", link_path(self.link, "docs"), pipeline.now())

        async def one(item_id, pk):
            try:
                return await self.read_item(item_id, pk, **kwargs)
            except CosmosResourceNotFoundError as e:
                if e.sub_status != 0:
                    raise
                return e
        got = await asyncio.gather(*(one(i, pk) for i, pk in items))
        for g in got:
            shift = (g.diagnostics.started_s - diag.started_s) * 1000.0
            for a in g.diagnostics.attempts:
                diag.attempts.append(dataclasses.replace(a, started_ms=round(a.started_ms + shift, 3)))
        diag.latency_ms = diag.elapsed_ms(pipeline.now())
        diag.status = 200
        return CosmosList([g for g in got if isinstance(g, CosmosDict)], None, diag)

    def query_items_change_feed(self, **kwargs) -> AsyncItemPaged:
        """partition_key= or feed_range=, start_time="Beginning"|"Now"|datetime, continuation=,
        max_item_count=, mode="LatestVersion"|"AllVersionsAndDeletes"."""
        return ChangeFeed(self, **kwargs).pages()

    # ---- transactional batch -------------------------------------------------------------
    async def execute_item_batch(self, batch_operations: list, partition_key, **kwargs) -> CosmosList:
        ops = [from_batch_tuple(op) for op in batch_operations]
        headers = {H.IS_BATCH: "True", H.BATCH_ATOMIC: "True", H.BATCH_CONTINUE_ON_ERROR: "False",
                   H.CONTENT_TYPE: "application/json"}
        req = Request("POST", link_path(self.link, "docs"), "batch", headers, dumps(ops), is_write=True,
                      is_document=True, idempotent=False, collection=self.link,
                      partition_key=pkmod.header_value(partition_key),
                      **request_options(kwargs, "execute_item_batch"))
        reply, diag = await self._send(req)
        results = body_json(reply) or []
        if reply.status == S.MULTI_STATUS:
            index = next((i for i, r in enumerate(results) if r.get("statusCode", 0) >= 400
                          and r.get("statusCode") != S.FAILED_DEPENDENCY), 0)
            raise CosmosBatchOperationError(index, results, status_code=results[index].get("statusCode"),
                                            message=f"batch operation {index} failed",
                                            sub_status=results[index].get("subStatusCode", 0),
                                            headers=reply.headers, diagnostics=diag, request_charge=diag.request_charge)
        return CosmosList(results, reply.headers, diag)

    # ---- bulk --------------------------------------------------------------------------------
    async def execute_bulk_operations(self, operations: list, *, continue_on_error: bool = True,
                                      **kwargs) -> CosmosList:
        """Non-atomic: each operation applied on its own, one result per operation in input
        order (client/aio/bulk.py). An operation is a JS-style dict (`operationType`, `id`,
        `resourceBody`, `partitionKey`, `ifMatch`) or a batch tuple with
        `{"partition_key": ...}` as its options."""
        return await bulk.execute(self, list(operations), continue_on_error,
                                  request_options(kwargs, "execute_bulk_operations"))

    # ---- throughput ----------------------------------------------------------------------------
    async def _offer_resource(self) -> str:
        return (await self._properties())["_self"]
