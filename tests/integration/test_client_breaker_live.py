"""Proves the bundled client's partition-level circuit breaker against a real 3-region emulator
with a request fault (`error` 503) on one partition key range of one region: it counts failures
per (container, partition key range, region) whatever keys hit the range (15 different keys,
one request each, open it: 10 failed reads or 5 failed writes); once open, reads and writes of
the range both go to the next region first, so the client never reads the range in one region
and writes it in another, while the other range stays; after 30 s on the client's clock (an
injected clock the test moves on: nothing waits 30 s) the range is HealthyTentative, the next
request probes the region, a failed probe opens it again for another 30 s and a successful one
closes it; the background sweep moves an expired range to HealthyTentative with no request (its
60 s period set to 100 ms here); a single-write account's reads are never re-ordered by it.
The 15 keys open it in direct mode too (the nodes apply the fault to their replies). Judged by
each operation's diagnostics and the emulator's per-region reply counters. Real sockets, gateway
mode but where said; no sleeps."""
import logging
import threading
import time

import pytest

from regionlab.client import CosmosClient, PartitionKey
from regionlab.client import partition_key as pkmod
from regionlab.client.policies import breaker as cb
from sdk_harness import direct_client, doc_hits, no_lag
from test_client_direct_faults import node_hits
from test_client_faults import MovableClock, path

REGIONS = ("East US", "East US 2", "West US")
EAST, EAST2, WEST = REGIONS
NO_LAG = no_lag(REGIONS)
KEYS = 15                                # different keys of the failing range, each used once
SWEEP_MS = 100                           # the background sweep's period in the sweep test
SWEEP_WAIT_S = 10.0                      # generous: a loaded 2-core machine


def breaker_events(d) -> list[str]:
    return [e.detail for e in d.events if e.kind == "breaker"]


def ranges_of(emu, container: str) -> list[dict]:
    for db in emu.topology()["databases"]:
        for c in db["containers"]:
            if c["id"] == container:
                return c["partitions"]
    raise AssertionError(f"no container {container}")


def keys_by_range(emu, container: str, n: int) -> tuple[str, list[str], str]:
    """(the id of the range the first key falls in, n different keys in it, a key of another range)."""
    ranges = ranges_of(emu, container)
    assert len(ranges) >= 2

    def range_of(key):
        epk = pkmod.epk_of([key])
        return next(r["id"] for r in ranges if r["minInclusive"] <= epk < r["maxExclusive"])
    bad = range_of("k0")
    inside = [k for k in (f"k{i}" for i in range(20 * n)) if range_of(k) == bad][:n]
    other = next(k for k in (f"o{i}" for i in range(200)) if range_of(k) != bad)
    assert len(inside) == n
    return bad, inside, other


def setup(client, emu, n=KEYS):
    c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
    bad, keys, other = keys_by_range(emu, "c", n)
    for k in keys + [other]:
        c.create_item({"id": "1", "pk": k})
    return c, bad, keys, other


@pytest.mark.regionlab_config(multi_write=True, lag_ms=NO_LAG, partitions=2)
def test_fifteen_keys_of_one_failing_range_open_it_and_its_writes_move_with_its_reads(regionlab):
    emu = regionlab
    with CosmosClient(emu.endpoint, credential=emu.key, preferred_locations=[EAST, EAST2]) as client:
        c, bad, keys, other = setup(client, emu)
        with emu.faults.error(EAST, status=503, op="read", database="db", container="c", partition=bad):
            before = emu.topology()["requests"]
            reads = [c.read_item("1", partition_key=k) for k in keys]
            write = c.upsert_item({"id": "w", "pk": keys[0]})        # writes are not faulted
            other_read = c.read_item("1", partition_key=other)
            other_write = c.upsert_item({"id": "w", "pk": other})
            hits = doc_hits(emu, before)
    # one failure per read (a 503 moves on at once); the 10th key's read opens the range
    assert [path(r.diagnostics) for r in reads] == [[(EAST, 503), (EAST2, 200)]] * 10 + [[(EAST2, 200)]] * 5
    assert not any(breaker_events(r.diagnostics) for r in reads[:9])
    assert breaker_events(reads[9].diagnostics) == [f"partition key range {bad} of dbs/db/colls/c in {EAST}: "
                                                    f"{cb.UNAVAILABLE}"]
    assert path(write.diagnostics) == [(EAST2, 201)]       # the range's writes follow its reads
    assert path(other_read.diagnostics) == [(EAST, 200)]   # the other range stays
    assert path(other_write.diagnostics) == [(EAST, 201)]
    assert hits[EAST] == {"GET 503": 10, "GET 200": 1, "POST 201": 1}
    assert hits[EAST2] == {"GET 200": 15, "POST 201": 1}
    assert client.circuit_breaker.state(("dbs/db/colls/c", bad), EAST, time.perf_counter() * 1000) == cb.UNAVAILABLE


@pytest.mark.regionlab_config(multi_write=True, lag_ms=NO_LAG, partitions=2)
def test_in_direct_mode_fifteen_keys_of_the_failing_ranges_replicas_open_it(regionlab):
    emu = regionlab
    with direct_client(emu, preferred_locations=[EAST, EAST2]) as client:
        c, bad, keys, other = setup(client, emu)
        with emu.faults.error(EAST, status=503, op="read", database="db", container="c", partition=bad):
            before = emu.topology()
            reads = [c.read_item("1", partition_key=k) for k in keys]
            write = c.upsert_item({"id": "w", "pk": keys[0]})
            other_read = c.read_item("1", partition_key=other)
            hits = node_hits(emu, before)
    assert [path(r.diagnostics) for r in reads] == [[(EAST, 503), (EAST2, 200)]] * 10 + [[(EAST2, 200)]] * 5
    assert [cb.UNAVAILABLE in e for e in breaker_events(reads[9].diagnostics)] == [True]
    assert path(write.diagnostics) == [(EAST2, 201)] and path(other_read.diagnostics) == [(EAST, 200)]
    assert all(a.direct and not a.direct["fallback"] for r in reads for a in r.diagnostics.attempts)  # replicas
    assert sum(n for k, n in hits[EAST].items() if "503" in k) == 10


@pytest.mark.regionlab_config(multi_write=True, lag_ms=NO_LAG, partitions=2)
def test_five_failed_writes_of_different_keys_open_the_range_for_its_reads_too(regionlab):
    emu = regionlab
    with CosmosClient(emu.endpoint, credential=emu.key, preferred_locations=[EAST, EAST2]) as client:
        c, bad, keys, other = setup(client, emu, n=8)
        with emu.faults.error(EAST, status=503, op="write", database="db", container="c", partition=bad):
            before = emu.topology()["requests"]
            writes = [c.upsert_item({"id": "1", "pk": k, "v": 1}) for k in keys[:6]]
            reads = [c.read_item("1", partition_key=k) for k in keys[6:]]     # reads are not faulted
            other_read = c.read_item("1", partition_key=other)
            hits = doc_hits(emu, before)
    assert [path(w.diagnostics) for w in writes] == [[(EAST, 503), (EAST2, 200)]] * 5 + [[(EAST2, 200)]]
    assert any(cb.UNAVAILABLE in e for e in breaker_events(writes[4].diagnostics))
    assert [path(r.diagnostics) for r in reads] == [[(EAST2, 200)]] * 2   # the range's reads follow its writes
    assert path(other_read.diagnostics) == [(EAST, 200)]
    assert hits[EAST] == {"POST 503": 5, "GET 200": 1} and hits[EAST2] == {"POST 200": 6, "GET 200": 2}


@pytest.mark.regionlab_config(multi_write=True, lag_ms=NO_LAG, partitions=2)
def test_after_30_s_a_probe_decides_a_failed_one_opens_it_again_and_a_good_one_closes_it(regionlab):
    emu = regionlab
    clock = MovableClock()
    with CosmosClient(emu.endpoint, credential=emu.key, preferred_locations=[EAST, EAST2],
                      clock=clock) as client:
        c, bad, keys, _ = setup(client, emu, n=12)
        fault = emu.faults.error(EAST, status=503, op="read", database="db", container="c", partition=bad)
        opened = [c.read_item("1", partition_key=k) for k in keys[:10]]
        clock.advance(cb.UNAVAILABLE_MS / 1000.0 + 1)
        failed_probe = c.read_item("1", partition_key=keys[10])
        reopened = c.read_item("1", partition_key=keys[11])
        clock.advance(cb.UNAVAILABLE_MS / 1000.0 - 2)
        not_yet = c.read_item("1", partition_key=keys[0])       # 28 s after the failed probe
        fault.heal()
        clock.advance(3)
        probe = c.read_item("1", partition_key=keys[1])
        closed = [c.read_item("1", partition_key=k) for k in keys[2:5]]
    assert breaker_events(opened[-1].diagnostics) and cb.UNAVAILABLE in breaker_events(opened[-1].diagnostics)[0]
    # HealthyTentative: the probe goes to East US, fails, and the range is Unavailable again
    assert path(failed_probe.diagnostics) == [(EAST, 503), (EAST2, 200)]
    assert [e.endswith(cb.UNAVAILABLE) for e in breaker_events(failed_probe.diagnostics)] == [True]
    assert path(reopened.diagnostics) == [(EAST2, 200)]
    assert path(not_yet.diagnostics) == [(EAST2, 200)]      # the failed probe started another 30 s
    assert path(probe.diagnostics) == [(EAST, 200)]
    assert [e.endswith(cb.HEALTHY) for e in breaker_events(probe.diagnostics)] == [True]
    assert [path(r.diagnostics) for r in closed] == [[(EAST, 200)]] * 3
    assert not client.circuit_breaker.tracking


class _Records(logging.Handler):
    """Sets `seen` when the breaker's sweep logs a range turning HealthyTentative."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.seen = threading.Event()
        self.messages: list[str] = []

    def emit(self, record):
        message = record.getMessage()
        if "HealthyTentative" in message:
            self.messages.append(message)
            self.seen.set()


@pytest.mark.regionlab_config(multi_write=True, lag_ms=NO_LAG, partitions=2)
def test_the_background_sweep_moves_an_expired_range_to_tentative_without_a_request(regionlab):
    emu = regionlab
    clock = MovableClock()
    records = _Records()
    log = logging.getLogger("regionlab.client")
    log.addHandler(records)
    level = log.level
    log.setLevel(logging.INFO)
    try:
        with CosmosClient(emu.endpoint, credential=emu.key, preferred_locations=[EAST, EAST2], clock=clock,
                          circuit_breaker={"check_interval_ms": SWEEP_MS}) as client:
            c, bad, keys, _ = setup(client, emu, n=10)
            with emu.faults.error(EAST, status=503, op="read", database="db", container="c", partition=bad):
                [c.read_item("1", partition_key=k) for k in keys]
            assert not records.seen.is_set()
            breaker = client.circuit_breaker
            key = ("dbs/db/colls/c", bad)
            assert breaker._health[key, EAST].state == cb.UNAVAILABLE
            clock.advance(cb.UNAVAILABLE_MS / 1000.0 + 1)
            assert records.seen.wait(SWEEP_WAIT_S)              # no request was made meanwhile
            swept = breaker._health[key, EAST].state
    finally:
        log.removeHandler(records)
        log.setLevel(level)
    assert swept == cb.TENTATIVE
    assert records.messages == [f"circuit breaker: partition {key} in {EAST} is HealthyTentative"]
    assert cb.CHECK_INTERVAL_MS == 60_000 and cb.UNAVAILABLE_MS == 30_000      # the defaults are the seed's
    assert (cb.READ_FAILURES_TOLERATED, cb.WRITE_FAILURES_TOLERATED) == (10, 5)


@pytest.mark.regionlab_config(lag_ms=NO_LAG, partitions=2)
def test_a_single_write_accounts_reads_are_never_reordered_by_the_breaker(regionlab):
    emu = regionlab
    with CosmosClient(emu.endpoint, credential=emu.key, preferred_locations=[EAST, EAST2]) as client:
        c, bad, keys, _ = setup(client, emu)
        with emu.faults.error(EAST, status=503, op="read", database="db", container="c", partition=bad):
            reads = [c.read_item("1", partition_key=k) for k in keys + keys]
    assert [path(r.diagnostics) for r in reads] == [[(EAST, 503), (EAST2, 200)]] * (2 * KEYS)
    assert not any(breaker_events(r.diagnostics) for r in reads)
    assert not client.circuit_breaker.tracking and len(client._inner._pipeline.ranges) == 0
