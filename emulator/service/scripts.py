"""Stored procedures, triggers and user-defined functions as resources (/dbs/{db}/colls/{coll}/
sprocs, /triggers, /udfs): create, read, replace, delete, read feed and query, charged as metadata;
and a stored procedure's execution (POST to it: service/sproc.py)."""
from regionlab.client.protocol import headers as H

from ..core import charge, scripts
from ..core.errors import CosmosError
from . import admission, metadata, responses


def handle(call, container, kind: str, segs: list, by_rid: bool):
    """The coroutine of a request on a container's scripts of one kind (segs[4])."""
    n = len(segs)
    if n == 5:
        return _feed(call, container, kind)
    if n != 6:
        raise CosmosError(404, 0, f"Unknown resource path '/{'/'.join(segs)}'.")
    script = container.scripts.get(kind, segs[5], by_rid)
    if call.method == "POST" and kind == "sprocs":
        from .sproc import execute                 # the engine's code loads on the first execution
        return execute(call, container, script)
    admission.management(call)
    return call.svc.durable_reply(call, _one(call, container, script))


async def _feed(call, container, kind: str):
    key = scripts.KINDS[kind][0]
    items = [s.properties() for s in container.scripts.by_kind[kind].values()]
    if call.method == "GET":
        return metadata.feed(call, container.rid, key, items)
    if call.method != "POST":
        raise CosmosError(405, 0, f"{call.method} is not supported on the {kind} feed; use GET or POST.")
    if metadata.is_query(call):
        return await metadata.query_feed(call, container.rid, key, items)
    admission.management(call)
    return await call.svc.durable_reply(call, _create(call, container, kind))


async def _create(call, container, kind: str):
    s = scripts.create(call.svc.account, container, kind, call.json_body())
    return responses.reply(201, s.properties(), call.activity_id, charge.METADATA_WRITE_RU, {H.ETAG: s.etag})


async def _one(call, container, s):
    account = call.svc.account
    if call.method == "GET":
        return responses.reply(200, s.properties(), call.activity_id, charge.METADATA_READ_RU, {H.ETAG: s.etag})
    if call.method == "PUT":
        if_match = call.header(H.IF_MATCH)
        if if_match is not None and if_match not in (s.etag, "*"):
            raise CosmosError(412, 0, "One of the specified pre-condition is not met.")
        scripts.replace(account, s, call.json_body())
        return responses.reply(200, s.properties(), call.activity_id, charge.METADATA_WRITE_RU, {H.ETAG: s.etag})
    if call.method == "DELETE":
        scripts.delete(account, container, s)
        return responses.reply(204, None, call.activity_id, charge.METADATA_WRITE_RU)
    raise CosmosError(405, 0, f"{call.method} is not supported on a {scripts.KINDS[s.kind][1]}.")
