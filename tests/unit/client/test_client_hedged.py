"""Proves the pipeline's one hedge timer (client/aio/hedged.py, HedgeWatch) hedges each operation
at its own time and costs nothing else, in virtual time over a scripted transport (client_world):
of many concurrent reads only the slow one hedges, 500 ms after its own start; a read whose time
comes after the armed timer's (armed for an earlier read that finished) still hedges on time; a
request's own shorter threshold hedges on its time while the client's timer is armed for a later
one; back-to-back healthy reads arm it once
per threshold, make no task, and once they are over it disarms and keeps no entry; close()
disarms it; a first chain that fails after its hedge fired hands its failure to the race (a
transient one: the copies go on, the third on its time; a final one: it is the answer and the
copy is cancelled; any other error: it goes up once the copy is cancelled)."""
import asyncio

import pytest

from regionlab.client.aio import CosmosHttpResponseError

import client_world as world
from client_world import CONTAINER, ScriptedTransport, reply, run

FAST_S, SLOW_S = 0.010, 2.0


def serve(east_s=None, fast_s=FAST_S):
    """Item reads of an id in `east_s` take that long in East US; everything else answers in fast_s."""
    def script(region, method, path, headers):
        if path.endswith("/colls/c"):
            return 0.001, reply(body=CONTAINER)
        doc_id = path.rsplit("/", 1)[1]
        return ((east_s or {}).get(doc_id, fast_s) if region == "East US" else fast_s), reply()
    return script


async def container(transport, **kwargs):
    """client_world.container with hedging on."""
    return await world.container(transport, availability_strategy=True, **kwargs)


def hedge_watch(client):
    return client._pipeline._client_hedges


async def read_at(c, start_s, doc_id, **kwargs):
    """Read `doc_id` at virtual time start_s (driving the clock, not waiting for anything)."""
    await asyncio.sleep(start_s - asyncio.get_running_loop().time())
    return await c.read_item(doc_id, partition_key="a", **kwargs)


def plan(attempts):
    return [(a.region, a.started_ms, a.hedge) for a in attempts]


def test_of_many_concurrent_reads_only_the_slow_one_hedges_at_its_own_500_ms():
    t = ScriptedTransport(serve({"slow": SLOW_S}))

    async def main():
        client, c = await container(t)
        t0 = asyncio.get_running_loop().time()
        ids = [f"r{i}" for i in range(20)]
        ids[7] = "slow"                  # starts at t0 + 7 * 30 ms, among 19 healthy reads
        items = await asyncio.gather(*(read_at(c, t0 + i * 0.030, d) for i, d in enumerate(ids)))
        await client.close()
        return dict(zip(ids, items))
    items = run(main())
    slow = items.pop("slow").diagnostics
    assert plan(slow.attempts) == [("East US", 0.0, False), ("West US", 500.0, True)]
    assert slow.latency_ms == pytest.approx(510.0) and slow.attempts[0].error == "cancelled"
    assert all(plan(i.diagnostics.attempts) == [("East US", 0.0, False)] for i in items.values())
    assert t.regions_sent().count("West US") == 1 and "North" not in t.regions_sent()


def test_a_read_due_after_the_armed_time_of_a_finished_read_still_hedges_on_time():
    t = ScriptedTransport(serve({"slow": SLOW_S}))

    async def main():
        client, c = await container(t)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await read_at(c, t0, "fast")     # arms the timer for t0 + 500 ms, then finishes
        armed = hedge_watch(client).armed
        slow = await read_at(c, t0 + 0.100, "slow")
        await client.close()
        return armed, slow, loop.time() - t0
    armed, slow, ended_s = run(main())
    assert armed                          # the finished read's time was still armed
    assert plan(slow.diagnostics.attempts) == [("East US", 0.0, False), ("West US", 500.0, True)]
    assert ended_s == pytest.approx(0.610)


def test_a_requests_shorter_threshold_hedges_on_its_time_while_the_clients_timer_waits():
    t = ScriptedTransport(serve({"slow": SLOW_S, "long": 0.100}))

    async def main():
        client, c = await container(t)
        t0 = asyncio.get_running_loop().time()
        return await asyncio.gather(
            read_at(c, t0, "long"),       # in flight, the timer armed for its 500 ms
            read_at(c, t0 + 0.020, "slow", availability_strategy={"threshold_ms": 50, "threshold_steps_ms": 50}))
    long, slow = run(main())
    assert plan(long.diagnostics.attempts) == [("East US", 0.0, False)]
    assert plan(slow.diagnostics.attempts) == [("East US", 0.0, False), ("West US", 50.0, True)]


def test_back_to_back_healthy_reads_arm_the_timer_once_and_leave_nothing_behind():
    t = ScriptedTransport(serve(fast_s=0.001))

    async def main():
        client, c = await container(t)
        loop = asyncio.get_running_loop()
        timer = hedge_watch(client)
        tasks_before = len(asyncio.all_tasks())
        for i in range(100):             # 100 ms of reads, all within the first one's threshold
            await c.read_item(f"r{i}", partition_key="a")
        arms = [cb for cb in loop.timers_armed if getattr(cb, "__self__", None) is timer]
        during = timer.armed, len(asyncio.all_tasks()) - tasks_before, len(timer)
        await asyncio.sleep(0.5)         # past the threshold of the last read
        after = timer.armed, list(timer), [h for h in loop._scheduled if not h.cancelled()]
        await client.close()
        return len(arms), during, after
    arms, during, after = run(main())
    assert arms == 1
    assert during == (True, 0, 1)        # armed once, no task made, one (finished) entry kept
    assert after == (False, [], [])      # disarmed, no entry, no timer of anyone's left


def test_close_disarms_the_timer():
    t = ScriptedTransport(serve())

    async def main():
        client, c = await container(t)
        await c.read_item("1", partition_key="a")
        armed = hedge_watch(client).armed
        await client.close()
        loop = asyncio.get_running_loop()
        return armed, hedge_watch(client).armed, [h for h in loop._scheduled if not h.cancelled()]
    assert run(main()) == (True, False, [])


def by_region(answers):
    """Item reads answer answers[region] = (delay_s, status) in each region."""
    def script(region, method, path, headers):
        if path.endswith("/colls/c"):
            return 0.001, reply(body=CONTAINER)
        delay_s, status = answers[region]
        return delay_s, reply(status)
    return script


def test_a_transient_failure_after_the_hedge_fired_leaves_the_race_to_the_copies():
    # East US answers 503 at 550 ms (a regional 503 moves on: the pinned chain ends there); the
    # copy in West US is still out, so the race waits for it and starts North on its time, 600 ms.
    t = ScriptedTransport(by_region({"East US": (0.550, 503), "West US": (0.300, 200), "North": (1.0, 200)}))

    async def main():
        client, c = await container(t)
        item = await c.read_item("1", partition_key="a")
        await client.close()
        return item
    d = run(main()).diagnostics
    assert [(a.region, a.started_ms, a.status, a.error) for a in d.attempts] == [
        ("East US", 0.0, 503, None), ("West US", 500.0, 200, None), ("North", 600.0, None, "cancelled")]
    assert d.latency_ms == pytest.approx(800.0)


def test_a_final_error_after_the_hedge_fired_is_the_answer_and_the_copy_is_cancelled():
    t = ScriptedTransport(by_region({"East US": (0.550, 404), "West US": (1.0, 200), "North": (1.0, 200)}))

    async def main():
        client, c = await container(t)
        try:
            await c.read_item("1", partition_key="a")
        finally:
            await client.close()
    with pytest.raises(CosmosHttpResponseError) as e:
        run(main())
    d = e.value.diagnostics
    assert e.value.status_code == 404 and d.latency_ms == pytest.approx(550.0)
    assert [(a.region, a.started_ms, a.status, a.error) for a in d.attempts] == [
        ("East US", 0.0, 404, None), ("West US", 500.0, None, "cancelled")]


def test_an_error_of_the_first_chain_after_its_hedge_fired_goes_up_with_the_copy_cancelled():
    east_calls = []

    def script(region, method, path, headers):
        if path.endswith("/colls/c"):
            return 0.001, reply(body=CONTAINER)
        if region != "East US":
            return 1.0, reply()
        east_calls.append(region)
        if len(east_calls) == 1:     # throttled until 550 ms: the hedge fires at 500 meanwhile
            return 0.0, reply(429, 3200, retry_after_ms=550)
        raise ValueError("a bug in the first region's chain")
    t = ScriptedTransport(script)

    async def main():
        client, c = await container(t)
        try:
            await c.read_item("1", partition_key="a")
        finally:
            await client.close()
    with pytest.raises(ValueError):
        run(main())
    assert t.regions_sent()[1:] == ["East US", "West US", "East US"] and t.cancelled == 1   # [0]: the container
