"""Proves the region router's effective order, by feeding it account documents and clocks (no
sockets): preferred ∩ account regions in preference order with the primary as the last resort,
names compared as the SDK compares them, a preferred region the account gains used after a
refresh, single-write writes pinned to the write region, exclusions (list, supplier callable,
per request, which replaces the client's as in the SDK) with every-region-excluded going to the
primary, unavailable endpoints last until they expire, and the 5-minute refresh clock, which
turns to one second while the write region does not answer, until the account names another."""
from regionlab.client.policies.regions import FAILOVER_REFRESH_MS, RegionRouter, UNAVAILABLE_MS, parse_account

from client_world import account_doc

E, W, N = "East US", "West US", "North"


def router(doc=None, now_ms=0, **kwargs):
    r = RegionRouter(**kwargs)
    r.update(parse_account(doc or account_doc()), now_ms)
    return r


def names(regions):
    return [r.name for r in regions]


def test_no_preference_follows_the_account_order():
    assert names(router().applicable(False, 0)) == [E, W, N]


def test_preferred_regions_in_preference_order_then_the_primary():
    r = router(preferred=["north", "West-US"])
    assert names(r.applicable(False, 0)) == [N, W, E]


def test_a_preferred_region_the_account_lacks_is_ignored_until_it_appears():
    r = router(account_doc(read=(E, W)), preferred=["North", "West US"])
    assert names(r.applicable(False, 0)) == [W, E]
    r.update(parse_account(account_doc(read=(E, W, N))), 1)
    assert names(r.applicable(False, 1)) == [N, W, E]


def test_single_write_writes_go_to_the_write_region_whatever_the_preference():
    r = router(preferred=["West US"], excluded=["East US"])
    assert names(r.applicable(True, 0)) == [E]


def test_multi_write_writes_follow_the_preference():
    r = router(account_doc(write=(E, W), multi_write=True), preferred=["West US"])
    assert names(r.applicable(True, 0)) == [W, E]
    assert r.multi_write


def test_multi_write_needs_the_client_to_want_it():
    r = router(account_doc(write=(E, W), multi_write=True), multi_write_enabled=False)
    assert names(r.applicable(True, 0)) == [E, W] and not r.multi_write


def test_client_exclusions_can_change_at_runtime_as_a_list_or_a_supplier():
    r = router(excluded=["East US"])
    assert names(r.applicable(False, 0)) == [W, N]
    r.excluded_locations = ["North"]
    assert names(r.applicable(False, 0)) == [E, W]
    current = {"x": [W]}
    r.excluded_locations = lambda: current["x"]
    assert names(r.applicable(False, 0)) == [E, N]
    current["x"] = [E, N]
    assert names(r.applicable(False, 0)) == [W]


def test_request_exclusions_replace_the_clients_as_in_the_sdk():
    r = router(excluded=["East US"])
    assert names(r.applicable(False, 0, excluded=["West US"])) == [E, N]
    assert names(r.applicable(False, 0, excluded=[])) == [E, W, N]       # [] clears the client's
    assert names(r.applicable(False, 0, excluded=None)) == [W, N]        # None: the client's
    r.excluded_locations = lambda: [W]
    assert names(r.applicable(False, 0, excluded=[N])) == [E, W]


def test_every_region_excluded_goes_to_the_primary():
    r = router(preferred=["West US"], excluded=[E, W, N])
    assert names(r.applicable(False, 0)) == [E]


def test_an_unavailable_endpoint_moves_last_until_it_expires():
    r = router()
    r.mark_unavailable("http://east/", 1000)
    assert names(r.applicable(False, 1000)) == [W, N, E]
    assert names(r.applicable(False, 1000 + UNAVAILABLE_MS)) == [E, W, N]


def test_refresh_every_five_minutes_and_at_once_when_asked():
    r = router(now_ms=0)
    assert not r.needs_refresh(299_999)
    assert r.needs_refresh(300_000)
    r.update(parse_account(account_doc()), 300_000)
    r.request_refresh("403/3")
    assert r.needs_refresh(300_001)
    r = router(now_ms=0, refresh_interval_ms=1000)
    assert r.needs_refresh(1000)


def test_a_region_given_as_a_string_is_one_region_not_its_letters():
    r = router(preferred="West US", excluded="North")
    assert names(r.applicable(False, 0)) == [W, E]
    assert names(r.applicable(False, 0, excluded="West US")) == [E]


def test_a_write_region_not_answering_has_the_account_read_every_second_until_it_moves():
    r = router(now_ms=0)
    assert not r.mark_write_unavailable("http://west/", 10)      # a read region: nothing to follow
    assert not r.needs_refresh(5_000)
    assert r.mark_write_unavailable("http://east/", 10)
    assert not r.needs_refresh(FAILOVER_REFRESH_MS - 1) and r.needs_refresh(FAILOVER_REFRESH_MS)
    r.update(parse_account(account_doc()), 2_000)                 # the service has not failed over yet
    assert not r.needs_refresh(2_999) and r.needs_refresh(3_000)
    r.update(parse_account(account_doc(write=(W,), read=(W, E, N))), 3_000)     # it has
    assert r.write_down == {} and names(r.applicable(True, 3_000)) == [W]
    assert not r.needs_refresh(4_000) and r.needs_refresh(3_000 + 300_000)


def test_the_failover_refresh_ends_when_the_region_answers_or_after_the_unavailable_time():
    r = router(now_ms=0)
    r.mark_write_unavailable("http://east/", 0)
    r.mark_write_available("http://east/")
    assert not r.needs_refresh(5_000)
    r.mark_write_unavailable("http://east/", 0)
    r.update(parse_account(account_doc()), UNAVAILABLE_MS)
    assert not r.needs_refresh(UNAVAILABLE_MS + FAILOVER_REFRESH_MS) and r.write_down == {}


def test_every_read_region_puts_the_ones_outside_the_preference_last_and_drops_the_excluded():
    r = router(preferred=["West US"])
    assert names(r.every_read_region(0)) == [W, E, N]
    assert names(r.every_read_region(0, excluded=["North"])) == [W, E]
    r.excluded_locations = ["West US"]
    assert names(r.every_read_region(0)) == [E, N]
