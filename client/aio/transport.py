"""Gateway transport: HTTP/1.1 to the regional gateways, one connection pool per endpoint.

Each endpoint gets its own `EndpointPool` (client/aio/http_pool.py: keep-alive connections on
asyncio Protocols, at most POOL_CONNECTIONS_MAX per endpoint, closed after IDLE_TIMEOUT_S
unused), so a slow or failing region never holds the connections another region needs. aiohttp's
client is not used: per read it cost ~200 µs of the client's ~250 µs of CPU (docs/performance.md).
`https://` endpoints are TLS, verified against the system CAs by default; `connection_verify`
is False (no verification) or a CA file or directory, as azure-cosmos's keyword; `ssl_context`
replaces both. Errors come back as `TransportError` with the retry policy's kind: `connect` (the
request was never sent), `response` (the connection broke after sending: it may have happened)
or `timeout`.

A transport is anything with `async send(endpoint, method, path, headers, body) -> Reply` and
`async close()`; a direct-mode transport plugs in the same way.
"""
import os
import ssl
from dataclasses import dataclass

from .http_pool import ConnectionFailed, EndpointPool

POOL_CONNECTIONS_MAX = 100
IDLE_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 65.0                 # the SDK's read timeout; the end-to-end timeout is separate


@dataclass
class Reply:
    status: int
    headers: dict                        # header names in lower case
    body: bytes
    direct: dict | None = None           # direct mode: replicas contacted, refreshes, quorum, fallback


class TransportError(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def ssl_context_for(connection_verify=True) -> ssl.SSLContext:
    """The TLS context of https endpoints: True verifies against the system CAs, False not at
    all, a path against that CA file (or directory of CA files)."""
    if connection_verify is True or connection_verify is None:
        return ssl.create_default_context()
    if connection_verify is False:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    path = os.fspath(connection_verify)
    if os.path.isdir(path):
        return ssl.create_default_context(capath=path)
    if not os.path.isfile(path):
        raise ValueError(f"connection_verify: no CA file or directory at {path!r}")
    return ssl.create_default_context(cafile=path)


class GatewayTransport:
    def __init__(self, pool_connections_max: int = POOL_CONNECTIONS_MAX,
                 idle_timeout_s: float = IDLE_TIMEOUT_S, connect_timeout_s: float = CONNECT_TIMEOUT_S,
                 request_timeout_s: float = REQUEST_TIMEOUT_S, *, connection_verify=True,
                 ssl_context: ssl.SSLContext | None = None):
        self.pool_connections_max = pool_connections_max
        self.idle_timeout_s = idle_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        if connection_verify not in (True, False, None) and not os.path.exists(os.fspath(connection_verify)):
            raise ValueError(f"connection_verify: no CA file or directory at {connection_verify!r}")
        self._connection_verify = connection_verify    # the context is made at the first https connect
        self._ssl_context = ssl_context
        self._pools: dict[str, EndpointPool] = {}

    def _tls(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            self._ssl_context = ssl_context_for(self._connection_verify)
        return self._ssl_context

    @property
    def pools(self) -> dict[str, EndpointPool]:
        """The pool of each endpoint used so far."""
        return dict(self._pools)

    def pool(self, endpoint: str) -> EndpointPool:
        p = self._pools.get(endpoint)
        if p is None:
            p = self._pools[endpoint] = EndpointPool(
                endpoint.rstrip("/"), connections_max=self.pool_connections_max,
                idle_timeout_s=self.idle_timeout_s, connect_timeout_s=self.connect_timeout_s,
                request_timeout_s=self.request_timeout_s,
                ssl_context=self._tls() if endpoint.startswith("https:") else None)
        return p

    async def send(self, endpoint: str, method: str, path: str, headers: dict, body: bytes | None) -> Reply:
        pool = self._pools.get(endpoint) or self.pool(endpoint)
        try:
            status, reply_headers, reply_body = await pool.send(method, path, headers, body)
        except ConnectionFailed as e:
            raise TransportError(e.kind, str(e)) from None
        return Reply(status, reply_headers, reply_body)

    async def close(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for p in pools:
            await p.close()
