"""Pre- and post-triggers: an item write that names triggers (x-ms-documentdb-pre-trigger-include,
x-ms-documentdb-post-trigger-include: comma-separated ids) runs them around the write.

Theory of operation: the write and its triggers are one transaction (service/script_txn.py),
committed as one LSN or not at all. Each pre-trigger runs first, in the order named, and sees the
item in `getContext().getRequest().getBody()`; `setBody` replaces it for the write (and for the
next trigger). Then the write is staged, and each post-trigger runs, seeing the written item in
`getContext().getResponse().getBody()`. Any trigger may use the collection API, as a stored
procedure does (service/sproc.py runs each trigger the same way, in a context of its own); a
trigger that throws, or that runs out of its bounds, leaves nothing of the write applied. As for
a stored procedure, a commit another write raced runs everything again (then 449).

A trigger runs only on the operation it names (its triggerOperation, or All): a create on Create,
a replace on Replace or Update, a delete on Delete, an upsert on Create, Replace or Update.
"""
import json

from regionlab.client.protocol import headers as H

from ..core import charge
from ..core.errors import CosmosError, bad_request
from ..core.limits import SCRIPT_RERUNS_MAX
from . import admission, partition_keys, script_api
from .documents import _check_item, _item_key, written_reply
from .script_engine import no_engine
from .script_txn import Transaction
from .sproc import run

# A write's operation -> the triggerOperation values that run on it.
RUNS_ON = {"Create": ("All", "Create"), "Replace": ("All", "Replace", "Update"), "Delete": ("All", "Delete"),
           "Upsert": ("All", "Create", "Replace", "Update")}


async def write(call, container, segs: list, by_rid: bool):
    """A create, upsert, replace or delete of an item with its triggers."""
    engine = call.svc.script_engine
    if engine is None:
        raise no_engine()
    operation, id = _operation(call, segs)
    pre, post = _named(call, container, "Pre", operation), _named(call, container, "Post", operation)
    if id is None:
        pk_json, values = partition_keys.required(call, container)
    else:
        pk_json, values, id = _item_key(call, container, id, by_rid)
    doc = None
    if operation != "Delete":
        doc = call.json_body()
        _check_item(doc, len(call.raw))
    for _ in range(SCRIPT_RERUNS_MAX + 1):
        txn = Transaction(call, container, pk_json, values)
        status, version = await _run_all(call, engine, txn, operation, id, doc, pre, post)
        if txn.still_current():            # no await from here to the commit
            return await _commit(call, container, txn, status, version)
    raise CosmosError(449, 0, f"The write and its triggers were run {SCRIPT_RERUNS_MAX + 1} times and each time "
                              "another write to its partition landed meanwhile; nothing was applied. Retry it.")


def _operation(call, segs: list) -> tuple[str, str | None]:
    """(the write's operation, the item id segment or None) of a request that names triggers."""
    if len(segs) == 5 and call.method == "POST" and not call.flag(H.IS_QUERY) and not call.flag(H.IS_BATCH) \
            and call.header(H.IS_QUERY_PLAN) is None:
        return ("Upsert" if call.flag(H.IS_UPSERT) else "Create"), None
    if len(segs) == 6 and call.method in ("PUT", "DELETE"):
        return ("Replace" if call.method == "PUT" else "Delete"), segs[5]
    raise bad_request("Triggers run on creates, upserts, replaces and deletes of single items; send this request "
                      f"without {H.PRE_TRIGGER_INCLUDE} and {H.POST_TRIGGER_INCLUDE}.")


def _named(call, container, kind: str, operation: str) -> list:
    """The triggers a header names, checked: each exists, is of its kind and runs on operation."""
    text = call.header(H.PRE_TRIGGER_INCLUDE if kind == "Pre" else H.POST_TRIGGER_INCLUDE) or ""
    out = []
    for name in (n.strip() for n in text.split(",")):
        if not name:
            continue
        t = container.scripts.get("triggers", name)
        if t.extra["triggerType"] != kind:
            raise bad_request(f"The trigger '{name}' is a {t.extra['triggerType']}-trigger; it cannot be named in "
                              f"the {kind.lower()}-trigger header.")
        if t.extra["triggerOperation"] not in RUNS_ON[operation]:
            raise bad_request(f"The trigger '{name}' runs on {t.extra['triggerOperation']} operations, not on this "
                              f"{operation.lower()}.")
        out.append(t)
    return out


async def _run_all(call, engine, txn, operation: str, id, doc, pre: list, post: list) -> tuple:
    """Run the pre-triggers, stage the write, run the post-triggers: (status, version)."""
    for t in pre:
        done = await run(call, engine, t, txn, script_api.start(t.body, "[]", json.dumps(doc), operation))
        if done.get("request") is not None:
            doc = json.loads(done["request"])
    status, version = _stage(txn, operation, id, doc, call.header(H.IF_MATCH))
    written = "undefined" if version is None or status == 204 else version.body.decode("utf-8", "surrogatepass")
    for t in post:
        await run(call, engine, t, txn, script_api.start(t.body, "[]", json.dumps(doc), operation, written))
    return status, version


def _stage(txn, operation: str, id, doc, if_match) -> tuple:
    writer = txn.writer
    if operation != "Delete":
        _check_item(doc, 0)                 # a pre-trigger may have set anything as the body
    if operation == "Create":
        status, version = writer.create(doc)
    elif operation == "Upsert":
        status, version = writer.upsert(doc, if_match)
    elif operation == "Replace":
        status, version = writer.replace(id, doc, if_match)
    else:
        old = writer.current(id)
        status, version = writer.delete(id, if_match)
        txn.ru += charge.staged_key(writer, old.key)
        return status, version
    txn.ru += charge.staged_key(writer, version.key)
    return status, version


async def _commit(call, container, txn, status: int, version):
    writer = txn.writer
    ru = round(txn.ru, 2)
    admission.script(call, writer, ru, max(1, len(writer.pending)))     # a 429 here leaves nothing applied
    lsn = writer.commit()
    if lsn:
        await call.svc.write_acknowledged(call, writer, lsn)
    return written_reply(call, container, writer, lsn, ru, status, version)
