"""The asyncio CosmosClient: the account's databases, over a pipeline of policies and a transport.

    async with CosmosClient(url, credential=KEY, preferred_locations=["West US"]) as client:
        db = await client.create_database_if_not_exists("shop")

The constructor mirrors azure.cosmos.aio.CosmosClient's (url, credential: the key or resource tokens in
gateway mode, preferred_locations,
excluded_locations, consistency_level, connection_mode, multiple_write_locations) and adds the
policies' knobs: availability_strategy (hedging), timeout (end-to-end seconds), circuit_breaker
(False: no partition-level circuit breaker, as the SDKs' default; a dict: its thresholds),
non_idempotent_write_retry, retry limits, region-scoped session capture and its Bloom filter,
the diagnostics latency threshold, the account refresh interval, TLS verification of https
endpoints (connection_verify=True/False/a CA path, or ssl_context=), the gateway pool and direct
mode's pool (connection_mode="direct": client/aio/direct.py; docs/client.md). A custom
`transport=` (anything with the GatewayTransport interface) replaces the gateway one.
"""
import asyncio
import inspect

from regionlab.client.exceptions import CosmosResourceExistsError, CosmosResourceNotFoundError
from regionlab.client.policies import direct_pool as pool
from regionlab.client.policies.breaker import PartitionCircuitBreaker
from regionlab.client.policies.regions import ACCOUNT_REFRESH_MS, RegionRouter
from regionlab.client.policies.retry import RetryOptions
from regionlab.client.policies.session import BLOOM_EXPECTED_INSERTIONS, BLOOM_FALSE_POSITIVE_RATE, SessionContainer
from regionlab.client.protocol.auth import MasterKeySigner, ResourceTokenSigner

from . import options
from .database import DatabaseProxy, metadata_feed, offer_headers
from .feed import AsyncItemPaged
from .links import link_path
from .pipeline import Pipeline
from .request import Request, request_options
from .responses import as_dict, dumps
from .transport import GatewayTransport, IDLE_TIMEOUT_S, POOL_CONNECTIONS_MAX, REQUEST_TIMEOUT_S as GATEWAY_REQUEST_TIMEOUT_S
from .direct import DirectTransport

GATEWAY, DIRECT = "gateway", "direct"
WARMUP_REGIONS = 2
WARMUP_AGGRESSIVE_S = 1.0


_RETRY_NAMES = {"throttle_retries_max": "throttle_retries_max", "throttle_wait_ms_max": "throttle_wait_ms_max",
                "local_retries_max": "local_retries_max", "local_retry_wait_ms": "local_retry_wait_ms",
                "credits_wait_ms_max": "credits_wait_ms_max",
                # azure-cosmos's names for the 429 limits: a count, and seconds of waiting
                "retry_total": "throttle_retries_max", "retry_throttle_total": "throttle_retries_max"}
_RETRY_SECONDS = {"retry_backoff_max": "throttle_wait_ms_max", "retry_throttle_backoff_max": "throttle_wait_ms_max"}
_RETRY_GENERIC = ("retry_total", "retry_backoff_max")     # the throttle-specific names win, as in the SDK


def _retry_options(kwargs, non_idempotent_write_retry: bool, endpoint_discovery: bool) -> RetryOptions:
    chosen = {"non_idempotent_write_retry": bool(non_idempotent_write_retry)}
    if not endpoint_discovery:           # as the SDK's endpoint discovery retry policy: 403/3 is raised
        chosen["write_forbidden_retries_max"] = 0
    for name in sorted(kwargs, key=lambda k: k not in _RETRY_GENERIC):
        value = kwargs[name]
        if value is None:
            continue
        if name in _RETRY_NAMES:
            chosen[_RETRY_NAMES[name]] = value
        elif name in _RETRY_SECONDS:
            chosen[_RETRY_SECONDS[name]] = int(value * 1000)
    return RetryOptions(**chosen)


def parse_connection_string(conn_str: str, credential=None) -> tuple[str, object]:
    """(url, credential) of `AccountEndpoint=...;AccountKey=...;`, as azure-cosmos reads it."""
    settings = dict(part.split("=", 1) for part in conn_str.rstrip(";").split(";") if "=" in part)
    if "AccountEndpoint" not in settings:
        raise ValueError("Connection string missing setting 'AccountEndpoint'.")
    if not credential and "AccountKey" not in settings:
        raise ValueError("Connection string missing setting 'AccountKey'.")
    return settings["AccountEndpoint"], credential or settings["AccountKey"]


class ConsistencyLevel:
    """The consistency_level= values, as azure.cosmos.ConsistencyLevel names them."""
    Strong = "Strong"
    BoundedStaleness = "BoundedStaleness"
    Session = "Session"
    Eventual = "Eventual"
    ConsistentPrefix = "ConsistentPrefix"


class DatabaseAccount:
    """The account document with azure-cosmos's attribute names (WritableLocations,
    ReadableLocations, ConsistencyPolicy, ...) and the parsed view's (write_regions,
    read_regions, multi_write, consistency)."""

    def __init__(self, doc: dict, view):
        self.properties = doc
        self.WritableLocations = doc.get("writableLocations") or []
        self.ReadableLocations = doc.get("readableLocations") or []
        self.ConsistencyPolicy = doc.get("userConsistencyPolicy") or {}
        self._EnableMultipleWritableLocations = bool(doc.get("enableMultipleWriteLocations"))
        self.write_regions, self.read_regions = view.write_regions, view.read_regions
        self.multi_write, self.consistency = view.multi_write, view.consistency


def _credential(credential) -> tuple:
    """(master key, None) or (None, resource tokens) of a credential as azure-cosmos takes one: the
    key, {'masterKey': key}, {'resourceTokens': {link: token}}, or {link: token} itself."""
    if isinstance(credential, str) and credential:
        return credential, None
    if isinstance(credential, dict) and isinstance(credential.get("masterKey"), str):
        return credential["masterKey"], None
    if isinstance(credential, dict) and credential and "masterKey" not in credential:
        tokens = credential.get("resourceTokens", credential)
        if isinstance(tokens, dict) and tokens:
            return None, tokens
    raise TypeError(f"credential must be the account key (a string), {{'masterKey': key}} or resource tokens "
                    f"({{container_link: token}}), not {type(credential).__name__}; AAD credentials and "
                    "permission lists are not supported")


_CONNECTION_MODES = {0: GATEWAY, "Gateway": GATEWAY, "Direct": DIRECT}     # documents.ConnectionMode.Gateway is 0


class CosmosClient:
    @classmethod
    def from_connection_string(cls, conn_str: str, credential=None, consistency_level=None, **kwargs):
        url, key = parse_connection_string(conn_str, credential)
        return cls(url, key, consistency_level=consistency_level, **kwargs)

    def __init__(self, url: str, credential, *, preferred_locations=None, excluded_locations=None,
                 consistency_level=None, connection_mode: str = GATEWAY, multiple_write_locations=True,
                 availability_strategy=None, timeout=None, circuit_breaker=True,
                 region_scoped_session_capturing=True,
                 session_bloom_expected_insertions=BLOOM_EXPECTED_INSERTIONS,
                 session_bloom_false_positive_rate=BLOOM_FALSE_POSITIVE_RATE,
                 diagnostics_latency_threshold_ms=None, account_refresh_interval_ms=ACCOUNT_REFRESH_MS,
                 pool_connections_max=POOL_CONNECTIONS_MAX, idle_timeout_s=IDLE_TIMEOUT_S,
                 transport=None, clock=None,
                 max_requests_per_connection=pool.MAX_REQUESTS_PER_CONNECTION,
                 max_connections_per_endpoint=pool.MAX_CONNECTIONS_PER_ENDPOINT,
                 idle_connection_timeout_s=pool.IDLE_CONNECTION_TIMEOUT_S,
                 idle_endpoint_timeout_s=pool.IDLE_ENDPOINT_TIMEOUT_S,
                 connect_timeout_s=pool.CONNECT_TIMEOUT_S, request_timeout_s=None,
                 connection_verify=True, ssl_context=None, enable_endpoint_discovery=True,
                 no_response_on_write=False, non_idempotent_write_retry=False,
                 **kwargs):
        sdk = options.client_keywords(kwargs, _CONSTRUCTOR_KEYWORDS)
        connect_timeout_s = sdk.pop("connect_timeout_s", connect_timeout_s)
        request_timeout_s = sdk.pop("request_timeout_s", request_timeout_s)
        non_idempotent_write_retry = sdk.pop("non_idempotent_write_retry", non_idempotent_write_retry)
        connection_mode = _CONNECTION_MODES.get(connection_mode, connection_mode)
        if connection_mode not in (GATEWAY, DIRECT):
            raise ValueError(f"connection_mode must be 'gateway' or 'direct', not {connection_mode!r}")
        key, tokens = _credential(credential)
        if tokens is not None and connection_mode == DIRECT:
            raise ValueError("resource tokens work in gateway mode only: direct mode authenticates its "
                             "connections with the account key")
        signer = MasterKeySigner(key) if tokens is None else ResourceTokenSigner(tokens)
        self.url = url if url.endswith("/") else url + "/"
        self.connection_mode = connection_mode
        self.no_response_on_write = bool(no_response_on_write)
        # enable_endpoint_discovery=False: the given endpoint only, for reads and writes, no failover
        self._router = RegionRouter(preferred_locations, excluded_locations, multiple_write_locations,
                                    account_refresh_interval_ms,
                                    only_endpoint=None if enable_endpoint_discovery else self.url)
        if transport is None:
            # request_timeout_s: None keeps each transport's own (gateway 65 s, direct 5 s)
            transport = GatewayTransport(pool_connections_max, idle_timeout_s, connect_timeout_s,
                                         request_timeout_s=request_timeout_s or GATEWAY_REQUEST_TIMEOUT_S,
                                         connection_verify=connection_verify, ssl_context=ssl_context)
            if connection_mode == DIRECT:
                transport = DirectTransport(
                    key, transport, self._account_consistency,
                    pool.PoolOptions(max_requests_per_connection, max_connections_per_endpoint,
                                     idle_connection_timeout_s, idle_endpoint_timeout_s,
                                     connect_timeout_s, request_timeout_s or pool.REQUEST_TIMEOUT_S), clock)
        self._pipeline = Pipeline(
            self.url, signer, transport,
            self._router, retry_options=_retry_options(sdk, non_idempotent_write_retry, enable_endpoint_discovery),
            consistency_level=consistency_level,
            availability_strategy=availability_strategy, timeout_s=timeout,
            breaker=PartitionCircuitBreaker.of(circuit_breaker),
            sessions=SessionContainer(region_scoped_session_capturing, session_bloom_expected_insertions,
                                      session_bloom_false_positive_rate),
            latency_threshold_ms=diagnostics_latency_threshold_ms, clock=clock)

    # ---- lifecycle -----------------------------------------------------------------------------
    async def __aenter__(self):
        await self._pipeline.ensure_account()
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def close(self) -> None:
        await self._pipeline.close()

    def _account_consistency(self):
        return self._router.account.consistency if self._router.account is not None else None

    @property
    def direct_transport(self) -> DirectTransport | None:
        t = self._pipeline.transport
        return t if isinstance(t, DirectTransport) else None

    async def open_connections_and_init_caches(self, containers, regions: int = WARMUP_REGIONS,
                                               aggressive_warmup_s: float = WARMUP_AGGRESSIVE_S) -> dict:
        """Direct mode: fill the address caches and open a connection to every replica endpoint
        of `containers` (proxies or links) in the first `regions` preferred read regions. Waits
        at most `aggressive_warmup_s`; what is not done by then goes on in the background.
        Answers {"regions", "containers", "connections"} (connections open when it returns)."""
        direct = self.direct_transport
        if direct is None:
            raise ValueError("open_connections_and_init_caches needs connection_mode='direct'")
        await self._pipeline.ensure_account()
        chosen = self._router.applicable(False, self._pipeline.now_ms(), None)[:regions]
        links = [c if isinstance(c, str) else c.link for c in containers]
        tasks = [asyncio.ensure_future(direct.warm_up(r.endpoint, link)) for r in chosen for link in links]
        if tasks:
            done, pending = await asyncio.wait(tasks, timeout=aggressive_warmup_s)
            for t in done:
                t.exception()             # a region that failed to warm up is served cold
        return {"regions": [r.name for r in chosen], "containers": links,
                "connections": direct.connection_count()}

    # ---- regions ---------------------------------------------------------------------------------
    @property
    def excluded_locations(self) -> list[str]:
        return self._router.excluded_locations

    @excluded_locations.setter
    def excluded_locations(self, value) -> None:
        """A list of region names, or a callable returning one (read at every request)."""
        self._router.excluded_locations = value

    @property
    def session_container(self) -> SessionContainer:
        return self._pipeline.sessions

    @property
    def circuit_breaker(self) -> PartitionCircuitBreaker | None:
        """The partition-level circuit breaker; None when the client was made with circuit_breaker=False."""
        return self._pipeline.breaker

    async def get_database_account(self) -> "DatabaseAccount":
        """Re-read the account (GET /): azure-cosmos's DatabaseAccount fields, and the regions
        as the router sees them."""
        await self._pipeline.refresh_account()
        return DatabaseAccount(self._pipeline.account_document or {}, self._router.account)

    # ---- databases -------------------------------------------------------------------------------
    def get_database_client(self, database) -> DatabaseProxy:
        return DatabaseProxy(self, database if isinstance(database, str) else database["id"])

    async def create_database(self, id: str, *, offer_throughput=None, return_properties=False, **kwargs):
        """The database's proxy, or (proxy, properties) with return_properties=True."""
        req = Request("POST", "/dbs", "create_database", offer_headers(offer_throughput),
                      dumps({"id": id}), is_write=True, idempotent=False,
                      **request_options(kwargs, "create_database"))
        reply, diag = await self._pipeline.execute(req)
        proxy = self.get_database_client(id)
        proxy._props = as_dict(reply, diag)
        return (proxy, proxy._props) if return_properties else proxy

    async def create_database_if_not_exists(self, id: str, *, offer_throughput=None, return_properties=False,
                                            **kwargs):
        request_options(kwargs, "create_database_if_not_exists")      # checks them before any request
        proxy = self.get_database_client(id)
        try:
            await proxy.read(**kwargs)
        except CosmosResourceNotFoundError:
            try:
                return await self.create_database(id, offer_throughput=offer_throughput,
                                                  return_properties=return_properties, **kwargs)
            except CosmosResourceExistsError:
                await proxy.read(**kwargs)
        return (proxy, proxy._props) if return_properties else proxy

    async def delete_database(self, database, **kwargs):
        """An empty dict (falsy, like the SDK's None) that carries the diagnostics and charge."""
        did = database if isinstance(database, str) else database.id
        reply, diag = await self._pipeline.execute(Request("DELETE", link_path("dbs", did), "delete_database",
                                                           is_write=True, **request_options(kwargs, "delete_database")))
        return as_dict(reply, diag)

    def list_databases(self, max_item_count=None, **kwargs) -> AsyncItemPaged:
        return metadata_feed(self._pipeline, "/dbs", "list_databases", "Databases", max_item_count, kwargs)

    def query_databases(self, query=None, parameters=None, enable_cross_partition_query=None, max_item_count=None,
                        **kwargs) -> AsyncItemPaged:
        """enable_cross_partition_query= is taken as the SDK takes it; the databases feed has no
        partitions, so it changes nothing."""
        return metadata_feed(self._pipeline, "/dbs", "query_databases", "Databases", max_item_count, kwargs,
                             query or "SELECT * FROM root r", parameters)


_CONSTRUCTOR_KEYWORDS = frozenset(p for p in inspect.signature(CosmosClient.__init__).parameters
                                  if p not in ("self", "url", "credential", "kwargs"))
