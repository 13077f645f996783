"""Proves gateway/sessions.token gives `<range>:<epoch>#<lsn>#<id>=<count>...` with the region
vector in id order and every count current, however the cached vector text was made: checked
against the format written out by hand, over random progress (one region's count moved, as
writes move it, or the whole map), region orders and epochs; and the same for a write region's
run of writes, whose token formats the moved count alone."""
import random

from regionlab.emulator.core.partition import Partition
from regionlab.emulator.core.replica_set import ReplicaSet
from regionlab.emulator.core.scheduler import ManualClock, Scheduler
from regionlab.emulator.service import sessions


def expected(rs, lsn: int) -> str:
    vector = "".join(f"#{rid}={rs.progress.get(name, 0)}" for name, rid in rs.partition.region_order)
    return f"{rs.range_id}:{rs.epoch}#{lsn}{vector}"


def test_the_token_follows_every_change_of_progress_order_and_epoch():
    rng = random.Random(7)
    clock, scheduler = ManualClock(0), Scheduler()
    p = Partition("3", "", "FF")
    rs = ReplicaSet("East US", "3", scheduler, clock)
    p.attach("East US", rs)
    names = ["East US", "West US", "North Europe", "Japan East"]
    p.region_ids = {"East US": 0, "West US": 1}
    split = 0
    for step in range(2_000):
        move = rng.random()
        if move < 0.6:                       # a write or a shipped commit moves one region's count
            # (runs of moves of one region, as a single write region makes, and of others)
            name = names[0] if rng.random() < 0.5 else rng.choice(names)
            rs.progress[name] = rs.progress.get(name, 0) + rng.randint(1, 3)
            rs.progress_seq += 1
            rs.progress_moved = name
        elif move < 0.62:                    # the whole map at once (a restore, a region's seed)
            rs.progress = {n: rng.randint(0, 50) for n in names if rng.random() < 0.7}
            rs.progress_seq += 1
            rs.progress_moved = None
        elif move < 0.7:                     # a region joins or leaves (the order object changes)
            name = rng.choice(names[2:])
            if name in p.region_ids:
                p.drop_region_id(name)
            else:
                p.set_region_id(name, rng.randint(2, 9))
        elif move < 0.75:
            rs.next_version()
        if move < 0.6 and rng.random() < 0.3:
            continue                         # sometimes two changes before the next token
        lsn = rng.randint(0, 10 ** 6)
        assert sessions.token(rs, lsn) == expected(rs, lsn), step
        split += rs.token_vector[5] is not None      # the text kept split around a moved count
        assert sessions.token(rs, lsn) == expected(rs, lsn), step     # from the cache
    assert split > 100                       # the one-number path ran, and was checked


def test_a_replica_set_outside_a_partition_has_no_vector():
    rs = ReplicaSet("East US", "0", Scheduler(), ManualClock(0))
    assert sessions.token(rs, 12) == "0:0#12"
