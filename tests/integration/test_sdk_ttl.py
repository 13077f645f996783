"""Proves time to live end to end through the official azure-cosmos SDK against a real emulator:
defaultTtl and item ttl as the service defines them (absent, -1, n), expired items gone from
point reads, queries, read feed and the latest-version change feed in every region at once, the
sweep's deletes replicated to every region, charged to no client and shown in the
all-versions-and-deletes feed as TTL expiries, replace and patch moving an item's expiry, the
service's 400s for invalid values, and expiry across restarts with a data dir.

Time moves without sleeping: the emulator's clock is the account's injected clock plus each
region's clock_skew faults, so `advance` adds a skew of +n seconds to every region (the control
port's fault API) and each test heals its skews. Only the sweep's deletes are waited for: after
a commit in each region's store, with a deadline (the sweep looks at least once a second)."""
import threading
import time

import pytest
from azure.cosmos import PartitionKey, exceptions

from regionlab.emulator.testing import running_emulator
from sdk_harness import make_client

REGIONS = ("East US", "East US 2", "West US")
SWEEP_DEADLINE_S = 10.0           # the sweep runs every second; generous for a loaded 2-core machine


@pytest.fixture(scope="module")
def emu():
    with running_emulator() as emu:
        yield emu


@pytest.fixture
def db(emu):
    with make_client(emu) as client:
        db = client.create_database(f"db{time.perf_counter_ns()}")
        yield db
    for fault in emu.control("GET", "/faults")["faults"]:
        emu.control("DELETE", f"/faults/{fault['id']}")


def advance(emu, seconds: int) -> None:
    """Every region's clock moves on by `seconds` (skews add up)."""
    for region in REGIONS:
        emu.control("POST", "/faults", {"type": "clock_skew", "region": region, "offset_ms": seconds * 1000})


def visible(c) -> set:
    """Ids a client sees by query, by read feed and by point reads of every id it ever wrote."""
    by_query = {d["id"] for d in c.query_items("SELECT * FROM c", enable_cross_partition_query=True)}
    by_feed = {d["id"] for d in c.read_all_items()}
    assert by_query == by_feed
    return by_query


def point_read(c, id: str):
    try:
        return c.read_item(id, partition_key="p")
    except exceptions.CosmosResourceNotFoundError:
        return None


def _stored(account, db_id: str, coll: str) -> dict:
    """Region -> {id: deleted-by-TTL?} of the newest version of each key in its store."""
    c = account.databases[db_id].containers[coll]
    out = {}
    for region, rs in c.partitions[0].replica_sets.items():
        newest = {}
        for v in rs.store.versions_above(0):
            newest[v.key[1]] = v
        out[region] = {k: (v.op if v.deleted else "live") for k, v in newest.items()}
    return out


def stored(emu, db_id: str, coll: str) -> dict:
    return emu.call(_stored, db_id, coll)


def charged_ru(emu, db_id: str, coll: str) -> float:
    """Request units charged to the container's partitions so far, in every region."""
    def get(account):
        rid = account.databases[db_id].containers[coll].rid
        return sum(b.charged_ru for key, b in account.throttle.buckets.items() if key[1] == rid)
    return emu.call(get)


def wait_swept(emu, db_id: str, coll: str, ids: set) -> dict:
    """Until every region's store holds ids as TTL deletes: checked on the emulator's loop after
    each commit in a region still short of it (an event the server sets, not a poll)."""
    done, last = threading.Event(), {}
    armed: set = set()

    def swept(state: dict, region: str) -> bool:
        return all(state[region].get(i) == "expire" for i in ids)

    def check(account, region=None):
        armed.discard(region)
        last["state"] = state = _stored(account, db_id, coll)
        if all(swept(state, r) for r in REGIONS):
            done.set()
            return
        for r, rs in account.databases[db_id].containers[coll].partitions[0].replica_sets.items():
            if r not in armed and not swept(state, r):
                armed.add(r)
                rs.when_committed(rs.committed_lsn + 1, lambda _ok, r=r: check(account, r))
    emu.call(check)
    assert done.wait(SWEEP_DEADLINE_S), f"the sweep did not delete {sorted(ids)} everywhere: {last['state']}"
    return last["state"]


def test_container_and_item_ttl_as_the_service_defines_them(emu, db):
    c = db.create_container("c", PartitionKey(path="/pk"), default_ttl=100)
    assert c.read()["defaultTtl"] == 100
    c.create_item({"id": "default", "pk": "p"})
    c.create_item({"id": "never", "pk": "p", "ttl": -1})
    c.create_item({"id": "short", "pk": "p", "ttl": 30})
    off = db.create_container("off", PartitionKey(path="/pk"))
    off.create_item({"id": "ignored", "pk": "p", "ttl": 5})
    assert "defaultTtl" not in off.read()
    by_item = db.create_container("by_item", PartitionKey(path="/pk"), default_ttl=-1)
    by_item.create_item({"id": "default", "pk": "p"})
    by_item.create_item({"id": "short", "pk": "p", "ttl": 30})

    advance(emu, 31)
    assert visible(c) == {"default", "never"}
    assert point_read(c, "short") is None and point_read(c, "default")["id"] == "default"
    assert visible(by_item) == {"default"}
    assert visible(off) == {"ignored"}

    advance(emu, 70)
    assert visible(c) == {"never"}
    assert point_read(c, "default") is None
    with make_client(emu, preferred_locations=["West US"]) as west:
        wc = west.get_database_client(db.id).get_container_client("c")
        assert visible(wc) == {"never"}
    state = wait_swept(emu, db.id, "c", {"default", "short"})
    assert all(state[r]["never"] == "live" for r in REGIONS)
    assert stored(emu, db.id, "off")["East US"] == {"ignored": "live"}


def test_sweep_deletes_show_in_the_all_versions_feed_as_expiries(emu, db):
    c = db.create_container("c", PartitionKey(path="/pk"), default_ttl=10)
    assert list(c.query_items_change_feed(mode="AllVersionsAndDeletes", partition_key="p")) == []
    token = c.client_connection.last_response_headers["etag"]
    c.create_item({"id": "a", "pk": "p"})
    c.create_item({"id": "b", "pk": "p", "ttl": -1})
    charged = charged_ru(emu, db.id, "c")
    advance(emu, 11)
    wait_swept(emu, db.id, "c", {"a"})
    assert charged_ru(emu, db.id, "c") == charged       # the sweep's delete charged no client
    assert {d["id"] for d in c.query_items_change_feed(start_time="Beginning")} == {"b"}
    entries = list(c.query_items_change_feed(mode="AllVersionsAndDeletes", partition_key="p",
                                             continuation=token))
    assert [(e["metadata"]["operationType"], (e["current"] or e["previous"])["id"],
             e["metadata"].get("timeToLiveExpired")) for e in entries] == [
        ("create", "a", None), ("create", "b", None), ("delete", "a", True)]


def test_replace_upsert_and_patch_move_the_expiry(emu, db):
    c = db.create_container("c", PartitionKey(path="/pk"), default_ttl=30)
    for id in ("replaced", "upserted", "patched", "kept"):
        c.create_item({"id": id, "pk": "p"})
    advance(emu, 20)
    c.replace_item("replaced", {"id": "replaced", "pk": "p", "v": 2})
    c.upsert_item({"id": "upserted", "pk": "p", "v": 2})
    c.patch_item("patched", partition_key="p", patch_operations=[{"op": "add", "path": "/ttl", "value": 5}])
    advance(emu, 6)
    assert visible(c) == {"replaced", "upserted", "kept"}
    advance(emu, 5)
    assert visible(c) == {"replaced", "upserted"}
    advance(emu, 20)
    assert visible(c) == set()
    # An expired id is free again: a create succeeds, as it does once the service deleted it.
    assert c.create_item({"id": "kept", "pk": "p"})["id"] == "kept"


def test_replacing_the_container_changes_every_item_expiry(emu, db):
    c = db.create_container("c", PartitionKey(path="/pk"), default_ttl=-1)
    c.create_item({"id": "a", "pk": "p"})
    advance(emu, 50)
    assert visible(c) == {"a"}
    db.replace_container(c, PartitionKey(path="/pk"), default_ttl=40)
    assert visible(c) == set()
    wait_swept(emu, db.id, "c", {"a"})


@pytest.mark.parametrize("value", [-10, 0, -2, 2_147_483_648])
def test_an_invalid_default_ttl_is_400(emu, db, value):
    with pytest.raises(exceptions.CosmosHttpResponseError) as e:
        db.create_container("bad", PartitionKey(path="/pk"), default_ttl=value)
    assert e.value.status_code == 400
    assert f"The input defaultTtl '{value}' is invalid" in e.value.message
    assert "nonzero positive integer" in e.value.message
    assert [p["id"] for p in db.list_containers()] == []


@pytest.mark.parametrize("value", [0, -5, None, "10", 1.5, True])
def test_an_invalid_item_ttl_is_400_and_writes_nothing(emu, db, value):
    c = db.create_container("c", PartitionKey(path="/pk"), default_ttl=-1)
    c.create_item({"id": "x", "pk": "p", "v": 1})
    for write in (lambda: c.create_item({"id": "y", "pk": "p", "ttl": value}),
                  lambda: c.upsert_item({"id": "x", "pk": "p", "ttl": value}),
                  lambda: c.patch_item("x", partition_key="p",
                                       patch_operations=[{"op": "set", "path": "/ttl", "value": value}])):
        with pytest.raises(exceptions.CosmosHttpResponseError) as e:
            write()
        assert e.value.status_code == 400 and "The input ttl" in e.value.message
    assert visible(c) == {"x"} and point_read(c, "x")["v"] == 1


# ---- --data-dir: expiry across restarts --------------------------------------------------------
def test_an_item_that_expired_while_down_is_gone_after_restart_and_its_delete_is_kept(tmp_path):
    data = str(tmp_path / "data")
    with running_emulator(data_dir=data) as first, make_client(first) as client:
        c = client.create_database("d").create_container("c", PartitionKey(path="/pk"), default_ttl=60)
        c.create_item({"id": "short", "pk": "p"})
        c.create_item({"id": "never", "pk": "p", "ttl": -1})
    with running_emulator(data_dir=data) as second, make_client(second) as client:
        c = client.get_database_client("d").get_container_client("c")
        assert c.read()["defaultTtl"] == 60
        assert list(c.query_items_change_feed(mode="AllVersionsAndDeletes", partition_key="p")) == []
        token = c.client_connection.last_response_headers["etag"]
        advance(second, 61)          # the minute passed while the emulator was down
        assert visible(c) == {"never"}
        wait_swept(second, "d", "c", {"short"})
        deletes = list(c.query_items_change_feed(mode="AllVersionsAndDeletes", partition_key="p",
                                                 continuation=token))
        assert [(e["metadata"]["id"], e["metadata"]["timeToLiveExpired"]) for e in deletes] == [("short", True)]
    with running_emulator(data_dir=data) as third, make_client(third) as client:   # no skew: the delete was kept
        c = client.get_database_client("d").get_container_client("c")
        assert visible(c) == {"never"} and point_read(c, "short") is None
