"""Proves the history checker catches each kind of violation it claims to, and only those: real
simulated histories pass, and each is then corrupted in exactly one way (a lost acknowledged
write, a diverged region, a read of an out-of-order prefix, a session going back, a stale strong
read, ...) that the checker must name. Pure data in, violations out; no core involved."""
import copy

import pytest

from regionlab.emulator.sim import SimConfig, check, run
from regionlab.emulator.sim.checker import WRITE_FS, lineages


@pytest.fixture(scope="module")
def session_history():
    """A Session run with faults and a forced failover that lost an acknowledged write."""
    for seed in range(60):
        result = run(seed, SimConfig(steps=200, consistency="Session"))
        if result.ok and any(o.get("lost") and o["outcome"] == "ok" for o in result.history["ops"]):
            return result.history
    raise AssertionError("no seed lost writes")


@pytest.fixture(scope="module")
def strong_history():
    result = run(3, SimConfig(steps=200, consistency="Strong", faults=False))
    assert result.ok
    return result.history


def checks(h) -> set:
    return {v["check"] for v in check(h)}


def first(h, pred):
    return next(o for o in h["ops"] if pred(o))


def test_real_histories_pass(session_history, strong_history):
    assert check(session_history) == [] and check(strong_history) == []


def test_an_acknowledged_write_discarded_without_a_lost_entry(session_history):
    h = copy.deepcopy(session_history)
    w = first(h, lambda o: o["f"] in WRITE_FS and o["outcome"] == "ok" and not o["lost"])
    w["fate"] = "discarded"
    assert "acknowledged" in checks(h)


def test_a_lost_write_that_nobody_listed(session_history):
    h = copy.deepcopy(session_history)
    w = first(h, lambda o: o.get("lost") and o.get("fate") == "committed")
    w["lost"] = False
    assert checks(h) & {"acknowledged", "lost-writes"}


def test_a_lost_writes_entry_that_names_no_write(session_history):
    h = copy.deepcopy(session_history)
    next(e for e in h["events"] if e["kind"] == "lost")["op"] = None
    assert "lost-writes" in checks(h)


def test_a_region_that_did_not_converge(session_history):
    h = copy.deepcopy(session_history)
    regions = next(iter(next(iter(h["final"].values())).values()))
    region = regions[sorted(regions)[-1]]
    region["items"] = dict(region["items"], phantom=-1)
    assert {"convergence", "final-state"} <= checks(h)


def test_a_read_of_a_value_the_log_never_had_at_that_position(session_history):
    h = copy.deepcopy(session_history)
    r = first(h, lambda o: o["f"] == "read" and o["outcome"] == "ok" and o["value"] is not None)
    r["value"] = -1
    assert "prefix" in checks(h)


def test_a_snapshot_missing_an_earlier_write_is_no_prefix(session_history):
    h = copy.deepcopy(session_history)
    s = first(h, lambda o: o["f"] == "snapshot" and o["outcome"] == "ok" and o["items"])
    s["items"] = dict(list(s["items"].items())[1:])      # a later write visible, an earlier one not
    assert "prefix" in checks(h)


def test_a_session_read_older_than_the_session(session_history):
    h = copy.deepcopy(session_history)
    lins = lineages(h)
    r = first(h, lambda o: o["f"] == "read" and o["outcome"] == "ok" and o["consistency"] == "Session"
              and o["sent_token"] and o["sent_token"][1] > 0 and o["sent_token"][0] == o["epoch"])
    r["lsn"] = r["sent_token"][1] - 1
    lin = lins[(r["container"], r["partition"])]
    r["value"] = lin.state((r["epoch"], r["lsn"])).get(r["key"], (None, None))[0]   # a consistent, older read
    assert checks(h) == {"session"}


def test_a_definite_failure_that_happened(session_history):
    h = copy.deepcopy(session_history)
    w = first(h, lambda o: o["f"] in WRITE_FS and o["outcome"] == "ok" and o.get("fate") == "committed"
              and not o["lost"])
    w["outcome"] = "fail"
    assert "definite" in checks(h)


def test_a_commit_that_never_resolved(session_history):
    h = copy.deepcopy(session_history)
    w = first(h, lambda o: o["f"] in WRITE_FS and "lsn" in o)
    w["fate"] = None
    assert "liveness" in checks(h)


def test_a_strong_read_that_misses_an_acknowledged_write(strong_history):
    h = copy.deepcopy(strong_history)
    lins = lineages(h)
    for r in h["ops"]:
        if r["f"] != "read" or r["outcome"] != "ok" or r["consistency"] != "Strong":
            continue
        before = [w for w in h["ops"] if w["f"] in WRITE_FS and w["outcome"] == "ok" and w["key"] == r["key"]
                  and w["container"] == r["container"] and w["complete_seq"] < r["invoke_seq"]]
        if before:
            break
    else:
        raise AssertionError("no strong read after an acknowledged write of its key")
    w = max(before, key=lambda o: o["lsn"])
    r["lsn"] = w["lsn"] - 1                      # served just before it: a stale, consistent read
    r["value"] = lins[(r["container"], r["partition"])].state((r["epoch"], r["lsn"])).get(r["key"], (None,))[0]
    assert "strong" in checks(h)


def test_a_strong_write_acknowledged_before_a_majority_held_it(strong_history):
    h = copy.deepcopy(strong_history)
    w = first(h, lambda o: o["f"] in WRITE_FS and o["outcome"] == "ok" and o["lsn"] > 1)
    at = w["regions_at_ack"]
    for region in sorted(at)[1:]:            # only one region still has it
        at[region] = [w["epoch"], w["lsn"] - 1]
    assert "strong" in checks(h)


def test_strong_reads_going_back_in_time(strong_history):
    """Two strong reads of one key, the second started after the first finished, returning an
    older value: not linearizable even if no write was acknowledged in between."""
    h = copy.deepcopy(strong_history)
    lins = lineages(h)
    reads = [o for o in h["ops"] if o["f"] == "read" and o["outcome"] == "ok" and o["consistency"] == "Strong"]
    for r1 in reads:
        src = lins[(r1["container"], r1["partition"])].state((r1["epoch"], r1["lsn"])).get(r1["key"], (None, None))[1]
        later = [r2 for r2 in reads if r2["key"] == r1["key"] and r2["container"] == r1["container"]
                 and r2["invoke_seq"] > r1["complete_seq"]]
        if src is not None and later:
            break
    else:
        raise AssertionError("no pair of strong reads of one key")
    r2 = later[0]
    r2["lsn"], r2["epoch"] = src["lsn"] - 1, src["epoch"]
    r2["value"] = lins[(r2["container"], r2["partition"])].state((r2["epoch"], r2["lsn"])).get(r2["key"], (None,))[0]
    # Make every write acknowledged before r2 look concurrent, so only the read order is wrong.
    for w in h["ops"]:
        if w["f"] in WRITE_FS and w["outcome"] == "ok" and w.get("complete_seq", 0) < r2["invoke_seq"] \
                and w["lsn"] >= src["lsn"] and w["container"] == r2["container"]:
            w["complete_seq"] = r2["invoke_seq"] + 1
    assert "strong" in checks(h)


def test_a_graceful_failover_aborted_with_nothing_in_its_way(session_history):
    h = copy.deepcopy(session_history)
    end = h["start_ms"] + h["virtual_ms"] + 1
    h["failovers"].append({"id": 99, "from": "East US", "to": "West US", "kind": "graceful", "state": "aborted",
                           "reason": "manual", "started_ms": end - 60_000, "finished_ms": end, "lost_writes": 0})
    assert "liveness" in checks(h)


def test_a_lost_writes_entry_under_the_wrong_region(session_history):
    h = copy.deepcopy(session_history)
    e = next(e for e in h["events"] if e["kind"] == "lost" and e["op"] is not None)
    e["region"] = next(r for r in ("East US", "East US 2", "West US") if r != e["region"])
    assert "lost-writes" in checks(h)


def test_an_acknowledged_strong_write_lost_even_if_listed(session_history):
    h = copy.deepcopy(session_history)
    assert "strong" not in checks(h)                     # Session: a listed loss is the failover window
    h["config"]["consistency"] = "Strong"
    lost = {o["id"] for o in h["ops"] if o.get("lost") and o["outcome"] == "ok"}
    flagged = {v["op"] for v in check(h) if v["check"] == "strong" and "RPO is 0" in v["message"]}
    assert flagged == lost                               # Strong: RPO 0, listed or not
