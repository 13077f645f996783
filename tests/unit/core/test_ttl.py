"""Proves core/ttl.py in virtual time (the real core, ManualClock + Scheduler): expiry as the
service defines it (defaultTtl absent / -1 / n, item ttl -1 / n, from the item's _ts), reads
never serve an expired item even before the sweep, the sweep deletes it at expiry as a replicated
`expire` tombstone in every region, each timer turn does at most SWEEP_TURN_MAX_ENTRIES of work,
a forced failover does not list a TTL delete as lost and the new write region expires the item
again, and a region's clock_skew moves expiry for that region's readers."""
import pytest

from regionlab.emulator.core.changefeed import all_versions, avad_entry
from regionlab.emulator.core.errors import CosmosError
from regionlab.emulator.core.link import CUT
from regionlab.emulator.core import ttl
from regionlab.emulator.core.limits import TTL_SWEEP_TURN_MAX_ENTRIES

from core_world import PK_DEF, World

EAST, EAST2, WEST = "East US", "East US 2", "West US"
NO_LAG = {(a, b): 0 for a in (EAST, EAST2, WEST) for b in (EAST, EAST2, WEST) if a != b}


def world(default_ttl=10, **config):
    config.setdefault("lag_ms", NO_LAG)
    config.setdefault("partition_count", 1)
    w = World(**config)
    db = w.account.create_database({"id": "db"})
    body = {"id": "c", "partitionKey": PK_DEF}
    if default_ttl is not None:
        body["defaultTtl"] = default_ttl
    return w, w.account.create_container(db, body)


def create(w, c, id: str, **extra):
    return w.write(c, "p", "create", {"id": id, "pk": "p", **extra})


def live(c, region: str) -> set:
    """Ids whose newest version in region's store is not a tombstone (what the sweep left)."""
    rs = c.partitions[0].replica_sets[region]
    return {v.key[1] for v in rs.store.scan(rs.committed_lsn)}


def visible(w, c, region: str = EAST) -> set:
    """Ids a reader in region is served: live in the store and not expired on its clock."""
    rs = c.partitions[0].replica_sets[region]
    now = w.account.region_now_ms(region)
    return {v.key[1] for v in rs.store.scan(rs.committed_lsn) if c.ttl is None or not c.ttl.expired_at(v, now)}


@pytest.mark.parametrize("default_ttl, item_ttl, expires_after_s", [
    (None, None, None), (None, 5, None), (None, -1, None),
    (-1, None, None), (-1, -1, None), (-1, 5, 5),
    (10, None, 10), (10, -1, None), (10, 5, 5), (10, 20, 20),
])
def test_expiry_follows_the_service_table(default_ttl, item_ttl, expires_after_s):
    w, c = world(default_ttl)
    extra = {} if item_ttl is None else {"ttl": item_ttl}
    create(w, c, "a", **extra)
    if expires_after_s is None:
        w.advance(3_600_000)
        assert live(c, EAST) == {"a"}
        return
    w.advance(expires_after_s * 1000 - 1000)       # _ts is whole seconds: expiry is at _ts + n
    assert visible(w, c) == {"a"}
    w.advance(1000)
    assert visible(w, c) == set() and live(c, EAST) == set()


def test_reads_hide_an_expired_item_before_the_sweep_deletes_it():
    w, c = world(10)
    create(w, c, "a")
    w.clock.advance_to(w.now_ms + 11_000)          # the clock moves, no timer has run yet
    assert live(c, EAST) == {"a"}                  # not deleted yet ...
    with pytest.raises(CosmosError) as e:          # ... but gone for writes (and reads)
        w.write(c, "p", "replace", "a", {"id": "a", "pk": "p"})
    assert e.value.status == 404
    old_rid = next(v.rid for v in c.partitions[0].replica_sets[EAST].store.scan(10 ** 9))
    _, new, _, _ = w.write(c, "p", "create", {"id": "a", "pk": "p", "v": 2})       # the id is free again
    assert new.rid != old_rid and old_rid not in c.rid_index and c.rid_index[new.rid].key == ("[\"p\"]", "a")


def test_the_sweep_deletes_in_every_region_with_a_replicated_expire_tombstone():
    w, c = world(10)
    create(w, c, "a")
    create(w, c, "b", ttl=-1)
    w.advance(10_000)
    for region in (EAST, EAST2, WEST):
        assert live(c, region) == {"b"}
    rs = c.partitions[0].replica_sets[WEST]
    entries, _ = all_versions(rs, 0, rs.committed_lsn, 100)
    last = avad_entry(entries[-1], ["pk"])
    assert last["metadata"]["operationType"] == "delete" and last["metadata"]["timeToLiveExpired"]
    assert w.account.ttl_sweeper.deleted == 1
    w.advance(10)                                  # one more turn finds nothing left to do
    assert not w.account.ttl_sweeper.armed and len(w.scheduler) == 0     # idle: no timer left


def test_each_turn_is_bounded_and_the_sweep_finishes():
    w, c = world(10)
    n = 3 * TTL_SWEEP_TURN_MAX_ENTRIES + 7
    for i in range(n):
        w.write(c, f"p{i % 5}", "create", {"id": str(i), "pk": f"p{i % 5}"})
    sweeper = w.account.ttl_sweeper
    turns = []
    real_turn = sweeper._turn

    def counted(token):
        before = sweeper.deleted
        real_turn(token)
        turns.append(sweeper.deleted - before)
    sweeper._turn = counted
    sweeper.hurry()                                # the turn the writes armed gives way to a counted one
    w.advance(10_000 + 100)
    assert sum(turns) == n and max(turns) <= TTL_SWEEP_TURN_MAX_ENTRIES
    assert live(c, EAST) == set() and live(c, WEST) == set()


def test_a_replace_moves_the_expiry_and_leaves_the_old_entry_stale():
    w, c = world(10)
    create(w, c, "a")
    w.advance(8_000)
    w.write(c, "p", "replace", "a", {"id": "a", "pk": "p", "v": 2})
    w.advance(5_000)                               # the first expiry has passed; the item is newer
    assert live(c, EAST) == {"a"}
    w.advance(5_000)
    assert live(c, EAST) == set()


def test_a_forced_failover_does_not_list_a_ttl_delete_and_the_new_region_expires_again():
    w, c = world(10)
    create(w, c, "a")
    create(w, c, "b", ttl=-1)
    w.advance(100)                                 # replicated everywhere
    w.account.links[(EAST, EAST2)].set_state(CUT)
    w.advance(9_900)                               # East US deleted a; East US 2 never heard
    assert live(c, EAST) == {"b"} and live(c, EAST2) == {"a", "b"}
    assert visible(w, c, EAST2) == {"b"}           # ... yet its readers do not see it
    w.account.failover(EAST2, forced=True)
    w.advance(2_000)
    assert w.account.lost_writes == []
    for region in (EAST, EAST2, WEST):
        assert live(c, region) == {"b"}


def test_a_region_clock_skew_moves_expiry_for_its_readers_and_hurries_the_sweep():
    w, c = world(100)
    create(w, c, "a")
    w.account.faults.inject({"type": "clock_skew", "region": WEST, "offset_ms": 200_000})
    assert visible(w, c, WEST) == set() and visible(w, c, EAST) == {"a"}
    w.advance(5_000)
    assert live(c, EAST) == {"a"}                  # the write region's clock says not yet
    w.account.faults.inject({"type": "clock_skew", "region": EAST, "offset_ms": 200_000})
    w.advance(0)                                   # the sweep's turn comes at once, not in a second
    assert live(c, EAST) == set() and live(c, WEST) == set()


def test_a_new_default_ttl_reindexes_existing_items():
    w, c = world(-1)
    create(w, c, "a")
    w.advance(60_000)
    assert live(c, EAST) == {"a"}
    w.account.replace_container(c, {"id": "c", "partitionKey": PK_DEF, "defaultTtl": 30})
    w.advance(1_000)
    assert live(c, EAST) == set()
    w.account.replace_container(c, {"id": "c", "partitionKey": PK_DEF})
    assert c.ttl is None


@pytest.mark.parametrize("value", [0, -10, -2, 1.5, "5", True, 2 ** 31])
def test_invalid_values_are_400_with_the_service_message(value):
    w, c = world(None)
    with pytest.raises(CosmosError) as e:
        w.account.create_container(w.account.database("db"), {"id": "x", "partitionKey": PK_DEF,
                                                               "defaultTtl": value})
    assert e.value.status == 400 and "The input defaultTtl" in e.value.message
    w, c = world(-1)
    with pytest.raises(CosmosError) as e:
        create(w, c, "a", ttl=value)
    assert e.value.status == 400 and "The input ttl" in e.value.message
    assert live(c, EAST) == set()


def test_rewriting_an_item_keeps_the_expiry_index_bounded():
    w, c = world(3600)
    create(w, c, "a")
    for i in range(3 * ttl.HEAP_SLACK_ENTRIES):     # a rewrite a second: each sweep turn indexes one
        w.write(c, "p", "upsert", {"id": "a", "pk": "p", "v": i})
        w.advance(ttl.SWEEP_INTERVAL_MS)
    sweep = c.ttl.sweeps[0]
    assert sweep.cursor_lsn == c.partitions[0].replica_sets[EAST].committed_lsn
    assert len(sweep.due) == 1 and len(sweep.heap) <= 2 + ttl.HEAP_SLACK_ENTRIES
    w.advance(3_600_000)
    assert live(c, EAST) == set() and sweep.due == {}


def test_multi_write_expires_once_at_the_hub_and_every_region_converges():
    w, c = world(10, multi_write=True)
    w.write(c, "p", "create", {"id": "a", "pk": "p"}, region=WEST)
    w.write(c, "p", "create", {"id": "b", "pk": "p", "ttl": -1}, region=EAST2)
    w.advance(10_000)
    w.advance(100)
    for region in (EAST, EAST2, WEST):
        assert live(c, region) == {"b"}
    assert w.account.ttl_sweeper.deleted == 1 and c.conflicts.entries == []
    w.account.delete_container(c)
    w.advance(2 * 1000)
    assert not w.account.ttl_sweeper.armed           # no container with TTL on: the sweep stops


def test_a_write_committed_after_a_replica_delay_is_still_indexed():
    w, c = world(10, intra_region_delay_ms=50)
    create(w, c, "a")                              # the sweep's turn runs before the quorum has it
    w.advance(10_000 + ttl.SWEEP_INTERVAL_MS)
    assert live(c, EAST) == set()


def test_a_long_backlog_in_one_container_does_not_hold_up_another():
    w, big = world(10)
    small = w.account.create_container(w.account.database("db"), {"id": "small", "partitionKey": PK_DEF,
                                                                  "defaultTtl": 10})
    for i in range(3 * TTL_SWEEP_TURN_MAX_ENTRIES):
        w.write(big, f"p{i % 7}", "create", {"id": str(i), "pk": f"p{i % 7}"})
    create(w, small, "a")
    w.advance(10_000)                              # the first turn with anything due: big's budget
    w.advance(1)                                   # the next starts with small
    assert live(small, EAST) == set() and len(live(big, EAST)) > TTL_SWEEP_TURN_MAX_ENTRIES
    w.advance(100)
    assert live(big, EAST) == set()
