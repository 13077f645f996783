"""Bulk: a batch request with `x-ms-cosmos-batch-atomic: false` (the JS SDK's `items.bulk` and
`executeBulkOperations`, cosmos-wire §10.2).

Theory of operation: the request names a partition key range (`x-ms-documentdb-partition-
keyrangeid`), not a partition key; each operation carries its own `partitionKey` (JSON text).
Every operation runs on its own: its own core Writer, its own admission and its own commit and
LSN, so one operation's failure never undoes or blocks another's — unless
`x-ms-cosmos-batch-continue-on-error` is false, when the operations after the first failure are
not run and get 424. Throttling keeps the operations in order: the first operation that does not
fit the partition's budget and every one after it get 429 with `retryAfterMilliseconds` and are
not applied (the SDK resends them); when that is the very first operation, the whole request is
429, as the service answers a request it admits nothing of (the SDK's throttle retry resends it). The reply has one result per operation, in order (`statusCode`,
`requestCharge`, `eTag`, `resourceBody`; errors add `subStatusCode` and `message`), and is 200
when every operation succeeded, else 207.
"""
from regionlab.client.protocol import headers as H

from ..core import throttle as th
from ..core.errors import CosmosError
from . import admission, partition_keys, responses
from .batch import FAILED_DEPENDENCY, UNMEASURED_BODY_BYTES_MAX, _result, _run, encode_results, op_charge, operations
from .documents import _writer
from .sessions import token

MULTI_STATUS = 207
_THROTTLE_OPS = {"Create": th.CREATE, "Upsert": th.UPSERT, "Replace": th.REPLACE, "Delete": th.DELETE,
                 "Patch": th.PATCH, "Read": th.READ}


def _check_range(call, container) -> None:
    range_id = call.header(H.PK_RANGE_ID)
    if range_id is not None and all(p.range_id != range_id for p in container.partitions):
        raise CosmosError(410, 1002, f"Partition key range '{range_id}' does not exist (any more); "
                                     "refresh the partition key ranges.")


def _failure(e: CosmosError) -> dict:
    out = {"statusCode": e.status, "subStatusCode": e.substatus, "requestCharge": 0.0, "message": e.message}
    if e.retry_after_ms is not None:
        out["retryAfterMilliseconds"] = int(e.retry_after_ms)
    return out


def _apply(call, container, op: dict, measure: bool = True):
    """(result, writer, lsn) of one operation, applied on its own; raises CosmosError if refused."""
    header_pk = call.header(H.PARTITION_KEY)
    pk_json, values = (partition_keys.of_operation(container, op["partitionKey"]) if "partitionKey" in op
                       else partition_keys.required(call, container) if header_pk is not None
                       else partition_keys.of_operation(container, None))
    writer = _writer(call, container, pk_json, values)
    status, version = _run(writer, op, measure)
    ru = op_charge(writer, op, version)
    kind = _THROTTLE_OPS.get(op.get("operationType"), th.BATCH)
    if kind == th.READ:
        admission.read(call, container, writer.rs, ru)
    else:
        admission.write(call, writer, kind, ru)       # a 429 here leaves nothing of it applied
    return _result(status, version, ru), writer, writer.commit()


async def execute(call, container):
    _check_range(call, container)
    ops = operations(call)
    go_on = (call.header(H.BATCH_CONTINUE_ON_ERROR) or "true").lower() != "false"
    measure = len(call.raw) > UNMEASURED_BODY_BYTES_MAX
    results, committed = [], []
    failed = False
    throttled = None
    for i, op in enumerate(ops):
        if throttled is not None:       # in order: nothing after a throttled operation runs
            results.append(_failure(throttled))
            continue
        if failed and not go_on:
            results.append({"statusCode": FAILED_DEPENDENCY, "requestCharge": 0.0})
            continue
        try:
            result, writer, lsn = _apply(call, container, op, measure)
        except CosmosError as e:
            if i == 0 and e.status in (403, 429):
                raise                   # nothing ran: the SDK retries or moves the whole request
            results.append(_failure(e))
            failed = True
            if e.status == 429:
                throttled = e
            continue
        results.append(result)
        committed.append((i, writer, lsn))
    for i, writer, lsn in committed:
        try:
            await call.svc.write_acknowledged(call, writer, lsn)
        except CosmosError as e:
            results[i] = _failure(e)
            failed = True
    total = round(sum(r["requestCharge"] for r in results), 2)
    return responses.reply(MULTI_STATUS if failed else 200, encode_results(results), call.activity_id, total,
                           _session_headers(container, committed))


def _session_headers(container, committed: list) -> dict:
    """The session token of every partition the bulk wrote (one `<range>:<token>` each)."""
    latest: dict = {}
    for _, writer, lsn in committed:
        rs = writer.rs
        latest[rs] = max(latest.get(rs, 0), lsn or rs.committed_lsn)
    if not latest:
        return {}
    return {H.SESSION_TOKEN: ",".join(token(rs, lsn) for rs, lsn in latest.items()),
            H.ALT_CONTENT_PATH: container.name_path, H.CONTENT_PATH: container.rid}
