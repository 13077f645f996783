"""Transactional batch: every operation of one logical partition, all or nothing. (A batch with
`x-ms-cosmos-batch-atomic: false` is bulk: gateway/bulk.py.)

The partition key comes only from the request header (cosmos-wire §5.6). Operations run in
order inside one core Writer; the first failure rolls the whole batch back (nothing was
staged into the store), keeps its own status code and gives every other operation 424, and
the reply is HTTP 207. A successful batch commits under a single LSN, so no replica ever shows
half of it.
"""
from json.encoder import encode_basestring

from regionlab.client.protocol import headers as H

from ..core import charge, jsontext
from ..core import throttle as th
from ..core.errors import CosmosError, bad_request
from . import admission, partition_keys, responses
from .documents import _check_item, _writer, patch_request
from .sessions import session_headers
from ..core.limits import BATCH_MAX_OPERATIONS, ITEM_MAX_BYTES

FAILED_DEPENDENCY = 424
ID_OPERATIONS = frozenset(("Read", "Replace", "Delete", "Patch"))     # addressed by 'id'
# How much longer JSON text can get when it is parsed and written again compactly: only a short
# float grows ("1e15" is written 1000000000000000.0, 4.5x); whitespace goes, strings keep or
# shorten their escapes, and every other token is written as it came. So no item of a request
# body of up to ITEM_MAX_BYTES // REENCODED_GROWTH_MAX bytes can be over ITEM_MAX_BYTES once
# re-encoded, and such a batch need not encode each item a second time to measure it.
REENCODED_GROWTH_MAX = 5
UNMEASURED_BODY_BYTES_MAX = ITEM_MAX_BYTES // REENCODED_GROWTH_MAX


def _shown(value) -> str:
    text = jsontext.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _not_an_etag(name: str, value) -> CosmosError:
    return bad_request(f"The batch operation's '{name}' must be an etag string; got {_shown(value)}.")


def _run(writer, op: dict, measure: bool = True):
    """(status, version) of one operation staged into writer. measure=False: the request body
    is too small for any item in it to exceed ITEM_MAX_BYTES (see REENCODED_GROWTH_MAX)."""
    kind = op.get("operationType")
    body = op.get("resourceBody")
    if_match = op.get("ifMatch")
    if kind in ID_OPERATIONS and not isinstance(op.get("id"), str):
        raise bad_request(f"A batch {kind} needs the item's 'id' as a string; got {_shown(op.get('id'))}.")
    if_none_match = op.get("ifNoneMatch")
    if if_match is not None and not isinstance(if_match, str):
        raise _not_an_etag("ifMatch", if_match)
    if if_none_match is not None and not isinstance(if_none_match, str):
        raise _not_an_etag("ifNoneMatch", if_none_match)
    if kind == "Create":                # the common case first: a bulk load is all creates
        _check_item(body, len(jsontext.dumps_bytes(body)) if measure else 0)
        return writer.create(body)
    if kind in ("Upsert", "Replace"):
        _check_item(body, len(jsontext.dumps_bytes(body)) if measure else 0)
    if kind == "Upsert":
        return writer.upsert(body, if_match)
    if kind == "Replace":
        return writer.replace(op.get("id"), body, if_match)
    if kind == "Delete":
        return writer.delete(op.get("id"), if_match)
    if kind == "Read":
        return writer.read(op.get("id"), if_none_match)
    if kind == "Patch":
        operations, condition = patch_request(body)
        return writer.patch(op.get("id"), operations, condition, if_match)
    raise bad_request(f"Unknown batch operationType {kind!r}: use Create, Upsert, Read, Replace, Delete or Patch.")


def _result(status: int, version, ru: float) -> dict:
    """One operation's result; its resourceBody is the version's stored body (bytes), which
    encode_results splices into the reply as it is."""
    out = {"statusCode": status, "requestCharge": ru}
    if version is not None:
        out["eTag"] = version.etag
        if status != 204:
            out["resourceBody"] = version.body
    return out


def encode_results(results: list) -> bytes:
    """The reply body of a batch or bulk request: the results as a JSON array, each stored body
    spliced in as it is stored. A stored body is exactly the compact JSON of its document, so this
    is byte for byte what encoding the parsed documents gave, without parsing or encoding them."""
    parts = []
    heads: dict = {}                # the operations of one commit share an etag, and most a charge
    for r in results:
        body = r.get("resourceBody")
        ru = r["requestCharge"]
        if type(body) is bytes and len(r) == 4 and type(ru) is float and type(r["eTag"]) is str:
            shape = (r["statusCode"], ru, r["eTag"])
            head = heads.get(shape)
            if head is None:
                head = heads[shape] = b'{"statusCode":%d,"requestCharge":%b,"eTag":%b,"resourceBody":' % (
                    shape[0], float.__repr__(ru).encode(), encode_basestring(shape[2]).encode())
            parts += (b",", head, body, b"}")
        elif type(body) is bytes:
            head = jsontext.dumps_bytes({k: v for k, v in r.items() if k != "resourceBody"})
            parts += (b",", head[:-1], b',"resourceBody":', body, b"}")
        else:
            parts += (b",", jsontext.dumps_bytes(r))
    if not parts:
        return b"[]"
    parts[0] = b"["                 # the first result's comma
    parts.append(b"]")
    return b"".join(parts)


def operations(call) -> list:
    """The batch body: a non-empty array of at most BATCH_MAX_OPERATIONS operation objects."""
    ops = call.json_body()
    if not isinstance(ops, list) or not ops:
        raise bad_request("A batch body must be a non-empty JSON array of operations.")
    if len(ops) > BATCH_MAX_OPERATIONS:
        raise bad_request(f"A batch may hold at most {BATCH_MAX_OPERATIONS} operations; this one has {len(ops)}.")
    for i, op in enumerate(ops):
        if not isinstance(op, dict):
            raise bad_request(f"Batch operation {i} is not a JSON object.")
    return ops


def op_charge(writer, op: dict, version) -> float:
    if op.get("operationType") == "Read":
        return charge.read(len(version.body) if version.body else 0)
    return charge.staged_key(writer, version.key if version is not None else (writer.pk_json, op.get("id")))


def is_bulk(call) -> bool:
    """Whether a batch request is bulk (x-ms-cosmos-batch-atomic: false: each operation applied
    on its own, service/bulk.py) rather than a transactional batch."""
    atomic = call.header(H.BATCH_ATOMIC)
    return atomic is not None and atomic.lower() == "false"


async def execute(call, container):
    atomic = call.header(H.BATCH_ATOMIC)
    if atomic is None or atomic.lower() != "true":
        raise bad_request("A batch request needs x-ms-cosmos-batch-atomic: true (a transactional batch) or "
                          "false (bulk: each operation applied on its own).")
    pk_json, values = partition_keys.required(call, container)
    ops = operations(call)
    writer = _writer(call, container, pk_json, values)
    measure = len(call.raw) > UNMEASURED_BODY_BYTES_MAX
    results = []
    for i, op in enumerate(ops):
        try:
            status, version = _run(writer, op, measure)
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
        await call.svc.write_acknowledged(call, writer, lsn)
    hdrs = session_headers(call, container, writer.rs, lsn or writer.rs.committed_lsn)
    return responses.reply(200, encode_results(results), call.activity_id, total, hdrs)
