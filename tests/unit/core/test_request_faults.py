"""Proves core/request_faults.py decides per request what the docs say, in virtual time with a
real Account and its FaultRegistry: op and selector matching, seeded shares that replay, delays
that add up, errors that win over drops, counts that heal the fault, skews that sum."""
import random

import pytest

from regionlab.emulator.core.account import Account, AccountConfig
from regionlab.emulator.core.errors import CosmosError
from regionlab.emulator.core.request_faults import DROP_AFTER_APPLY, RESET
from regionlab.emulator.core.scheduler import ManualClock, Scheduler

EAST = "East US"


@pytest.fixture
def account():
    clock, scheduler = ManualClock(), Scheduler()
    acct = Account(AccountConfig(partition_count=2), clock, scheduler, random.Random(7))
    acct.create_container(acct.create_database({"id": "db"}), {"id": "c", "partitionKey": {"paths": ["/pk"]}})
    return acct


def decide(account, op="read", partition=None, region=EAST):
    return account.faults.requests.decide(region, op, "db", "c", partition)


def test_nothing_active_costs_nothing(account):
    assert decide(account) is None


def test_latency_adds_up_and_jitter_is_seeded(account):
    account.faults.inject({"type": "latency", "region": EAST, "delay_ms": 100})
    account.faults.inject({"type": "latency", "region": EAST, "delay_ms": 50, "jitter_ms": 20, "seed": 3})
    delays = [decide(account).delay_ms for _ in range(50)]
    assert all(150 <= d <= 170 for d in delays) and len(set(delays)) > 1
    rng = random.Random(3)
    assert delays == [150 + rng.randint(0, 20) for _ in range(50)]
    assert decide(account, region="West US") is None


def test_op_and_partition_selectors(account):
    account.faults.inject({"type": "error", "region": EAST, "status": 503, "op": "write",
                           "database": "db", "container": "c", "partition": "1"})
    assert decide(account, "read", "1") is None
    assert decide(account, "write", "0") is None
    assert decide(account, "write", None) is None          # names no partition: not selected
    e = decide(account, "write", "1").error
    assert isinstance(e, CosmosError) and (e.status, e.substatus) == (503, 0)


def test_share_is_seeded_and_replays(account):
    fid = account.faults.inject({"type": "tcp_reset", "region": EAST, "share": 0.5, "seed": 11})
    first = [decide(account) is not None for _ in range(200)]
    account.faults.heal(fid)
    account.faults.inject({"type": "tcp_reset", "region": EAST, "share": 0.5, "seed": 11})
    assert [decide(account) is not None for _ in range(200)] == first
    assert 60 < sum(first) < 140
    effects = [decide(account) for _ in range(20)]
    assert {e.drop for e in effects if e is not None} == {RESET}


def test_error_wins_over_a_drop_and_count_heals(account):
    account.faults.inject({"type": "timeout_after_apply", "region": EAST})
    fid = account.faults.inject({"type": "error", "region": EAST, "status": 429, "substatus": 3200, "count": 2})
    for _ in range(2):
        effect = decide(account)
        assert effect.error.status == 429 and effect.error.retry_after_ms == 100 and effect.drop is None
    assert decide(account).drop == DROP_AFTER_APPLY           # the count is used up
    account.scheduler.run_due(account.clock.now_ms())
    assert fid not in account.faults.active                   # and the fault healed itself


def test_clock_skews_sum_and_heal(account):
    a = account.faults.inject({"type": "clock_skew", "region": EAST, "offset_ms": 1000})
    account.faults.inject({"type": "clock_skew", "region": EAST, "offset_ms": -300})
    assert account.faults.requests.skew_ms(EAST) == 700
    assert decide(account) is None                            # a skew changes no request by itself
    account.faults.heal(a)
    assert account.faults.requests.skew_ms(EAST) == -300


def test_duration_heals_and_the_seed_is_recorded(account):
    fid = account.faults.inject({"type": "latency", "region": EAST, "delay_ms": 5, "duration_ms": 1000})
    assert isinstance(account.faults.active[fid]["seed"], int)
    account.clock.advance_to(account.clock.now_ms() + 1000)
    account.scheduler.run_due(account.clock.now_ms())
    assert decide(account) is None and fid not in account.faults.active
