"""Proves, against a real emulator with the fault that triggers each, the bundled client's policies
that docs/client.md states and no other live test asserted with its numbers: hedging's third
region at threshold + step (500 + 100 ms); a final reply (404/0, 409, 401) ends a hedged request at
once with no copy; writes hedged only on a multi-write account with the non-idempotent opt-in;
every region excluded -> the primary region; excluded regions set on a running client apply
from the next request; 429/3200 retried 9 times (the 10th answer raised) and never past the wait
bound; 429/50009 backed off 2 s, then 4 s; 408 retried once in the region after 100 ms, then the
next region, and 503 the next region at once, on single- and multi-write accounts (and a write
retried only where it may be); 404/1002 on a multi-write account moves to the next preferred
region; region-scoped session capture reads a key where it was written with that region's token,
and a key never written here falls back to the range's global token; a preferred region removed
from the account is left, and used again once re-added (after the account refresh, on the
client's moved clock). Judged by the client's diagnostics and the emulator's per-region reply
counters.

Two emulators for the module (one single-write, one multi-write; the region-removal test starts
its own, as it changes the account); each test has its own database and fresh client, its
request faults are scoped to that database, and every fault (link cuts too, which cannot be
scoped) is healed on leaving its `with`. Timing
bounds are lower bounds of the policy plus generous upper ones that hold on a loaded 2-core
machine; counts are exact. Real sockets; no sleeps."""
import urllib.parse

import pytest

from regionlab.client import CosmosClient, CosmosHttpResponseError, CosmosResourceExistsError, PartitionKey
from regionlab.client.policies import retry
from regionlab.client.policies.regions import ACCOUNT_REFRESH_MS, UNAVAILABLE_MS
from regionlab.emulator.testing import running_emulator
from sdk_harness import attempts, doc_hits, no_lag, wait_replicated
from test_client_faults import MovableClock, path

REGIONS = ("East US", "East US 2", "West US")
EAST, EAST2, WEST = REGIONS
NO_LAG = no_lag(REGIONS)
HEDGE = {"threshold_ms": 500, "threshold_steps_ms": 100}
# Generous slack for a timer or a reply on a loaded 2-core machine; only upper bounds use it.
LOADED_SLACK_MS = 900


@pytest.fixture(scope="module")
def single():
    with running_emulator(lag_ms=NO_LAG) as emu:
        yield emu


@pytest.fixture(scope="module")
def multi():
    with running_emulator(lag_ms=NO_LAG, multi_write=True) as emu:
        yield emu


def client(emu, **kwargs) -> CosmosClient:
    return CosmosClient(emu.endpoint, credential=emu.key, **kwargs)


def container(cl: CosmosClient, db: str):
    """A fresh container `<db>/c` (pk /pk) holding item "1" in partition "p"."""
    c = cl.create_database(db).create_container("c", PartitionKey(path="/pk"))
    c.upsert_item({"id": "1", "pk": "p"})
    return c


def gaps_ms(d) -> list[float]:
    return [b.started_ms - a.started_ms for a, b in zip(d.attempts, d.attempts[1:])]


# ---- hedging ----------------------------------------------------------------------------------
HELD_MS = 1500                 # the first two regions' replies: far past the third copy's 600 ms


def test_hedging_sends_the_third_region_at_threshold_plus_step(single):
    emu = single
    with client(emu, preferred_locations=[EAST, EAST2, WEST], availability_strategy=HEDGE) as cl:
        c = container(cl, "hedge3")
        before = emu.topology()["requests"]
        with emu.faults.latency(EAST, delay_ms=HELD_MS, op="read", database="hedge3"), \
                emu.faults.latency(EAST2, delay_ms=HELD_MS, op="read", database="hedge3"):
            r = c.read_item("1", partition_key="p")
            # The held replies still go out (to cancelled attempts), counted then. A read held
            # after them in East US 2 returns after both: the counts below are whole, and none
            # lands in a later test's.
            c.read_item("1", partition_key="p", availability_strategy=False, excluded_locations=[EAST, WEST])
        hits = doc_hits(emu, before)
    d = r.diagnostics
    assert [(a.region, a.hedge) for a in d.attempts] == [(EAST, False), (EAST2, True), (WEST, True)]
    assert [a.error for a in d.attempts[:2]] == ["cancelled", "cancelled"] and d.attempts[2].status == 200
    assert [a.reason for a in d.attempts[1:]] == ["hedge after 500 ms", "hedge after 600 ms"]
    assert 500 <= d.attempts[1].started_ms < 500 + LOADED_SLACK_MS
    assert 600 <= d.attempts[2].started_ms < 600 + LOADED_SLACK_MS
    assert d.hedges == 2 and d.latency_ms < HELD_MS        # the third region answered first
    assert hits == {EAST: {"GET 200": 1}, EAST2: {"GET 200": 2}, WEST: {"GET 200": 1}}


FINAL_THRESHOLD_MS = 2000      # no answer here waits for it: a final reply ends the race at once


def test_a_final_reply_ends_a_hedged_read_at_once_with_no_copy(single):
    emu = single
    with client(emu, preferred_locations=[EAST, EAST2],
                availability_strategy={"threshold_ms": FINAL_THRESHOLD_MS}) as cl:
        c = container(cl, "final")
        before = emu.topology()["requests"]
        with pytest.raises(CosmosHttpResponseError) as missing:
            c.read_item("absent", partition_key="p")
        with emu.faults.error(EAST, status=401, op="read", database="final"):
            with pytest.raises(CosmosHttpResponseError) as unauthorized:
                c.read_item("1", partition_key="p")
        hits = doc_hits(emu, before)
    for e, status in ((missing.value, 404), (unauthorized.value, 401)):
        d = e.diagnostics
        assert e.status_code == status and attempts(d) == [(EAST, status, 0)]
        assert d.hedges == 0 and d.latency_ms < FINAL_THRESHOLD_MS
    assert hits == {EAST: {"GET 404": 1, "GET 401": 1}}


def test_a_409_ends_a_hedged_write_at_once_with_no_copy(multi):
    emu = multi
    with client(emu, preferred_locations=[EAST, EAST2], non_idempotent_write_retry=True,
                availability_strategy={"threshold_ms": FINAL_THRESHOLD_MS}) as cl:
        c = container(cl, "final409")
        before = emu.topology()["requests"]
        with pytest.raises(CosmosResourceExistsError) as e:
            c.create_item({"id": "1", "pk": "p"})
        hits = doc_hits(emu, before)
    d = e.value.diagnostics
    assert attempts(d) == [(EAST, 409, 0)] and d.hedges == 0 and d.latency_ms < FINAL_THRESHOLD_MS
    assert hits == {EAST: {"POST 409": 1}}


WRITE_DELAY_MS = 600
WRITE_HEDGE = {"threshold_ms": 100, "threshold_steps_ms": 100}


def _slow_create(emu, db: str, **kwargs):
    """A create whose reply East US holds WRITE_DELAY_MS. East US applies it at once, so East US 2
    is cut off from East US meanwhile: a hedged copy there meets no replicated twin (which would
    answer 409, the risk the opt-in accepts)."""
    with client(emu, preferred_locations=[EAST, EAST2], availability_strategy=WRITE_HEDGE, **kwargs) as cl:
        c = container(cl, db)
        with emu.faults.link_cut(EAST, EAST2, one_way=True), \
                emu.faults.latency(EAST, delay_ms=WRITE_DELAY_MS, op="write", database=db):
            return c.create_item({"id": "new", "pk": "p"})


def test_writes_are_hedged_only_on_multi_write_with_the_opt_in(single, multi):
    hedged = _slow_create(multi, "wh_multi_optin", non_idempotent_write_retry=True)
    plain_multi = _slow_create(multi, "wh_multi")
    plain_single = _slow_create(single, "wh_single", non_idempotent_write_retry=True)
    d = hedged.diagnostics
    assert [(a.region, a.hedge) for a in d.attempts] == [(EAST, False), (EAST2, True)]
    assert d.attempts[0].error == "cancelled" and d.attempts[1].status == 201
    assert 100 <= d.attempts[1].started_ms < 100 + LOADED_SLACK_MS
    for r in (plain_multi, plain_single):            # one attempt, the held reply waited out
        assert path(r.diagnostics) == [(EAST, 201)] and r.diagnostics.hedges == 0
        assert r.diagnostics.latency_ms >= WRITE_DELAY_MS


# ---- excluded regions -------------------------------------------------------------------------
def test_every_region_excluded_sends_reads_and_writes_to_the_primary_region(single, multi):
    for emu, db in ((single, "excl_single"), (multi, "excl_multi")):
        with client(emu, preferred_locations=[WEST, EAST2], excluded_locations=list(REGIONS)) as cl:
            c = container(cl, db)
            written = c.upsert_item({"id": "2", "pk": "p"})
            read = c.read_item("1", partition_key="p")
        assert path(written.diagnostics) == [(EAST, 201)]
        assert path(read.diagnostics) == [(EAST, 200)]


def test_excluded_regions_set_on_a_running_client_apply_from_the_next_request(single):
    emu = single
    with client(emu, preferred_locations=[EAST, EAST2, WEST]) as cl:
        c = container(cl, "excl_live")
        seen = []
        for excluded in ([], [EAST], [EAST, EAST2], [EAST2], []):
            cl.excluded_locations = excluded
            seen.append(c.read_item("1", partition_key="p").diagnostics.regions_contacted)
    assert seen == [[EAST], [EAST2], [WEST], [EAST], [EAST]]


# ---- throttling -------------------------------------------------------------------------------
ERROR_RETRY_AFTER_MS = 100          # what an `error` fault's 429 carries (docs/control-api.md)


def test_429_3200_is_retried_9_times_and_the_10th_answer_is_raised(single):
    emu = single
    with client(emu) as cl:
        c = container(cl, "thr9")
        before = emu.topology()["requests"]
        with emu.faults.error(EAST, status=429, substatus=3200, op="read", database="thr9"):
            with pytest.raises(CosmosHttpResponseError) as e:
                c.read_item("1", partition_key="p")
        hits = doc_hits(emu, before)
    d = e.value.diagnostics
    assert (e.value.status_code, e.value.sub_status) == (429, 3200)
    assert attempts(d) == [(EAST, 429, 3200)] * (retry.THROTTLE_RETRIES_MAX + 1)
    assert [a.reason for a in d.attempts[1:]] == [
        f"429/3200 throttled: retry-after {ERROR_RETRY_AFTER_MS} ms (retry {n}/9)" for n in range(1, 10)]
    assert all(g >= ERROR_RETRY_AFTER_MS for g in gaps_ms(d))
    assert hits == {EAST: {"GET 429/3200": 10}}


def test_429_3200_waits_stop_at_the_bound_on_the_total_wait(single):
    """retry_throttle_backoff_max=0.35 s stands in for the default 30 s: three 100 ms waits fit,
    a fourth would take the total past the bound, so the 4th 429 is raised."""
    emu = single
    with client(emu, retry_throttle_backoff_max=0.35) as cl:
        c = container(cl, "thr_bound")
        with emu.faults.error(EAST, status=429, substatus=3200, op="read", database="thr_bound"):
            with pytest.raises(CosmosHttpResponseError) as e:
                c.read_item("1", partition_key="p")
    assert attempts(e.value.diagnostics) == [(EAST, 429, 3200)] * 4


@pytest.mark.slow
def test_429_50009_backs_off_2_s_then_4_s(single):
    """Two spent-credit answers (an `error` fault of 429/50009, count 2): the client waits 2 s,
    then twice as long, and the third attempt lands. (The 8 s cap per step and the 30 s bound
    would take 30 s to show live; tests/unit/client/ shows them in virtual time.)"""
    emu = single
    with client(emu) as cl:
        c = container(cl, "credits")
        emu.faults.error(EAST, status=429, substatus=50009, op="write", database="credits", count=2)
        r = c.upsert_item({"id": "2", "pk": "p"})
    d = r.diagnostics
    assert attempts(d) == [(EAST, 429, 50009), (EAST, 429, 50009), (EAST, 201, 0)]
    assert [a.reason.split(" (")[0] for a in d.attempts[1:]] == [
        "429/50009 credits spent: back off 2000 ms", "429/50009 credits spent: back off 4000 ms"]
    first, second = gaps_ms(d)
    assert 2000 <= first < 2000 + LOADED_SLACK_MS and 4000 <= second < 4000 + LOADED_SLACK_MS


# ---- 408 and 503 ------------------------------------------------------------------------------
def _under_error(emu, db: str, status: int, op: str, action, **kwargs):
    """(the result or the error, the item hits) of `action(container)` under an `error` fault of
    `status` on East US's `op`s of `db`."""
    with client(emu, preferred_locations=[EAST, EAST2], **kwargs) as cl:
        c = container(cl, db)
        before = emu.topology()["requests"]
        with emu.faults.error(EAST, status=status, op=op, database=db):
            try:
                out = action(c)
            except CosmosHttpResponseError as e:
                out = e
        return out, doc_hits(emu, before)


def read_1(c):
    return c.read_item("1", partition_key="p")


def upsert_2(c):
    return c.upsert_item({"id": "2", "pk": "p"})


def create_3(c):
    return c.create_item({"id": "3", "pk": "p"})


@pytest.mark.parametrize("account", ["single", "multi"])
def test_a_408_read_is_retried_once_in_the_region_after_100_ms_then_the_next(account, request):
    emu = request.getfixturevalue(account)
    r, hits = _under_error(emu, f"r408_{account}", 408, "read", read_1)
    d = r.diagnostics
    assert path(d) == [(EAST, 408), (EAST, 408), (EAST2, 200)]
    assert d.attempts[1].reason == "408/0: retry in the same region (1/1)"
    assert d.attempts[2].reason == "408/0: next region"
    local, move = gaps_ms(d)
    assert retry.LOCAL_RETRY_WAIT_MS <= local < retry.LOCAL_RETRY_WAIT_MS + LOADED_SLACK_MS
    assert move < LOADED_SLACK_MS                         # no wait before the next region
    assert hits == {EAST: {"GET 408": 2}, EAST2: {"GET 200": 1}}


@pytest.mark.parametrize("account", ["single", "multi"])
def test_a_503_read_goes_to_the_next_region_at_once(account, request):
    emu = request.getfixturevalue(account)
    r, hits = _under_error(emu, f"r503_{account}", 503, "read", read_1)
    d = r.diagnostics
    assert path(d) == [(EAST, 503), (EAST2, 200)] and d.attempts[1].reason == "503/0: next region"
    assert hits == {EAST: {"GET 503": 1}, EAST2: {"GET 200": 1}}


def test_on_a_multi_write_account_an_idempotent_write_is_retried_as_a_read_and_a_create_is_not(multi):
    up408, hits408 = _under_error(multi, "w408_multi", 408, "write", upsert_2)
    up503, hits503 = _under_error(multi, "w503_multi", 503, "write", upsert_2)
    create, hits_create = _under_error(multi, "c408_multi", 408, "write", create_3)
    assert path(up408.diagnostics) == [(EAST, 408), (EAST, 408), (EAST2, 201)]
    assert hits408 == {EAST: {"POST 408": 2}, EAST2: {"POST 201": 1}}
    assert path(up503.diagnostics) == [(EAST, 503), (EAST2, 201)]
    assert hits503 == {EAST: {"POST 503": 1}, EAST2: {"POST 201": 1}}
    assert isinstance(create, CosmosHttpResponseError) and create.status_code == 408
    assert path(create.diagnostics) == [(EAST, 408)] and hits_create == {EAST: {"POST 408": 1}}


def test_on_a_single_write_account_a_408_or_503_write_is_raised(single):
    """The write region is the only one; a 408 or 503 reply was sent, so the write may have
    happened: raised after the one attempt (the 503 also starts following the account)."""
    for status in (408, 503):
        e, hits = _under_error(single, f"w{status}_single", status, "write", upsert_2)
        assert isinstance(e, CosmosHttpResponseError) and e.status_code == status
        assert path(e.diagnostics) == [(EAST, status)]
        assert hits == {EAST: {f"POST {status}": 1}}


# ---- 404/1002 on a multi-write account ---------------------------------------------------------
def test_a_multi_write_read_region_lacking_the_session_moves_to_the_next_preferred_region(multi):
    """West US stops receiving East US's writes (a one-way link cut). A write in East US, then a
    read preferring West US: West US answers 404/1002 (it lacks the session) and the read goes to
    the next preferred region, East US 2, which has it. (Single-write: the write region retries
    it; test_client_failover.py's lagging-region and forced-failover tests show that.)"""
    emu = multi
    with client(emu, preferred_locations=[WEST, EAST2, EAST]) as cl:
        c = container(cl, "s1002")
        with emu.faults.link_cut(EAST, WEST, one_way=True):
            written = c.upsert_item({"id": "2", "pk": "p"}, excluded_locations=[WEST, EAST2])
            wait_replicated(emu, "s1002", "c", EAST2)
            before = emu.topology()["requests"]
            r = c.read_item("2", partition_key="p")
            hits = doc_hits(emu, before)
    assert path(written.diagnostics) == [(EAST, 201)]
    d = r.diagnostics
    assert attempts(d) == [(WEST, 404, 1002), (EAST2, 200, 0)]
    assert d.attempts[1].reason == "404/1002 session not yet readable: next preferred region"
    assert hits == {WEST: {"GET 404/1002": 1}, EAST2: {"GET 200": 1}}


# ---- region-scoped session capture (multi-write) ------------------------------------------------
def _session_reads(emu, db: str, scoped: bool):
    """West US stops receiving East US's writes. The client writes key "a" in West US and key "b"
    in East US, then reads "a" and "c" (a key it only read, written by another client) preferring
    West US: (read of a, read of c, item hits of the two reads)."""
    with client(emu, preferred_locations=[WEST, EAST2, EAST], region_scoped_session_capturing=scoped) as cl, \
            client(emu) as other:
        c = cl.create_database(db).create_container("c", PartitionKey(path="/pk"))
        other.get_database_client(db).get_container_client("c").upsert_item({"id": "1", "pk": "c"})
        wait_replicated(emu, db, "c", WEST)
        c.read_item("1", partition_key="c")                  # its range is known, it is not written here
        with emu.faults.link_cut(EAST, WEST, one_way=True):
            c.upsert_item({"id": "1", "pk": "a"})                                   # in West US
            c.upsert_item({"id": "1", "pk": "b"}, excluded_locations=[WEST, EAST2])  # in East US
            wait_replicated(emu, db, "c", EAST2)
            before = emu.topology()["requests"]
            a = c.read_item("1", partition_key="a")
            other_key = c.read_item("1", partition_key="c")
            hits = doc_hits(emu, before)
    return a, other_key, hits


def session_decisions(d) -> list[str]:
    return [e.detail for e in d.events if e.kind == "session"]


def test_region_scoped_capture_reads_a_key_where_it_was_written_and_falls_back_to_the_global_token(multi):
    a, other_key, hits = _session_reads(multi, "scoped", scoped=True)
    assert path(a.diagnostics) == [(WEST, 200)]       # West US's own write: no wait for East US's
    assert session_decisions(a.diagnostics) == ["region-scoped token of range 0 from ['West US']"]
    d = other_key.diagnostics      # never written here: the range's global token names East US's write
    assert session_decisions(d) == ["global token of range 0 (partition key not written here)"] * 2   # per attempt
    assert attempts(d) == [(WEST, 404, 1002), (EAST2, 200, 0)]
    assert hits == {WEST: {"GET 200": 1, "GET 404/1002": 1}, EAST2: {"GET 200": 1}}


def test_without_region_scoped_capture_a_key_written_in_the_region_waits_for_every_regions_writes(multi):
    a, _, hits = _session_reads(multi, "unscoped", scoped=False)
    assert session_decisions(a.diagnostics) == ["global token of range 0"] * 2        # per attempt
    assert attempts(a.diagnostics) == [(WEST, 404, 1002), (EAST2, 200, 0)]
    assert hits == {WEST: {"GET 404/1002": 2}, EAST2: {"GET 200": 2}}


# ---- region removal and re-addition ------------------------------------------------------------
READS_MAX = 200                     # reads while a background account refresh lands


def _reads_until(c, region: str) -> list:
    """Reads until one is served first by `region` (the account refresh that changes the order
    runs in the background: no read waits for it), at most READS_MAX."""
    reads = []
    for _ in range(READS_MAX):
        reads.append(c.read_item("1", partition_key="p"))
        if reads[-1].diagnostics.regions_contacted[0] == region:
            break
    return reads


@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_a_removed_preferred_region_is_left_and_used_again_once_re_added(regionlab):
    emu = regionlab
    clock = MovableClock()
    with client(emu, preferred_locations=[WEST, EAST2], clock=clock) as cl:
        c = container(cl, "regions")
        wait_replicated(emu, "regions", "c", WEST)
        first = c.read_item("1", partition_key="p")
        emu.control("DELETE", "/regions/" + urllib.parse.quote(WEST))
        gone = c.read_item("1", partition_key="p")
        clock.advance((UNAVAILABLE_MS + ACCOUNT_REFRESH_MS) / 1000.0 + 1)   # unavailability over, refresh due
        left = _reads_until(c, EAST2)
        still_left = c.read_item("1", partition_key="p")
        emu.control("POST", "/regions", {"name": WEST, "port": 0})
        wait_replicated(emu, "regions", "c", WEST)
        clock.advance(ACCOUNT_REFRESH_MS / 1000.0 + 1)
        back = _reads_until(c, WEST)
    assert path(first.diagnostics) == [(WEST, 200)]
    d = gone.diagnostics                # its endpoint is closed: the next region serves the read
    assert d.attempts[-1].region == EAST2 and d.attempts[-1].status == 200
    assert {a.region for a in d.attempts[:-1]} == {WEST} and all(a.status is None for a in d.attempts[:-1])
    assert left[-1].diagnostics.regions_contacted == [EAST2]
    assert path(still_left.diagnostics) == [(EAST2, 200)]       # the account no longer lists it
    assert path(back[-1].diagnostics) == [(WEST, 200)]
