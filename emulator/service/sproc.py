"""Executing a stored procedure: POST /dbs/{db}/colls/{coll}/sprocs/{sproc} with the arguments
array as the body and the partition key in x-ms-documentdb-partitionkey.

Theory of operation: the script runs in its own JavaScript context (service/script_engine.py), as
a conversation of rounds (service/script_api.py); between rounds the service does the operations
the script queued, in order, on one core Writer of the script's logical partition, the same
staging a transactional batch uses (service/batch.py). Nothing is committed until the script has
run to its end without throwing: then everything it wrote is committed as one commit under one
LSN (all or nothing). A script that throws, runs out of time or memory, or issues an operation that
fails with no callback to hear it, leaves nothing applied.

A script awaits its engine between rounds, so other requests run meanwhile; the transaction is
validated optimistically. A Writer stages at the replica set's next LSN; if another commit took
that LSN while the script ran, what the script read may be stale, so the whole execution runs
again (at most SCRIPT_RERUNS_MAX times, then 449 RetryWith, nothing applied): an execution
that commits saw its partition as no one else changed it, as the service's serializable scripts do.
"""
import json
from urllib.parse import quote

from regionlab.client.protocol import headers as H

from ..core.errors import CosmosError, bad_request, too_large
from ..core.limits import (
    SCRIPT_HEAP_MAX_BYTES, SCRIPT_OPERATIONS_MAX, SCRIPT_PARAMS_MAX_BYTES, SCRIPT_RERUNS_MAX,
    SCRIPT_RESPONSE_MAX_BYTES,
)
from . import admission, partition_keys, responses, script_api
from .script_engine import ScriptFailed, ScriptOutOfMemory, ScriptTimeout, engine_error, no_engine
from .script_txn import Transaction
from .sessions import session_headers

SCRIPT_LOG_MAX_CHARS = 4096          # console.log text returned in x-ms-documentdb-script-log-results


async def execute(call, container, script):
    engine = call.svc.script_engine
    if engine is None:
        raise no_engine()
    pk_json, values = partition_keys.required(call, container)
    params_json = _params(call)
    for _ in range(SCRIPT_RERUNS_MAX + 1):
        txn = Transaction(call, container, pk_json, values)
        done = await run(call, engine, script, txn, script_api.start(script.body, params_json))
        if txn.still_current():          # no await from here to the commit
            return await _commit(call, container, txn, done)
    raise CosmosError(449, 0, f"The stored procedure '{script.id}' was run {SCRIPT_RERUNS_MAX + 1} times and each "
                              "time another write to its partition landed while it ran; nothing was applied. "
                              "Retry it.")


def _params(call) -> str:
    if len(call.raw) > SCRIPT_PARAMS_MAX_BYTES:
        raise too_large(f"The stored procedure's parameters are {len(call.raw)} bytes; at most "
                        f"{SCRIPT_PARAMS_MAX_BYTES} are allowed.")
    params = call.json_body(required=False)
    if params is None:
        params = []
    if not isinstance(params, list):
        raise bad_request("The body of a stored procedure execution must be a JSON array of its arguments, "
                          "e.g. [\"a\", 1].")
    return json.dumps(params)


async def run(call, engine, script, txn, first: str) -> dict:
    """Run a script from `first` (the code of its first round) until it queues nothing more;
    returns its last round (body, logs, request). Raises the CosmosError the service answers for
    a script that failed."""
    svc = call.svc
    session = engine.session(svc.script_timeout_ms, SCRIPT_HEAP_MAX_BYTES)
    what = f"{_NAMES[script.kind]} '{script.id}'"
    try:
        await session.eval(script_api.prelude(txn.container.self_link, SCRIPT_OPERATIONS_MAX, SCRIPT_LOG_MAX_CHARS,
                                              SCRIPT_RESPONSE_MAX_BYTES))
        text = await session.eval(first)
        while True:
            step = _round(text)
            failed = step.get("failed")
            if failed is not None:
                raise CosmosError(failed["status"], failed.get("substatus", 0), failed["message"])
            ops = step["ops"]
            if not ops:
                return step
            text = await session.eval(script_api.deliver("[" + ",".join(map(txn.do, ops)) + "]"))
    except ScriptTimeout:
        raise CosmosError(408, 0, f"The {what} did not finish within {svc.script_timeout_ms / 1000:g} s, the time "
                                  "a script may run (ServerConfig.script_timeout_s); it was stopped and nothing it "
                                  "wrote was applied.") from None
    except ScriptOutOfMemory:
        raise bad_request(f"The {what} used more than {SCRIPT_HEAP_MAX_BYTES // (1024 * 1024)} MiB of JavaScript "
                          "heap, the most a script may use; it was stopped and nothing it wrote was applied.") from None
    except ScriptFailed as e:
        raise bad_request(f"Encountered exception while executing function. Exception = {engine_error(str(e))}") from None
    finally:
        session.close()


def _round(text) -> dict:
    """A round as script_api's __rl hands it over; a script that tampered with what the round is
    made of (its own toJSON, a replaced Object.prototype) gets a 400, not a 500."""
    try:
        step = json.loads(text)
        if isinstance(step.get("failed"), dict) or (isinstance(step.get("ops"), list)
                                                     and all(isinstance(op, dict) for op in step["ops"])):
            return step
    except (TypeError, ValueError, AttributeError):
        pass
    raise bad_request("The script changed the server-side API it was given (the round it handed back is "
                      "not what getContext() makes); nothing it wrote was applied.")


_NAMES = {"sprocs": "stored procedure", "triggers": "trigger", "udfs": "user-defined function"}


async def _commit(call, container, txn, done: dict):
    body = done.get("body")
    raw = b"" if body is None else body.encode("utf-8", "surrogatepass")
    if len(raw) > SCRIPT_RESPONSE_MAX_BYTES:
        raise too_large(f"The stored procedure's response body is {len(raw)} bytes; at most "
                        f"{SCRIPT_RESPONSE_MAX_BYTES} are allowed. Nothing it wrote was applied.")
    writer = txn.writer
    ru = round(txn.ru, 2)
    admission.script(call, writer, ru, max(1, txn.operations))     # a 429 here leaves nothing applied
    lsn = writer.commit()
    if lsn:
        await call.svc.write_acknowledged(call, writer, lsn)
    hdrs = session_headers(call, container, writer.rs, lsn or writer.rs.committed_lsn)
    if call.flag(H.SCRIPT_ENABLE_LOGGING):
        hdrs[H.SCRIPT_LOG_RESULTS] = quote(done.get("logs", ""), safe="")
    return responses.reply(200, raw, call.activity_id, ru, hdrs)

