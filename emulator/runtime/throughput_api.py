"""Control-port routes for throughput: the throttling knobs, throttle storms, and `/metrics` in
Prometheus text format (docs/control-api.md, "Throughput"; the model is docs/throughput.md).

Every route runs on the emulator's event loop and changes the core's Throttle directly, so a
knob takes effect on the next request. Errors come back as JSON `{"error": message}`.
"""
from aiohttp import web

from ..core import throttle as th
from ..core.errors import CosmosError
from .routing_api import metrics as replica_metrics
from .control_json import guarded, json_body as _body, json_reply as _json

KNOBS = {"ru": bool, "burst": bool, "serverless": bool, "credits_per_s": int, "serverless_ru_per_s": int}
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


# ---- views -------------------------------------------------------------------------------------
def _names(account, rid) -> tuple | None:
    c = account.colls_by_rid.get(rid)
    return None if c is None else (c.db.id, c.id)


def _now(t, b, budget) -> tuple:
    """A bucket's (window, used, reserve) as of now (windows roll over with time, not requests)."""
    if budget is None:
        return b.state()
    return th.advance(b.state(), t.clock.now_ms() // th.WINDOW_MS, budget, t.config.burst)


def describe(account) -> dict:
    """The throttling state for GET /throttle and GET /topology."""
    t = account.throttle
    cfg = t.config
    containers = []
    for db in account.databases.values():
        for c in db.containers.values():
            budget = t.partition_budget(c)
            # Sharing the database's offer: the window's use is the pool's, for all its sharers.
            shared = budget is not None and not cfg.serverless and c.offer_rid is None
            parts = []
            for p in c.partitions:
                usage = {}
                for region in (r.name for r in account.regions):
                    b = t.buckets.get((region, c.rid, p.range_id))
                    if b is not None:
                        meter = t.pools.get((region, db.offer_rid), b) if shared else b
                        _, used, reserve = _now(t, meter, budget)
                        usage[region] = {"accepted": b.accepted, "charged_ru": round(b.charged_ru, 2),
                                         "window_used_ru": round(used, 2), "burst_reserve_ru": round(reserve, 2)}
                parts.append({"id": p.range_id, "regions": usage})
            containers.append({"database": db.id, "container": c.id,
                               "ru_per_s": None if budget is None else budget if shared else budget * len(c.partitions),
                               "partition_ru_per_s": budget, "partitions": parts})
    throttled = []
    for (region, rid, range_id, reason), n in sorted(t.throttled.items(), key=str):
        names = _names(account, rid) if rid is not None else (None, None)
        if names is not None:
            throttled.append({"region": region, "database": names[0], "container": names[1],
                              "partition": range_id, "reason": reason, "count": n})
    return {"ru": cfg.ru, "burst": cfg.burst, "serverless": cfg.serverless,
            "serverless_ru_per_s": cfg.serverless_ru_per_s, "credits_per_s": cfg.credits_per_s,
            "credits": t.credits_now() if cfg.credits_per_s is not None else None,
            "storms": [s.describe() for s in t.storms.values()],
            "throttled": throttled, "containers": containers}


def _label(value) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**kv) -> str:
    return "{" + ",".join(f'{k}="{_label(v)}"' for k, v in kv.items() if v is not None) + "}"


def metrics(emu) -> str:
    """Prometheus text exposition of the throttling counters (and the gateways' replies)."""
    account = emu.account
    t = account.throttle
    out = []

    def family(name, kind, help_text, samples):
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(f"{name}{labels} {value:g}" if isinstance(value, float) else f"{name}{labels} {value}"
                   for labels, value in samples)

    throttled, admitted, charged, budgets, reserves = [], [], [], [], []
    for (region, rid, range_id, reason), n in sorted(t.throttled.items(), key=str):
        names = _names(account, rid) if rid is not None else (None, None)
        if names is not None:
            throttled.append((_labels(region=region, database=names[0], container=names[1],
                                      partition=range_id, reason=reason), n))
    for (region, rid, range_id), b in sorted(t.buckets.items()):
        names = _names(account, rid)
        if names is None:
            continue
        labels = _labels(region=region, database=names[0], container=names[1], partition=range_id)
        admitted.append((labels, b.accepted))
        charged.append((labels, round(b.charged_ru, 2)))
        if t.config.burst:
            reserves.append((labels, round(_now(t, b, t.partition_budget(account.colls_by_rid[rid]))[2], 2)))
    for db in account.databases.values():
        for c in db.containers.values():
            budget = t.partition_budget(c)
            if budget is not None:
                budgets.extend((_labels(database=db.id, container=c.id, partition=p.range_id), float(budget))
                               for p in c.partitions)
    family("regionlab_throttled_requests_total", "counter",
           "Requests refused with 429, by region, partition and reason (ru, credits, storm).", throttled)
    family("regionlab_admitted_requests_total", "counter", "Requests admitted, by region and partition.", admitted)
    family("regionlab_request_units_total", "counter", "Request units charged to admitted requests.", charged)
    family("regionlab_partition_budget_ru_per_s", "gauge",
           "RU/s budget of each physical partition (unmetered partitions are absent).", budgets)
    if reserves:
        family("regionlab_burst_reserve_ru", "gauge", "Burst capacity accrued per partition and region.", reserves)
    if t.config.credits_per_s is not None:
        now = t.credits_now()
        family("regionlab_credits_per_s", "gauge", "The account's credit limit per second.",
               [("", t.config.credits_per_s)])
        family("regionlab_credits_window_used", "gauge", "Credits spent in the current window.", [("", now["used"])])
        family("regionlab_credits_spent_total", "counter", "Credits spent, by kind.",
               [(_labels(kind=k), v) for k, v in sorted(t.credits_spent.items())])
    family("regionlab_storm_requests_total", "counter", "Requests a throttle storm saw and throttled.",
           [(_labels(region=s.region, outcome=o), n) for s in t.storms.values()
            for o, n in (("seen", s.seen), ("throttled", s.hits))])
    served = []
    for name, gw in emu.services.items():
        for (method, kind, status, sub), n in sorted(getattr(gw, "requests_served", {}).items()):
            served.append((_labels(endpoint=name or "global", method=method, resource=kind,
                                   status=status, substatus=sub), n))
    family("regionlab_requests_total", "counter", "Replies sent by each gateway endpoint.", served)
    if getattr(emu, "direct", None) is not None:
        family("regionlab_direct_requests_total", "counter", "Replies sent by the direct-mode nodes, by region.",
               [(_labels(region=r, op=op, status=st, substatus=sub), n) for r, op, st, sub, n in emu.direct.counts()])
    query_work = [(kind, [(_labels(endpoint=name or "global"), getattr(gw, "query_work", {}).get(kind, 0))
                          for name, gw in emu.services.items()]) for kind in ("work", "slices", "abandoned", "pages")]
    family("regionlab_query_work_units_total", "counter",
           "Query work units spent (documents loaded and FROM/JOIN rows made).", query_work[0][1])
    family("regionlab_query_slices_total", "counter",
           "Query slices run (each at most QUERY_SLICE_MAX_WORK_UNITS; the event loop serves other requests "
           "between two).", query_work[1][1])
    family("regionlab_query_pages_total", "counter", "Query pages answered.", query_work[3][1])
    family("regionlab_queries_abandoned_total", "counter",
           "Queries stopped between slices because their client closed the connection.", query_work[2][1])
    out.extend(replica_metrics(emu))
    if emu.collector is not None:
        out.extend(emu.collector.metrics())
    return "\n".join(out) + "\n"


# ---- routes ------------------------------------------------------------------------------------
def _set_knobs(account, body: dict) -> None:
    """Apply a partial update of the knobs, all or nothing."""
    unknown = set(body) - set(KNOBS)
    if unknown:
        raise CosmosError(400, 0, f"Unknown throttling knob(s) {sorted(unknown)}; use {sorted(KNOBS)}.")
    values = {}
    for key, value in body.items():
        if key == "credits_per_s" and (value is None or value is True):
            values[key] = None if value is None else th.CREDITS_PER_S_DEFAULT
        elif type(value) is KNOBS[key] and (KNOBS[key] is bool or value > 0):
            values[key] = value
        else:
            raise CosmosError(400, 0, f"'{key}' must be " + ("true or false." if KNOBS[key] is bool else
                                      "a positive integer" + (" (null: off, true: 1000)." if key == "credits_per_s" else ".")))
    for key, value in values.items():
        setattr(account.throttle.config, key, value)


def _throughput(body: dict) -> tuple:
    ru, auto = body.get("ru_per_s"), body.get("autoscale_max")
    if set(body) - {"ru_per_s", "autoscale_max"} or (ru is not None and auto is not None):
        raise CosmosError(400, 0, 'Give {"ru_per_s": 400} or {"autoscale_max": 4000} (or {"ru_per_s": null} to remove).')
    return ru, auto


async def on_disk(emu) -> None:
    """With --data-dir, answer once the change is on disk (runtime/persistence.py)."""
    if emu.persistence is not None:
        fut = emu.persistence.barrier()
        if fut is not None:
            await fut


def add_throughput_routes(app: web.Application, emu) -> None:
    def account():
        return emu.account

    async def get_state(request):
        return _json(describe(account()))

    async def put_knobs(request):
        _set_knobs(account(), await _body(request))
        return _json(describe(account()))

    async def put_container(request):
        a = account()
        ru, auto = _throughput(await _body(request))
        db = a.database(request.match_info["db"])
        c = a.container(db, request.match_info["coll"])
        offer = a.set_throughput(c, ru, auto)
        await on_disk(emu)
        return _json({"database": db.id, "container": c.id, "offer": offer.properties() if offer else None,
                      "partition_ru_per_s": a.throttle.partition_budget(c)})

    async def put_database(request):
        a = account()
        ru, auto = _throughput(await _body(request))
        db = a.database(request.match_info["db"])
        offer = a.set_throughput(db, ru, auto)
        await on_disk(emu)
        return _json({"database": db.id, "offer": offer.properties() if offer else None})

    async def put_storm(request):
        body = await _body(request, ("share", "op", "retry_after_ms", "seed"))
        region = request.match_info["region"]
        try:
            storm = account().throttle.set_storm(
                region, body.get("share", 1.0), body.get("op"),
                body.get("retry_after_ms", th.STORM_RETRY_AFTER_MS_DEFAULT), body.get("seed", 0))
        except KeyError:
            raise CosmosError(404, 0, f"No region named '{region}'.") from None
        except (ValueError, TypeError) as e:
            raise CosmosError(400, 0, str(e)) from None
        return _json(storm.describe())

    async def delete_storm(request):
        storm = account().throttle.clear_storm(request.match_info["region"])
        if storm is None:
            raise CosmosError(404, 0, f"No throttle storm in '{request.match_info['region']}'.")
        return _json({"cleared": storm.describe()})

    async def get_metrics(request):
        return web.Response(text=metrics(emu), headers={"Content-Type": PROMETHEUS_TEXT})

    app.router.add_get("/throttle", guarded(get_state))
    app.router.add_put("/throttle", guarded(put_knobs))
    app.router.add_put("/throttle/containers/{db}/{coll}", guarded(put_container))
    app.router.add_put("/throttle/databases/{db}", guarded(put_database))
    app.router.add_put("/throttle/storms/{region}", guarded(put_storm))
    app.router.add_delete("/throttle/storms/{region}", guarded(delete_storm))
    app.router.add_get("/metrics", guarded(get_metrics))
