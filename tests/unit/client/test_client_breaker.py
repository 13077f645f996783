"""Proves the partition-level circuit breaker's transitions in virtual time (now_ms given): 10
consecutive read failures or 5 write failures open a (partition, region), a success in between
resets the count, an Unavailable region moves to the end of that partition's order only, after
30 s it is HealthyTentative (lazily or by the 60 s background sweep) and the probe's outcome
decides Healthy or Unavailable again; the four numbers are settings of the client's
`circuit_breaker={...}`."""
import pytest

from regionlab.client.policies.breaker import (HEALTHY, TENTATIVE, UNAVAILABLE, PartitionCircuitBreaker,
                                     is_failure)

P, Q = ("dbs/d/colls/c", '["a"]'), ("dbs/d/colls/c", '["b"]')


def fail(b, n, is_write=False, now=0, region="East US", partition=P):
    return [b.record(partition, region, is_write, True, now) for _ in range(n)]


def test_ten_read_failures_open_the_partition_in_that_region():
    b = PartitionCircuitBreaker()
    assert fail(b, 9) == [None] * 9 and b.state(P, "East US", 0) == HEALTHY
    assert fail(b, 1) == [UNAVAILABLE]
    assert b.state(P, "West US", 0) == HEALTHY and b.state(Q, "East US", 0) == HEALTHY


def test_five_write_failures_open_it():
    b = PartitionCircuitBreaker()
    assert fail(b, 5, is_write=True)[-1] == UNAVAILABLE


def test_a_success_resets_the_count():
    b = PartitionCircuitBreaker()
    fail(b, 9)
    b.record(P, "East US", False, False, 0)
    assert fail(b, 9) == [None] * 9


def test_an_unavailable_region_goes_last_for_that_partition_only():
    b = PartitionCircuitBreaker()
    fail(b, 10)
    regions = ["East US", "West US", "North"]
    assert b.order(P, regions, 0) == ["West US", "North", "East US"]
    assert b.order(Q, regions, 0) == regions


def test_after_thirty_seconds_a_probe_decides():
    b = PartitionCircuitBreaker()
    fail(b, 10, now=1000)
    assert b.state(P, "East US", 30_999) == UNAVAILABLE
    assert b.state(P, "East US", 31_000) == TENTATIVE
    assert b.order(P, ["East US", "West US"], 31_000) == ["East US", "West US"]   # the probe goes there
    assert b.record(P, "East US", False, True, 31_001) == UNAVAILABLE            # failed probe
    assert b.state(P, "East US", 61_000) == UNAVAILABLE
    assert b.state(P, "East US", 61_001) == TENTATIVE
    assert b.record(P, "East US", False, False, 61_002) == HEALTHY


def test_the_background_sweep_moves_expired_partitions_to_tentative():
    b = PartitionCircuitBreaker()
    fail(b, 10, now=0)
    fail(b, 5, is_write=True, now=20_000, partition=Q)
    assert b.check(60_000) == [(P, "East US"), (Q, "East US")]
    assert b.check(120_000) == []


def test_what_counts_as_a_failure():
    assert is_failure(503, None) and is_failure(408, None) and is_failure(500, None)
    assert is_failure(None, "connect")
    assert not is_failure(429, None) and not is_failure(404, None) and not is_failure(200, None)


def test_the_settings_come_from_the_clients_option():
    assert PartitionCircuitBreaker.of(False) is None and PartitionCircuitBreaker.of(None) is None
    default = PartitionCircuitBreaker.of(True)
    assert (default.read_failures_tolerated, default.write_failures_tolerated, default.unavailable_ms,
            default.check_interval_ms) == (10, 5, 30_000, 60_000)
    b = PartitionCircuitBreaker.of({"read_failures_tolerated": 3, "unavailable_ms": 5_000})
    assert fail(b, 3, now=0)[-1] == UNAVAILABLE
    assert b.state(P, "East US", 5_000) == TENTATIVE
    with pytest.raises(ValueError, match="unknown setting"):
        PartitionCircuitBreaker.of({"read_failures": 3})
    with pytest.raises(ValueError, match="positive"):
        PartitionCircuitBreaker.of({"write_failures_tolerated": 0})
