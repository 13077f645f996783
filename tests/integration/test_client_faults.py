"""Proves the bundled client's availability policies against the real emulator under the
request faults of the catalogue, judged by the client's diagnostics and the emulator's per-region
reply counters (GET /topology `requests`): a `latency` fault of 1 s on the preferred region's
reads is hedged and the next region answers, with no hedge once it is healed; an `error` 503 on
one partition of one region of a multi-write account opens that partition's circuit breaker
after 10 failed reads (5 failed writes) so its requests go to the next region first while the
other partition stays, and after the fault is healed and the breaker's 30 s (the client's
injected clock, moved on — no test waits) the next request probes and the region serves again;
`error` 429/3200 is waited out by its retry-after; `timeout_after_apply` on a create leaves the
client unable to tell (diagnostics say the outcome is unknown), and with the non-idempotent
opt-in on a multi-write account the retry meets the applied create as 409; `region_outage` in
each mode (`unavailable`, `refuse`, `reset`, `blackhole` with a 0.5 s request timeout) moves
reads to the next region, in gateway and direct mode; under a 1 s `latency` the end-to-end
timeout (per client, per request, or none per request) cancels every attempt, hedges included,
and raises 408. The latency and error faults act on
gateway replies only (the direct nodes do not apply request faults), so those tests run in
gateway mode. Real sockets; no sleeps."""
import time

import pytest

from regionlab.client import (CosmosClient, CosmosClientTimeoutError, CosmosHttpResponseError, CosmosResourceExistsError,
                    PartitionKey)
from regionlab.client import partition_key as pkmod
from regionlab.client.policies import breaker as cb
from sdk_harness import doc_hits, no_lag

REGIONS = ("East US", "East US 2", "West US")
EAST, EAST2, WEST = REGIONS
NO_LAG = no_lag(REGIONS)
HEDGE = {"threshold_ms": 500, "threshold_steps_ms": 100}
OUTAGE_REQUEST_TIMEOUT_S = 0.5           # a blackholed region's attempt gives up after this


class MovableClock:
    """perf_counter plus an offset the test moves on: the client's timers (breaker, unavailable
    regions) see time pass without the test waiting for it."""

    def __init__(self):
        self.offset_s = 0.0

    def __call__(self) -> float:
        return time.perf_counter() + self.offset_s

    def advance(self, seconds: float) -> None:
        self.offset_s += seconds


def path(d) -> list:
    return [(a.region, a.status) for a in d.attempts]


def partition_of(emu, container: str, pk) -> str:
    epk = pkmod.epk_of([pk])
    for db in emu.topology()["databases"]:
        for c in db["containers"]:
            if c["id"] == container:
                for p in c["partitions"]:
                    if p["minInclusive"] <= epk < p["maxExclusive"]:
                        return p["id"]
    raise AssertionError(f"no partition of {container} holds {pk!r}")


def keys_in_two_partitions(emu, container: str) -> tuple[str, str, str, str]:
    """(key a, its partition, key b, its partition) with the partitions different."""
    seen = {}
    for k in range(64):
        seen.setdefault(partition_of(emu, container, f"k{k}"), f"k{k}")
        if len(seen) == 2:
            (pa, a), (pb, b) = seen.items()
            return a, pa, b, pb
    raise AssertionError("every key fell in one partition")


# ---- hedging under latency -------------------------------------------------------------------
@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_a_second_of_latency_on_the_preferred_region_is_hedged_and_only_then(regionlab):
    emu = regionlab
    with CosmosClient(emu.endpoint, credential=emu.key, preferred_locations=[EAST, EAST2],
                      availability_strategy=HEDGE) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "1", "pk": "p"})
        calm = c.read_item("1", partition_key="p")
        before = emu.topology()["requests"]
        with emu.faults.latency(EAST, delay_ms=1000, op="read"):
            slow = c.read_item("1", partition_key="p")
        hits = doc_hits(emu, before)
        healed = c.read_item("1", partition_key="p")
    assert path(calm.diagnostics) == [(EAST, 200)] and calm.diagnostics.hedges == 0
    d = slow.diagnostics
    assert [(a.region, a.hedge, a.started_ms >= 500) for a in d.attempts] == [(EAST, False, False),
                                                                              (EAST2, True, True)]
    assert d.attempts[0].error == "cancelled" and d.attempts[1].status == 200
    assert d.hedges == 1 and any(e.kind == "hedge" for e in d.events)
    assert d.latency_ms < 1000                     # the hedge answered before the held reply
    assert hits[EAST2] == {"GET 200": 1}
    assert path(healed.diagnostics) == [(EAST, 200)] and healed.diagnostics.hedges == 0


# ---- the partition-level circuit breaker under an error fault ---------------------------------
@pytest.mark.regionlab_config(multi_write=True, lag_ms=NO_LAG, partitions=2)
def test_503s_on_one_partition_open_its_breaker_and_it_closes_after_30_s(regionlab):
    emu = regionlab
    clock = MovableClock()
    with CosmosClient(emu.endpoint, credential=emu.key, preferred_locations=[EAST, EAST2],
                      clock=clock) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        bad, bad_range, good, _ = keys_in_two_partitions(emu, "c")
        for k in (bad, good):
            c.create_item({"id": "1", "pk": k})
        fault = emu.faults.error(EAST, status=503, op="read", database="db", container="c", partition=bad_range)
        before = emu.topology()["requests"]
        reads = [c.read_item("1", partition_key=bad) for _ in range(11)]
        other = c.read_item("1", partition_key=good)
        hits = doc_hits(emu, before)
        fault.heal()
        still_open = c.read_item("1", partition_key=bad)
        clock.advance(cb.UNAVAILABLE_MS / 1000.0 + 1)
        probe = c.read_item("1", partition_key=bad)
        after = c.read_item("1", partition_key=bad)
    # 1 failure per read (a 503 moves on at once), the 10th read's opens it
    assert [path(r.diagnostics) for r in reads] == [[(EAST, 503), (EAST2, 200)]] * 10 + [[(EAST2, 200)]]
    assert not any(e.kind == "breaker" for e in reads[8].diagnostics.events)
    assert any(e.kind == "breaker" and cb.UNAVAILABLE in e.detail for e in reads[9].diagnostics.events)
    assert path(other.diagnostics) == [(EAST, 200)]           # the other partition stays
    assert hits[EAST] == {"GET 503": 10, "GET 200": 1} and hits[EAST2] == {"GET 200": 11}
    assert path(still_open.diagnostics) == [(EAST2, 200)]     # healed, but the 30 s are not up
    assert path(probe.diagnostics) == [(EAST, 200)]           # HealthyTentative: the probe succeeds
    assert any(e.kind == "breaker" and cb.HEALTHY in e.detail for e in probe.diagnostics.events)
    assert path(after.diagnostics) == [(EAST, 200)]


@pytest.mark.regionlab_config(multi_write=True, lag_ms=NO_LAG, partitions=2)
def test_503s_on_writes_of_one_partition_open_its_breaker_after_5(regionlab):
    emu = regionlab
    with CosmosClient(emu.endpoint, credential=emu.key, preferred_locations=[EAST, EAST2]) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        bad, bad_range, good, _ = keys_in_two_partitions(emu, "c")
        c.upsert_item({"id": "warm", "pk": bad})
        before = emu.topology()["requests"]
        with emu.faults.error(EAST, status=503, op="write", database="db", container="c", partition=bad_range):
            writes = [c.upsert_item({"id": str(i), "pk": bad}) for i in range(6)]
            other = c.upsert_item({"id": "o", "pk": good})
        hits = doc_hits(emu, before)
    assert [path(w.diagnostics) for w in writes] == [
        [(EAST, 503), (EAST2, 201)]] * 5 + [[(EAST2, 201)]]         # new items: 201
    assert path(other.diagnostics) == [(EAST, 201)]
    assert hits[EAST] == {"POST 503": 5, "POST 201": 1} and hits[EAST2] == {"POST 201": 6}


# ---- throttling and indefinite outcomes ------------------------------------------------------
def test_an_error_fault_of_429_3200_is_waited_out_by_its_retry_after(regionlab):
    emu = regionlab
    with CosmosClient(emu.endpoint, credential=emu.key) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "1", "pk": "p"})
        emu.faults.error(EAST, status=429, substatus=3200, op="read", count=3)
        r = c.read_item("1", partition_key="p")
    d = r.diagnostics
    assert [(a.region, a.status, a.sub_status) for a in d.attempts] == [(EAST, 429, 3200)] * 3 + [(EAST, 200, 0)]
    for prev, nxt in zip(d.attempts, d.attempts[1:]):
        assert nxt.reason.startswith("429/3200 throttled: retry-after 100 ms")
        assert nxt.started_ms - prev.started_ms >= 100


def test_a_create_timed_out_after_apply_is_not_retried_and_its_outcome_is_unknown(regionlab):
    emu = regionlab
    with CosmosClient(emu.endpoint, credential=emu.key) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.read()
        with emu.faults.timeout_after_apply(EAST, op="write"):
            with pytest.raises(CosmosHttpResponseError) as e:
                c.create_item({"id": "1", "pk": "p"})
        item = c.read_item("1", partition_key="p")         # it was applied
    d = e.value.diagnostics
    assert len(d.attempts) == 1 and d.attempts[0].status is None and d.attempts[0].outcome_unknown
    assert "outcome unknown" in str(e.value)
    assert item["id"] == "1"


@pytest.mark.regionlab_config(multi_write=True, lag_ms=NO_LAG)
def test_with_the_opt_in_the_retried_create_meets_itself_as_409(regionlab):
    emu = regionlab
    with CosmosClient(emu.endpoint, credential=emu.key, preferred_locations=[EAST, EAST2],
                      non_idempotent_write_retry=True) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.read()
        before = emu.topology()["requests"]
        with emu.faults.timeout_after_apply(EAST, op="write"):
            with pytest.raises(CosmosResourceExistsError) as e:
                c.create_item({"id": "1", "pk": "p"})
        hits = doc_hits(emu, before)
    d = e.value.diagnostics
    assert d.attempts[0].status is None and d.attempts[0].outcome_unknown
    assert d.attempts[-1].status == 409
    assert sum(n for r in hits.values() for k, n in r.items() if k.startswith("POST 201")) == 1


# ---- a regional 503 moves on at once -----------------------------------------------------------
@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_every_read_in_an_unavailable_outage_leaves_the_region_after_one_503(regionlab):
    """region_outage mode `unavailable` answers every data request 503: each read goes to the
    next preferred region right after the first 503 (no local retry, no back-off: the attempt's
    reason says why), nothing marks the region down, so once healed it serves again at once."""
    emu = regionlab
    with CosmosClient(emu.endpoint, credential=emu.key, preferred_locations=[EAST2, WEST]) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "1", "pk": "p"})
        c.read_item("1", partition_key="p")
        with emu.faults.region_outage(EAST2, mode="unavailable"):
            before = emu.topology()["requests"]
            during = [c.read_item("1", partition_key="p") for _ in range(3)]
            hits = doc_hits(emu, before)
        healed = c.read_item("1", partition_key="p")
    for r in during:
        assert path(r.diagnostics) == [(EAST2, 503), (WEST, 200)]
        assert r.diagnostics.attempts[1].reason == "503/0: next region"
    assert hits == {EAST2: {"GET 503": 3}, WEST: {"GET 200": 3}}
    assert path(healed.diagnostics) == [(EAST2, 200)]


# ---- region outage in every mode, both connection modes ----------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("connection_mode", ["gateway", "direct"])
@pytest.mark.parametrize("mode", ["unavailable", "refuse", "reset", "blackhole"])
@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_reads_leave_a_region_in_outage_in_every_mode(regionlab, mode, connection_mode):
    emu = regionlab
    with CosmosClient(emu.endpoint, credential=emu.key, preferred_locations=[EAST2, WEST],
                      connection_mode=connection_mode, request_timeout_s=OUTAGE_REQUEST_TIMEOUT_S) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "1", "pk": "p", "n": 1})
        first = c.read_item("1", partition_key="p")
        with emu.faults.region_outage(EAST2, mode=mode):
            before = emu.topology()
            during = c.read_item("1", partition_key="p")
            after = emu.topology()
            hits = doc_hits(emu, before["requests"])
    assert first.diagnostics.regions_contacted == [EAST2]
    d = during.diagnostics
    assert during["n"] == 1 and d.regions_contacted == [EAST2, WEST]
    assert d.attempts[-1].region == WEST and d.attempts[-1].status == 200
    failed = d.attempts[:-1]
    assert failed and all(a.region == EAST2 for a in failed)
    if mode == "unavailable" and connection_mode == "gateway":
        assert all(a.status == 503 for a in failed)
    elif connection_mode == "gateway":
        assert all(a.status is None and a.error for a in failed)
    if connection_mode == "gateway" and mode == "unavailable":
        assert hits.get(EAST2) == {"GET 503": 1}        # no local retry after the region's 503
    if connection_mode == "gateway":
        assert hits.get(WEST) == {"GET 200": 1}
    else:
        replicas = d.attempts[-1].direct["replicas"]
        assert replicas and {r["region"] for r in replicas} == {WEST}
        west = lambda t: t["direct_requests"].get(WEST, {}).get("read 200", 0)
        assert west(after) - west(before) == 1             # West US's replicas served it


# ---- the end-to-end timeout under latency ------------------------------------------------------
E2E_TIMEOUT_S = 0.3
LOOP_TICK_MS = 2                         # uvloop's timers tick in whole ms; diagnostics use perf_counter


@pytest.mark.slow
@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_the_end_to_end_timeout_cancels_every_attempt_per_client_and_per_request(regionlab):
    emu = regionlab
    with CosmosClient(emu.endpoint, credential=emu.key, preferred_locations=[EAST, EAST2],
                      timeout=E2E_TIMEOUT_S) as timed, \
            CosmosClient(emu.endpoint, credential=emu.key, preferred_locations=[EAST, EAST2]) as plain:
        c = timed.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "1", "pk": "p"})
        p = plain.get_database_client("db").get_container_client("c")
        with emu.faults.latency(EAST, delay_ms=1000, op="read"):
            with pytest.raises(CosmosClientTimeoutError) as client_level:
                c.read_item("1", partition_key="p")
            with pytest.raises(CosmosClientTimeoutError) as request_level:
                p.read_item("1", partition_key="p", timeout=E2E_TIMEOUT_S)
            hedged_ok = c.read_item("1", partition_key="p", availability_strategy={"threshold_ms": 100})
            with emu.faults.latency(EAST2, delay_ms=1000, op="read"):
                with pytest.raises(CosmosClientTimeoutError) as hedged:     # both copies cancelled
                    c.read_item("1", partition_key="p", availability_strategy={"threshold_ms": 100})
            overridden = c.read_item("1", partition_key="p", timeout=None)   # the request's own: none
        fast = c.read_item("1", partition_key="p")
    for e in (client_level.value, request_level.value):
        d = e.diagnostics
        assert (e.status_code, d.status) == (408, 408) and "end-to-end timeout" in e.message
        assert [(a.region, a.error) for a in d.attempts] == [(EAST, "cancelled")]
        assert E2E_TIMEOUT_S * 1000 - LOOP_TICK_MS <= d.latency_ms < 1000
    assert path(hedged_ok.diagnostics) == [(EAST, None), (EAST2, 200)]        # the hedge beat the timeout
    d = hedged.value.diagnostics
    assert [(a.region, a.hedge, a.error) for a in d.attempts] == [(EAST, False, "cancelled"),
                                                                  (EAST2, True, "cancelled")]
    assert path(overridden.diagnostics) == [(EAST, 200)] and overridden.diagnostics.latency_ms >= 1000
    assert path(fast.diagnostics) == [(EAST, 200)]
