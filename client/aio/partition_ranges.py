"""Which partition key range a request goes to, for the circuit breaker.

Theory of operation. The breaker counts failures per (container, partition key range, region)
(client/policies/breaker.py), so the pipeline needs the range of a request that failed, or of
any request while the breaker tracks something. A request that names its range (the
x-ms-documentdb-partitionkeyrangeid header: bulk, a change feed of one range) is taken at its
word; one with a partition key is placed by the EPK of the key in the container's RangeMap. A
container's map is fetched (GET <container>/pkranges through the pipeline, as any metadata read)
the first time it is needed, and kept until a 410/1002 says the ranges changed (a split or a
merge: `forget`), as the SDKs' routing-map cache does. Concurrent callers share one fetch, run in
its own task so a caller cancelled meanwhile (a hedge that lost, its end-to-end timeout) does
not cancel it for the others. A fetch that fails leaves the request without a range (the breaker
neither counts nor routes it) and is not tried again for that container within
FETCH_RETRY_MS. At most RANGE_MAPS_MAX containers are kept, the least recently used dropped
first (a map holds one row per range).
"""
import asyncio
import logging

from regionlab.client import partition_key as pkmod
from regionlab.client.exceptions import CosmosHttpResponseError
from regionlab.client.protocol import headers as H

from .links import link_path
from .request import Request
from .responses import body_json

LOG = logging.getLogger("regionlab.client")
RANGE_MAPS_MAX = 1024                # containers whose ranges are kept
FETCH_RETRY_MS = 1_000               # a failed fetch is not repeated for a container sooner


class PartitionRanges:
    def __init__(self, pipeline):
        self._pipeline = pipeline
        self._maps: dict[str, pkmod.RangeMap] = {}        # container link -> its ranges, LRU order
        self._fetching: dict[str, asyncio.Task] = {}
        self._failed_ms: dict[str, float] = {}            # container link -> when its fetch failed

    async def range_of(self, req) -> str | None:
        """The range id of a request with a collection and a range header or a partition key;
        None when it cannot be known now."""
        named = req.headers.get(H.PK_RANGE_ID)
        if named is not None:
            return named
        if req.partition_key is None:
            return None
        rmap = await self._map(req.collection)
        if rmap is None:
            return None
        try:
            return rmap.range_of_key(req.partition_key)
        except (ValueError, TypeError) as e:     # a key the client cannot hash, or a map with a gap
            LOG.debug("circuit breaker: cannot place %s in %s's ranges: %s", req.partition_key, req.collection, e)
            return None

    def forget(self, collection: str) -> None:
        """The container's ranges changed (410/1002): the next request fetches them again."""
        self._maps.pop(collection, None)

    def __len__(self) -> int:
        return len(self._maps)

    async def close(self) -> None:
        tasks = list(self._fetching.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _map(self, collection: str) -> pkmod.RangeMap | None:
        rmap = self._maps.get(collection)
        if rmap is not None:
            self._maps[collection] = self._maps.pop(collection)     # most recently used last
            return rmap
        failed = self._failed_ms.get(collection)
        if failed is not None and self._pipeline.now_ms() - failed < FETCH_RETRY_MS:
            return None
        task = self._fetching.get(collection)
        if task is None:
            task = self._fetching[collection] = asyncio.ensure_future(self._fetch(collection))
            task.add_done_callback(lambda t, c=collection: self._fetching.pop(c, None))
        return await asyncio.shield(task)

    async def _fetch(self, collection: str) -> pkmod.RangeMap | None:
        req = Request("GET", link_path(collection, "pkranges"), "read_pkranges", {H.MAX_ITEM_COUNT: "-1"})
        try:
            reply, _ = await self._pipeline.execute(req)
            rmap = pkmod.RangeMap((body_json(reply) or {}).get("PartitionKeyRanges", []))
            if len(rmap) == 0:
                raise ValueError("the answer lists no ranges")
        except (CosmosHttpResponseError, ValueError, KeyError, TypeError, AttributeError) as e:
            self._failed_ms[collection] = self._pipeline.now_ms()
            while len(self._failed_ms) > RANGE_MAPS_MAX:
                del self._failed_ms[next(iter(self._failed_ms))]
            LOG.info("circuit breaker: the partition key ranges of %s could not be read: %s", collection, e)
            return None
        self._failed_ms.pop(collection, None)
        self._maps[collection] = rmap
        while len(self._maps) > RANGE_MAPS_MAX:
            del self._maps[next(iter(self._maps))]
        return rmap
