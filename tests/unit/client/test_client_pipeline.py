"""Proves the pipeline applies the policies as they decide, in virtual time over a scripted
transport (client_world): hedged reads start the second region at exactly 500 ms, take its
answer and cancel the first (a healthy one runs inline in the caller's task and leaves no timer
but the pipeline's one shared hedge timer;
the third region follows at 600 ms; a copy that answers while the first sleeps in a back-off
wins; a fast 503 in the first region starts the next copy at once; the end-to-end timeout
cancels the inline chain and every copy); the end-to-end timeout cancels the attempt in flight at exactly 3 s;
429s are waited out by their retry-after; 403/3 refreshes the account and follows the new write
region; per-request exclusions route reads; repeated 503s open the circuit breaker so the next
read of that partition goes elsewhere first (and with circuit_breaker=False never do); reads carry the region-scoped session token; the
periodic account refresh runs in the background without holding a request, and a caller
cancelled during a shared refresh leaves it to the others; while the write region does not
answer writes (503, or a write the end-to-end timeout cut off) the account is read once a second
and writes go to the new write region within a second of the failover; every
attempt, hedge and decision is in the diagnostics with its charge."""
import asyncio

import pytest

from regionlab.client.aio import CosmosClient, CosmosClientTimeoutError, CosmosHttpResponseError
from regionlab.client.aio.transport import TransportError
from regionlab.client.policies.regions import FAILOVER_REFRESH_MS
from regionlab.client.policies.retry import CONNECT_ERROR

from client_world import (CONTAINER, GLOBAL, TWO_RANGES, KEY, ScriptedTransport, VirtualTimeLoop, account_doc, container,
                          reply, run)



def serve(items):
    """A script: container reads answer CONTAINER, its partition key ranges TWO_RANGES; item
    requests answer items(region, method, headers)."""
    def script(region, method, path, headers):
        if path.endswith("/colls/c"):
            return 0.001, reply(body=CONTAINER)
        if path.endswith("/colls/c/pkranges"):
            return 0.001, reply(body={"PartitionKeyRanges": TWO_RANGES})
        return items(region, method, headers)
    return script


def test_a_slow_region_is_hedged_at_500_ms_and_the_hedge_wins():
    t = ScriptedTransport(serve(lambda r, m, h: (2.0, reply(charge=1.0)) if r == "East US"
                                else (0.010, reply(charge=1.5))))

    async def main():
        client, c = await container(t, availability_strategy=True)
        item = await c.read_item("1", partition_key="a")
        await client.close()
        return item
    item = run(main())
    d = item.diagnostics
    assert [(a.region, a.started_ms, a.hedge) for a in d.attempts] == [("East US", 0.0, False),
                                                                       ("West US", 500.0, True)]
    assert d.attempts[0].error == "cancelled" and t.cancelled == 1
    assert d.latency_ms == pytest.approx(510.0)
    assert d.hedges == 1 and any(e.kind == "hedge" for e in d.events)


def test_a_healthy_hedged_read_runs_in_the_callers_task_and_leaves_only_the_shared_timer():
    tasks = []

    def items(r, m, h):
        tasks.append(asyncio.current_task())
        return 0.010, reply()
    t = ScriptedTransport(serve(items))

    async def main():
        client, c = await container(t, availability_strategy=True)
        item = await c.read_item("1", partition_key="a")
        loop = asyncio.get_running_loop()
        live = [repr(h) for h in loop._scheduled if not h.cancelled()]     # timers still armed
        await client.close()
        return item, asyncio.current_task(), live
    item, me, live = run(main())
    assert tasks[-1] is me                       # the read ran inline: no task was made for it
    assert [a.region for a in item.diagnostics.attempts] == ["East US"] and item.diagnostics.hedges == 0
    assert len(live) == 1 and "HedgeWatch._fire" in live[0]     # no HedgedRun timer


def test_the_timer_rearms_for_the_third_region_and_the_losers_are_cancelled():
    t = ScriptedTransport(serve(lambda r, m, h: (0.010, reply()) if r == "North" else (2.0, reply())))

    async def main():
        client, c = await container(t, availability_strategy=True)
        item = await c.read_item("1", partition_key="a")
        await client.close()
        return item
    d = run(main()).diagnostics
    assert [(a.region, a.started_ms, a.hedge) for a in d.attempts] == [
        ("East US", 0.0, False), ("West US", 500.0, True), ("North", 600.0, True)]
    assert [a.error for a in d.attempts[:2]] == ["cancelled", "cancelled"] and t.cancelled == 2
    assert d.latency_ms == pytest.approx(610.0) and d.hedges == 2


def test_a_hedged_copy_answering_while_the_first_retries_wins():
    # East US is throttled (retry-after 400 ms, twice): the inline chain is asleep in its back-off
    # when West US's copy answers; the back-off is cut short.
    t = ScriptedTransport(serve(lambda r, m, h: (0.0, reply(429, 3200, retry_after_ms=400)) if r == "East US"
                                else (0.020, reply())))

    async def main():
        client, c = await container(t, availability_strategy=True)
        item = await c.read_item("1", partition_key="a")
        await client.close()
        return item
    d = run(main()).diagnostics
    assert [(a.region, a.started_ms, a.status) for a in d.attempts] == [
        ("East US", 0.0, 429), ("East US", 400.0, 429), ("West US", 500.0, 200)]
    assert d.latency_ms == pytest.approx(520.0)


def test_a_fast_transient_failure_of_the_first_region_starts_the_next_copy_at_once():
    t = ScriptedTransport(serve(lambda r, m, h: (0.010, reply(503)) if r == "East US" else (0.010, reply())))

    async def main():
        client, c = await container(t, availability_strategy=True)
        item = await c.read_item("1", partition_key="a")
        await client.close()
        return item
    d = run(main()).diagnostics
    assert [(a.region, a.started_ms, a.hedge, a.status) for a in d.attempts] == [
        ("East US", 0.0, False, 503), ("West US", 10.0, True, 200)]
    assert d.latency_ms == pytest.approx(20.0)


def test_the_end_to_end_timeout_cancels_the_inline_chain_and_every_hedge():
    t = ScriptedTransport(serve(lambda r, m, h: (10.0, reply())))

    async def main():
        client, c = await container(t, availability_strategy=True, timeout=1)
        try:
            await c.read_item("1", partition_key="a")
        finally:
            await client.close()
    with pytest.raises(CosmosClientTimeoutError) as e:
        run(main())
    d = e.value.diagnostics
    assert [(a.region, a.started_ms, a.error) for a in d.attempts] == [
        ("East US", 0.0, "cancelled"), ("West US", 500.0, "cancelled"), ("North", 600.0, "cancelled")]
    assert t.cancelled == 3 and d.latency_ms == pytest.approx(1000.0)


def test_no_hedge_after_a_fast_non_transient_error():
    t = ScriptedTransport(serve(lambda r, m, h: (0.010, reply(404, 0)) if r == "East US" else (0.010, reply())))

    async def main():
        client, c = await container(t, availability_strategy=True)
        try:
            await c.read_item("1", partition_key="a")
        finally:
            await client.close()
    with pytest.raises(CosmosHttpResponseError) as e:
        run(main())
    assert e.value.status_code == 404 and [a.region for a in e.value.diagnostics.attempts] == ["East US"]


def test_the_end_to_end_timeout_cancels_every_attempt():
    t = ScriptedTransport(serve(lambda r, m, h: (10.0, reply())))

    async def main():
        client, c = await container(t, timeout=3)
        try:
            await c.read_item("1", partition_key="a")
        finally:
            await client.close()
    with pytest.raises(CosmosClientTimeoutError) as e:
        run(main())
    assert e.value.status_code == 408 and e.value.diagnostics.latency_ms == pytest.approx(3000.0)
    assert t.cancelled == 1 and e.value.diagnostics.attempts[0].error == "cancelled"


def throttled_read(retry_after_ms: int, throttles: int, loop_class=None):
    """The diagnostics of one point read answered 429/3200 `throttles` times, then 200."""
    answers = iter([reply(429, 3200, retry_after_ms=retry_after_ms, charge=0)] * throttles + [reply(charge=2.0)])
    t = ScriptedTransport(serve(lambda r, m, h: (0.0, next(answers))))

    async def main():
        client, c = await container(t)
        item = await c.read_item("1", partition_key="a")
        await client.close()
        return item
    return run(main(), loop_class).diagnostics


def test_throttling_is_waited_out_by_the_retry_after():
    d = throttled_read(100, 3)
    assert [a.status for a in d.attempts] == [429, 429, 429, 200]
    assert [a.started_ms for a in d.attempts] == pytest.approx([0, 100, 200, 300])
    assert d.attempts[1].reason.startswith("429/3200 throttled: retry-after 100 ms")
    assert d.request_charge == 2.0


def test_write_forbidden_refreshes_the_account_and_follows_the_new_write_region():
    t = ScriptedTransport(None)

    def items(region, method, headers):
        if region == "East US":
            t.account = account_doc(write=("West US",), read=("West US", "East US"))
            return 0.0, reply(403, 3)
        return 0.0, reply(201)
    t.script = serve(items)

    async def main():
        client, c = await container(t)
        item = await c.create_item({"id": "1", "pk": "a"})
        await client.close()
        return item
    d = run(main()).diagnostics
    assert [(a.region, a.status) for a in d.attempts] == [("East US", 403), ("West US", 201)]
    assert "403/3" in d.attempts[1].reason and any(e.kind == "account" for e in d.events)


def test_a_request_can_exclude_regions():
    t = ScriptedTransport(serve(lambda r, m, h: (0.0, reply())))

    async def main():
        client, c = await container(t, preferred_locations=["East US", "West US"])
        item = await c.read_item("1", partition_key="a", excluded_locations=["East US"])
        client.excluded_locations = lambda: ["West US"]
        other = await c.read_item("1", partition_key="a")
        await client.close()
        return item, other
    item, other = run(main())
    assert item.diagnostics.regions_contacted == ["West US"]
    assert other.diagnostics.regions_contacted == ["East US"]


def test_a_refused_connection_moves_the_read_to_the_next_region():
    refused = TransportError(CONNECT_ERROR, "refused")
    t = ScriptedTransport(serve(lambda r, m, h: (0.0, refused) if r == "East US" else (0.0, reply())))

    async def main():
        client, c = await container(t)
        item = await c.read_item("1", partition_key="a")
        await client.close()
        return item
    d = run(main()).diagnostics
    assert [(a.region, a.error is not None) for a in d.attempts] == [("East US", True), ("East US", True),
                                                                      ("West US", False)]


def test_repeated_failures_open_the_breaker_for_that_partition():
    doc = account_doc(write=("East US", "West US"), read=("East US", "West US"), multi_write=True)
    t = ScriptedTransport(serve(lambda r, m, h: (0.0, reply(503)) if r == "East US" and
                                h.get("x-ms-documentdb-partitionkey") == '["a"]' else (0.0, reply())), doc)

    async def main():
        client, c = await container(t)
        for _ in range(10):                     # each read fails once in East US, then West US answers
            last = await c.read_item("1", partition_key="a")
        after = await c.read_item("1", partition_key="a")
        other = await c.read_item("1", partition_key="b")
        await client.close()
        return last, after, other
    last, after, other = run(main())
    assert any(e.kind == "breaker" and "Unavailable" in e.detail for e in last.diagnostics.events)
    assert [a.region for a in after.diagnostics.attempts] == ["West US"]
    assert [a.region for a in other.diagnostics.attempts] == ["East US"]


def test_without_the_breaker_repeated_failures_keep_the_region_order():
    doc = account_doc(write=("East US", "West US"), read=("East US", "West US"), multi_write=True)
    t = ScriptedTransport(serve(lambda r, m, h: (0.0, reply(503)) if r == "East US" else (0.0, reply())), doc)

    async def main():
        client, c = await container(t, circuit_breaker=False)
        reads = [await c.read_item("1", partition_key="a") for _ in range(8)]
        await client.close()
        return client, reads
    client, reads = run(main())
    assert client.circuit_breaker is None
    # A regional 503 moves on at once (no local retry); without the breaker East US stays first.
    assert all([a.region for a in r.diagnostics.attempts] == ["East US", "West US"] for r in reads)
    assert not any(e.kind == "breaker" for r in reads for e in r.diagnostics.events)


class SlowRefresh(ScriptedTransport):
    """Every account read after the first takes 1 s."""
    async def send(self, endpoint, method, path, headers, body):
        if path == "/" and self.account_reads:
            await asyncio.sleep(1.0)
        return await super().send(endpoint, method, path, headers, body)


def test_a_caller_timed_out_during_a_shared_account_refresh_does_not_cancel_the_others():
    doc = account_doc(write=("East US",), read=("East US", "West US"))
    t = SlowRefresh(serve(lambda r, m, h: (0.0, reply(503)) if r == "East US" else (0.0, reply())), doc)

    async def main():
        client, c = await container(t)
        # Both reads get a regional 503 and wait for one account refresh; the first times out in it.
        first = asyncio.ensure_future(c.read_item("1", partition_key="a", timeout=0.5))
        second = asyncio.ensure_future(c.read_item("1", partition_key="b"))
        done = await asyncio.gather(first, second, return_exceptions=True)
        await client.close()
        return done
    first, second = run(main())
    assert isinstance(first, CosmosClientTimeoutError)
    assert isinstance(second, dict)
    assert [(a.region, a.status) for a in second.diagnostics.attempts] == [("East US", 503), ("West US", 200)]


def test_reads_carry_the_region_scoped_session_token():
    def items(region, method, headers):
        if method == "POST":
            return 0.0, reply(201, session="0:-1#7")
        return 0.0, reply()
    t = ScriptedTransport(serve(items))

    async def main():
        client, c = await container(t)
        await c.create_item({"id": "1", "pk": "a"})
        item = await c.read_item("1", partition_key="a")
        await client.close()
        return item
    d = run(main()).diagnostics
    assert t.sent[-1][4]["x-ms-session-token"] == "0:-1#7"
    assert any(e.kind == "session" and "region-scoped" in e.detail for e in d.events)
    assert "x-ms-session-token" not in t.sent[-2][4]          # single-write writes send none


def test_the_periodic_account_refresh_runs_in_the_background():
    t = ScriptedTransport(serve(lambda r, m, h: (0.005, reply())))

    async def main():
        client, c = await container(t, account_refresh_interval_ms=1000)
        reads_at_start = t.account_reads
        await asyncio.sleep(1.5)
        item = await c.read_item("1", partition_key="a")
        await asyncio.sleep(0)                      # let the background refresh run
        await client.close()
        return reads_at_start, item
    reads_at_start, item = run(main())
    assert t.account_reads == reads_at_start + 1
    assert not any(e.kind == "account" for e in item.diagnostics.events)
    assert item.diagnostics.latency_ms == pytest.approx(5.0)


def test_circuit_breaker_settings_and_the_sdks_retry_names_reach_the_policies():
    doc = account_doc(write=("East US", "West US"), read=("East US", "West US"), multi_write=True)
    t = ScriptedTransport(serve(lambda r, m, h: (0.0, reply(503)) if r == "East US" else (0.0, reply())), doc)

    async def main():
        client, c = await container(t, circuit_breaker={"read_failures_tolerated": 2, "check_interval_ms": 1000},
                                    retry_throttle_total=4, retry_backoff_max=12)
        reads = [await c.read_item("1", partition_key="a") for _ in range(3)]
        await client.close()
        return client, reads
    client, reads = run(main())
    assert client.circuit_breaker.read_failures_tolerated == 2
    assert client.circuit_breaker.check_interval_ms == 1000
    assert [a.region for a in reads[2].diagnostics.attempts] == ["West US"]   # opened after 2 failures
    options = client._pipeline.retry_options
    assert (options.throttle_retries_max, options.throttle_wait_ms_max) == (4, 12_000)


@pytest.mark.parametrize("mode", ["gateway", "direct"])
def test_the_connect_timeout_reaches_the_gateway_pools_too(mode):
    async def main():
        client = CosmosClient(GLOBAL, KEY, connection_mode=mode, connect_timeout_s=2.5, request_timeout_s=4)
        transport = client._pipeline.transport
        gateway = transport.gateway if mode == "direct" else transport
        pool = gateway.pool("http://east/")
        if mode == "direct":
            assert (transport.options.connect_timeout_s, transport.options.request_timeout_s) == (2.5, 4)
        await client.close()
        return pool.connect_timeout_s, pool.request_timeout_s
    assert run(main()) == (2.5, 4)


@pytest.mark.parametrize("credential", [None, "", {"resourceTokens": {}}, 42])
def test_a_credential_that_is_not_a_key_is_refused_clearly(credential):
    with pytest.raises(TypeError, match="credential must be the account key"):
        CosmosClient(GLOBAL, credential)


class EarlyTimersLoop(VirtualTimeLoop):
    """A loop whose timers end EARLY_S early by its own clock, as uvloop's do by the client's
    perf_counter when they are armed from a loop time cached before the request was handled."""
    EARLY_S = 0.00022

    def call_at(self, when, callback, *args, context=None):
        return super().call_at(when - self.EARLY_S, callback, *args, context=context)


def test_a_retry_after_is_a_floor_by_the_clients_clock_even_when_a_timer_ends_early():
    d = throttled_read(20, 2, EarlyTimersLoop)
    assert [a.status for a in d.attempts] == [429, 429, 200]
    gaps = [b.started_ms - a.started_ms for a, b in zip(d.attempts, d.attempts[1:])]
    # At least the 20 ms asked for, and no more than one loop tick beyond it.
    assert all(20 <= g <= 21 for g in gaps), gaps


def test_writes_follow_the_account_within_a_second_once_the_write_region_stops_answering():
    # East US answers every write 503 (a region outage); the service fails over to West US at 2.5 s.
    t = ScriptedTransport(None)
    failover_s = 2.5

    def items(region, method, headers):
        if asyncio.get_running_loop().time() >= failover_s:
            t.account = account_doc(write=("West US",), read=("West US", "East US", "North"))
        return 0.001, reply(503 if region == "East US" else 201)
    t.script = serve(items)

    async def main():
        client, c = await container(t)
        reads_before = t.account_reads
        first = None
        for i in range(100):                    # the application writes every 50 ms
            try:
                first = await c.create_item({"id": str(i), "pk": "a"})
                break
            except CosmosHttpResponseError as e:
                assert e.status_code == 503
            await asyncio.sleep(0.05)
        await client.close()
        return first, t.account_reads - reads_before, asyncio.get_running_loop().time()
    first, account_reads, at_s = run(main())
    assert [(a.region, a.status) for a in first.diagnostics.attempts] == [("West US", 201)]
    assert failover_s <= at_s <= failover_s + FAILOVER_REFRESH_MS / 1000 + 0.06
    assert account_reads <= failover_s / (FAILOVER_REFRESH_MS / 1000) + 2      # once a second, not per write


def test_a_write_the_end_to_end_timeout_cut_off_in_the_write_region_starts_the_failover_refresh():
    t = ScriptedTransport(serve(lambda r, m, h: (100.0, reply(201)) if r == "East US" else (0.001, reply(201))))

    async def main():
        client, c = await container(t)
        with pytest.raises(CosmosClientTimeoutError):
            await c.create_item({"id": "1", "pk": "a"}, timeout=0.5)       # a blackhole
        t.account = account_doc(write=("West US",), read=("West US", "East US"))
        reads, loop = t.account_reads, asyncio.get_running_loop()
        # The account was read at t = 0; the next read is due a FAILOVER_REFRESH_MS later.
        await asyncio.sleep(FAILOVER_REFRESH_MS / 1000 * 0.9 - loop.time())
        with pytest.raises(CosmosClientTimeoutError):
            await c.create_item({"id": "2", "pk": "a"}, timeout=0.05)      # no refresh due yet
        assert t.account_reads == reads
        await asyncio.sleep(FAILOVER_REFRESH_MS / 1000 - loop.time())
        item = await c.create_item({"id": "3", "pk": "a"})     # waits for the refresh now due
        await client.close()
        return item
    item = run(main())
    assert [(a.region, a.status) for a in item.diagnostics.attempts] == [("West US", 201)]
    assert any(e.kind == "account" and "not answering" in e.detail for e in item.diagnostics.events)
