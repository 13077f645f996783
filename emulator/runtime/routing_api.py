"""Control-port routes for read routing inside a region (docs/control-api.md#read-routing):
the policy's knobs, replica weights, and the per-replica counters in `/metrics`.

Every change applies at once, on the emulator's loop, to every replica set (and to those
created later); a refused change (a 400) changes nothing.
"""
from aiohttp import web

from ..core import read_routing
from ..core.errors import CosmosError
from .control_json import guarded, json_body, json_reply


def add_routing_routes(app: web.Application, emu) -> None:
    async def show(request):
        return json_reply(emu.account.routing.describe())

    async def put_settings(request):
        return json_reply(read_routing.change_settings(emu.account, await json_body(request)))

    async def put_weights(request):
        return json_reply(read_routing.change_weights(emu.account, await json_body(request)))

    async def read_only_endpoint(request):
        name = request.match_info["name"]
        try:
            emu.account.region(name)
        except KeyError:
            raise CosmosError(404, 0, f"No region named '{name}'.") from None
        body = await json_body(request, ("port",)) if request.can_read_body else {}
        port = body.get("port", 0)
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < 65536:
            raise CosmosError(400, 0, 'Open a read-only endpoint with {"port": N} (0 or none: a free port).')
        try:
            url = await emu.add_read_only_endpoint(name, port)
        except OSError as e:
            raise CosmosError(400, 0, str(e)) from None
        return json_reply({"region": name, "read_only_endpoint": url}, status=201)

    app.router.add_post("/regions/{name}/read-only-endpoint", guarded(read_only_endpoint))
    app.router.add_get("/routing", guarded(show))
    app.router.add_put("/routing", guarded(put_settings))
    app.router.add_put("/routing/weights", guarded(put_weights))


def metrics(emu) -> list:
    """Prometheus lines: reads served, reads in flight and their peak, pinned connections, per replica."""
    samples = {"regionlab_replica_reads_served_total": [], "regionlab_replica_reads_in_flight": [],
               "regionlab_replica_reads_in_flight_peak": [], "regionlab_replica_pinned_connections": []}
    for c, p in emu.account.partitions():
        for region, rs in p.replica_sets.items():
            for r in rs.replicas:
                labels = (f'{{region="{_label(region)}",database="{_label(c.db.id)}",container="{_label(c.id)}",'
                          f'partition="{p.range_id}",replica="{r.index}",role="{r.role}"}}')
                samples["regionlab_replica_reads_served_total"].append(f"{labels} {r.reads_served}")
                samples["regionlab_replica_reads_in_flight"].append(f"{labels} {r.in_flight}")
                samples["regionlab_replica_reads_in_flight_peak"].append(f"{labels} {r.in_flight_peak}")
                samples["regionlab_replica_pinned_connections"].append(f"{labels} {r.pinned}")
    helps = {"regionlab_replica_reads_served_total": ("counter", "Reads routed to each replica."),
             "regionlab_replica_reads_in_flight": ("gauge", "Reads each replica is serving now (admission to reply)."),
             "regionlab_replica_reads_in_flight_peak": ("gauge", "The most reads each replica served at once."),
             "regionlab_replica_pinned_connections": ("gauge", "Client connections pinned to each replica "
                                                               "(strategy connections).")}
    out = []
    for name, lines in samples.items():
        kind, text = helps[name]
        out += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"] + [name + line for line in lines]
    return out


def _label(value) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
