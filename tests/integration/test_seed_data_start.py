"""Proves --seed-data end to end: an account file and a directory of container files load before
the emulator serves (the official SDK reads the databases, containers with their partition keys,
throughput and defaultTtl, and the items), a second start on the same --data-dir writes nothing
and duplicates nothing (and puts back a seeded item the application changed), and a bad seed ends
start-up with exit 2 and one line naming the file and the problem, before anything listens."""
import json
import subprocess
import sys

from azure.cosmos import CosmosClient

from regionlab.emulator.testing import running_emulator
from sdk_harness import make_client
from test_cli import EXIT_TIMEOUT_S, _clean_env, spawn
from test_durability import ARGS

ACCOUNT = {"databases": [
    {"id": "shop", "throughput": 1000, "containers": [
        {"id": "orders", "partitionKey": "/customer", "throughput": 400, "defaultTtl": -1,
         "items": [{"id": "1", "customer": "c1", "total": 5}, {"id": "2", "customer": "c2", "ttl": 3600}]},
        {"id": "carts", "partitionKey": {"paths": ["/tenant", "/user"], "kind": "MultiHash", "version": 2},
         "items": [{"id": "k", "tenant": "t", "user": "u"}]}]}]}


def ids(container) -> list:
    return sorted(d["id"] for d in container.read_all_items())


def test_an_account_file_loads_before_the_emulator_serves(tmp_path):
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps(ACCOUNT))
    with running_emulator(seed_data=str(seed)) as emu, make_client(emu) as client:
        db = client.get_database_client("shop")
        assert db.get_throughput().offer_throughput == 1000
        orders = db.get_container_client("orders")
        props = orders.read()
        assert props["partitionKey"]["paths"] == ["/customer"] and props["defaultTtl"] == -1
        assert orders.get_throughput().offer_throughput == 400
        assert ids(orders) == ["1", "2"]
        assert orders.read_item("1", partition_key="c1")["total"] == 5
        carts = db.get_container_client("carts")
        assert carts.read()["partitionKey"]["kind"] == "MultiHash" and ids(carts) == ["k"]


def test_a_directory_of_container_files(tmp_path):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "people.json").write_text(json.dumps([{"id": "a", "n": 1}, {"id": "b", "n": 2}]))
    things = {"partitionKey": "/cat", "items": [{"id": "x", "cat": "k"}]}
    (tmp_path / "app" / "things.json").write_text(json.dumps(things))
    (tmp_path / "notes.txt").write_text("not a seed file")
    with running_emulator(seed_data=str(tmp_path)) as emu, make_client(emu) as client:
        db = client.get_database_client("app")
        people = db.get_container_client("people")
        assert people.read()["partitionKey"]["paths"] == ["/id"] and ids(people) == ["a", "b"]
        assert people.read_item("b", partition_key="b")["n"] == 2
        assert ids(db.get_container_client("things")) == ["x"]


def test_a_restart_on_the_data_dir_writes_only_what_changed(tmp_path):
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps(ACCOUNT))
    args = (*ARGS, "--data-dir", str(tmp_path / "data"), "--seed-data", str(seed))
    with spawn(tmp_path, *args) as cli:
        assert cli.info["seeded_items"] == 3
        orders = CosmosClient(cli.info["account_endpoint"], cli.info["key"]).get_database_client(
            "shop").get_container_client("orders")
        orders.upsert_item({"id": "1", "customer": "c1", "total": 99})     # the application's changes
        orders.create_item({"id": "3", "customer": "c3"})
        assert cli.terminate()[0] == 0
    with spawn(tmp_path, *args) as cli:
        assert cli.info["seeded_items"] == 1                                 # item 1 put back; nothing else
        orders = CosmosClient(cli.info["account_endpoint"], cli.info["key"]).get_database_client(
            "shop").get_container_client("orders")
        assert ids(orders) == ["1", "2", "3"]
        assert orders.read_item("1", partition_key="c1")["total"] == 5


def test_a_bad_seed_is_exit_2_and_one_line_naming_the_file(tmp_path):
    """(The shapes a seed file may not have are tests/unit/runtime/test_seed_data.py's.)"""
    seed = tmp_path / "bad.json"
    seed.write_text('{"databases": [{"id": "d", "containers": [{"id": "c", "partitionKey": "/pk", "defaultTtl": 5, '
                    '"items": [{"id": "x", "pk": "p", "ttl": 0}]}]}]}')
    done = subprocess.run([sys.executable, "-m", "regionlab.emulator", *ARGS, "--seed-data", str(seed)],
                          capture_output=True, text=True, env=_clean_env(), cwd=tmp_path, timeout=EXIT_TIMEOUT_S * 4)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert lines == [f"regionlab: error: seed data {seed}: container 'd/c': The input ttl '0' is invalid. Ensure to "
                     "provide a nonzero positive integer less than or equal to '2147483647', or '-1' which means "
                     "never expire."]
