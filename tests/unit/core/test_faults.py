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
