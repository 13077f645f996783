"""Which handler answers a request: the service's routes, by path segments and, on a container's
documents feed, by method and headers (create, batch, bulk, query, query plan, read feed,
change feed). Each handler module owns one resource family; this module only chooses."""
from regionlab.client.protocol import headers as H
from regionlab.client.protocol.status import SUB_COLLECTION_RID_MISMATCH

from ..core.errors import CosmosError, bad_request
from . import account as account_doc
from ..core.scripts import KINDS as SCRIPT_KINDS
from . import addresses, admission, batch, bulk, documents, metadata, scripts, users
from .paths import rid_based, unknown, unsupported_or_unknown


async def dispatch(call):
    segs = call.segs
    n = len(segs)
    if n == 0:
        return account_doc.handle(call)
    svc = call.svc
    if 3 <= n <= 6 and segs[2] == "users" and segs[0] == "dbs":
        admission.management(call)          # users and permissions: metadata, admitted before they run
        return await svc.durable_reply(call, users.route(call, segs))
    if n <= 4 and segs[0] in ("dbs", "offers"):
        admission.management(call)          # databases, containers, offers: before they run
        return await svc.durable_reply(call, _metadata(call, segs, n))
    if segs[0] == "addresses" and n == 1:
        return addresses.handle(call)        # direct mode's address feed
    if segs[0] != "dbs":
        raise unknown(segs)
    by_rid = rid_based(segs[1])
    db = svc.account.database(segs[1], by_rid)
    if segs[2] != "colls":
        raise unsupported_or_unknown(segs, segs[2])
    c = svc.account.container(db, segs[3], by_rid)
    sub = segs[4]
    _check_intended_container(call, c)
    if sub == "docs":
        if call.header(H.PRE_TRIGGER_INCLUDE) or call.header(H.POST_TRIGGER_INCLUDE):
            from .triggers import write             # the engine's code loads on the first trigger
            return await write(call, c, segs, by_rid)
        if n == 5:
            return await documents_feed(call, c)
        if n == 6:
            return await documents.item(call, c, segs[5], by_rid)
    elif sub == "pkranges" and n == 5:
        return await metadata.pkranges(call, c)
    elif sub == "conflicts" and n == 5:
        return await metadata.conflicts(call, c)
    elif sub == "operations" and n == 6 and segs[5].lower() == "partitionkeydelete":
        return await documents.delete_by_partition_key(call, c)
    elif sub in SCRIPT_KINDS:
        return await scripts.handle(call, c, sub, segs, by_rid)
    raise unsupported_or_unknown(segs, sub)


def _check_intended_container(call, container) -> None:
    """400/1024 when the SDK names, in x-ms-cosmos-intended-collection-rid, a container the path
    no longer resolves to (it was deleted and re-created under the same name), as the service
    answers: the SDK then refreshes its cached container (rid, partition key) and retries."""
    intended = call.header(H.INTENDED_COLLECTION_RID)
    if intended is not None and intended != container.rid:
        raise bad_request(
            f"The container '{container.id}' has the resource id {container.rid}, not {intended[:40]!r} "
            "named by x-ms-cosmos-intended-collection-rid: the container was deleted and re-created "
            "since the client read it. Re-read the container and retry.", SUB_COLLECTION_RID_MISMATCH)


def _metadata(call, segs: list, n: int):
    """The coroutine of a request on databases, containers or offers (n <= 4 segments)."""
    account = call.svc.account
    if segs[0] == "offers":
        if n > 2:
            raise unknown(segs)
        return metadata.offers(call) if n == 1 else metadata.offer(call, segs[1])
    if n == 1:
        return metadata.databases(call)
    by_rid = rid_based(segs[1])
    db = account.database(segs[1], by_rid)
    if n == 2:
        return metadata.database(call, db)
    if segs[2] != "colls":
        raise unsupported_or_unknown(segs, segs[2])
    if n == 3:
        return metadata.containers(call, db)
    return metadata.container(call, db, account.container(db, segs[3], by_rid))


def documents_feed(call, container):
    """The coroutine of a request on a container's documents feed."""
    if call.method == "POST":
        if call.header(H.IS_QUERY_PLAN) is not None:
            from .queries import query_plan          # the query engine loads on the first query
            return query_plan(call, container)
        if call.flag(H.IS_BATCH):
            return (bulk.execute if batch.is_bulk(call) else batch.execute)(call, container)
        if metadata.is_query(call):
            from .queries import query_documents
            return query_documents(call, container)
        return documents.create(call, container)
    if call.method == "GET":
        if call.header(H.A_IM) is not None:
            from .changefeed import change_feed
            return change_feed(call, container)
        return documents.read_feed(call, container)
    raise CosmosError(405, 0, f"{call.method} is not supported on a documents feed; use GET or POST.")
