"""Regions joining and leaving an account at runtime, in virtual time: a new region starts from a
snapshot of the write region and then follows by log shipping; a removed region stops being
shipped to; the write region cannot be removed; multi-write token versions move on; each link's
receiver_up flag follows both its regions through outages, joins and removals."""
import random

import pytest

from regionlab.emulator.core.account import Account, AccountConfig
from regionlab.emulator.core.documents import Writer, read_item
from regionlab.emulator.core.errors import CosmosError
from regionlab.emulator.core.scheduler import ManualClock, Scheduler, run_until_idle


def _setup(multi_write=False):
    clock, scheduler = ManualClock(), Scheduler()
    account = Account(AccountConfig(multi_write=multi_write), clock, scheduler, random.Random(3))
    db = account.create_database({"id": "db"})
    c = account.create_container(db, {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}})
    return account, c, clock, scheduler


def _put(c, clock, region, id, value):
    w = Writer(c, region, '["p"]', ["p"], clock.now_ms())
    w.upsert({"id": id, "pk": "p", "v": value})
    return w.commit()


def _value(c, region, id):
    v, _, _ = read_item(c, region, '["p"]', ["p"], id, "Eventual", None)
    return None if v is None else v.doc["v"]


def test_added_region_gets_the_snapshot_then_later_writes():
    account, c, clock, scheduler = _setup()
    for i in range(5):
        _put(c, clock, "East US", str(i), i)
    account.add_region("North Europe")
    assert [_value(c, "North Europe", str(i)) for i in range(5)] == list(range(5))
    _put(c, clock, "East US", "late", 99)
    assert _value(c, "North Europe", "late") is None            # still in flight
    run_until_idle(clock, scheduler)
    assert _value(c, "North Europe", "late") == 99
    assert account.region("North Europe").id == 3


def test_removed_region_is_no_longer_shipped_to_and_the_write_region_stays():
    account, c, clock, scheduler = _setup()
    account.remove_region("West US")
    assert "West US" not in c.partitions[0].replica_sets
    assert not any("West US" in pair for pair in account.links)
    _put(c, clock, "East US", "a", 1)
    run_until_idle(clock, scheduler)
    assert _value(c, "East US 2", "a") == 1
    with pytest.raises(CosmosError) as e:
        account.remove_region("East US")
    assert e.value.status == 400 and "fail over" in e.value.message
    with pytest.raises(CosmosError):
        account.add_region("east us")                       # names are unique, case-insensitively


def test_multi_write_join_catches_up_every_origin_and_bumps_token_versions():
    account, c, clock, scheduler = _setup(multi_write=True)
    _put(c, clock, "East US", "a", "east")
    _put(c, clock, "West US", "b", "west")                   # not yet merged by East US
    epoch_before = c.partitions[0].replica_sets["East US"].epoch
    account.add_region("North Europe")
    run_until_idle(clock, scheduler)
    assert _value(c, "North Europe", "a") == "east"
    assert _value(c, "North Europe", "b") == "west"
    assert c.partitions[0].replica_sets["East US"].epoch == epoch_before + 1



def test_each_link_knows_whether_both_its_regions_are_up_through_outages_joins_and_removals():
    account, c, clock, scheduler = _setup()
    west = "West US"

    def up_links():
        return {pair for pair, link in account.links.items() if link.receiver_up}
    every = set(account.links)
    account.set_region_state(west, "down")
    assert up_links() == {pair for pair in every if west not in pair}
    account.add_region("North Europe")               # joins while West US is down
    assert account.links[("North Europe", west)].receiver_up is False
    assert account.links[(west, "North Europe")].receiver_up is False
    assert account.links[("East US", "North Europe")].receiver_up is True
    account.set_region_state(west, "up")
    assert up_links() == set(account.links)
    doomed = [link for pair, link in account.links.items() if "North Europe" in pair]
    account.remove_region("North Europe")
    assert doomed and not any(link.receiver_up for link in doomed)   # a timer still holding one delivers nothing
    assert up_links() == set(account.links)
