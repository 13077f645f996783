"""The data explorer on the control port: `GET /explorer` (the page, explorer.html) and
`/explorer/api/{endpoint}/{path}`, which runs one Cosmos DB REST request against one endpoint's
service — a region's by name, or `global` (the account's, which writes to the write region) —
and answers the service's reply as it is: status, body, charge, continuation, query metrics
(an error's body also carries the control port's "error" key). Its 5xx are the service's own (a
region in an outage: 503) and 502 when a request fault dropped the request unanswered.

It is the same request path as the gateway's (service/service.py), with the control port's
access rules (token, origin) in place of the master key: what the page shows is what a client
of that region would be answered, request charges and throttling included, and a region whose
link lags shows what it has so far. Queries run whole on the server (the `whole` query mode,
whatever --query-mode says), since the page is no SDK that could merge a query plan.

The request is what the page could send, no more: a method of the REST API, a path of at most
EXPLORER_PATH_MAX_CHARS, the headers of FORWARDED_HEADERS, a body within the gateway's limit.
"""
import json

from aiohttp import web

from regionlab.client.protocol import headers as H

from ..core.limits import REQUEST_BODY_MAX_BYTES
from ..service.call import Call
from .control_json import json_reply
from .dashboard_page import explorer_response

GLOBAL = "global"
EXPLORER_PATH_MAX_CHARS = 2048
# What the page may set, by name in lower case: paging, partition key, query, conditions.
FORWARDED_HEADERS = ("content-type", H.PARTITION_KEY, H.CONTINUATION, H.MAX_ITEM_COUNT, H.IS_QUERY,
                     H.ENABLE_CROSS_PARTITION, "x-ms-documentdb-populatequerymetrics", "if-match",
                     H.CONSISTENCY_LEVEL, H.SESSION_TOKEN)
# What of a reply the page reads, besides status and body.
REPLY_HEADERS = (H.REQUEST_CHARGE, H.CONTINUATION, "x-ms-documentdb-query-metrics", H.SUBSTATUS, "etag",
                 H.SESSION_TOKEN, "x-ms-item-count")
METHODS = ("GET", "POST", "PUT", "DELETE")


def add_explorer_routes(app: web.Application, emu) -> None:
    services: dict = {}               # endpoint name -> its Service for the explorer (made once)

    def service(name: str):
        region = None if name == GLOBAL else name
        if region is not None and emu.account.region_state(region) is None:
            raise web.HTTPNotFound(text=f"No region {region!r} in the account (see GET /topology).")
        svc = services.get(name)
        if svc is None:
            svc = services[name] = emu.service(region, key=None)
            svc.query_mode = "whole"
        return svc

    async def explorer_page(request):
        return explorer_response()

    async def api(request):
        path = request.match_info["path"]
        if request.method not in METHODS or len(path) > EXPLORER_PATH_MAX_CHARS:
            return json_reply({"error": f"The explorer forwards {', '.join(METHODS)} of a path up to "
                                        f"{EXPLORER_PATH_MAX_CHARS} characters."}, 400)
        try:
            svc = service(request.match_info["endpoint"])
        except web.HTTPNotFound as e:
            return json_reply({"error": e.text}, 404)
        body = await request.content.read(REQUEST_BODY_MAX_BYTES + 1)
        if len(body) > REQUEST_BODY_MAX_BYTES:
            return json_reply({"error": f"The body is over {REQUEST_BODY_MAX_BYTES} bytes."}, 413)
        headers = {k: request.headers[k] for k in FORWARDED_HEADERS if k in request.headers}
        target = "/" + path + (f"?{request.query_string}" if request.query_string else "")
        reply = await svc.handle(Call(svc, request.method, target, headers, body))
        if reply.fault is not None:         # a request fault dropped it, as a client would see
            return json_reply({"error": "The region dropped the request unanswered (a request fault: "
                                        "see GET /faults)."}, 502)
        out = {k: str(reply.headers[k]) for k in REPLY_HEADERS if k in reply.headers}
        body = reply.body if reply.status < 400 else _with_error_key(reply.body)
        return web.Response(status=reply.status, body=body, headers=out,
                            content_type=(reply.content_type or "application/json").split(";")[0])

    app.router.add_get("/explorer", explorer_page)
    app.router.add_route("*", "/explorer/api/{endpoint}/{path:.*}", api)


def _with_error_key(body: bytes) -> bytes:
    """The service's error ({"code", "message"}) with the control port's "error" key added, so
    that every refusal of the port reads alike; its status is the service's (a region in an
    outage answers 503 here as it does to a client)."""
    try:
        data = json.loads(body)
    except ValueError:
        return body
    if isinstance(data, dict) and "message" in data:
        data["error"] = data["message"]
        return json.dumps(data).encode()
    return body
