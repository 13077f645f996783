"""Transactional batch: every operation of one logical partition, all or nothing. (A batch with
`x-ms-cosmos-batch-atomic: false` is bulk: gateway/bulk.py.)

The partition key comes only from the request header (cosmos-wire §5.6). Operations run in
order inside one core Writer; the first failure rolls the whole batch back (nothing was
staged into the store), keeps its own status code and gives every other operation 424, and
the reply is HTTP 207. A successful batch commits under a single LSN, so no replica ever shows
half of it.
"""
from client.protocol import headers as H

from ..core import charge, jsontext
from ..core import throttle as th
from ..core.errors import CosmosError, bad_request
from . import admission, partition_keys, responses
from .documents import _check_item, _writer, patch_request
from .sessions import session_headers

BATCH_OPERATIONS_MAX = 100
FAILED_DEPENDENCY = 424
ID_OPERATIONS = frozenset(("Read", "Replace", "Delete", "Patch"))     # addressed by 'id'


def _shown(value) -> str:
    text = jsontext.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _run(writer, op: dict):
    kind = op.get("operationType")
    body = op.get("resourceBody")
    if_match = op.get("ifMatch")
    if kind in ID_OPERATIONS and not isinstance(op.get("id"), str):
        raise bad_request(f"A batch {kind} needs the item's 'id' as a string; got {_shown(op.get('id'))}.")
    for name in ("ifMatch", "ifNoneMatch"):
        if op.get(name) is not None and not isinstance(op.get(name), str):
            raise bad_request(f"The batch operation's '{name}' must be an etag string; got {_shown(op.get(name))}.")
    if kind in ("Create", "Upsert", "Replace"):
        raw_len = len(jsontext.dumps_bytes(body))
        _check_item(body, raw_len)
    if kind == "Create":
        return writer.create(body)
    if kind == "Upsert":
        return writer.upsert(body, if_match)
    if kind == "Replace":
        return writer.replace(op.get("id"), body, if_match)
    if kind == "Delete":
        return writer.delete(op.get("id"), if_match)
    if kind == "Read":
        return writer.read(op.get("id"), op.get("ifNoneMatch"))
    if kind == "Patch":
        operations, condition = patch_request(body)
        return writer.patch(op.get("id"), operations, condition, if_match)
    raise bad_request(f"Unknown batch operationType {kind!r}: use Create, Upsert, Read, Replace, Delete or Patch.")


def _result(status: int, version, ru: float) -> dict:
    out = {"statusCode": status, "requestCharge": ru}
    if version is not None:
        out["eTag"] = version.etag
        if status != 204:
            out["resourceBody"] = version.doc
    return out


def operations(call) -> list:
    """The batch body: a non-empty array of at most BATCH_OPERATIONS_MAX operation objects."""
    ops = call.json_body()
    if not isinstance(ops, list) or not ops:
        raise bad_request("A batch body must be a non-empty JSON array of operations.")
    if len(ops) > BATCH_OPERATIONS_MAX:
        raise bad_request(f"A batch may hold at most {BATCH_OPERATIONS_MAX} operations; this one has {len(ops)}.")
    for i, op in enumerate(ops):
        if not isinstance(op, dict):
            raise bad_request(f"Batch operation {i} is not a JSON object.")
    return ops


def op_charge(writer, op: dict, version) -> float:
    if op.get("operationType") == "Read":
        return charge.read(len(version.body) if version.body else 0)
    return charge.staged_key(writer, version.key if version is not None else (writer.pk_json, op.get("id")))


async def execute(call, container):
    atomic = call.header(H.BATCH_ATOMIC)
    if atomic is not None and atomic.lower() == "false":
        from .bulk import execute as execute_bulk
        return await execute_bulk(call, container)
    if atomic is None or atomic.lower() != "true":
        raise bad_request("A batch request needs x-ms-cosmos-batch-atomic: true (a transactional batch) or "
                          "false (bulk: each operation applied on its own).")
    pk_json, values = partition_keys.required(call, container)
    ops = operations(call)
    writer = _writer(call, container, pk_json, values)
    results = []
    for i, op in enumerate(ops):
        try:
            status, version = _run(writer, op)
        except CosmosError as e:
            failed = [{"statusCode": FAILED_DEPENDENCY, "requestCharge": 0.0}] * len(ops)
            failed = list(failed)
            failed[i] = {"statusCode": e.status, "subStatusCode": e.substatus, "requestCharge": 1.0,
                         "message": e.message}
            return responses.reply(207, failed, call.activity_id, 1.0,
                                   session_headers(call, container, writer.rs, writer.rs.committed_lsn))
        results.append(_result(status, version, op_charge(writer, op, version)))
    total = round(sum(r["requestCharge"] for r in results), 2)
    admission.write(call, writer, th.BATCH, total, len(ops))     # a 429 here leaves nothing applied
    lsn = writer.commit()
    if lsn:
        await call.gw.write_acknowledged(writer, lsn)
    hdrs = session_headers(call, container, writer.rs, lsn or writer.rs.committed_lsn)
    return responses.reply(200, results, call.activity_id, total, hdrs)
