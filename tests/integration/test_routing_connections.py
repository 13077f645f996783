"""Proves connections-based read balancing (PUT /routing {"strategy": "connections"}) on a real
emulator: keep-alive clients (raw signed requests on persistent sockets, and separate official
SDK clients) are pinned to replicas by fewest pinned connections, every eventual read of a
connection is served by its one replica (judged by the per-replica reads_served counters), session
reads are routed per request, closing connections unpins them (pinned_connections back to 0 in
/topology and /metrics), and switching the strategy drops every pin at once."""
import asyncio
import http.client
import urllib.request

import pytest
from azure.cosmos import PartitionKey

from regionlab.emulator import cli
from regionlab.emulator.ctl import ControlError
from sdk_harness import control_json, host_port, make_client, signed_headers

EAST = "East US"
PATH = "/dbs/db/colls/c/docs/x"
READS_PER_CONNECTION = 4


def _replicas(emu, region=EAST):
    part = control_json(emu, "GET", "/topology")["databases"][0]["containers"][0]["partitions"][0]
    return part["regions"][region]["replicas"]


def _served(emu):
    return [r["reads_served"] for r in _replicas(emu)]


def _pinned(emu):
    return [r["pinned_connections"] for r in _replicas(emu)]


def _read(conn, emu, consistency="Eventual"):
    headers = {"x-ms-documentdb-partitionkey": '["p"]', "x-ms-consistency-level": consistency}
    conn.request("GET", PATH, headers=signed_headers(emu.key, "GET", PATH, headers))
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 200 and not resp.will_close       # the same socket serves the next read


def _server(emu):
    return emu.emulator._listeners[EAST][0]


def _wait_all_closed(emu):
    """Until the East US endpoint holds no connection (the server saw every close)."""
    asyncio.run_coroutine_threadsafe(_server(emu).wait_closed(None), emu.loop).result(10)


def _close(emu, clients):
    """Close these client connections and wait until the server has seen each of them close."""
    names = {c.sock.getsockname() for c in clients}

    def theirs(_account):
        return {c for c in _server(emu).connections
                if c.transport is not None and c.transport.get_extra_info("peername") in names}
    server_side = emu.call(theirs)
    assert len(server_side) == len(clients)
    for c in clients:
        c.close()
    asyncio.run_coroutine_threadsafe(_server(emu).wait_closed(server_side), emu.loop).result(10)


@pytest.fixture
def seeded(regionlab):
    with make_client(regionlab) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "x", "pk": "p"})
    out = control_json(regionlab, "PUT", "/routing", {"strategy": "connections", "primary_accepts_reads": False})
    assert out["strategy"] == "connections"
    return regionlab


def test_keep_alive_connections_spread_by_fewest_pinned_and_each_stays_on_its_replica(seeded):
    emu = seeded
    host, port = host_port(emu.region_endpoints[EAST])
    conns = [http.client.HTTPConnection(host, port, timeout=10) for _ in range(6)]
    owner = []
    for conn in conns:                           # each connection's first read pins it
        before = _served(emu)
        _read(conn, emu)
        after = _served(emu)
        moved = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
        assert len(moved) == 1 and after[moved[0]] == before[moved[0]] + 1
        owner.append(moved[0])
    assert owner == [1, 2, 3, 1, 2, 3]           # fewest pinned, primary off, ties to the lowest index
    assert _pinned(emu) == [0, 2, 2, 2]
    for conn, replica in zip(conns, owner):      # every later eventual read stays on the pin
        before = _served(emu)
        for _ in range(READS_PER_CONNECTION):
            _read(conn, emu)
        after = _served(emu)
        assert [b - a for a, b in zip(before, after)] == [READS_PER_CONNECTION if i == replica else 0
                                                          for i in range(4)]
    with urllib.request.urlopen(emu.control_endpoint + "metrics") as resp:
        text = resp.read().decode()
    assert 'regionlab_replica_pinned_connections{region="East US",database="db",container="c",partition="0",' \
           'replica="2",role="secondary"} 2' in text
    _close(emu, conns[:3])
    assert _pinned(emu) == [0, 1, 1, 1]
    _close(emu, conns[3:])
    assert _pinned(emu) == [0, 0, 0, 0]
    assert all(r["in_flight"] == 0 for r in _replicas(emu))


def test_session_reads_are_routed_per_request_not_by_the_pin(seeded):
    emu = seeded
    host, port = host_port(emu.region_endpoints[EAST])
    first, second = (http.client.HTTPConnection(host, port, timeout=10) for _ in range(2))
    _read(first, emu)
    _read(second, emu)                           # pinned to replica 2
    assert _pinned(emu) == [0, 1, 1, 0]
    before = _served(emu)
    for _ in range(3):
        _read(second, emu, consistency="Session")
    after = _served(emu)
    # Per request, with nothing in flight: the highest weight / (in_flight + 1) is a tie, so the
    # lowest index, replica 1, not the pinned replica 2. And a session read pins nothing.
    assert [b - a for a, b in zip(before, after)] == [0, 3, 0, 0] and _pinned(emu) == [0, 1, 1, 0]
    _close(emu, [first, second])
    assert _pinned(emu) == [0, 0, 0, 0]


def test_switching_the_strategy_drops_every_pin_and_pins_rebuild(seeded):
    emu = seeded
    host, port = host_port(emu.region_endpoints[EAST])
    conns = [http.client.HTTPConnection(host, port, timeout=10) for _ in range(3)]
    for conn in conns:
        _read(conn, emu)
    assert _pinned(emu) == [0, 1, 1, 1]
    control_json(emu, "PUT", "/routing", {"strategy": "active_requests"})
    assert _pinned(emu) == [0, 0, 0, 0]
    before = _served(emu)
    _read(conns[2], emu)                         # per request again: replica 1, no pin
    assert [b - a for a, b in zip(before, _served(emu))] == [0, 1, 0, 0] and _pinned(emu) == [0, 0, 0, 0]
    control_json(emu, "PUT", "/routing", {"strategy": "connections", "region": EAST})    # one region's override
    control_json(emu, "PUT", "/routing/weights", {"weights": [1, 1, 1, 4]})
    for conn in conns:
        _read(conn, emu)
    assert _pinned(emu) == [0, 0, 0, 3]          # 4 / (2 + 1) still beats 1 / (0 + 1)
    _close(emu, conns)
    assert _pinned(emu) == [0, 0, 0, 0]


def test_official_sdk_clients_each_read_from_their_own_pinned_replica(seeded):
    emu = seeded
    clients = [make_client(emu, consistency_level="Eventual", preferred_locations=[EAST]) for _ in range(3)]
    try:
        owner = []
        for client in clients:
            container = client.get_database_client("db").get_container_client("c")
            before = _served(emu)
            for _ in range(READS_PER_CONNECTION):
                assert container.read_item("x", partition_key="p")["id"] == "x"
            delta = [b - a for a, b in zip(before, _served(emu))]
            assert sorted(delta) == [0, 0, 0, READS_PER_CONNECTION], delta
            owner.append(delta.index(READS_PER_CONNECTION))
        assert owner == [1, 2, 3] and _pinned(emu) == [0, 1, 1, 1]
    finally:
        for client in clients:
            client.close()
    _wait_all_closed(emu)
    assert _pinned(emu) == [0, 0, 0, 0]


def test_the_cli_sets_the_strategy_and_unknown_ones_are_refused(seeded, capsys):
    base = ["--control", seeded.control_endpoint]
    assert cli.main(["routing", "set", "--strategy", "active_requests", *base]) == 0
    assert '"strategy": "active_requests"' in capsys.readouterr().out
    assert cli.main(["routing", "set", "--strategy", "connections", "--region", EAST, *base]) == 0
    assert control_json(seeded, "GET", "/routing")["regions"][EAST] == {"strategy": "connections"}
    with pytest.raises(ControlError) as e:
        control_json(seeded, "PUT", "/routing", {"strategy": "sticky"})
    assert e.value.status == 400 and "one of active_requests, connections" in e.value.message


@pytest.mark.regionlab_config(read_strategy="connections", primary_accepts_reads=False)
def test_the_fixture_option_starts_the_account_with_connections(regionlab):
    assert control_json(regionlab, "GET", "/routing")["strategy"] == "connections"
    with make_client(regionlab) as client:
        client.create_database("db").create_container("c", PartitionKey(path="/pk")).create_item({"id": "x", "pk": "p"})
    host, port = host_port(regionlab.region_endpoints[EAST])
    conns = [http.client.HTTPConnection(host, port, timeout=10) for _ in range(2)]
    for conn in conns:
        _read(conn, regionlab)
    assert _pinned(regionlab) == [0, 1, 1, 0]
    _close(regionlab, conns)
    assert _pinned(regionlab) == [0, 0, 0, 0]
