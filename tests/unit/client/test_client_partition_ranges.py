"""Proves the pipeline keys the circuit breaker by partition key range (client/aio/partition_ranges.py),
in virtual time over a scripted transport whose container has two ranges: failures of different
keys of one range add up and open it for every key of that range only; the ranges are read once
per container, and again after a 410/1002 says they changed; a request that names its range
(bulk) is counted in it without a lookup; a ranges read that fails leaves the request uncounted,
raises nothing to the caller and is not repeated within a second."""
import asyncio
import json

from regionlab.client import partition_key as pkmod
from regionlab.client.aio import partition_ranges as pr
from regionlab.client.protocol import headers as H

from client_world import CONTAINER, TWO_RANGES, ScriptedTransport, account_doc, container, reply, run

MULTI = account_doc(write=("East US", "West US"), read=("East US", "West US"), multi_write=True)
HIGH = [k for k in (f"k{i}" for i in range(100)) if pkmod.epk_of([k]) >= "20"][:12]     # range "1"
LOW = next(k for k in (f"k{i}" for i in range(100)) if pkmod.epk_of([k]) < "20")        # range "0"


def world(items, ranges=lambda: (0.001, reply(body={"PartitionKeyRanges": TWO_RANGES}))):
    def script(region, method, path, headers):
        if path.endswith("/colls/c"):
            return 0.001, reply(body=CONTAINER)
        if path.endswith("/colls/c/pkranges"):
            return ranges()
        return items(region, method, headers)
    return ScriptedTransport(script, MULTI)


def east_fails_high(region, method, headers):
    pk = headers.get(H.PARTITION_KEY)
    bad = region == "East US" and (headers.get(H.PK_RANGE_ID) == "1" or pk is not None and
                                   pkmod.epk_of(json.loads(pk)) >= "20")
    return 0.0, reply(503 if bad else 200)


def regions(item) -> list[str]:
    return [a.region for a in item.diagnostics.attempts]


def pkranges_reads(t) -> int:
    return sum(1 for s in t.sent if s[3].endswith("/pkranges"))


def test_ten_different_keys_of_one_range_open_it_for_that_range_only():
    t = world(east_fails_high)

    async def main():
        client, c = await container(t)
        reads = [await c.read_item("1", partition_key=k) for k in HIGH[:11]]
        low = await c.read_item("1", partition_key=LOW)
        await client.close()
        return reads, low
    reads, low = run(main())
    assert [regions(r) for r in reads] == [["East US", "West US"]] * 10 + [["West US"]]
    assert any("Unavailable" in e.detail for e in reads[9].diagnostics.events if e.kind == "breaker")
    assert regions(low) == ["East US"]
    assert pkranges_reads(t) == 1                        # read once, at the first failure


def test_a_410_1002_makes_the_next_request_read_the_ranges_again():
    gone = [True]

    def items(region, method, headers):
        if headers.get(H.PARTITION_KEY) == '["split"]' and gone:
            gone.clear()
            return 0.0, reply(410, sub=1002)
        return east_fails_high(region, method, headers)
    t = world(items)

    async def main():
        client, c = await container(t)
        await c.read_item("1", partition_key=HIGH[0])     # a failure: the ranges are read
        first = pkranges_reads(t)
        try:
            await c.read_item("1", partition_key="split")
        except Exception:                                 # how a 410/1002 ends is the retry policy's
            pass
        await c.read_item("1", partition_key=LOW)         # the breaker tracks: the range is looked up
        await client.close()
        return first, pkranges_reads(t)
    assert run(main()) == (1, 2)


def test_a_request_naming_its_range_is_counted_in_it_without_a_lookup():
    t = world(east_fails_high, ranges=lambda: (0.0, reply(404)))     # no lookup can succeed

    async def main():
        client, c = await container(t)
        c._ranges = TWO_RANGES                            # bulk's own grouping map, read before
        ops = [{"operationType": "Upsert", "resourceBody": {"id": "1", "pk": HIGH[0]}, "partitionKey": HIGH[0]}]
        for _ in range(5):
            await c.execute_bulk_operations(ops)
        state = client.circuit_breaker.state(("dbs/d/colls/c", "1"), "East US",
                                             asyncio.get_running_loop().time() * 1000)
        await client.close()
        return state
    assert run(main()) == "Unavailable" and pkranges_reads(t) == 0


def test_a_failed_ranges_read_leaves_the_request_uncounted_and_waits_a_second():
    t = world(east_fails_high, ranges=lambda: (0.0, reply(404)))

    async def main():
        client, c = await container(t)
        first = await c.read_item("1", partition_key=HIGH[0])     # answered by West US all the same
        second = await c.read_item("1", partition_key=HIGH[1])
        reads_then = pkranges_reads(t)
        await asyncio.sleep(pr.FETCH_RETRY_MS / 1000.0 + 0.001)    # past it (virtual time's float sums)
        await c.read_item("1", partition_key=HIGH[2])
        tracking = client.circuit_breaker.tracking
        await client.close()
        return first, second, reads_then, pkranges_reads(t), tracking
    first, second, reads_then, reads_after, tracking = run(main())
    assert regions(first) == regions(second) == ["East US", "West US"]
    assert (reads_then, reads_after) == (1, 2) and not tracking
