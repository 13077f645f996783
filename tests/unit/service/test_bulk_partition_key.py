"""Proves a bulk operation's partition key is read in each form the SDKs send it: the header's JSON
text, or the array itself (a list reached `json` without its import and answered 500), on a real
core container."""
import random

from regionlab.emulator.core.account import Account, AccountConfig
from regionlab.emulator.core.scheduler import ManualClock, Scheduler
from regionlab.emulator.service.partition_keys import of_operation


def _container():
    account = Account(AccountConfig(), ManualClock(), Scheduler(), random.Random(0))
    db = account.create_database({"id": "db"})
    return account.create_container(db, {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}})


def test_a_bulk_operations_partition_key_as_text_and_as_an_array_is_the_same_key():
    c = _container()
    assert of_operation(c, ["p1"]) == of_operation(c, '["p1"]')
    assert of_operation(c, ["p1"])[1] == ["p1"]
