"""Proves --data-dir keeps each region's own state across a kill -9: real `python -m emulator`
processes on one data dir, driven by the official azure-cosmos SDK at each region's endpoint.
A multi-write account under load (writers in every region, a cut link making conflicts) comes
back with every acknowledged write in the region that took it, the conflicts feed the clients
saw, and converges by its resolution policy (last writer wins on _ts or on a custom path) once
the cut — kept across the restart, under its id — is healed. A single-write region that lagged
behind a cut link comes back lagging by exactly what it lacked and catches up on the heal; a
link_lag fault comes back with its lag. A region added at runtime (and one removed) stays so;
a graceful failover interrupted by the kill leaves the write region where it was; a schema-1
file is read and migrated; an unreadable row is one error line and exit 1."""
import json
import sqlite3
import threading

import pytest
from azure.cosmos import CosmosClient, PartitionKey, exceptions

from regionlab.emulator.core import rid as rids
from test_cli import EXIT_TIMEOUT_S, spawn
from test_durability import _control, _start_fails

ARGS = ("--port", "0", "--control-port", "0")
MULTI = ARGS + ("--multi-write", "--consistency", "Session")
EAST, EAST2, WEST = "East US", "East US 2", "West US"
KEYS_PER_WRITER = 30
ACKS_PER_WRITER = 120            # acknowledged writes per region's writer before the kill
CONTENDED = 5                    # keys every region's writer also writes (they conflict)
CONVERGE_WAIT_S = 60


def _endpoints(info: dict) -> dict:
    return {r["name"]: r["endpoint"] for r in info["regions"]}


def _region_container(info: dict, region: str, db: str = "d", coll: str = "c"):
    """The container at one region's own endpoint: no discovery, so every request stays there."""
    client = CosmosClient(_endpoints(info)[region], info["key"], retry_total=0, connection_timeout=5,
                          enable_endpoint_discovery=False)
    return client.get_database_client(db).get_container_client(coll)


def _items(container) -> dict:
    return {(d["pk"], d["id"]): d for d in container.read_all_items()}


def _quiet(info: dict, but: tuple = ()) -> None:
    """Until every link's backlog is delivered (links that are cut keep theirs: none may be,
    except the (from, to) pairs in `but`, which are not waited for)."""
    done = threading.Event()
    for _ in range(CONVERGE_WAIT_S * 100):
        links = [link for link in _control(info, "GET", "/topology")["links"] if (link["from"], link["to"]) not in but]
        assert all(link["state"] == "active" for link in links), links
        if all(link["backlog"] == 0 for link in links):
            return
        done.wait(0.01)
    raise AssertionError(f"the links did not drain: {links}")


class RegionWriter(threading.Thread):
    """Upserts its region's own keys (only it writes them) and the contended keys, recording
    each acknowledged value and the one in flight."""

    def __init__(self, container, region: str, stop: threading.Event):
        super().__init__(daemon=True)
        self.container, self.region, self.stop = container, region, stop
        self.own: dict = {}            # id -> last acknowledged value
        self.in_flight = None
        self.acks = 0
        self.refused: list = []

    def run(self) -> None:
        i = 0
        while not self.stop.is_set() and self.acks < 10 * ACKS_PER_WRITER:
            contended = i % 4 == 3
            id = f"shared{i % CONTENDED}" if contended else f"{self.region}-{i % KEYS_PER_WRITER}"
            self.in_flight = (id, i)
            try:
                self.container.upsert_item({"id": id, "pk": "shared" if contended else self.region,
                                            "v": i, "by": self.region})
            except exceptions.CosmosHttpResponseError as e:
                self.refused.append(e)
                return
            except Exception:
                return                 # the server went away: this write's outcome is unknown
            if not contended:
                self.own[id] = i
            self.in_flight = None
            self.acks += 1
            i += 1


@pytest.mark.slow
def test_multi_write_kill_9_keeps_every_regions_writes_and_conflicts_then_converges(tmp_path):
    data = tmp_path / "data"
    with spawn(tmp_path, *MULTI, "--data-dir", str(data)) as cli:
        info = cli.info
        assert all(r["write"] for r in info["regions"])
        client = CosmosClient(info["account_endpoint"], info["key"])
        client.create_database("d").create_container("c", PartitionKey("/pk"), offer_throughput=20_000)
        cut = _control(info, "POST", "/faults", {"type": "link_cut", "from": EAST, "to": WEST})["id"]
        stop = threading.Event()
        writers = [RegionWriter(_region_container(info, r), r, stop) for r in (EAST, EAST2, WEST)]
        for w in writers:
            w.start()
        done = threading.Event()
        while min(w.acks for w in writers) < ACKS_PER_WRITER and all(w.is_alive() for w in writers):
            done.wait(0.01)
        # Conflicts the clients saw, made durable by one more acknowledged write after reading them.
        seen = {c["id"] for c in _region_container(info, EAST2).list_conflicts()}
        _region_container(info, EAST2).upsert_item({"id": "marker", "pk": "m"})
        cli.proc.kill()
        cli.proc.wait(EXIT_TIMEOUT_S)
        stop.set()
        for w in writers:
            w.join(60)
    assert [e for w in writers for e in w.refused] == []
    assert seen, "the contended keys made no conflict before the kill"
    with spawn(tmp_path, *MULTI, "--data-dir", str(data)) as cli:
        info = cli.info
        faults = _control(info, "GET", "/faults")["faults"]
        assert [(f["id"], f["type"], f["from"], f["to"]) for f in faults] == [(cut, "link_cut", EAST, WEST)]
        for w in writers:                       # each region kept what it acknowledged
            stored = _items(_region_container(info, w.region))
            for id, value in w.own.items():
                allowed = {value} | ({w.in_flight[1]} if w.in_flight and w.in_flight[0] == id else set())
                assert stored[(w.region, id)]["v"] in allowed, (w.region, id)
        assert seen <= {c["id"] for c in _region_container(info, EAST2).list_conflicts()}
        _control(info, "DELETE", f"/faults/{cut}")
        _quiet(info)
        states = {r: _items(_region_container(info, r)) for r in (EAST, EAST2, WEST)}
        for w in writers:                       # after the heal every region has every region's writes
            for id, value in w.own.items():
                allowed = {value} | ({w.in_flight[1]} if w.in_flight and w.in_flight[0] == id else set())
                assert {states[r][(w.region, id)]["v"] for r in states} <= allowed, (w.region, id)
        bodies = [{k: (d["v"], d["by"], d["_etag"]) for k, d in s.items() if k[0] == "shared"} for s in states.values()]
        assert bodies[0] == bodies[1] == bodies[2]      # converged on one winner per contended key
        # The winner is the last writer by _ts (the default policy): no loser has a later _ts.
        feed = list(_region_container(info, EAST).list_conflicts())
        winners = {k[1]: d for k, d in states[EAST].items() if k[0] == "shared"}
        for c in feed:
            loser = json.loads(c["content"])
            if loser.get("pk") == "shared" and loser["id"] in winners:
                assert c["_ts"] <= winners[loser["id"]]["_ts"]


def test_custom_resolution_path_decides_across_a_restart(tmp_path):
    data = tmp_path / "data"
    policy = {"mode": "LastWriterWins", "conflictResolutionPath": "/prio"}
    with spawn(tmp_path, *MULTI, "--data-dir", str(data)) as cli:
        info = cli.info
        db = CosmosClient(info["account_endpoint"], info["key"]).create_database("d")
        db.create_container("c", PartitionKey("/pk"), conflict_resolution_policy=policy)
        cut = _control(info, "POST", "/faults", {"type": "link_cut", "from": EAST, "to": WEST})["id"]
        # Two more links cut so neither write reaches the third region before the kill either.
        _control(info, "POST", "/faults", {"type": "link_cut", "from": EAST, "to": EAST2})
        _control(info, "POST", "/faults", {"type": "link_cut", "from": WEST, "to": EAST2})
        _region_container(info, EAST).upsert_item({"id": "k", "pk": "p", "prio": 9, "by": EAST})
        _region_container(info, WEST).upsert_item({"id": "k", "pk": "p", "prio": 1, "by": WEST})   # later, lower
        cli.proc.kill()
        cli.proc.wait(EXIT_TIMEOUT_S)
    with spawn(tmp_path, *MULTI, "--data-dir", str(data)) as cli:
        info = cli.info
        assert _region_container(info, EAST).read_item("k", "p")["by"] == EAST
        assert _region_container(info, WEST).read_item("k", "p")["by"] == WEST
        assert list(_region_container(info, EAST2).read_all_items()) == []
        assert len(_control(info, "GET", "/faults")["faults"]) == 3
        for f in _control(info, "GET", "/faults")["faults"]:
            _control(info, "DELETE", f"/faults/{f['id']}")
        _quiet(info)
        assert {_region_container(info, r).read_item("k", "p")["by"] for r in (EAST, EAST2, WEST)} == {EAST}
        losers = [json.loads(c["content"]) for c in _region_container(info, EAST).list_conflicts()]
        assert [(d["by"], d["prio"]) for d in losers] == [(WEST, 1)]
    assert cut


def test_lagging_region_comes_back_lagging_by_what_it_lacked_and_catches_up(tmp_path):
    data = tmp_path / "data"
    with spawn(tmp_path, *ARGS, "--data-dir", str(data)) as cli:
        info = cli.info
        client = CosmosClient(info["account_endpoint"], info["key"])
        c = client.create_database("d").create_container("c", PartitionKey("/pk"), offer_throughput=20_000)
        for i in range(20):
            c.create_item({"id": f"before{i}", "pk": "a"})
        _quiet(info)
        cut = _control(info, "POST", "/faults", {"type": "link_cut", "from": EAST, "to": WEST, "one_way": True})["id"]
        lag = _control(info, "POST", "/faults", {"type": "link_lag", "from": EAST, "to": EAST2, "lag_ms": 5})["id"]
        for i in range(15):
            c.create_item({"id": f"cut{i}", "pk": "a"})
        c.delete_item("before3", partition_key="a")
        c.upsert_item({"id": "before4", "pk": "a", "v": "new"})
        _quiet_except_cut = _control(info, "GET", "/topology")["links"]
        cli.proc.kill()
        cli.proc.wait(EXIT_TIMEOUT_S)
    acknowledged = ({f"before{i}" for i in range(20)} - {"before3"}) | {f"cut{i}" for i in range(15)}
    with spawn(tmp_path, *ARGS, "--data-dir", str(data)) as cli:
        info = cli.info
        faults = {f["id"]: f for f in _control(info, "GET", "/faults")["faults"]}
        assert set(faults) == {cut, lag} and faults[lag]["lag_ms"] == 5
        links = {(link["from"], link["to"]): link for link in _control(info, "GET", "/topology")["links"]}
        assert links[(EAST, WEST)]["state"] == "cut" and links[(EAST, WEST)]["backlog"] == 17
        assert links[(EAST, EAST2)]["lag_ms"] == 5
        _quiet(info, but=((EAST, WEST),))       # East US 2 gets what its lagged link still had
        west = _items(_region_container(info, WEST))
        assert {id for _, id in west} == {f"before{i}" for i in range(20)}      # still without the cut writes
        assert "v" not in west[("a", "before4")]
        for region in (EAST, EAST2):
            assert {id for _, id in _items(_region_container(info, region))} == acknowledged, region
        _control(info, "DELETE", f"/faults/{cut}")
        _quiet(info)
        west = _items(_region_container(info, WEST))
        assert {id for _, id in west} == acknowledged and west[("a", "before4")]["v"] == "new"
    assert _quiet_except_cut


def test_region_added_and_removed_at_runtime_stay_so_after_kill_9(tmp_path):
    data = tmp_path / "data"
    with spawn(tmp_path, *ARGS, "--data-dir", str(data)) as cli:
        info = cli.info
        c = CosmosClient(info["account_endpoint"], info["key"]).create_database("d").create_container(
            "c", PartitionKey("/pk"))
        for i in range(10):
            c.create_item({"id": f"i{i}", "pk": "a"})
        added = _control(info, "POST", "/regions", {"name": "North Europe", "port": 0})
        _control(info, "DELETE", "/regions/West%20US")
        for i in range(10, 15):
            c.create_item({"id": f"i{i}", "pk": "a"})
        topo = _control(info, "GET", "/topology")
        ids = {r["name"]: r["id"] for r in topo["regions"]}
        cli.proc.kill()
        cli.proc.wait(EXIT_TIMEOUT_S)
    with spawn(tmp_path, *ARGS, "--data-dir", str(data)) as cli:
        info = cli.info
        assert [r["name"] for r in info["regions"]] == [EAST, EAST2, "North Europe"]
        topo = _control(info, "GET", "/topology")
        assert {r["name"]: r["id"] for r in topo["regions"]} == ids and ids["North Europe"] == added["id"]
        assert {(link["from"], link["to"]) for link in topo["links"]} == {
            (a, b) for a in ids for b in ids if a != b}
        _quiet(info)
        for region in (EAST, EAST2, "North Europe"):
            assert {id for _, id in _items(_region_container(info, region))} == {f"i{i}" for i in range(15)}
        # The SDK discovers the restored region like any other and reads from it.
        pc = CosmosClient(info["account_endpoint"], info["key"], preferred_locations=["North Europe"])
        assert pc.get_database_client("d").get_container_client("c").read_item("i14", "a")["id"] == "i14"
        CosmosClient(info["account_endpoint"], info["key"]).get_database_client("d").get_container_client(
            "c").create_item({"id": "after", "pk": "a"})
        _quiet(info)
        assert _region_container(info, "North Europe").read_item("after", "a")["id"] == "after"


def test_a_graceful_failover_cut_short_by_kill_9_keeps_the_old_write_region(tmp_path):
    data = tmp_path / "data"
    with spawn(tmp_path, *ARGS, "--data-dir", str(data)) as cli:
        info = cli.info
        c = CosmosClient(info["account_endpoint"], info["key"]).create_database("d").create_container(
            "c", PartitionKey("/pk"))
        _control(info, "POST", "/faults", {"type": "link_cut", "from": EAST, "to": EAST2, "one_way": True})
        for i in range(10):
            c.create_item({"id": f"i{i}", "pk": "a"})      # East US 2 lacks them: the drain cannot end
        f = _control(info, "POST", "/failover", {"region": EAST2, "kind": "graceful", "wait": False})
        assert f["state"] == "draining"
        # Something that rewrites the account's metadata while the drain is under way.
        _control(info, "POST", "/faults", {"type": "link_lag", "from": WEST, "to": EAST, "lag_ms": 3})
        cli.proc.kill()
        cli.proc.wait(EXIT_TIMEOUT_S)
    with spawn(tmp_path, *ARGS, "--data-dir", str(data)) as cli:
        info = cli.info
        assert [r["name"] for r in info["regions"] if r["write"]] == [EAST]
        c = CosmosClient(info["account_endpoint"], info["key"]).get_database_client("d").get_container_client("c")
        assert {d["id"] for d in c.read_all_items()} == {f"i{i}" for i in range(10)}
        c.create_item({"id": "after", "pk": "a"})


def test_schema_1_file_is_read_and_migrated(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    db = sqlite3.connect(data / "regionlab.sqlite")
    db.execute("PRAGMA application_id=1380404290")
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID")
    db.execute("CREATE TABLE partitions (coll_rid TEXT NOT NULL, idx INTEGER NOT NULL, lsn INTEGER NOT NULL, "
               "state TEXT NOT NULL, PRIMARY KEY (coll_rid, idx)) WITHOUT ROWID")
    db.execute("CREATE TABLE items (coll_rid TEXT NOT NULL, idx INTEGER NOT NULL, pk TEXT NOT NULL, id TEXT NOT NULL, "
               "lsn INTEGER NOT NULL, rid TEXT NOT NULL, etag TEXT NOT NULL, ts INTEGER NOT NULL, ts_ms INTEGER NOT NULL, "
               "op TEXT NOT NULL, prev_lsn INTEGER NOT NULL, origin TEXT NOT NULL, oseq INTEGER NOT NULL, "
               "body BLOB NOT NULL, PRIMARY KEY (coll_rid, idx, pk, id)) WITHOUT ROWID")
    db_rid = rids.database_rid(1)
    coll_rid = rids.collection_rid(db_rid, 2)
    doc_rid = rids.document_rid(coll_rid, 1)
    config = {"regions": [EAST, EAST2, WEST], "multi_write": False, "consistency": "Session", "partition_count": None}
    definition = {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
                  "indexingPolicy": {"indexingMode": "consistent", "automatic": True,
                                     "includedPaths": [{"path": "/*"}], "excludedPaths": []}}
    metadata = {"seq": 2, "databases": [{"id": "d", "rid": db_rid, "ts": 1, "etag": '"1"', "offer_rid": None}],
                "containers": [{"db_rid": db_rid, "rid": coll_rid, "definition": definition, "ts": 1,
                                "etag": '"2"', "offer_rid": None, "doc_seq": 1,
                                "ranges": [["", "FF"]]}],
                "offers": [], "write_region": EAST, "failovers": 0, "lost_writes": []}
    db.executemany("INSERT INTO meta VALUES (?, ?)", [("schema_version", "1"), ("config", json.dumps(config)),
                                                      ("metadata", json.dumps(metadata))])
    db.execute("INSERT INTO partitions VALUES (?, 0, 1, ?)",
               (coll_rid, json.dumps({"progress": {EAST: 1}, "doc_seq": 1, "epoch": 0})))
    body = json.dumps({"id": "old", "pk": "a", "v": 1, "_rid": doc_rid, "_etag": '"e"', "_ts": 1})
    db.execute("INSERT INTO items VALUES (?, 0, '[\"a\"]', 'old', 1, ?, '\"e\"', 1, 1000, 'create', 0, ?, 1, ?)",
               (coll_rid, doc_rid, EAST, body.encode()))
    db.commit()
    db.close()
    with spawn(tmp_path, *ARGS, "--data-dir", str(data)) as cli:
        assert cli.info["restored_items"] == 1
        for region in (EAST, EAST2, WEST):
            assert _region_container(cli.info, region).read_item("old", "a")["v"] == 1
        _region_container(cli.info, EAST).create_item({"id": "new", "pk": "a"})
        assert cli.terminate()[0] == 0
    check = sqlite3.connect(data / "regionlab.sqlite")
    assert check.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("2",)
    assert {t for (t,) in check.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} >= {"replicas", "replica_items"}
    check.close()
    with spawn(tmp_path, *ARGS, "--data-dir", str(data)) as cli:
        _quiet(cli.info)                # West may have been stopped before "new" reached it
        assert {d["id"] for d in _region_container(cli.info, WEST).read_all_items()} == {"old", "new"}


def test_an_unreadable_row_is_one_line_and_exit_1(tmp_path):
    data = tmp_path / "data"
    with spawn(tmp_path, *ARGS, "--data-dir", str(data)) as cli:
        c = CosmosClient(cli.info["account_endpoint"], cli.info["key"]).create_database("d").create_container(
            "c", PartitionKey("/pk"))
        c.create_item({"id": "a", "pk": "a"})
        assert cli.terminate()[0] == 0
    db = sqlite3.connect(data / "regionlab.sqlite")
    db.execute("UPDATE replicas SET state = 'not json'")
    db.commit()
    db.close()
    line = _start_fails(tmp_path, "--data-dir", str(data))
    assert "cannot read" in line and "--reset-data" in line


def test_forced_failover_with_a_region_down_then_kill_9_cuts_it_on_restart(tmp_path):
    data = tmp_path / "data"
    with spawn(tmp_path, *ARGS, "--data-dir", str(data)) as cli:
        info = cli.info
        c = CosmosClient(info["account_endpoint"], info["key"]).create_database("d").create_container(
            "c", PartitionKey("/pk"))
        for i in range(10):
            c.create_item({"id": f"before{i}", "pk": "a"})
        _quiet(info)
        _control(info, "POST", "/faults", {"type": "region_outage", "region": WEST})
        _control(info, "POST", "/faults", {"type": "link_cut", "from": EAST, "to": EAST2, "one_way": True})
        for i in range(5):
            c.create_item({"id": f"cut{i}", "pk": "a"})       # only East US has them
        f = _control(info, "POST", "/failover", {"region": EAST2, "kind": "forced"})
        assert f["lost_writes"] >= 5
        lost = {w["id"] for w in _control(info, "GET", "/lost-writes")["writes"]}
        after = CosmosClient(info["account_endpoint"], info["key"]).get_database_client("d").get_container_client("c")
        for i in range(3):
            after.create_item({"id": f"after{i}", "pk": "a"})
        cli.proc.kill()
        cli.proc.wait(EXIT_TIMEOUT_S)
    acknowledged = {f"before{i}" for i in range(10)} | {f"after{i}" for i in range(3)}
    with spawn(tmp_path, *ARGS, "--data-dir", str(data)) as cli:
        info = cli.info
        assert [r["name"] for r in info["regions"] if r["write"]] == [EAST2]
        faults = _control(info, "GET", "/faults")["faults"]
        assert [f["type"] for f in faults] == ["link_cut"]         # the outage ended with the process
        _control(info, "DELETE", f"/faults/{faults[0]['id']}")
        _quiet(info)
        for region in (EAST, EAST2, WEST):      # West, down at the failover, took the cut on restart
            assert {id for _, id in _items(_region_container(info, region))} == acknowledged - lost, region
        assert {w["id"] for w in _control(info, "GET", "/lost-writes")["writes"]} == lost
