"""The control port: health and topology (faults, failover and metrics grow here).

JSON over HTTP on its own port, which no fault ever touches, so tests and the CLI can always
reach it. See docs/control-api.md.
"""
from aiohttp import web

from ..core.consistency import BOUNDED
from .chaos_api import add_chaos_routes
from .routing_api import add_routing_routes
from .throughput_api import add_throughput_routes, describe as describe_throttling


def _json(data, status: int = 200) -> web.Response:
    return web.json_response(data, status=status)


def topology(emu) -> dict:
    account = emu.account
    t = emu.topology
    out = {"account_endpoint": t.global_endpoint, "consistency": account.consistency,
           "bounded_staleness": {"max_staleness_prefix": account.config.staleness_ops,
                                 "max_interval_s": account.config.staleness_s,
                                 "enforced": account.consistency == BOUNDED},
           "write_regions": list(account.write_regions),
           "regions": [{"name": r.name, "id": r.id, "state": r.state, "endpoint": t.region_endpoint(r.name)}
                       for r in account.regions],
           "links": [link.describe() for link in account.links.values()],
           "failovers": [f.describe() for f in account.failovers],
           "failover_waiting": account.describe_waiting_failover(),
           "lost_writes": len(account.lost_writes),
           "faults": list(account.faults.active.values()),
           "requests": {name or "global": served(gw) for name, gw in emu.gateways.items()},
           "throttling": describe_throttling(account),
           "routing": account.routing.describe(),
           "read_only_endpoints": t.read_only_endpoints(),
           "databases": []}
    for db in account.databases.values():
        d = {"id": db.id, "containers": []}
        for c in db.containers.values():
            d["containers"].append({"id": c.id, "partitionKey": c.pk_def.to_json(),
                                    "partitions": [p.describe() for p in c.partitions]})
        out["databases"].append(d)
    return out


def health(account) -> tuple[int, dict]:
    """(HTTP status, body) of GET /health. 200 "ok": every region is up. 200 "degraded": some
    region is down but one still serves (`down` lists the others; `writable` says whether a write
    region is up). 503 "down": no region serves. The status stays 200 through a partial outage
    because outages here are injected on purpose: a drill must not make Docker or an orchestrator
    call the process unhealthy and restart it, which would wipe the in-memory account."""
    regions = {r.name: r.state for r in account.regions}
    down = [name for name, state in regions.items() if state != "up"]
    writable = any(regions.get(name) == "up" for name in account.write_regions)
    status = "ok" if not down else "degraded" if len(down) < len(regions) else "down"
    body = {"status": status, "regions": regions, "down": down,
            "write_regions": list(account.write_regions), "writable": writable}
    return (503 if status == "down" else 200), body


def served(gw) -> dict:
    """A gateway's replies so far, as {"GET docs 404/1002": count} (substatus only when not 0)."""
    out = {}
    for (method, kind, status, sub), n in gw.requests_served.items():
        out[f"{method} {kind} {status}" + (f"/{sub}" if sub else "")] = n
    return out


def control_app(emu) -> web.Application:
    app = web.Application()

    async def health_route(request):
        status, body = health(emu.account)
        return _json(body, status)

    async def topo(request):
        return _json(topology(emu))

    app.router.add_get("/health", health_route)
    app.router.add_get("/topology", topo)
    add_chaos_routes(app, emu)
    add_throughput_routes(app, emu)
    add_routing_routes(app, emu)
    return app
