"""Gateway transport: HTTP/1.1 to the regional gateways, one aiohttp connection pool per endpoint.

Each endpoint gets its own ClientSession and TCPConnector, so a slow or failing region never
holds the connections another region needs; connections are kept alive and reused, at most
POOL_CONNECTIONS_MAX per endpoint, closed after IDLE_TIMEOUT_S unused. Errors come back as
`TransportError` with the retry policy's kind: `connect` (the request was never sent), `response`
(the connection broke after sending: it may have happened) or `timeout`.

A transport is anything with `async send(endpoint, method, path, headers, body) -> Reply` and
`async close()`; a direct-mode transport plugs in the same way.
"""
import asyncio
from dataclasses import dataclass

import aiohttp
from yarl import URL

from client.policies.retry import CONNECT_ERROR, RESPONSE_ERROR, TIMEOUT_ERROR

POOL_CONNECTIONS_MAX = 100
IDLE_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 65.0                 # the SDK's read timeout; the end-to-end timeout is separate


@dataclass
class Reply:
    status: int
    headers: object                      # a case-insensitive mapping
    body: bytes
    direct: dict | None = None           # direct mode: replicas contacted, refreshes, quorum, fallback


class TransportError(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class GatewayTransport:
    def __init__(self, pool_connections_max: int = POOL_CONNECTIONS_MAX,
                 idle_timeout_s: float = IDLE_TIMEOUT_S, connect_timeout_s: float = CONNECT_TIMEOUT_S,
                 request_timeout_s: float = REQUEST_TIMEOUT_S):
        self.pool_connections_max = pool_connections_max
        self.idle_timeout_s = idle_timeout_s
        self._timeout = aiohttp.ClientTimeout(total=None, connect=connect_timeout_s,
                                              sock_read=request_timeout_s)
        self._sessions: dict[str, aiohttp.ClientSession] = {}

    def _session(self, endpoint: str) -> aiohttp.ClientSession:
        s = self._sessions.get(endpoint)
        if s is None or s.closed:
            connector = aiohttp.TCPConnector(limit=self.pool_connections_max, limit_per_host=0,
                                             keepalive_timeout=self.idle_timeout_s,
                                             enable_cleanup_closed=False)
            s = aiohttp.ClientSession(connector=connector, timeout=self._timeout,
                                      auto_decompress=False, skip_auto_headers=("User-Agent",))
            self._sessions[endpoint] = s
        return s

    async def send(self, endpoint: str, method: str, path: str, headers: dict, body: bytes | None) -> Reply:
        session = self._session(endpoint)
        url = URL(endpoint.rstrip("/") + path, encoded=True)    # the path is percent-encoded already
        try:
            async with session.request(method, url, headers=headers, data=body) as resp:
                return Reply(resp.status, resp.headers, await resp.read())
        except aiohttp.ClientConnectorError as e:
            raise TransportError(CONNECT_ERROR, f"cannot connect to {endpoint}: {e}") from None
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError) as e:
            raise TransportError(TIMEOUT_ERROR, f"{endpoint} did not answer in time: {e!r}") from None
        except aiohttp.ClientError as e:
            raise TransportError(RESPONSE_ERROR, f"the connection to {endpoint} broke: {e!r}") from None

    async def close(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        for s in sessions:
            await s.close()
