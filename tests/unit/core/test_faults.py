"""The fault catalogue as data: every fault type is injected and healed by id, and a bad spec is a
400 that changes nothing; a fault whose region left the account ends cleanly (in virtual time)."""
import random

import pytest

from regionlab.emulator.core.account import Account, AccountConfig
from regionlab.emulator.core.errors import CosmosError
from regionlab.emulator.core.scheduler import ManualClock, Scheduler, run_until_idle


def _setup():
    clock, scheduler = ManualClock(), Scheduler()
    account = Account(AccountConfig(), clock, scheduler, random.Random(3))
    db = account.create_database({"id": "db"})
    c = account.create_container(db, {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}})
    return account, c, clock, scheduler


def test_a_throttle_storm_is_a_fault_like_any_other():
    """The storm is in the fault catalogue, so scenarios and the control API inject and heal it by id."""
    account, c, clock, scheduler = _setup()
    fid = account.faults.inject({"type": "throttle_storm", "region": "West US", "share": 1.0, "op": "read"})
    assert account.throttle.storms["West US"].share == 1.0
    account.faults.heal(fid)
    assert "West US" not in account.throttle.storms
    with pytest.raises(CosmosError) as e:
        account.faults.inject({"type": "throttle_storm", "region": "West US", "share": 2})
    assert e.value.status == 400


@pytest.mark.parametrize("spec", [
    {"type": "region_outage", "region": "West US"},
    {"type": "link_cut", "from": "West US", "to": "East US"},
    {"type": "replica_slow", "region": "West US", "replica": 1, "delay_ms": 5},
    {"type": "throttle_storm", "region": "West US"},
], ids=lambda s: s["type"])
def test_a_fault_whose_region_left_ends_with_a_note_by_id_or_by_duration(spec):
    account, c, clock, scheduler = _setup()
    by_id = account.faults.inject(spec)
    timed = account.faults.inject(dict(spec, type="region_outage", region="West US", duration_ms=100)) \
        if spec["type"] != "region_outage" else account.faults.inject(dict(spec, duration_ms=100))
    account.remove_region("West US")
    assert "West US" not in account.throttle.storms
    assert "'West US' was removed" in account.faults.heal(by_id)["note"]
    run_until_idle(clock, scheduler)            # the timed fault's expiry must not raise
    assert timed not in account.faults.active and account.faults.active == {}


def test_a_region_re_added_under_the_name_is_not_the_faults_region():
    account, c, clock, scheduler = _setup()
    fid = account.faults.inject({"type": "region_outage", "region": "West US"})
    account.remove_region("West US")
    account.add_region("West US")
    account.faults.inject({"type": "region_outage", "region": "West US"})
    assert "note" in account.faults.heal(fid)
    assert account.region("West US").state == "down"      # the new region's own outage stays


@pytest.mark.parametrize("field,value", [("duration_ms", True), ("duration_ms", 10 ** 20), ("one_way", "yes"),
                                         ("lag_ms", False), ("replica", True), ("seed", [1]), ("op", {"a": 1}),
                                         ("share", True), ("retry_after_ms", 10 ** 12)])
def test_bools_are_not_numbers_and_values_are_bounded(field, value):
    account, c, clock, scheduler = _setup()
    kind = {"lag_ms": "link_lag", "one_way": "link_cut", "replica": "replica_crash", "seed": "throttle_storm",
            "op": "throttle_storm", "share": "throttle_storm", "retry_after_ms": "throttle_storm"}.get(field, "region_outage")
    spec = {"type": kind, "region": "West US", "from": "East US", "to": "West US", "lag_ms": 5, "replica": 2, field: value}
    with pytest.raises(CosmosError) as e:
        account.faults.inject(spec)
    assert e.value.status == 400 and account.faults.active == {}


def test_a_region_outage_carries_its_mode_and_defaults_to_unavailable():
    account, *_ = _setup()
    listened = []
    account.region_listeners.append(lambda name, state: listened.append((name, state, account.region(name).outage_mode)))
    fid = account.faults.inject({"type": "region_outage", "region": "West US"})
    assert account.faults.active[fid]["mode"] == "unavailable"
    assert listened == [("West US", "down", "unavailable")]      # the shell reads the mode when told
    account.faults.heal(fid)
    assert account.region("West US").outage_mode is None and account.region_state("West US") == "up"
    fid = account.faults.inject({"type": "region_outage", "region": "West US", "mode": "blackhole"})
    assert listened[-1] == ("West US", "down", "blackhole") and account.faults.active[fid]["mode"] == "blackhole"


@pytest.mark.parametrize("mode", ["sideways", None, 1, ["refuse"], {"m": 1}])
def test_an_unknown_outage_mode_is_400_and_changes_nothing(mode):
    account, *_ = _setup()
    with pytest.raises(CosmosError) as e:
        account.faults.inject({"type": "region_outage", "region": "West US", "mode": mode})
    assert e.value.status == 400 and "refuse, reset, unavailable, blackhole" in e.value.message
    assert account.region_state("West US") == "up" and account.region("West US").outage_mode is None
    assert account.faults.active == {}


def test_a_second_outage_of_a_region_already_down_keeps_the_first_mode():
    account, *_ = _setup()
    first = account.faults.inject({"type": "region_outage", "region": "West US", "mode": "refuse"})
    account.faults.inject({"type": "region_outage", "region": "West US", "mode": "blackhole"})
    assert account.region("West US").outage_mode == "refuse"
    account.faults.heal(first)
    assert account.region_state("West US") == "up"


def test_a_global_endpoint_outage_tells_the_shell_and_touches_no_region():
    account, _c, clock, scheduler = _setup()
    told = []
    account.global_endpoint_listeners.append(lambda state: told.append((state, account.global_outage_mode)))
    fid = account.faults.inject({"type": "global_endpoint_outage", "mode": "reset", "duration_ms": 1000})
    assert told == [("down", "reset")] and account.faults.active[fid]["mode"] == "reset"
    assert all(account.region_state(r.name) == "up" for r in account.regions)
    with pytest.raises(CosmosError) as e:          # one at a time: a second one would outlive the first's heal
        account.faults.inject({"type": "global_endpoint_outage"})
    assert e.value.status == 400 and "already out" in e.value.message
    run_until_idle(clock, scheduler)              # past duration_ms: healed by itself
    assert told[-1] == ("up", None) and account.faults.active == {}


def test_a_global_endpoint_outage_of_an_account_without_one_is_400():
    account, *_ = _setup()                         # no shell listens: e.g. the official emulator's shape
    with pytest.raises(CosmosError) as e:
        account.faults.inject({"type": "global_endpoint_outage", "mode": "refuse"})
    assert e.value.status == 400 and "region_outage" in e.value.message and account.faults.active == {}
