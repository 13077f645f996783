"""Every region on the account's port, told apart by the `Host` header (--regional-hostnames).

The official SDKs compute a region's endpoint from the account's: the first label of the host
gets `-<region>` (region name in lower case, spaces removed), so `https://localhost:8081/` and
"East US 2" make `https://localhost-eastus2:8081/`. In this mode the account advertises those
names, all on its one port, and `HostRouter` is the handler of that port's HttpServer: each
request goes to the gateway of the endpoint its Host names (any other Host: the global one).

A connection belongs to the endpoint its latest request named: it moves into that endpoint's
HttpServer, so a region outage resets or blackholes it as it would on the region's own port.
All of the port's HttpServers share one set of slots, as they share one listener. The one
thing a shared port cannot do is refuse a connection for one name: there a `refuse` outage
resets the connections that name the region instead (server.py).
"""
from ..core.faults import OUTAGE_BLACKHOLE, OUTAGE_RESET
from ..service import responses


def region_label(region: str) -> str:
    """A region's part of its host name, as the SDKs normalize it: 'East US 2' -> 'eastus2'."""
    return region.lower().replace(" ", "")


def regional_host(account_host: str, region: str) -> str:
    """The host name the SDKs compute for a region of the account served on account_host."""
    first, dot, rest = account_host.lower().partition(".")
    return f"{first}-{region_label(region)}{dot}{rest}"


_DROPPED = responses.Reply(200, {}, b"")    # what a reset or blackholed request "answers": nothing is sent


class HostRouter:
    def __init__(self, account_host: str, default):
        self.account_host = account_host
        self.default = default            # (HttpServer, handler) of the global endpoint
        self.routes: dict = {}            # host name (lower case, no port) -> (HttpServer, handler)

    def add(self, region: str, http, handler) -> None:
        self.routes[regional_host(self.account_host, region)] = (http, handler)

    def remove(self, region: str) -> None:
        self.routes.pop(regional_host(self.account_host, region), None)

    def target(self, host: str | None):
        if host:
            name = host.rpartition(":")[0] if host[-1:].isdigit() and ":" in host else host
            return self.routes.get(name.lower(), self.default)
        return self.default

    async def handle(self, req):
        http, handler = self.target(req.headers.get("host"))
        conn = req.conn
        if conn.server is not http:
            conn.server.connections.discard(conn)
            http.connections.add(conn)
            conn.server = http
            if http.outage == OUTAGE_RESET:
                conn.reset()
                return _DROPPED
            if http.outage == OUTAGE_BLACKHOLE:
                conn.silence()
                return _DROPPED           # conn.server's blackhole drops the answer
        return await handler(req)
