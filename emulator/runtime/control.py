"""The control port: health, topology, the route index and dashboard, and the access checks in
front of all of it (faults, failover and throughput live in chaos_api.py and throughput_api.py;
the dashboard page is dashboard_page.py).

JSON over HTTP on its own port, which no fault ever touches, so tests and the CLI can always
reach it. Every request first passes control_access.py (Host, Origin, token, content type); any
HTTP error aiohttp raises (404, 405, 413) is answered as JSON like the routes' own errors.
See docs/control-api.md.
"""
import logging

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from ..core.consistency import BOUNDED
from .chaos_api import add_chaos_routes
from .control_access import ControlAccess
from .control_json import json_reply as _json
from .dashboard_page import dashboard_response
from .drill_api import add_drill_routes
from .explorer_api import add_explorer_routes
from .routing_api import add_routing_routes
from .throughput_api import add_throughput_routes, describe as describe_throttling
from ..core.limits import CONTROL_BODY_MAX_BYTES

# The index `GET /` serves to a JSON client: (method, path, what). A browser gets the dashboard.
ROUTES = (
    ("GET", "/", "this index (JSON), or the live dashboard for a browser (text/html)"),
    ("GET", "/health", "liveness and each region's state (open without the token)"),
    ("GET", "/topology", "regions, links, faults, failovers, partitions and replicas"),
    ("GET", "/faults", "the active faults"),
    ("POST", "/faults", "inject a fault"),
    ("DELETE", "/faults/{id}", "heal a fault"),
    ("POST", "/failover", "move the write region (graceful or forced)"),
    ("GET", "/failovers", "every failover so far"),
    ("GET", "/lost-writes", "the writes forced failovers discarded"),
    ("POST", "/regions", "add a region"),
    ("DELETE", "/regions/{name}", "remove a region"),
    ("GET", "/throttle", "throughput knobs, storms and counters"),
    ("PUT", "/throttle", "change the account-wide throughput knobs"),
    ("PUT", "/throttle/containers/{db}/{coll}", "provision a container's throughput"),
    ("PUT", "/throttle/databases/{db}", "provision a database's shared throughput"),
    ("PUT", "/throttle/storms/{region}", "start a throttle storm in a region"),
    ("DELETE", "/throttle/storms/{region}", "end a region's throttle storm"),
    ("GET", "/metrics", "Prometheus text metrics"),
    ("GET", "/requests", "what the endpoints served, per 100 ms window, region, operation and status"),
    ("GET", "/debug/gc", "garbage collector pauses, freezes and event-loop lag"),
    ("GET", "/drill", "the drill running against this emulator: phase, next step, timeline"),
    ("PUT", "/drill", "a drill runner reports its state (the dashboard shows it)"),
    ("DELETE", "/drill", "forget the drill's state"),
    ("GET", "/explorer", "the data explorer (a page): databases, containers, items and queries per region"),
    ("GET", "/explorer/api/{endpoint}/{path}", "a REST read of a region's service (or `global`), as the explorer sends it"),
    ("POST", "/explorer/api/{endpoint}/{path}", "a REST create or query (PUT, DELETE: replace, delete) through the explorer"),
)
DOCS = "docs/control-api.md"


class _ClientMistakes(logging.Filter):
    """aiohttp logs a request it cannot parse (HTTP/1.1 without Host, a bad request line) with
    its traceback at ERROR, though the client has already been answered 400 and the server is
    fine: the mistake is the client's, so it is a DEBUG line without the traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, HttpProcessingError):
            return True
        if not CONTROL_HTTP_LOG.isEnabledFor(logging.DEBUG):
            return False
        record.msg, record.args = "control port: refused a malformed request: %s", (exc.message,)
        record.levelno, record.levelname, record.exc_info, record.exc_text = logging.DEBUG, "DEBUG", None, None
        return True


CONTROL_HTTP_LOG = logging.getLogger("regionlab.control.http")   # given to aiohttp's server
CONTROL_HTTP_LOG.addFilter(_ClientMistakes())


def topology(emu) -> dict:
    account = emu.account
    t = emu.topology
    out = {"account_endpoint": t.global_endpoint, "consistency": account.consistency,
           "bounded_staleness": {"max_staleness_prefix": account.config.staleness_ops,
                                 "max_interval_s": account.config.staleness_s,
                                 "enforced": account.consistency == BOUNDED},
           "write_regions": list(account.write_regions),
           "regions": [{"name": r.name, "id": r.id, "state": r.state, "endpoint": t.region_endpoint(r.name),
                        "outage_mode": r.outage_mode if r.state != "up" else None}
                       for r in account.regions],
           "links": [link.describe() for link in account.links.values()],
           "failovers": [f.describe() for f in account.failovers],
           "failover_waiting": account.describe_waiting_failover(),
           "lost_writes": len(account.lost_writes),
           "faults": list(account.faults.active.values()),
           "requests": {name or "global": served(gw) for name, gw in emu.services.items()},
           "direct": emu.direct.describe() if emu.direct is not None else None,
           "direct_requests": emu.direct.served() if emu.direct is not None else {},
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


def _index(request) -> web.Response:
    routes = [{"method": m, "path": p, "what": w} for m, p, w in ROUTES]
    if not _wants_html(request.headers.get("Accept", "")):
        return _json({"service": "regionlab control port", "docs": DOCS, "routes": routes})
    return dashboard_response(routes, DOCS)


def _wants_html(accept: str) -> bool:
    """Whether the client ranks text/html above JSON (a browser does; curl sends */*)."""
    def quality(kind: str) -> float:
        best = 0.0
        for part in accept.split(","):
            media, *params = [s.strip() for s in part.split(";")]
            if media.lower() in (kind, kind.split("/")[0] + "/*", "*/*"):
                q = next((p[2:] for p in params if p.lower().startswith("q=")), "1")
                try:
                    best = max(best, float(q) if media.lower() == kind else float(q) - 0.001)
                except ValueError:
                    continue
        return best
    return quality("text/html") > quality("application/json")


def _access_middleware(access: ControlAccess):
    @web.middleware
    async def check(request, handler):
        refusal = access.refusal(request.method, request.path, request.headers)
        if refusal is not None:
            status, message, headers = refusal
            return web.json_response({"error": message}, status=status, headers=headers)
        try:
            return await handler(request)
        except web.HTTPException as e:
            if e.status < 400:
                raise
            return web.json_response({"error": _http_error(request, e)}, status=e.status,
                                     headers={k: v for k, v in e.headers.items() if k.lower() == "allow"})
    return check


def _http_error(request, e: web.HTTPException) -> str:
    if e.status == 404:
        return f"No control route {request.path!r}; GET / lists them."
    if e.status == 405:
        return f"{request.method} is not allowed on {request.path} (allowed: {e.headers.get('Allow', '')})."
    if e.status == 413:
        return f"The body is larger than {CONTROL_BODY_MAX_BYTES} bytes."
    return e.reason


def control_app(emu) -> web.Application:
    cfg = emu.config
    access = ControlAccess(cfg.host, cfg.advertise_host, cfg.control_token)
    app = web.Application(middlewares=[_access_middleware(access)], client_max_size=CONTROL_BODY_MAX_BYTES)

    async def health_route(request):
        status, body = health(emu.account)
        return _json(body, status)

    async def topo(request):
        return _json(topology(emu))

    async def index(request):
        return _index(request)

    async def debug_gc(request):
        if emu.collector is None:
            return _json({"installed": False, "reason": "only a serving process (python -m emulator) "
                                                        "tunes and measures its garbage collector"})
        return _json(dict(installed=True, **emu.collector.describe()))

    async def requests(request):
        text = request.query.get("since_ms", "0")
        try:
            since_ms = int(text)
        except ValueError:
            return _json({"error": f"since_ms must be epoch milliseconds (an integer), not {text!r}"}, 400)
        emu.record_requests()
        return _json(dict(emu.request_log.since(since_ms), now_ms=emu.account.clock.now_ms(),
                          recording_since_ms=emu.request_log.recording_since_ms))

    app.router.add_get("/", index)
    app.router.add_get("/requests", requests)
    app.router.add_get("/health", health_route)
    app.router.add_get("/topology", topo)
    app.router.add_get("/debug/gc", debug_gc)
    add_chaos_routes(app, emu)
    add_throughput_routes(app, emu)
    add_routing_routes(app, emu)
    add_drill_routes(app, emu)
    add_explorer_routes(app, emu)
    return app
