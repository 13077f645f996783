"""Control-port routes for faults, failover and the lost-writes log (docs/control-api.md).

Every route runs on the emulator's event loop and calls the core directly; core errors come
back as JSON `{"error": message}` with the matching HTTP status.
"""
import asyncio

from aiohttp import web

from ..core.errors import CosmosError
from .control_json import guarded, json_body as _body, json_reply as _json
from .throughput_api import on_disk

FAILOVER_WAIT_S = 60.0


def add_chaos_routes(app: web.Application, emu) -> None:
    async def faults_list(request):
        return _json({"faults": list(emu.account.faults.active.values())})

    async def fault_inject(request):
        fid = emu.account.faults.inject(await _body(request))
        fault = emu.account.faults.active[fid]     # now: a duration_ms of 0 may end it while we settle
        await emu.settled()
        await on_disk(emu)
        return _json(fault, status=201)

    async def fault_heal(request):
        try:
            fid = int(request.match_info["id"])
        except ValueError:
            raise CosmosError(400, 0, "A fault id is an integer.") from None
        healed = emu.account.faults.heal(fid)
        await emu.settled()
        await on_disk(emu)
        return _json({"healed": healed})

    async def failover(request):
        body = await _body(request, ("region", "kind", "wait"))
        kind, region, wait = body.get("kind", "graceful"), body.get("region"), body.get("wait", True)
        if kind not in ("graceful", "forced"):
            raise CosmosError(400, 0, "kind must be 'graceful' or 'forced'.")
        if not isinstance(region, str) or not isinstance(wait, bool):
            raise CosmosError(400, 0, 'Fail over with {"region": "East US 2", "kind": "graceful", "wait": true}.')
        f = emu.account.failover(region, forced=kind == "forced")
        if f.state == "draining" and wait:
            done = asyncio.get_running_loop().create_future()
            f.listeners.append(lambda _: done.done() or done.set_result(None))
            try:
                await asyncio.wait_for(done, FAILOVER_WAIT_S)
            except asyncio.TimeoutError:
                pass
        await on_disk(emu)
        return _json(f.describe(), status=200 if f.state != "draining" else 202)

    async def failovers(request):
        return _json({"failovers": [f.describe() for f in emu.account.failovers]})

    async def lost_writes(request):
        lost = emu.account.lost_writes
        return _json({"count": len(lost), "writes": lost})

    async def region_add(request):
        body = await _body(request, ("name", "port"))
        name, port = body.get("name"), body.get("port", 0)
        if not isinstance(name, str) or type(port) is not int or not 0 <= port < 65536:
            raise CosmosError(400, 0, 'Add a region with {"name": "North Europe", "port": 0} '
                                      '(port: an integer 0-65535, 0 for any free one).')
        emu.account.check_new_region(name)       # refuse a duplicate before binding its port
        emu.reserve_port(name, port)
        if emu.persistence is not None:          # a restart serves it on the port asked for
            emu.persistence.region_ports[name] = port
        try:
            region = emu.account.add_region(name)
        except BaseException:
            if emu.persistence is not None:
                emu.persistence.region_ports.pop(name, None)
            raise
        finally:
            emu.release_port(name)               # a no-op once the region serves on it
        await emu.settled()
        await on_disk(emu)
        return _json({"name": region.name, "id": region.id,
                      "endpoint": emu.topology.region_endpoint(region.name)}, status=201)

    async def region_remove(request):
        name = request.match_info["name"]
        try:
            emu.account.region(name)
        except KeyError:
            raise CosmosError(404, 0, f"No region named '{name}'.") from None
        emu.account.remove_region(name)
        if emu.persistence is not None:
            emu.persistence.region_ports.pop(name, None)
        await emu.settled()
        await on_disk(emu)
        return _json({"removed": name})

    app.router.add_post("/regions", guarded(region_add))
    app.router.add_delete("/regions/{name}", guarded(region_remove))
    app.router.add_get("/faults", guarded(faults_list))
    app.router.add_post("/faults", guarded(fault_inject))
    app.router.add_delete("/faults/{id}", guarded(fault_heal))
    app.router.add_post("/failover", guarded(failover))
    app.router.add_get("/failovers", guarded(failovers))
    app.router.add_get("/lost-writes", guarded(lost_writes))
