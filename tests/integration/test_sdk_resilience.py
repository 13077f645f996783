"""Proves the official azure-cosmos SDK's own resilience features (cosmos-wire §10-11) react to
regionlab's request faults as they do to a real region going bad, judged by both the SDK's
result and the emulator's per-region counters (which region served what): hedging under a
latency fault, the per-partition circuit breaker under a 503 error fault on one partition,
regional 503 failover of reads, and timeout_after_apply turning an SDK write retry into a 409."""
import pytest
from azure.cosmos import PartitionKey, exceptions
from azure.cosmos import _partition_health_tracker as health_tracker

from regionlab.emulator.core.container import canonical_pk_json
from regionlab.emulator.ctl import call as control
from regionlab.emulator.drill import observed
from sdk_harness import AttemptLog, make_client, wait_replicated

EAST, EAST2 = "East US", "East US 2"
PREFER = [EAST, EAST2]


def _inject(emu, spec):
    return control(emu.control_endpoint.rstrip("/"), "POST", "/faults", spec)["id"]


def _heal(emu, fid):
    control(emu.control_endpoint.rstrip("/"), "DELETE", f"/faults/{fid}")


def _served(emu, region, key):
    """How many replies of `key` ("GET docs 200") the region's endpoint has sent."""
    return control(emu.control_endpoint.rstrip("/"), "GET", "/topology")["requests"][region].get(key, 0)


def _replica_reads(emu, region):
    def count(account):
        c = account.databases["db"].containers["c"]
        return sum(r.reads_served for p in c.partitions for r in p.replica_sets[region].replicas)
    return emu.call(count)


def _setup(emu, items=(("x", "p"),)):
    with make_client(emu) as admin:
        c = admin.create_database("db").create_container("c", PartitionKey(path="/pk"))
        for id, pk in items:
            c.create_item({"id": id, "pk": pk})
    for region in emu.regions:
        wait_replicated(emu, "db", "c", region)


@pytest.mark.slow
def test_hedging_answers_from_the_next_region_only_while_the_latency_lasts(regionlab):
    _setup(regionlab)
    with make_client(regionlab, preferred_locations=PREFER,
                     availability_strategy={"threshold_ms": 500, "threshold_steps_ms": 100}) as client:
        c = client.get_database_client("db").get_container_client("c")
        assert c.read_item("x", partition_key="p")["id"] == "x"
        before = _replica_reads(regionlab, EAST2)
        assert before == 0                                   # healthy: the preferred region answers
        fid = _inject(regionlab, {"type": "latency", "region": EAST, "delay_ms": 1000, "op": "read"})
        for _ in range(3):
            assert c.read_item("x", partition_key="p")["id"] == "x"
        assert _replica_reads(regionlab, EAST2) == 3        # each answered by the hedge to East US 2
        _heal(regionlab, fid)
        east_before = _replica_reads(regionlab, EAST)
        for _ in range(3):
            assert c.read_item("x", partition_key="p")["id"] == "x"
        assert _replica_reads(regionlab, EAST2) == 3        # no hedge once the fault is healed
        assert _replica_reads(regionlab, EAST) == east_before + 3


def test_503_from_a_region_moves_reads_to_the_next_region(regionlab):
    _setup(regionlab)
    with make_client(regionlab, preferred_locations=PREFER) as client:
        c = client.get_database_client("db").get_container_client("c")
        _inject(regionlab, {"type": "error", "region": EAST, "status": 503})
        assert c.read_item("x", partition_key="p")["id"] == "x"       # the app sees no error
        assert _served(regionlab, EAST, "GET docs 503") == 1
        assert _served(regionlab, EAST2, "GET docs 200") == 1


def _key_in(emu, range_id):
    def find(account):
        c = account.databases["db"].containers["c"]
        for i in range(200):
            k = f"k{i}"
            if c.partition_for_epk(c.epk_of(canonical_pk_json([k]), [k])).range_id == range_id:
                return k
    return emu.call(find)


@pytest.mark.slow
@pytest.mark.regionlab_config(multi_write=True, partitions=2)
def test_circuit_breaker_moves_one_partition_away_from_a_failing_region(regionlab, monkeypatch):
    monkeypatch.setenv("AZURE_COSMOS_ENABLE_CIRCUIT_BREAKER", "true")
    _setup(regionlab, items=())
    bad, good = _key_in(regionlab, "0"), _key_in(regionlab, "1")
    with make_client(regionlab, preferred_locations=PREFER, multiple_write_locations=True) as client:
        c = client.get_database_client("db").get_container_client("c")
        for k in (bad, good):
            c.create_item({"id": k, "pk": k})
        wait_replicated(regionlab, "db", "c", EAST2)
        fid = _inject(regionlab, {"type": "error", "region": EAST, "status": 503, "op": "read",
                                  "database": "db", "container": "c", "partition": "0"})
        reads = 16
        for _ in range(reads):
            assert c.read_item(bad, partition_key=bad)["id"] == bad        # each read succeeds
        refused = _served(regionlab, EAST, "GET docs 503")
        # After the documented 10 consecutive failures the SDK stops trying East US first for
        # partition 0: fewer 503s than reads, and East US 2 served every one.
        assert 10 <= refused < reads
        assert _served(regionlab, EAST2, "GET docs 200") == reads
        east_ok = _served(regionlab, EAST, "GET docs 200")
        assert c.read_item(good, partition_key=good)["id"] == good        # partition 1 stays put
        assert _served(regionlab, EAST, "GET docs 200") == east_ok + 1
        # Healed, partition 0 stays away from East US until the SDK's unavailability window
        # (a minute) has passed on its clock; then one probe read finds East US healthy and
        # partition 0 reads from it again. The SDK's breaker clock is moved on, not waited for.
        _heal(regionlab, fid)
        east2_ok = _served(regionlab, EAST2, "GET docs 200")
        assert c.read_item(bad, partition_key=bad)["id"] == bad
        assert _served(regionlab, EAST2, "GET docs 200") == east2_ok + 1, "still away within the window"
        real_ms = health_tracker.current_time_millis
        monkeypatch.setattr(health_tracker, "current_time_millis",
                            lambda: real_ms() + health_tracker.INITIAL_UNAVAILABLE_TIME_MS + 1_000)
        east_ok = _served(regionlab, EAST, "GET docs 200")
        for _ in range(3):
            assert c.read_item(bad, partition_key=bad)["id"] == bad
        assert _served(regionlab, EAST, "GET docs 200") == east_ok + 3, "back on East US after the probe"
        assert _served(regionlab, EAST, "GET docs 503") == refused


def test_timeout_after_apply_then_the_sdk_retry_gets_409(regionlab):
    _setup(regionlab, items=())
    # share 0.5 with seed 1: the first matching request is struck, the second is not.
    _inject(regionlab, {"type": "timeout_after_apply", "region": EAST, "op": "write", "share": 0.5, "seed": 1,
                        "database": "db", "container": "c"})
    log = AttemptLog()
    with make_client(regionlab, retry_write=2, transport=log) as client:       # retry_write: attempts in all
        c = client.get_database_client("db").get_container_client("c")
        with log.op("create", key="x", value=1), pytest.raises(exceptions.CosmosResourceExistsError):
            c.create_item({"id": "x", "pk": "p", "n": 1})
    # The first attempt was applied and its reply lost (indefinite: it did happen); the retry
    # found it there.
    assert _served(regionlab, EAST, "POST docs 201/drop_after_apply") == 1
    assert _served(regionlab, EAST, "POST docs 409") == 1
    with make_client(regionlab) as client:
        final = client.get_database_client("db").get_container_client("c").read_item("x", "p")["n"]
    assert final == 1
    # The history checker, from what the SDK saw on the wire alone: the application was told
    # "conflict", but the first attempt is unknown (no reply), so the operation is indefinite,
    # and the final state says it applied. No violation: a 409 after an unknown attempt is lawful.
    verdict = observed.check(log.ops, final={"x": final})
    assert [a["outcome"] for a in log.ops[0]["attempts"]] == [observed.UNKNOWN, observed.FAIL]
    assert log.ops[0]["outcome"] == observed.UNKNOWN
    assert verdict.unknown_writes == [{"op": 1, "f": "create", "key": "x", "applied": True,
                                       "attempts": [observed.UNKNOWN, observed.FAIL]}]
    assert verdict.valid, verdict.violations
