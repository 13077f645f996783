"""Bulk: `execute_bulk_operations` (the JS SDK's `executeBulkOperations`; azure-cosmos 4.17.1 has
no bulk) sends non-atomic batches (`x-ms-cosmos-batch-atomic: false`), one stream per partition
key range, and answers one result per input operation, in input order.

Theory of operation (the decisions are client/policies/bulk.py's): the operations are grouped by
range and chunked; each range's chunks go one after another (a range's operations stay in order)
while the ranges run concurrently. Each request goes through the pipeline, so its retry, region
and session policies apply to the request as a whole (a request whose first operation is
throttled is a whole 429, which the throttle policy waits out). In a 207 reply the operations
that got 429 are resent after the largest retry-after among them; those that got 410/1002 — or a
request that did — are regrouped after a routing-map refresh. Every request's diagnostics go in
the call's diagnostics (the list's `.diagnostics`); each result carries the diagnostics of the
request that gave its final answer.
"""
import asyncio
import json

from regionlab.client import partition_key as pkmod
from regionlab.client.diagnostics import Diagnostics
from regionlab.client.exceptions import CosmosHttpResponseError
from regionlab.client.policies import bulk as policy
from regionlab.client.protocol import headers as H, status as S

from .batch_operations import OPERATION_TYPES, from_batch_tuple
from .links import link_path
from .request import Request
from .responses import CosmosDict, CosmosList, body_json, dumps

_BODY_KEYED = ("Create", "Upsert", "Replace")      # the partition key may come from the body


class _Call:
    """One execute_bulk_operations call: the operations, their answers so far, the diagnostics."""

    def __init__(self, container, wire_ops, epks, continue_on_error, options):
        self.container, self.wire_ops, self.epks = container, wire_ops, epks
        self.continue_on_error = continue_on_error
        self.options = options
        self.results: list = [None] * len(wire_ops)
        self.throttles = [0] * len(wire_ops)
        self.gone: list[int] = []
        pipeline = container.client._pipeline
        self.pipeline = pipeline
        self.diag = Diagnostics("bulk", link_path(container.link, "docs"), pipeline.now())

    def merge(self, d: Diagnostics) -> None:
        shift = (d.started_s - self.diag.started_s) * 1000.0
        for a in d.attempts:
            a.started_ms = round(a.started_ms + shift, 3)
            self.diag.attempts.append(a)
        for e in d.events:
            e.at_ms = round(e.at_ms + shift, 3)
            self.diag.events.append(e)

    def note(self, detail: str) -> None:
        self.diag.event(self.pipeline.now(), "bulk", detail)


def wire_operation(op, paths: list[str]) -> tuple[dict, list]:
    """(the operation as sent, its partition key's values) of a JS-style dict
    (`operationType`, `id`, `resourceBody`, `partitionKey`, `ifMatch`) or a batch-style tuple
    (`("create", (body,), {"partition_key": ...})`)."""
    if isinstance(op, dict):
        kind = OPERATION_TYPES.get(str(op.get("operationType", "")).lower())
        if kind is None:
            raise ValueError(f"bulk operationType must be one of {sorted(OPERATION_TYPES.values())}: {op!r}")
        out = {"operationType": kind}
        for k in ("id", "resourceBody", "ifMatch"):
            if k in op:
                out[k] = op[k]
        pk = op.get("partitionKey")
    else:
        out = from_batch_tuple(op)
        pk = (op[2] if len(op) > 2 else {}).get("partition_key")
    if pk is None:
        if out["operationType"] not in _BODY_KEYED:
            raise ValueError(f"a bulk {out['operationType']} needs its partitionKey: {op!r}")
        try:
            pk = pkmod.value_in(out["resourceBody"], paths)
        except (KeyError, TypeError):
            pk = [{}] if len(paths) == 1 else [{} for _ in paths]
    text = pkmod.header_value(pk)
    out["partitionKey"] = text
    return out, json.loads(text)


async def execute(container, operations: list, continue_on_error: bool, options: dict) -> CosmosList:
    paths = (await container._properties())["partitionKey"]["paths"]
    pairs = [wire_operation(op, paths) for op in operations]
    call = _Call(container, [w for w, _ in pairs], [pkmod.epk_of(v) for _, v in pairs],
                 continue_on_error, options)
    pending = list(range(len(pairs)))
    ranges = pkmod.RangeMap(container._ranges or await container._partition_key_ranges())
    for refresh in range(policy.GONE_REFRESHES_MAX + 1):
        groups = policy.group(call.epks, pending, ranges)
        call.note(f"{len(pending)} operations in {sum(len(c) for c in groups.values())} requests "
                  f"over {len(groups)} ranges")
        await asyncio.gather(*(_range(call, rid, chunks) for rid, chunks in groups.items()))
        pending, call.gone = sorted(call.gone), []
        if not pending:
            break
        if refresh < policy.GONE_REFRESHES_MAX:
            call.note(f"410/1002 for {len(pending)} operations: routing map refreshed")
            ranges = pkmod.RangeMap(await container._partition_key_ranges())
    for i in pending:                    # the ranges kept moving: the last answer stands
        call.results[i] = call.results[i] or _failure(S.GONE, S.SUB_PARTITION_KEY_RANGE_GONE,
                                                      "the partition key range kept moving", call.diag)
    call.diag.latency_ms = call.diag.elapsed_ms(call.pipeline.now())
    failed = [r for r in call.results if r["statusCode"] >= 400]
    call.diag.status = S.MULTI_STATUS if failed else S.OK
    return CosmosList([_output(r, operations[i]) for i, r in enumerate(call.results)], None, call.diag)


async def _range(call: _Call, range_id: str, chunks: list[list[int]]) -> None:
    for chunk in chunks:
        todo = chunk
        while todo:
            todo = await _send(call, range_id, todo)


async def _send(call: _Call, range_id: str, indices: list[int]) -> list[int]:
    """Send one request; record the final answers; the indices to resend (after their wait)."""
    c = call.container
    headers = {H.IS_BATCH: "True", H.BATCH_ATOMIC: "False",
               H.BATCH_CONTINUE_ON_ERROR: "True" if call.continue_on_error else "False",
               H.PK_RANGE_ID: range_id, H.CONTENT_TYPE: "application/json"}
    req = Request("POST", link_path(c.link, "docs"), "bulk", headers,
                  dumps([call.wire_ops[i] for i in indices]), is_write=True, is_document=True,
                  idempotent=False, collection=c.link, **call.options)
    try:
        reply, diag = await call.pipeline.execute(req)
        answers = body_json(reply) or []
    except CosmosHttpResponseError as e:
        if e.diagnostics is not None:
            call.merge(e.diagnostics)
        if (e.status_code, e.sub_status) == (S.GONE, S.SUB_PARTITION_KEY_RANGE_GONE):
            call.gone.extend(indices)
            return []
        for i in indices:                # the request as a whole failed: so did each of its operations
            call.results[i] = _failure(e.status_code, e.sub_status or 0, e.message, e.diagnostics)
        return []
    call.merge(diag)
    again, wait_ms = [], 0.0
    for i, answer in zip(indices, answers):
        kind, wait = policy.verdict(answer, call.throttles[i])
        if kind == policy.THROTTLED:
            call.throttles[i] += 1
            again.append(i)
            wait_ms = max(wait_ms, wait)
        elif kind == policy.GONE:
            call.gone.append(i)
        else:
            call.results[i] = {**answer, "diagnostics": diag}
    if again:
        call.note(f"range {range_id}: {len(again)} operations throttled (429): resent after {wait_ms:g} ms")
        await call.pipeline.wait_ms(wait_ms)
    return again


def _failure(status, sub, message, diag) -> dict:
    return {"statusCode": status, "subStatusCode": sub, "requestCharge": 0.0, "message": message,
            "diagnostics": diag}


def _output(result: dict, op) -> CosmosDict:
    """One operation's answer: statusCode, subStatusCode, requestCharge, eTag, resourceBody
    (as the service sends them), operationInput, and `.diagnostics`."""
    diag = result.pop("diagnostics", None)
    out = {"statusCode": result["statusCode"], "subStatusCode": result.get("subStatusCode", 0),
           "requestCharge": result.get("requestCharge", 0.0), "eTag": result.get("eTag"),
           "resourceBody": result.get("resourceBody"), "operationInput": op}
    if "message" in result:
        out["message"] = result["message"]
    return CosmosDict(out, None, diag)
