"""Proves runtime/seed_data.py's reading and loading on a real core account in virtual time:
each bad shape of a seed file is a SeedError naming the file and the problem, found before
anything is written; a directory loads its account files and <database>/<container>.json files
in name order; and loading twice writes nothing the second time (only what changed since)."""
import json
import random

import pytest

from regionlab.emulator.core.account import Account, AccountConfig
from regionlab.emulator.core.scheduler import ManualClock, Scheduler
from regionlab.emulator.runtime import seed_data
from regionlab.emulator.service.service import Service


def service() -> Service:
    account = Account(AccountConfig(), ManualClock(), Scheduler(), random.Random(0))
    return Service(account, None, None, None, None)


@pytest.mark.parametrize("content, problem", [
    ('{"databases": [', "not valid JSON"),
    ("[1, 2]", 'expected {"databases"'),
    ('{"databases": [{"containers": []}]}', "each database needs a string 'id'"),
    ('{"databases": [{"id": "d", "containers": {}}]}', "database 'd': 'containers' must be an array"),
    ('{"databases": [{"id": "d", "containers": [{"partitionKey": "/pk"}]}]}', "a container needs a string 'id'"),
    ('{"databases": [{"id": "d", "containers": [{"id": "c", "partitionKey": 5}]}]}',
     "container 'd/c': 'partitionKey' must be a path"),
    ('{"databases": [{"id": "d", "containers": [{"id": "c", "throughput": "400"}]}]}',
     "container 'd/c': 'throughput' must be a positive integer (RU/s), not \"400\""),
    ('{"databases": [{"id": "d", "throughput": 0}]}', "database 'd': 'throughput' must be a positive integer"),
    ('{"databases": [{"id": "d", "containers": [{"id": "c", "items": [1]}]}]}',
     "container 'd/c': 'items' must be an array of JSON objects"),
])
def test_a_bad_shape_names_the_file_and_the_problem(tmp_path, content, problem):
    seed = tmp_path / "seed.json"
    seed.write_text(content)
    with pytest.raises(seed_data.SeedError) as e:
        seed_data.read(str(seed))
    assert str(e.value).startswith(f"seed data {seed}: ") and problem in str(e.value)


def test_a_missing_path_and_a_bad_file_in_a_directory(tmp_path):
    with pytest.raises(seed_data.SeedError, match="no such file or directory"):
        seed_data.read(str(tmp_path / "nope"))
    (tmp_path / "db").mkdir()
    (tmp_path / "db" / "c.json").write_text('"text"')
    with pytest.raises(seed_data.SeedError) as e:
        seed_data.read(str(tmp_path))
    assert f"{tmp_path / 'db' / 'c.json'}: database 'db': a container must be an object or an array" in str(e.value)


def test_nothing_is_written_when_a_later_file_is_bad(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"databases": [{"id": "d", "containers": [{"id": "c"}]}]}))
    (tmp_path / "b.json").write_text("{")
    svc = service()
    with pytest.raises(seed_data.SeedError):
        seed_data.load(svc, str(tmp_path))
    assert svc.account.databases == {}


def test_loading_twice_writes_only_what_changed(tmp_path):
    (tmp_path / "d").mkdir()
    items = [{"id": str(i), "n": i} for i in range(5)]
    (tmp_path / "d" / "c.json").write_text(json.dumps(items))
    svc = service()
    assert seed_data.load(svc, str(tmp_path)) == 5
    c = svc.account.databases["d"].containers["c"]
    assert c.definition["partitionKey"]["paths"] == ["/id"]
    assert seed_data.load(svc, str(tmp_path)) == 0
    items[2]["n"] = 20
    (tmp_path / "d" / "c.json").write_text(json.dumps(items))
    assert seed_data.load(svc, str(tmp_path)) == 1


def test_a_seed_cannot_change_an_existing_partition_key(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "c.json").write_text(json.dumps([{"id": "a"}]))
    svc = service()
    seed_data.load(svc, str(tmp_path))
    (tmp_path / "d" / "c.json").write_text(json.dumps({"partitionKey": "/pk", "items": []}))
    with pytest.raises(seed_data.SeedError, match="a partition key cannot change"):
        seed_data.load(svc, str(tmp_path))
