"""The fault catalogue as data: every fault type is injected and healed by id, and a bad spec is a
400 that changes nothing."""
import random

import pytest

from emulator.core.account import Account, AccountConfig
from emulator.core.errors import CosmosError
from emulator.core.scheduler import ManualClock, Scheduler


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
