"""Paged results: queries, read-all and change feed, iterated by item or `by_page` with a
continuation token, as azure-core's AsyncItemPaged (pages carry diagnostics and charge).

A feed is a `fetch(continuation) -> (items, next_continuation, diagnostics, headers)` function;
`next_continuation` None ends it."""
import base64
import json

from regionlab.client.protocol import headers as H

from .request import Request, request_options
from .responses import CosmosList, body_json, dumps


def encode_token(state: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(state, separators=(",", ":")).encode()).decode()


def decode_token(token: str) -> dict:
    try:
        return json.loads(base64.urlsafe_b64decode(token.encode()))
    except ValueError:
        raise ValueError(f"the continuation token {token[:60]!r} was not issued by this client") from None


class AsyncPageIterator:
    def __init__(self, fetch, continuation_token=None):
        self._fetch = fetch
        self.continuation_token = continuation_token
        self._started = False
        self._ended = False

    def __aiter__(self):
        return self

    async def __anext__(self) -> CosmosList:
        if self._ended or (self._started and self.continuation_token is None):
            raise StopAsyncIteration
        self._started = True
        items, nxt, diag, headers = await self._fetch(self.continuation_token)
        if items is None:                    # nothing more (a change feed round with no news)
            self._ended = True
            if nxt is not None:
                self.continuation_token = nxt
            raise StopAsyncIteration
        self.continuation_token = nxt
        return CosmosList(items, headers, diag)


class AsyncItemPaged:
    def __init__(self, fetch, continuation_token=None):
        self._fetch = fetch
        self._continuation = continuation_token
        self._pager: AsyncPageIterator | None = None
        self.last_page: CosmosList | None = None

    @property
    def continuation_token(self) -> str | None:
        """Where the last iteration stopped (for a change feed: where to continue from)."""
        return self._pager.continuation_token if self._pager else self._continuation

    def by_page(self, continuation_token=None) -> AsyncPageIterator:
        return AsyncPageIterator(self._fetch, continuation_token or self._continuation)

    def __aiter__(self):
        return self._iterate()

    async def _iterate(self):
        self._pager = self.by_page()
        async for page in self._pager:
            self.last_page = page
            for item in page:
                yield item


def metadata_feed(pipeline, path: str, operation: str, key: str, max_item_count, kwargs,
                  query=None, parameters=None) -> AsyncItemPaged:
    """The pages of a databases or containers feed (`key`: "Databases", "DocumentCollections"):
    read whole (GET), or a SQL query over it (POST application/query+json)."""
    fields = request_options(kwargs, operation)
    body = None if query is None else dumps({"query": query, "parameters": list(parameters or [])})

    async def fetch(continuation):
        h = {H.MAX_ITEM_COUNT: str(max_item_count)} if max_item_count else {}
        if body is not None:
            h.update({H.CONTENT_TYPE: "application/query+json", H.IS_QUERY: "True"})
        if continuation:
            h[H.CONTINUATION] = continuation
        req = Request("GET" if body is None else "POST", path, operation, h, body, is_feed=True, **fields)
        reply, diag = await pipeline.execute(req)
        return (body_json(reply) or {}).get(key, []), reply.headers.get(H.CONTINUATION), diag, reply.headers
    return AsyncItemPaged(fetch)
