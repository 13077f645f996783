"""The synchronous face of the client: `from client import CosmosClient`.

Each sync CosmosClient owns one background thread running an event loop (uvloop when present)
with the asyncio core on it; every call submits the core's coroutine to that loop and waits for
its result, so the sync objects are thread-safe (any number of threads may call at once; the
loop serialises nothing but its own callbacks, and the core holds no lock). Feeds come back as
`ItemPaged`, iterated by item or `by_page(continuation_token)` as azure-core's ItemPaged.
"""
import asyncio
import threading

from . import aio, event_loop
from .aio.client import parse_connection_string
from .aio.feed import AsyncItemPaged

LOOP_START_TIMEOUT_S = 10.0
CLOSE_TIMEOUT_S = 10.0


class _LoopThread:
    def __init__(self):
        self.loop = event_loop.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._main, args=(ready,), name="cosmos-client-loop",
                                       daemon=True)
        self.thread.start()
        ready.wait(LOOP_START_TIMEOUT_S)

    def _main(self, ready) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(ready.set)
        self.loop.run_forever()

    def run(self, coro):
        if self.loop.is_closed():
            coro.close()
            raise RuntimeError("this CosmosClient is closed; make a new one")
        if threading.current_thread() is self.thread:
            raise RuntimeError("a sync client call from inside its own loop thread would deadlock")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(CLOSE_TIMEOUT_S)
        self.loop.close()


class PageIterator:
    def __init__(self, runner, pager):
        self._run, self._pager = runner, pager

    @property
    def continuation_token(self):
        return self._pager.continuation_token

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return self._run(self._pager.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None


class ItemPaged:
    def __init__(self, runner, paged: AsyncItemPaged):
        self._run, self._paged = runner, paged
        self._pages: PageIterator | None = None

    def by_page(self, continuation_token=None) -> PageIterator:
        return PageIterator(self._run, self._paged.by_page(continuation_token))

    @property
    def continuation_token(self):
        return self._pages.continuation_token if self._pages else self._paged.continuation_token

    def __iter__(self):
        self._pages = self.by_page()
        for page in self._pages:
            yield from page


class _Proxy:
    """Forwards to an aio proxy: coroutines run on the loop, feeds become ItemPaged."""

    def __init__(self, runner, inner):
        self._run, self._inner = runner, inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def _call(self, name, *args, **kwargs):
        result = getattr(self._inner, name)(*args, **kwargs)
        if asyncio.iscoroutine(result):
            result = self._run(result)
        if isinstance(result, AsyncItemPaged):
            return ItemPaged(self._run, result)
        return result


class ContainerProxy(_Proxy):
    def read(self, **kw): return self._call("read", **kw)
    def create_item(self, body, **kw): return self._call("create_item", body, **kw)
    def upsert_item(self, body, **kw): return self._call("upsert_item", body, **kw)
    def replace_item(self, item, body, **kw): return self._call("replace_item", item, body, **kw)
    def read_item(self, item, partition_key, **kw): return self._call("read_item", item, partition_key, **kw)
    def delete_item(self, item, partition_key, **kw): return self._call("delete_item", item, partition_key, **kw)
    def patch_item(self, item, partition_key, patch_operations, **kw):
        return self._call("patch_item", item, partition_key, patch_operations, **kw)
    def delete_all_items_by_partition_key(self, partition_key, **kw):
        return self._call("delete_all_items_by_partition_key", partition_key, **kw)
    def query_items(self, query, parameters=None, partition_key=None, enable_cross_partition_query=None,
                    max_item_count=None, *, enable_scan_in_query=None, continuation_token=None, **kw):
        # As the sync SDK: the cross-partition flag only when asked (aio/container.py, _query_items).
        cross = partition_key is None and bool(enable_cross_partition_query)
        return self._call("_query_items", query, parameters, partition_key, cross, max_item_count,
                          enable_scan_in_query, continuation_token, kw)
    def read_all_items(self, **kw): return self._call("read_all_items", **kw)
    def query_items_change_feed(self, **kw): return self._call("query_items_change_feed", **kw)
    def read_feed_ranges(self, **kw): return self._call("read_feed_ranges", **kw)
    def feed_range_from_partition_key(self, partition_key):
        return self._call("feed_range_from_partition_key", partition_key)
    def read_items(self, items, **kw): return self._call("read_items", items, **kw)
    def list_conflicts(self, **kw): return self._call("list_conflicts", **kw)
    def query_conflicts(self, query, parameters=None, **kw):
        return self._call("query_conflicts", query, parameters, **kw)
    is_feed_range_subset = staticmethod(aio.ContainerProxy.is_feed_range_subset)
    def execute_item_batch(self, batch_operations, partition_key, **kw):
        return self._call("execute_item_batch", batch_operations, partition_key, **kw)
    def execute_bulk_operations(self, operations, **kw):
        return self._call("execute_bulk_operations", operations, **kw)
    def get_throughput(self, **kw): return self._call("get_throughput", **kw)
    read_offer = get_throughput
    def replace_throughput(self, throughput, **kw): return self._call("replace_throughput", throughput, **kw)


def _wrapped(kind, run, answer):
    """A create's or replace's answer as sync objects: the proxy, or (proxy, properties) when the
    caller asked for return_properties=True."""
    if isinstance(answer, tuple):
        return kind(run, answer[0]), answer[1]
    return kind(run, answer)


class DatabaseProxy(_Proxy):
    def read(self, **kw): return self._call("read", **kw)

    def get_container_client(self, container) -> ContainerProxy:
        return ContainerProxy(self._run, self._inner.get_container_client(container))

    def create_container(self, id, partition_key, **kw) -> ContainerProxy:
        return _wrapped(ContainerProxy, self._run, self._call("create_container", id, partition_key, **kw))

    def create_container_if_not_exists(self, id, partition_key, **kw) -> ContainerProxy:
        return _wrapped(ContainerProxy, self._run,
                        self._call("create_container_if_not_exists", id, partition_key, **kw))

    def delete_container(self, container, **kw):
        inner = container._inner if isinstance(container, ContainerProxy) else container
        return self._call("delete_container", inner, **kw)

    def list_containers(self, **kw): return self._call("list_containers", **kw)
    def query_containers(self, query=None, parameters=None, **kw):
        return self._call("query_containers", query, parameters, **kw)

    def replace_container(self, container, partition_key, **kw) -> ContainerProxy:
        inner = container._inner if isinstance(container, ContainerProxy) else container
        return _wrapped(ContainerProxy, self._run, self._call("replace_container", inner, partition_key, **kw))

    def execute_bulk_operations(self, operations, **kw):
        return self._call("execute_bulk_operations", operations, **kw)
    def get_throughput(self, **kw): return self._call("get_throughput", **kw)
    read_offer = get_throughput
    def replace_throughput(self, throughput, **kw): return self._call("replace_throughput", throughput, **kw)


class CosmosClient:
    """Same arguments as client.aio.CosmosClient; discovers the account in the constructor."""

    def __init__(self, url: str, credential, **kwargs):
        self._loop = _LoopThread()
        self._run = self._loop.run
        try:
            self._inner = self._run(self._make(url, credential, kwargs))
        except BaseException:                 # no client: do not leave its loop thread behind
            self._loop.stop()
            self._loop = None
            raise

    @classmethod
    def from_connection_string(cls, conn_str: str, credential=None, consistency_level=None, **kwargs):
        url, key = parse_connection_string(conn_str, credential)
        return cls(url, key, consistency_level=consistency_level, **kwargs)

    @staticmethod
    async def _make(url, credential, kwargs):
        c = aio.CosmosClient(url, credential, **kwargs)
        try:
            await c.__aenter__()
        except BaseException:
            await c.close()
            raise
        return c

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        if self._loop is None:
            return
        try:
            self._run(self._inner.close())
        finally:
            self._loop.stop()
            self._loop = None

    @property
    def excluded_locations(self):
        return self._inner.excluded_locations

    @excluded_locations.setter
    def excluded_locations(self, value):
        self._inner.excluded_locations = value

    @property
    def session_container(self):
        return self._inner.session_container

    @property
    def circuit_breaker(self):
        return self._inner.circuit_breaker

    def get_database_account(self):
        return self._run(self._inner.get_database_account())

    @property
    def direct_transport(self):
        return self._inner.direct_transport

    def open_connections_and_init_caches(self, containers, **kw) -> dict:
        inner = [c._inner if isinstance(c, ContainerProxy) else c for c in containers]
        return self._run(self._inner.open_connections_and_init_caches(inner, **kw))

    def get_database_client(self, database) -> DatabaseProxy:
        return DatabaseProxy(self._run, self._inner.get_database_client(database))

    def create_database(self, id, **kw) -> DatabaseProxy:
        return _wrapped(DatabaseProxy, self._run, self._run(self._inner.create_database(id, **kw)))

    def create_database_if_not_exists(self, id, **kw) -> DatabaseProxy:
        return _wrapped(DatabaseProxy, self._run, self._run(self._inner.create_database_if_not_exists(id, **kw)))

    def delete_database(self, database, **kw):
        inner = database._inner if isinstance(database, DatabaseProxy) else database
        return self._run(self._inner.delete_database(inner, **kw))

    def list_databases(self, **kw) -> ItemPaged:
        return ItemPaged(self._run, self._inner.list_databases(**kw))

    def query_databases(self, query=None, parameters=None, **kw) -> ItemPaged:
        return ItemPaged(self._run, self._inner.query_databases(query, parameters, **kw))
