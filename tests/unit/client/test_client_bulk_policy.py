"""Proves bulk (execute_bulk_operations) groups operations by partition key range in chunks of at
most 100, runs the ranges concurrently, resends only the operations a 207 answered 429 (after
their retry-after, exactly, in virtual time), regroups after 410/1002 with a refreshed routing
map, and answers one result per input operation in input order with the diagnostics; over a
scripted transport (client_world) that plays a two-range container."""
import asyncio
import base64
import json

from regionlab.client import partition_key as pkmod
from regionlab.client.aio import CosmosClient
from regionlab.client.policies import bulk as policy
from regionlab.client.protocol import headers as H

from client_world import GLOBAL, ScriptedTransport, reply, run

KEY = base64.b64encode(b"k" * 32).decode()
CONTAINER = {"id": "c", "_self": "dbs/x/colls/y/", "partitionKey": {"paths": ["/pk"], "kind": "Hash"}}
# V2 hashes keep the top two bits clear: p0, p1, p6 hash below 08, p2..p5 above
TWO_RANGES = [{"id": "0", "minInclusive": "", "maxExclusive": "08"},
              {"id": "1", "minInclusive": "08", "maxExclusive": "FF"}]
THREE_RANGES = [{"id": "2", "minInclusive": "", "maxExclusive": "05"},
                {"id": "3", "minInclusive": "05", "maxExclusive": "08"},
                {"id": "1", "minInclusive": "08", "maxExclusive": "FF"}]


def range_of(pk, ranges=TWO_RANGES) -> str:
    return policy.RangeMap(ranges).range_of(pkmod.epk_of([pk]))


class Service:
    """A two-range container's bulk endpoint: `answer(range_id, op, n)` gives an operation's
    result the n-th time it is sent (0-based)."""

    def __init__(self, answer, ranges=TWO_RANGES):
        self.answer, self.ranges = answer, ranges
        self.sent_to: dict[str, int] = {}
        self.requests: list[tuple] = []       # (virtual ms, range id, [op ids])
        self.pkrange_reads = 0

    def script(self, region, method, path, headers):
        if path.endswith("/colls/c"):
            return 0.001, reply(body=CONTAINER)
        if path.endswith("/pkranges"):
            self.pkrange_reads += 1
            return 0.001, reply(body={"PartitionKeyRanges": self.ranges})
        return 0.010, None                     # the body is answered in send (it needs the ops)


class BulkTransport(ScriptedTransport):
    def __init__(self, service):
        super().__init__(service.script)
        self.service = service

    async def send(self, endpoint, method, path, headers, body):
        if not headers.get(H.IS_BATCH):
            return await super().send(endpoint, method, path, headers, body)
        s = self.service
        assert headers[H.BATCH_ATOMIC] == "False"
        rid = headers[H.PK_RANGE_ID]
        ops = json.loads(body)
        assert len(ops) <= policy.BULK_OPERATIONS_MAX
        s.requests.append((asyncio.get_running_loop().time() * 1000, rid, [o.get("id") or o["resourceBody"]["id"] for o in ops]))
        await asyncio.sleep(0.010)
        if rid not in {r["id"] for r in s.ranges}:
            return reply(410, 1002, body={"message": "gone"})
        out = []
        for o in ops:
            key = o.get("id") or o["resourceBody"]["id"]
            n = s.sent_to.get(key, 0)
            s.sent_to[key] = n + 1
            out.append(s.answer(rid, o, n))
        status = 200 if all(r["statusCode"] < 400 for r in out) else 207
        return reply(status, body=out, charge=sum(r["requestCharge"] for r in out))


def created(op):
    return {"statusCode": 201, "requestCharge": 5.0, "eTag": f'"{op["resourceBody"]["id"]}"',
            "resourceBody": op["resourceBody"]}


async def open_container(t):
    client = CosmosClient(GLOBAL, KEY, transport=t, clock=asyncio.get_running_loop().time)
    await client.__aenter__()
    c = client.get_database_client("d").get_container_client("c")
    await c.read()
    return client, c


def creates(n):
    return [{"operationType": "Create", "resourceBody": {"id": f"i{k}", "pk": f"p{k % 7}"}} for k in range(n)]


def bulk(service, ops, **kw):
    t = BulkTransport(service)

    async def main():
        client, c = await open_container(t)
        t0 = asyncio.get_running_loop().time()
        out = await c.execute_bulk_operations(ops, **kw)
        elapsed_ms = (asyncio.get_running_loop().time() - t0) * 1000
        await client.close()
        return out, elapsed_ms
    return run(main())


def test_operations_are_grouped_by_range_in_chunks_of_100_and_answered_in_input_order():
    s = Service(lambda rid, op, n: created(op))
    ops = creates(450)
    out, _ = bulk(s, ops)
    assert [r["resourceBody"]["id"] for r in out] == [f"i{k}" for k in range(450)]
    assert all(r["statusCode"] == 201 and r["requestCharge"] == 5.0 for r in out)
    assert out[3]["operationInput"] is ops[3] and out[3]["eTag"] == '"i3"'
    for _, rid, ids in s.requests:       # every request holds only its range's keys
        assert {range_of(f"p{int(i[1:]) % 7}") for i in ids} == {rid}
    per_range = {rid: sum(1 for o in ops if range_of(o["resourceBody"]["pk"]) == rid) for rid in ("0", "1")}
    assert all(per_range.values())
    assert sorted(len(ids) for _, _, ids in s.requests) == sorted(
        [100] * (per_range["0"] // 100) + [per_range["0"] % 100] * bool(per_range["0"] % 100)
        + [100] * (per_range["1"] // 100) + [per_range["1"] % 100] * bool(per_range["1"] % 100))
    assert out.request_charge == 450 * 5.0
    assert out.diagnostics.status == 200 and len(out.diagnostics.attempts) == len(s.requests)


def test_the_ranges_run_concurrently():
    s = Service(lambda rid, op, n: created(op))
    out, elapsed_ms = bulk(s, creates(20))
    starts = sorted(ms for ms, _, _ in s.requests)
    assert len(starts) == 2 and starts[0] == starts[1]    # both ranges' requests left at once


def test_only_the_throttled_operations_are_resent_after_their_retry_after():
    throttled = {"i1", "i4", "i9"}

    def answer(rid, op, n):
        if op["resourceBody"]["id"] in throttled and n == 0:
            return {"statusCode": 429, "subStatusCode": 3200, "requestCharge": 0.0, "retryAfterMilliseconds": 250}
        return created(op)
    s = Service(answer)
    out, _ = bulk(s, creates(10))
    assert all(r["statusCode"] == 201 for r in out)
    first = min(ms for ms, _, _ in s.requests)
    resends = [(ms - first, ids) for ms, _, ids in s.requests if ms > first]
    assert sorted(i for _, ids in resends for i in ids) == sorted(throttled)
    # each resend leaves exactly 250 ms after the 10 ms reply that throttled it
    assert {round(ms) for ms, _ in resends} == {260}
    assert sum(s.sent_to.values()) == 10 + len(throttled)
    assert any(e.kind == "bulk" and "throttled" in e.detail for e in out.diagnostics.events)


def test_an_operation_throttled_past_the_retry_budget_answers_429():
    s = Service(lambda rid, op, n: {"statusCode": 429, "subStatusCode": 3200, "requestCharge": 0.0,
                                    "retryAfterMilliseconds": 100} if op["resourceBody"]["id"] == "i0"
                else created(op))
    out, _ = bulk(s, creates(3))
    assert [r["statusCode"] for r in out] == [429, 201, 201]
    assert s.sent_to["i0"] == policy.THROTTLE_RETRIES_MAX + 1


def test_a_split_range_is_regrouped_after_a_routing_map_refresh():
    s = Service(lambda rid, op, n: created(op))
    t = BulkTransport(s)

    async def main():
        client, c = await open_container(t)
        await c.read_feed_ranges()                      # the client knows the two-range map
        s.ranges = THREE_RANGES                          # range 0 splits into 2 and 3
        out = await c.execute_bulk_operations(creates(40))
        await client.close()
        return out
    out = run(main())
    assert [r["statusCode"] for r in out] == [201] * 40
    gone_ids = {i for _, rid, ids in s.requests if rid == "0" for i in ids}
    assert gone_ids and all(s.sent_to[i] == 1 for i in gone_ids)   # the 410 applied nothing
    assert {rid for _, rid, _ in s.requests} == {"0", "1", "2", "3"}
    assert any("410/1002" in e.detail for e in out.diagnostics.events)


def test_failures_are_per_operation_and_the_rest_succeed():
    s = Service(lambda rid, op, n: {"statusCode": 409, "requestCharge": 1.0, "message": "exists"}
                if op["resourceBody"]["id"] == "i2" else created(op))
    out, _ = bulk(s, creates(5))
    assert [r["statusCode"] for r in out] == [201, 201, 409, 201, 201]
    assert out.diagnostics.status == 207 and out[2].diagnostics is not None


def test_grouping_keeps_input_order_within_a_range():
    ranges = policy.RangeMap(TWO_RANGES)
    epks = [pkmod.epk_of([f"k{i}"]) for i in range(250)]
    groups = policy.group(epks, range(250), ranges)
    for rid, chunks in groups.items():
        flat = [i for c in chunks for i in c]
        assert flat == sorted(flat) and all(len(c) <= 100 for c in chunks)
        assert all(ranges.range_of(epks[i]) == rid for i in flat)
    assert sorted(i for cs in groups.values() for c in cs for i in c) == list(range(250))


def test_direct_mode_sends_bulk_through_the_gateway_and_batches_to_the_replicas():
    from regionlab.client.aio.direct import route_of
    bulk_headers = {H.IS_BATCH: "True", H.BATCH_ATOMIC: "False", H.PK_RANGE_ID: "0"}
    assert route_of("POST", "/dbs/d/colls/c/docs", bulk_headers) is None
    batch = route_of("POST", "/dbs/d/colls/c/docs", {H.IS_BATCH: "True", H.BATCH_ATOMIC: "True",
                                                    H.PARTITION_KEY: '["p"]'})
    assert batch is not None and batch.pk == '["p"]'
