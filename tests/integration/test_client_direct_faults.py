"""Proves the bundled client's availability policies in direct mode under the request faults of
the catalogue, which the emulator's nodes apply to their replies as the gateways do (the
gateway-mode versions are test_client_faults.py): a `latency` fault of 1 s on the preferred
region's reads is hedged to the next region's replicas; `error` 503s on one partition of one
region of a multi-write account open that partition's circuit breaker after 10 failed reads (5
failed writes; a partition opened by reads sends its writes elsewhere too); `error` 429/3200 is
waited out by its retry-after; `timeout_after_apply` on a create is not retried and its outcome
is unknown, unless the non-idempotent opt-in retries it in the next region, where it meets
itself as 409; the end-to-end timeout cancels a held read. Judged
by the client's diagnostics and the nodes' reply counters (`GET /topology` `direct_requests`).
Real sockets; no sleeps."""
import pytest

from regionlab.client import (CosmosClientTimeoutError, CosmosHttpResponseError, CosmosResourceExistsError,
                    PartitionKey)
from regionlab.client.policies import breaker as cb

from sdk_harness import direct_client, no_lag
from test_client_faults import keys_in_two_partitions, path

REGIONS = ("East US", "East US 2", "West US")
EAST, EAST2, WEST = REGIONS
NO_LAG = no_lag(REGIONS)
HEDGE = {"threshold_ms": 500, "threshold_steps_ms": 100}
E2E_TIMEOUT_S = 0.3
LOOP_TICK_MS = 2                         # uvloop's timers tick in whole ms; diagnostics use perf_counter


def node_hits(emu, before) -> dict:
    """Replies the nodes of each region gave since `before` (a topology): {region: {"read 200": n}}."""
    out = {}
    for region, counts in emu.topology()["direct_requests"].items():
        for key, n in counts.items():
            n -= before["direct_requests"].get(region, {}).get(key, 0)
            if n:
                out.setdefault(region, {})[key] = n
    return out


@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_a_second_of_latency_on_the_preferred_regions_replicas_is_hedged(regionlab):
    emu = regionlab
    with direct_client(emu, preferred_locations=[EAST, EAST2], availability_strategy=HEDGE) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "1", "pk": "p"})
        calm = c.read_item("1", partition_key="p")
        before = emu.topology()
        with emu.faults.latency(EAST, delay_ms=1000, op="read"):
            slow = c.read_item("1", partition_key="p")
        hits = node_hits(emu, before)
        healed = c.read_item("1", partition_key="p")
    assert path(calm.diagnostics) == [(EAST, 200)] and calm.diagnostics.hedges == 0
    d = slow.diagnostics
    assert [(a.region, a.hedge, a.error, a.status) for a in d.attempts] == [(EAST, False, "cancelled", None),
                                                                            (EAST2, True, None, 200)]
    assert d.attempts[1].started_ms >= 500 and d.latency_ms < 1000
    assert {r["region"] for r in d.attempts[1].direct["replicas"]} == {EAST2}
    assert hits[EAST2] == {"read 200": 1}
    assert path(healed.diagnostics) == [(EAST, 200)] and healed.diagnostics.hedges == 0


@pytest.mark.regionlab_config(multi_write=True, lag_ms=NO_LAG, partitions=2)
def test_503s_from_one_partitions_replicas_open_its_breaker(regionlab):
    emu = regionlab
    with direct_client(emu, preferred_locations=[EAST, EAST2]) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        bad, bad_range, good, good_range = keys_in_two_partitions(emu, "c")
        for k in (bad, good):
            c.create_item({"id": "1", "pk": k})
        before = emu.topology()
        with emu.faults.error(EAST, status=503, op="read", database="db", container="c", partition=bad_range):
            reads = [c.read_item("1", partition_key=bad) for _ in range(11)]
            other = c.read_item("1", partition_key=good)
        hits = node_hits(emu, before)
        with emu.faults.error(EAST, status=503, op="write", database="db", container="c", partition=bad_range):
            writes = [c.upsert_item({"id": f"w{i}", "pk": bad}) for i in range(2)]
        with emu.faults.error(EAST, status=503, op="write", database="db", container="c", partition=good_range):
            good_writes = [c.upsert_item({"id": f"w{i}", "pk": good}) for i in range(6)]
    assert [path(r.diagnostics) for r in reads] == [[(EAST, 503), (EAST2, 200)]] * 10 + [[(EAST2, 200)]]
    assert any(e.kind == "breaker" and cb.UNAVAILABLE in e.detail for e in reads[9].diagnostics.events)
    assert path(other.diagnostics) == [(EAST, 200)]
    assert hits[EAST] == {"read 503": 10, "read 200": 1} and hits[EAST2] == {"read 200": 11}
    # the reads opened it for this partition in East US: the writes go to East US 2 first already
    assert [path(w.diagnostics) for w in writes] == [[(EAST2, 201)]] * 2
    # the other partition's writes: 5 failures open it for writes
    assert [path(w.diagnostics) for w in good_writes] == [[(EAST, 503), (EAST2, 201)]] * 5 + [[(EAST2, 201)]]


def test_an_error_fault_of_429_3200_from_the_replicas_is_waited_out(regionlab):
    emu = regionlab
    with direct_client(emu) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "1", "pk": "p"})
        emu.faults.error(EAST, status=429, substatus=3200, op="read", count=3)
        r = c.read_item("1", partition_key="p")
    d = r.diagnostics
    assert [(a.region, a.status, a.sub_status) for a in d.attempts] == [(EAST, 429, 3200)] * 3 + [(EAST, 200, 0)]
    for prev, nxt in zip(d.attempts, d.attempts[1:]):
        assert nxt.reason.startswith("429/3200 throttled: retry-after 100 ms")
        assert nxt.started_ms - prev.started_ms >= 100
        assert prev.direct["replicas"]


def test_a_create_timed_out_after_apply_on_the_primary_is_not_retried(regionlab):
    emu = regionlab
    with direct_client(emu) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.read()
        with emu.faults.timeout_after_apply(EAST, op="write"):
            with pytest.raises(CosmosHttpResponseError) as e:
                c.create_item({"id": "1", "pk": "p"})
        item = c.read_item("1", partition_key="p")         # it was applied
    d = e.value.diagnostics
    assert len(d.attempts) == 1 and d.attempts[0].status is None and d.attempts[0].outcome_unknown
    assert "outcome unknown" in str(e.value) and item["id"] == "1"


@pytest.mark.regionlab_config(multi_write=True, lag_ms=NO_LAG)
def test_with_the_opt_in_the_retried_create_meets_itself_as_409_in_direct_mode(regionlab):
    emu = regionlab
    with direct_client(emu, preferred_locations=[EAST, EAST2], non_idempotent_write_retry=True) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.read()
        before = emu.topology()
        with emu.faults.timeout_after_apply(EAST, op="write"):
            with pytest.raises(CosmosResourceExistsError) as e:
                c.create_item({"id": "1", "pk": "p"})
        hits = node_hits(emu, before)
    d = e.value.diagnostics
    assert d.attempts[0].status is None and d.attempts[0].outcome_unknown and d.attempts[-1].status == 409
    assert sum(n for r in hits.values() for k, n in r.items() if k.startswith("create 201")) == 1


@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_the_end_to_end_timeout_cancels_a_held_direct_read(regionlab):
    emu = regionlab
    with direct_client(emu, preferred_locations=[EAST, EAST2], timeout=E2E_TIMEOUT_S) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "1", "pk": "p"})
        with emu.faults.latency(EAST, delay_ms=1000, op="read"):
            with pytest.raises(CosmosClientTimeoutError) as e:
                c.read_item("1", partition_key="p")
        after = c.read_item("1", partition_key="p")       # the connection still serves
    d = e.value.diagnostics
    assert e.value.status_code == 408 and [(a.region, a.error) for a in d.attempts] == [(EAST, "cancelled")]
    assert E2E_TIMEOUT_S * 1000 - LOOP_TICK_MS <= d.latency_ms < 1000
    assert path(after.diagnostics) == [(EAST, 200)]
