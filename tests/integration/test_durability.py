"""Proves --data-dir keeps what was acknowledged across a restart, and that recovery never wedges:
real `python -m emulator` processes on one data dir, driven by the official azure-cosmos SDK
(concurrent writers and transactional batches, every acknowledged write recorded), killed with
SIGKILL and started again; damaged, foreign, newer and mismatched files end start-up with one
error line and exit 1; --reset-data starts empty."""
import json
import sqlite3
import subprocess
import sys
import threading

import pytest
from azure.cosmos import CosmosClient, PartitionKey, exceptions

from test_cli import EXIT_TIMEOUT_S, _clean_env, spawn

ARGS = ("--port", "0", "--control-port", "0")
WRITERS = 4
KEYS_PER_WRITER = 40
ACKS_BEFORE_KILL = 400           # acknowledged writes across all writers before the SIGKILL
BATCH_OPS = 3


def _client(endpoint: str, key: str, **kw) -> CosmosClient:
    return CosmosClient(endpoint, key, retry_total=0, connection_timeout=5, **kw)


def _container(info: dict, **kw):
    client = _client(info["account_endpoint"], info["key"], **kw)
    db = client.create_database_if_not_exists("durable")
    return db.create_container_if_not_exists("items", PartitionKey("/pk"), offer_throughput=20_000)


class Writer(threading.Thread):
    """Upserts and deletes its own keys one at a time, recording each acknowledged outcome and
    the one write in flight (whose outcome a kill leaves unknown)."""

    def __init__(self, container, n: int, stop: threading.Event, acks: list):
        super().__init__(daemon=True)
        self.container, self.n, self.stop, self.acks = container, n, stop, acks
        self.state: dict = {}          # id -> last acknowledged value (None: deleted)
        self.in_flight = None          # (id, value) sent, not yet answered
        self.refused: list = []        # replies with an error status: none is expected

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            id = f"w{self.n}-{i % KEYS_PER_WRITER}"
            delete = i % 7 == 6 and self.state.get(id) is not None
            value = None if delete else i
            self.in_flight = (id, value)
            try:
                if delete:
                    self.container.delete_item(id, partition_key=f"p{self.n}")
                else:
                    self.container.upsert_item({"id": id, "pk": f"p{self.n}", "v": i})
            except exceptions.CosmosHttpResponseError as e:
                self.refused.append(e)
                return
            except Exception:
                return                 # the server went away: this write's outcome is unknown
            self.state[id] = value
            self.in_flight = None
            self.acks.append(1)
            i += 1


class Batcher(threading.Thread):
    """Transactional batches of BATCH_OPS creates in one logical partition each."""

    def __init__(self, container, stop: threading.Event):
        super().__init__(daemon=True)
        self.container, self.stop = container, stop
        self.acked: list = []
        self.in_flight = None
        self.refused: list = []

    def run(self) -> None:
        j = 0
        while not self.stop.is_set():
            pk = f"batch{j}"
            self.in_flight = j
            ops = [("create", ({"id": f"b{k}", "pk": pk, "j": j},)) for k in range(BATCH_OPS)]
            try:
                self.container.execute_item_batch(ops, partition_key=pk)
            except exceptions.CosmosHttpResponseError as e:
                self.refused.append(e)
                return
            except Exception:
                return
            self.acked.append(j)
            self.in_flight = None
            j += 1


def _wait_for(acks: list, n: int, threads: list) -> None:
    done = threading.Event()

    def watch():
        while len(acks) < n and any(t.is_alive() for t in threads):
            threading.Event().wait(0.01)
        done.set()
    threading.Thread(target=watch, daemon=True).start()
    assert done.wait(120), "the writers did not reach the acknowledged writes wanted"


@pytest.mark.slow
def test_kill_9_under_load_loses_no_acknowledged_write_and_halves_no_batch(tmp_path):
    data = tmp_path / "data"
    with spawn(tmp_path, *ARGS, "--data-dir", str(data)) as cli:
        container = _container(cli.info)
        stop, acks = threading.Event(), []
        writers = [Writer(container, n, stop, acks) for n in range(WRITERS)]
        batcher = Batcher(container, stop)
        for t in writers + [batcher]:
            t.start()
        _wait_for(acks, ACKS_BEFORE_KILL, writers)
        cli.proc.kill()                      # SIGKILL, mid-load: no clean shutdown
        cli.proc.wait(EXIT_TIMEOUT_S)
        stop.set()
        for t in writers + [batcher]:
            t.join(60)
            assert not t.is_alive()
    assert len(acks) >= ACKS_BEFORE_KILL and batcher.acked
    assert [e for t in writers + [batcher] for e in t.refused] == []
    with spawn(tmp_path, *ARGS, "--data-dir", str(data)) as cli:
        assert cli.info["restored_items"] > 0
        container = _container(cli.info)
        stored = {(d["pk"], d["id"]): d for d in container.read_all_items()}
    for w in writers:
        for id, value in w.state.items():
            got = stored.get((f"p{w.n}", id))
            got_value = None if got is None else got["v"]
            allowed = {value}
            if w.in_flight is not None and w.in_flight[0] == id:
                allowed.add(w.in_flight[1])      # the write the kill interrupted: either outcome
            assert got_value in allowed, f"{id}: acknowledged {value}, found {got_value}"
    batches: dict = {}
    for (pk, id), d in stored.items():
        if pk.startswith("batch"):
            batches.setdefault(d["j"], set()).add(id)
    for j in batcher.acked:
        assert batches.get(j) == {f"b{k}" for k in range(BATCH_OPS)}, f"acknowledged batch {j} incomplete"
    for j, ids in batches.items():
        assert len(ids) == BATCH_OPS, f"batch {j} half-applied after recovery: {sorted(ids)}"
        assert j in batcher.acked or j == batcher.in_flight


def test_restart_serves_metadata_and_items_from_every_region(tmp_path):
    data = tmp_path / "data"
    policy = {"indexingMode": "consistent", "automatic": True, "includedPaths": [{"path": "/v/?"}],
              "excludedPaths": [{"path": "/*"}]}
    with spawn(tmp_path, *ARGS, "--data-dir", str(data), "--durability", "relaxed") as cli:
        client = _client(cli.info["account_endpoint"], cli.info["key"])
        db = client.create_database("shop", offer_throughput=1000)
        assert db.get_throughput().offer_throughput == 1000
        c = db.create_container("orders", PartitionKey("/tenant"), indexing_policy=policy,
                                offer_throughput=30_000)
        db.create_container("gone", PartitionKey("/x"))
        db.delete_container("gone")
        for i in range(60):
            c.create_item({"id": f"o{i}", "tenant": f"t{i % 5}", "v": i})
        c.replace_item("o1", {"id": "o1", "tenant": "t1", "v": -1})
        c.delete_item("o2", partition_key="t2")
        before_ranges = len(list(c.client_connection._ReadPartitionKeyRanges(c.container_link)))
        before = c.read()
        _control(cli.info, "PUT", "/throttle/databases/shop", {"autoscale_max": 4000})
        cli.proc.kill()                       # no clean stop: what was answered is on disk
        cli.proc.wait(EXIT_TIMEOUT_S)
    with spawn(tmp_path, *ARGS, "--data-dir", str(data), "--durability", "relaxed") as cli:
        client = _client(cli.info["account_endpoint"], cli.info["key"])
        assert [d["id"] for d in client.list_databases()] == ["shop"]
        db = client.get_database_client("shop")
        assert [x["id"] for x in db.list_containers()] == ["orders"]
        c = db.get_container_client("orders")
        after = c.read()
        assert after["indexingPolicy"] == before["indexingPolicy"] and after["_rid"] == before["_rid"]
        assert len(list(c.client_connection._ReadPartitionKeyRanges(c.container_link))) == before_ranges
        assert c.get_throughput().offer_throughput == 30_000
        assert db.get_throughput().auto_scale_max_throughput == 4000
        # Each region's own endpoint, without discovery: every region has what was acknowledged.
        for region in cli.info["regions"]:
            rc_ = _client(region["endpoint"], cli.info["key"], enable_endpoint_discovery=False)
            rcont = rc_.get_database_client("shop").get_container_client("orders")
            items = {d["id"]: d["v"] for d in rcont.read_all_items()}
            assert len(items) == 59 and items["o1"] == -1 and "o2" not in items, region["name"]
            assert rcont.read_item("o7", partition_key="t2")["v"] == 7
        # The SDK with preferred locations reads from each region in turn.
        for region in cli.info["regions"]:
            pc = _client(cli.info["account_endpoint"], cli.info["key"], preferred_locations=[region["name"]])
            pcont = pc.get_database_client("shop").get_container_client("orders")
            assert pcont.read_item("o1", partition_key="t1")["v"] == -1
        # Writes go on after the restart: new ids, new LSNs, nothing reused.
        created = c.create_item({"id": "new", "tenant": "t0", "v": 1})
        assert created["_rid"] not in {d["_rid"] for d in c.read_all_items() if d["id"] != "new"}
        with pytest.raises(exceptions.CosmosResourceExistsError):
            c.create_item({"id": "o3", "tenant": "t3"})


def _start_fails(tmp_path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "regionlab.emulator", *ARGS, *args], capture_output=True, text=True,
                          env=_clean_env(), cwd=tmp_path, timeout=60)
    assert done.returncode == 1 and done.stdout == "", done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("regionlab: error:") and "Traceback" not in done.stderr, lines
    return lines[0]


def _filled(tmp_path):
    data = tmp_path / "data"
    with spawn(tmp_path, *ARGS, "--data-dir", str(data)) as cli:
        c = _container(cli.info)
        for i in range(300):
            c.create_item({"id": str(i), "pk": str(i % 3), "pad": "x" * 500})
        assert cli.terminate()[0] == 0
    return data


@pytest.mark.slow
def test_truncated_file_is_one_line_and_exit_1(tmp_path):
    data = _filled(tmp_path)
    path = data / "regionlab.sqlite"
    raw = path.read_bytes()
    assert len(raw) > 8192
    path.write_bytes(raw[: len(raw) // 2])
    line = _start_fails(tmp_path, "--data-dir", str(data))
    assert "corrupt" in line and str(path) in line and "--reset-data" in line


def test_garbage_file_is_one_line_and_exit_1(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "regionlab.sqlite").write_bytes(b"\x00garbage" * 1000)
    line = _start_fails(tmp_path, "--data-dir", str(data))
    assert "not a regionlab data file" in line


@pytest.mark.slow
def test_foreign_sqlite_and_newer_schema_are_refused(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    path = data / "regionlab.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    assert "not a regionlab data file" in _start_fails(tmp_path, "--data-dir", str(data))
    path.unlink()
    data = _filled(tmp_path)
    db = sqlite3.connect(data / "regionlab.sqlite")
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    assert "newer regionlab (schema 99" in _start_fails(tmp_path, "--data-dir", str(data))


@pytest.mark.slow
def test_other_topology_flags_are_refused_and_reset_data_starts_empty(tmp_path):
    data = _filled(tmp_path)
    line = _start_fails(tmp_path, "--data-dir", str(data), "--regions", "East US,West US")
    assert "regions" in line and "--reset-data" in line
    with spawn(tmp_path, *ARGS, "--data-dir", str(data), "--regions", "East US,West US", "--reset-data") as cli:
        assert cli.info["restored_items"] == 0
        client = _client(cli.info["account_endpoint"], cli.info["key"])
        assert list(client.list_databases()) == []


def test_without_data_dir_nothing_is_kept(tmp_path):
    with spawn(tmp_path, *ARGS) as cli:
        c = _container(cli.info)
        c.create_item({"id": "a", "pk": "a"})
        assert cli.info["data_dir"] is None
        assert cli.terminate()[0] == 0
    assert list(tmp_path.glob("**/*.sqlite")) == []
    with spawn(tmp_path, *ARGS) as cli:
        assert list(_client(cli.info["account_endpoint"], cli.info["key"]).list_databases()) == []


def test_reset_data_without_data_dir_is_a_usage_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "regionlab.emulator", *ARGS, "--reset-data"], capture_output=True,
                          text=True, env=_clean_env(), cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and "--reset-data needs --data-dir" in done.stderr
    json.dumps(done.stderr)


def _control(info: dict, method: str, path: str, body: dict | None = None) -> dict:
    import urllib.request
    req = urllib.request.Request(info["control_endpoint"].rstrip("/") + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def test_forced_failover_then_kill_9_keeps_the_new_write_region_and_not_the_lost_writes(tmp_path):
    data = tmp_path / "data"
    with spawn(tmp_path, *ARGS, "--data-dir", str(data)) as cli:
        c = _container(cli.info)
        for i in range(20):
            c.create_item({"id": f"before{i}", "pk": "a"})
        _control(cli.info, "POST", "/faults", {"type": "link_cut", "from": "East US", "to": "East US 2"})
        for i in range(10):
            c.create_item({"id": f"cut{i}", "pk": "a"})      # acknowledged by East US only
        f = _control(cli.info, "POST", "/failover", {"region": "East US 2", "kind": "forced", "wait": True})
        assert f["state"] == "completed" and f["lost_writes"] >= 10
        # What the failover discarded (the cut writes, and any "before" write still in flight
        # to East US 2 when the link was cut): the server's own list, taken before the kill.
        lost = {w["id"] for w in _control(cli.info, "GET", "/lost-writes")["writes"]}
        assert lost >= {f"cut{i}" for i in range(10)}
        after = _container(cli.info)                     # a fresh client finds the new write region
        for i in range(5):
            after.create_item({"id": f"after{i}", "pk": "a"})
        cli.proc.kill()
        cli.proc.wait(EXIT_TIMEOUT_S)
    with spawn(tmp_path, *ARGS, "--data-dir", str(data)) as cli:
        assert [r["name"] for r in cli.info["regions"] if r["write"]] == ["East US 2"]
        ids = {d["id"] for d in _container(cli.info).read_all_items()}
        acknowledged = {f"before{i}" for i in range(20)} | {f"cut{i}" for i in range(10)} | {f"after{i}" for i in range(5)}
        assert ids == acknowledged - lost
        assert {w["id"] for w in _control(cli.info, "GET", "/lost-writes")["writes"]} == lost
        _container(cli.info).create_item({"id": "later", "pk": "a"})   # the new write region takes writes


def test_unwritable_data_dir_is_one_line_and_exit_1(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a directory")
    line = _start_fails(tmp_path, "--data-dir", str(blocker / "data"))
    assert "cannot keep data in" in line and "--data-dir" in line
