"""A direct create or upsert gets the same reply on the lean path (no request fault anywhere) as on
the general one (taken while any request fault is on; here one in another region that touches no
East US request): the same cases run through both on a real emulator, and their replies must be
equal field by field (status, substatus, body, charge, etag shape, which LSNs are reported), for
successes, conflicts, preconditions, Prefer minimal, activity ids and every kind of bad input."""
import asyncio
import json
import re

import pytest

from regionlab.client.protocol import direct as D
from direct_client import Connection, feed, target
from sdk_harness import control, inject
from test_direct import EAST, setup

PK = '["p"]'


def cases(tag: str) -> list:
    """(op, fields) of each request; ids carry the tag, so the second pass writes new items."""
    def body(id: str, **extra) -> bytes:
        return json.dumps({"id": f"{id}-{tag}", "pk": "p", **extra}).encode()
    return [
        ("create", {"pk": PK, "body": body("n1", n=1)}),
        ("create", {"pk": PK, "body": body("n1", n=2)}),                        # 409: it exists
        ("upsert", {"pk": PK, "body": body("n1", n=3)}),                        # 200: replaced
        ("upsert", {"pk": PK, "body": body("n2")}),                             # 201: new
        ("upsert", {"pk": PK, "body": body("n1"), "if_match": '"stale"'}),      # 412
        ("create", {"pk": PK, "body": body("n3"), "prefer": "return=minimal"}),
        ("create", {"pk": PK, "body": body("n4"), "activity_id": f"act-{tag}"}),
        ("create", {"body": body("n5")}),                                       # no partition key
        ("create", {"pk": "5", "body": body("n6")}),                            # not an array
        ("create", {"pk": '["q"]', "body": body("n7")}),                        # 400: body says "p"
        ("create", {"pk": '["p", 1]', "body": body("n8")}),                     # two values, one path
        ("create", {"pk": PK}),                                                 # empty body
        ("create", {"pk": PK, "body": b"[1, 2]"}),                              # not an object
        ("create", {"pk": PK, "body": b'{"id": "x'}),                           # not JSON
        ("create", {"pk": PK, "body": json.dumps({"id": "a/b", "pk": "p"}).encode()}),   # bad id
        ("create", {"pk": PK, "body": "text, not bytes"}),
        ("create", {"pk": 7, "body": body("n9")}),
        ("create", {"pk": PK, "body": body("n10"), "session": 5}),              # an option not a string
        ("create", {"pk": PK, "body": body("n11"), "unknown_option": 1}),       # ignored
        ("upsert", {"body": body("n12"), "pk_in_options": True}),               # pk as an option
    ]


def normalized(reply: dict, tag: str) -> dict:
    out = {k: reply.get(k) for k in ("status", "sub", "charge", "role")}
    for k in ("lsn", "quorum_lsn", "global_lsn", "item_lsn", "session"):
        out[k + " given"] = reply.get(k) is not None
    etag = reply.get("etag")
    out["etag"] = None if etag is None else bool(re.fullmatch(r'"[0-9a-f-]+"', etag))
    body = reply.get("body")
    if body:
        doc = json.loads(body)
        if isinstance(doc, dict):
            for k in ("_rid", "_self", "_etag", "_ts"):
                doc.pop(k, None)
            if "message" in doc:
                doc["message"] = re.sub(r"ActivityId: [^,\s]+", "ActivityId: *", doc["message"])
        body = json.dumps(doc, sort_keys=True).replace(tag, "*")
    out["body"] = body
    activity = reply.get("activity_id")
    out["activity"] = activity.replace(tag, "*") if activity and activity.startswith("act-") else bool(activity)
    return out


async def run_cases(conn, key: str, tag: str) -> list:
    out = []
    for op, fields in cases(tag):
        fields = dict(fields)
        if fields.pop("pk_in_options", False):
            reply = await _pk_option_request(conn, op, key, fields)
        else:
            reply = await conn.request(op, key, **fields)
        out.append(((op, sorted(fields)), normalized(reply, tag)))
    return out


async def _pk_option_request(conn, op: str, key: str, fields: dict) -> dict:
    """A version 2 request with nil in the pk slot and the key in its options map."""
    conn._next_id += 1
    rid = conn._next_id
    fut = asyncio.get_running_loop().create_future()
    conn._waiting[rid] = fut
    frame = [D.REQUEST_CODE, rid, D.OPERATION_CODE[op], key, None, None, fields["body"], {"pk": PK}]
    conn.writer.write(D.encode(frame))
    return await asyncio.wait_for(fut, 10)


@pytest.mark.regionlab_config(partitions=1)
def test_lean_and_general_direct_creates_answer_alike(regionlab):
    both_paths_alike(regionlab)


@pytest.mark.regionlab_config(partitions=1, consistency="Strong")
def test_lean_and_general_direct_creates_answer_alike_when_they_wait_for_a_majority_of_regions(regionlab):
    # Under Strong a write waits for a majority of regions: the lean path answers from a task.
    both_paths_alike(regionlab)


def both_paths_alike(regionlab) -> None:
    setup(regionlab)
    (_, replicas), = feed(regionlab).items()
    host, port, key = target(replicas["primary"])

    async def main():
        conn = await Connection.open(host, port, regionlab.key)
        lean = await run_cases(conn, key, "ZQ1")
        fid = inject(regionlab, type="latency", region="West US", delay_ms=1, op="read")
        try:
            general = await run_cases(conn, key, "ZQ2")
        finally:
            assert control(regionlab, "DELETE", f"/faults/{fid}")[0] == 200
        await conn.close()
        return lean, general

    lean, general = asyncio.run(main())
    assert [r["status"] for _, r in lean][:7] == [201, 409, 200, 201, 412, 201, 201]
    assert lean[5][1]["body"] is None                       # Prefer: return=minimal
    assert lean[6][1]["activity"] == "act-*"
    for (case, a), (_, b) in zip(lean, general):
        assert a == b, f"{case}: lean {a} != general {b}"


@pytest.mark.regionlab_config(partitions=2)
def test_a_lean_create_for_a_key_of_another_range_is_410_as_on_the_general_path(regionlab):
    setup(regionlab, partitions_items=())
    ranges = feed(regionlab)
    host, port, key = target(ranges["0"]["primary"])

    async def main():
        conn = await Connection.open(host, port, regionlab.key)
        out = []
        for tag in ("lean", "general"):
            fid = None if tag == "lean" else inject(regionlab, type="latency", region="West US", delay_ms=1,
                                                     op="read")
            seen = []
            for i in range(40):      # some of these keys hash into range 1
                pk = f'["k{i}"]'
                r = await conn.request("create", key, pk=pk,
                                       body=json.dumps({"id": f"{tag}{i}", "pk": f"k{i}"}).encode())
                seen.append((r["status"], r.get("sub"), r.get("lsn") is not None))
            if fid is not None:
                control(regionlab, "DELETE", f"/faults/{fid}")
            out.append(seen)
        await conn.close()
        return out

    lean, general = asyncio.run(main())
    assert lean == general
    assert {s for s, _, _ in lean} == {201, 410}
