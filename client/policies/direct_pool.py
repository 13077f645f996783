"""The direct-mode connection pool's policy: which connection of an endpoint (a node's
host:port) takes the next request, when to open another, and what to close when idle.

Theory of operation (sans-IO; the caller passes in-flight counts and times in seconds). A
request goes to the open connection with the fewest requests in flight, as long as it has
fewer than `max_requests_per_connection` (they are multiplexed by request id); when every one is
full, another connection is opened, up to `max_connections_per_endpoint`; past that the request
waits for a slot. An idle connection is closed after `idle_connection_timeout_s` (None: kept,
with heartbeats), an endpoint nobody used for `idle_endpoint_timeout_s` loses all its
connections, and a connection idle for the node's heartbeat interval is pinged.
"""
from dataclasses import dataclass

MAX_REQUESTS_PER_CONNECTION = 30
MAX_CONNECTIONS_PER_ENDPOINT = 130
IDLE_CONNECTION_TIMEOUT_S = None         # keep open connections (heartbeats keep them alive)
IDLE_ENDPOINT_TIMEOUT_S = 3600.0
CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 5.0

HEARTBEAT_DEFAULT_S = 15.0              # when a node states none (the protocol's HEARTBEAT_INTERVAL_S)
HEARTBEAT_MIN_S = 0.05                  # never ping faster than this, whatever a node says

USE, OPEN, WAIT = "use", "open", "wait"


@dataclass(frozen=True)
class PoolOptions:
    max_requests_per_connection: int = MAX_REQUESTS_PER_CONNECTION
    max_connections_per_endpoint: int = MAX_CONNECTIONS_PER_ENDPOINT
    idle_connection_timeout_s: float | None = IDLE_CONNECTION_TIMEOUT_S
    idle_endpoint_timeout_s: float | None = IDLE_ENDPOINT_TIMEOUT_S
    connect_timeout_s: float = CONNECT_TIMEOUT_S
    request_timeout_s: float = REQUEST_TIMEOUT_S

    def __post_init__(self):
        if self.max_requests_per_connection < 1 or self.max_connections_per_endpoint < 1:
            raise ValueError("max_requests_per_connection and max_connections_per_endpoint must be at least 1")


def choose(options: PoolOptions, in_flight: list[int], opening: int, waiting: int = 0) -> tuple[str, int | None]:
    """(USE, index) of the least busy connection with room; else WAIT when the connections being
    opened will have room for this request behind the `waiting` ones; else (OPEN, None) when the
    endpoint may have another; else (WAIT, None)."""
    best = None
    for i, n in enumerate(in_flight):
        if n < options.max_requests_per_connection and (best is None or n < in_flight[best]):
            best = i
    if best is not None:
        return USE, best
    if waiting < opening * (options.max_requests_per_connection - 1):   # each opener takes a slot
        return WAIT, None
    if len(in_flight) + opening < options.max_connections_per_endpoint:
        return OPEN, None
    return WAIT, None


def endpoint_expired(options: PoolOptions, last_used_s: float, now_s: float) -> bool:
    t = options.idle_endpoint_timeout_s
    return t is not None and now_s - last_used_s >= t


def connection_expired(options: PoolOptions, in_flight: int, last_used_s: float, now_s: float) -> bool:
    t = options.idle_connection_timeout_s
    return t is not None and in_flight == 0 and now_s - last_used_s >= t


def heartbeat_interval_s(heartbeat_ms, idle_timeout_ms) -> float:
    """How often an idle connection is pinged: the node's heartbeat_ms, but always within half
    its idle timeout (a node with a short idle timeout must not close a kept connection)."""
    s = (heartbeat_ms or 0) / 1000.0 or HEARTBEAT_DEFAULT_S
    if idle_timeout_ms:
        s = min(s, idle_timeout_ms / 2000.0)
    return max(s, HEARTBEAT_MIN_S)


def needs_ping(heartbeat_s: float, last_sent_s: float, now_s: float) -> bool:
    return now_s - last_sent_s >= heartbeat_s
