"""Proves the simulated world sends each operation to the product's own request layer and records
what the reply said: every request is counted by its region's Service, a write's and a read's
history entries carry the reply's status and position, a point read of a missing item is an
answer (404, value None), a Strong write that no majority acknowledges waits the service's
WRITE_ACK_DEADLINE_MS and ends indefinite (408), an error fault's 408 is definite, and a region
outage drops the requests still open there while the service runs them to the end. Driven by
hand: one world, operations invoked one at a time, virtual time run until idle."""
from regionlab.emulator.core.account import AccountConfig
from regionlab.emulator.sim.run import REGIONS
from regionlab.emulator.sim.world import World
from regionlab.emulator.core.limits import WRITE_ACK_DEADLINE_MS

EAST, EAST2, WEST = REGIONS


def world(consistency: str = "Session") -> World:
    return World(1, AccountConfig(regions=REGIONS, consistency=consistency, partition_count=1), 1, 4)


def op(w: World, f: str, key: str | None, region: str = EAST, consistency: str | None = None) -> dict:
    return w.history.invoke(w.now_ms, client=0, f=f, container="c0", key=key, partition="0", region=region,
                            consistency=consistency, lost=False)


def write(w: World, f: str, key: str, region: str = EAST) -> dict:
    o = op(w, f, key, region)
    w.write(o, lambda *_: None)
    return o


def read(w: World, f: str, key: str | None, region: str = EAST, consistency: str = "Eventual") -> dict:
    o = op(w, f, key, region, consistency)
    w.read(o, None, lambda *_: None)
    return o


def served(w: World) -> dict:
    out = {}
    for region, svc in w.services.items():
        for key, n in svc.requests_served.items():
            out[(region, *key)] = n
    return out


def test_operations_are_requests_to_the_service_and_entries_say_what_the_replies_said():
    w = world()
    created = write(w, "create", "k1")
    w.run_idle()
    assert (created["outcome"], created["status"], created["fate"]) == ("ok", 201, "committed")
    assert created["reply_token"] == [created["epoch"], created["lsn"]] and created["regions_at_ack"][EAST][1] >= 1
    got, missing, snap = read(w, "read", "k1", WEST), read(w, "read", "k2", WEST), read(w, "snapshot", None, WEST)
    w.run_idle()
    assert (got["outcome"], got["status"], got["value"]) == ("ok", 200, created["id"])
    assert (missing["outcome"], missing["status"], missing["value"]) == ("ok", 404, None)
    assert (snap["outcome"], snap["items"], snap["lsn"]) == ("ok", {"k1": created["id"]}, created["lsn"])
    assert served(w) == {(EAST, "POST", "docs", 201, 0): 1, (WEST, "GET", "docs", 200, 0): 2,
                         (WEST, "GET", "docs", 404, 0): 1}


def test_an_unacknowledged_strong_write_waits_the_services_timeout_and_is_indefinite():
    w = world("Strong")
    for other in (EAST2, WEST):
        w.account.faults.inject({"type": "link_cut", "from": EAST, "to": other})
    o = write(w, "upsert", "k1")
    w.run_idle()
    assert (o["outcome"], o["status"], o["fate"]) == ("info", 408, "committed")
    assert o["complete_ms"] - o["invoke_ms"] == WRITE_ACK_DEADLINE_MS


def test_an_error_faults_408_is_definite():
    w = world()
    w.account.faults.inject({"type": "error", "region": EAST, "status": 408, "op": "write"})
    o = write(w, "upsert", "k1")
    w.run_idle()
    assert (o["outcome"], o["status"]) == ("fail", 408) and "lsn" not in o


def test_a_region_outage_drops_its_open_requests_and_the_service_still_runs_them():
    w = world()
    w.account.faults.inject({"type": "latency", "region": WEST, "delay_ms": 500})
    held = read(w, "read", "k1", WEST)
    w.run_idle(w.now_ms + 100)
    assert held["outcome"] is None and w.in_flight == 1
    w.account.faults.inject({"type": "region_outage", "region": WEST})
    assert (held["outcome"], held["status"]) == ("info", 503) and w.in_flight == 0
    w.run_idle()
    assert served(w) == {(WEST, "GET", "docs", 404, 0): 1}      # it ran to the end; its reply went nowhere
