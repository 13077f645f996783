"""Proves the direct-mode policies in virtual time (times are numbers the test passes, no clock):
the address cache per (container, range, region) — feed parsing (with the emulator instance
an address names), invalidation after a 410,
refused endpoints skipped for ENDPOINT_DOWN_MS, reads round-robin over secondaries with the
primary last, writes only to a live primary — and the connection pool — 30 requests per
connection, then another connection up to 130, then waiting; idle connection and endpoint
timeouts; heartbeats."""
import math

import pytest

from regionlab.client.policies import direct_pool as pool
from regionlab.client.policies.addresses import ENDPOINT_DOWN_MS, AddressCache, parse_feed
from regionlab.client.protocol import direct as D

EAST, WEST = "http://east/", "http://west/"
C = "dbs/db/colls/c"


def entry(rid, rng, index, port, primary=False, state="up", protocol=D.PROTOCOL):
    uri = D.replica_uri("127.0.0.1", port, D.replica_key(rid, rng, index), primary)
    return {"protocol": protocol, "isPrimary": primary, "physcialUri": uri, "logicalUri": uri,
            "partitionKeyRangeId": rng, "node": port - 10000, "region": "East US", "state": state}


def body(*entries):
    return {"_rid": "R", "Addresss": list(entries)}


def four(rng="0", base=10000, down=()):
    return [entry("R", rng, i, base + i, primary=(i == 0), state="down" if i in down else "up") for i in range(4)]


# ---- the address cache --------------------------------------------------------------------
def test_the_feed_parses_into_replica_sets_per_range_by_index():
    sets = parse_feed(body(*reversed(four("0")), *four("1", 10010),
                           entry("R", "0", 9, 10099, protocol="rntbd")), now_ms=5)
    assert sorted(sets) == ["0", "1"]
    rs = sets["0"]
    assert [r.index for r in rs.replicas] == [0, 1, 2, 3] and rs.fetched_ms == 5
    assert rs.primary.index == 0 and rs.primary.endpoint == ("127.0.0.1", 10000)
    assert rs.replicas[1].key == D.replica_key("R", "0", 1) and rs.replicas[1].role == "secondary"


def test_a_replica_keeps_the_instance_its_address_names_and_pools_by_it():
    uri = D.replica_uri("127.0.0.1", 10000, D.replica_key("R", "0", 0), True, instance="a1")
    named = parse_feed(body(dict(entry("R", "0", 0, 10000, primary=True), physcialUri=uri)), 0)["0"].replicas[0]
    plain = parse_feed(body(entry("R", "0", 0, 10000, primary=True)), 0)["0"].replicas[0]
    assert named.instance == "a1" and plain.instance is None
    assert named.endpoint == plain.endpoint == ("127.0.0.1", 10000)     # marked down by host:port
    assert named.pool_key == ("127.0.0.1", 10000, "a1") != plain.pool_key   # pooled per instance too


def test_entries_are_per_container_range_and_region_and_a_410_invalidates_only_its_own():
    cache = AddressCache()
    cache.put(C, EAST, parse_feed(body(*four("0"), *four("1", 10010)), 0))
    cache.put(C, WEST, parse_feed(body(*four("0", 20000)), 0))
    assert cache.entries() == 3 and cache.refreshes == 2
    cache.invalidate(C, "0", EAST)
    assert cache.get(C, "0", EAST) is None
    assert cache.get(C, "1", EAST) is not None and cache.get(C, "0", WEST) is not None
    cache.invalidate(C, None, EAST)                  # 410/1002: the whole routing map of the region
    assert cache.get(C, "1", EAST) is None and cache.get(C, "0", WEST) is not None


def test_reads_round_robin_over_secondaries_with_the_primary_last():
    cache = AddressCache()
    rs = parse_feed(body(*four()), 0)["0"]
    orders = [[r.index for r in cache.read_order(rs, 0)] for _ in range(4)]
    assert orders == [[1, 2, 3, 0], [2, 3, 1, 0], [3, 1, 2, 0], [1, 2, 3, 0]]


def test_a_refused_endpoint_is_skipped_for_endpoint_down_ms_then_tried_again():
    cache = AddressCache()
    rs = parse_feed(body(*four()), 0)["0"]
    cache.mark_down(("127.0.0.1", 10002), now_ms=1_000)
    assert 2 not in [r.index for r in cache.read_order(rs, 1_000 + ENDPOINT_DOWN_MS - 1)]
    assert 2 in [r.index for r in cache.read_order(rs, 1_000 + ENDPOINT_DOWN_MS)]
    cache.mark_down(("127.0.0.1", 10000), now_ms=0)
    assert cache.write_target(rs, 1) is None         # the primary refused: refresh the addresses
    cache.mark_up(("127.0.0.1", 10000))
    assert cache.write_target(rs, 1).index == 0


def test_replicas_the_feed_lists_down_are_never_chosen():
    cache = AddressCache()
    rs = parse_feed(body(*four(down=(0, 3))), 0)["0"]
    assert rs.primary is None and cache.write_target(rs, 0) is None      # an election is running
    assert sorted(r.index for r in cache.read_order(rs, 0)) == [1, 2]


# ---- the connection pool ------------------------------------------------------------------
def test_a_connection_takes_30_requests_then_another_is_opened():
    o = pool.PoolOptions()
    assert (o.max_requests_per_connection, o.max_connections_per_endpoint) == (30, 130)
    assert pool.choose(o, [], 0) == (pool.OPEN, None)
    assert pool.choose(o, [29], 0) == (pool.USE, 0)
    assert pool.choose(o, [30], 0) == (pool.OPEN, None)
    assert pool.choose(o, [30, 12, 5], 0) == (pool.USE, 2)              # the least busy one
    assert pool.choose(o, [30] * 130, 0) == (pool.WAIT, None)           # the cap: wait for a slot
    assert pool.choose(o, [30], 1, waiting=10) == (pool.WAIT, None)     # the one being opened has room
    assert pool.choose(o, [30], 1, waiting=29) == (pool.OPEN, None)


@pytest.mark.parametrize("concurrent", [1, 30, 31, 100, 3900, 5000])
def test_concurrent_requests_open_as_many_connections_as_their_count_needs(concurrent):
    """Requests arriving at once (opens complete after all have chosen) never open more
    connections than ceil(n / 30), nor more than 130."""
    o = pool.PoolOptions()
    in_flight, opening, waiting = [], 0, 0
    for _ in range(concurrent):
        action, i = pool.choose(o, in_flight, opening, waiting)
        if action == pool.USE:
            in_flight[i] += 1
        elif action == pool.OPEN:
            opening += 1
        else:
            waiting += 1
    assert opening == min(math.ceil(concurrent / 30), 130)


def test_idle_connections_are_kept_by_default_and_endpoints_close_after_an_hour():
    o = pool.PoolOptions()
    assert not pool.connection_expired(o, 0, last_used_s=0, now_s=10 ** 6)
    assert not pool.endpoint_expired(o, last_used_s=0, now_s=3599.9)
    assert pool.endpoint_expired(o, last_used_s=0, now_s=3600)
    short = pool.PoolOptions(idle_connection_timeout_s=10)
    assert pool.connection_expired(short, 0, last_used_s=5, now_s=15)
    assert not pool.connection_expired(short, 1, last_used_s=5, now_s=15)   # busy: never idle


def test_an_idle_connection_is_pinged_at_the_heartbeat_interval():
    assert not pool.needs_ping(D.HEARTBEAT_INTERVAL_S, last_sent_s=100, now_s=100 + D.HEARTBEAT_INTERVAL_S - 0.1)
    assert pool.needs_ping(D.HEARTBEAT_INTERVAL_S, last_sent_s=100, now_s=100 + D.HEARTBEAT_INTERVAL_S)


def test_the_ping_interval_is_the_nodes_heartbeat_within_half_its_idle_timeout():
    assert pool.heartbeat_interval_s(15_000, 60_000) == 15.0
    assert pool.heartbeat_interval_s(15_000, 1_000) == 0.5       # a node that idles connections out fast
    assert pool.heartbeat_interval_s(None, None) == pool.HEARTBEAT_DEFAULT_S == D.HEARTBEAT_INTERVAL_S
    assert pool.heartbeat_interval_s(1, 1) == pool.HEARTBEAT_MIN_S


def test_bad_pool_limits_are_refused():
    with pytest.raises(ValueError):
        pool.PoolOptions(max_requests_per_connection=0)
