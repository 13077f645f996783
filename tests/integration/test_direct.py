"""Direct mode end to end: a test client speaking only client/protocol/direct.py resolves
replicas through the gateway's address feed, reads and writes through the nodes' TCP ports,
follows a primary crash, a replica move (410 -> refresh) and a node crash, sees 404/1002 and
the quorum LSNs, and gets the same answers as the gateway for the same operations. Real
emulator, real sockets, the official SDK for the gateway side."""
import asyncio
import json
import socket
import time
import urllib.request

import pytest
from azure.cosmos import PartitionKey

from regionlab.client.protocol import direct as D
from direct_client import Connection, addresses, feed, item_body, target
from sdk_harness import control, inject, make_client

POLL_DEADLINE_S = 10.0
EAST = "East US"


def setup(emu, partitions_items=("a", "b", "c")):
    with make_client(emu) as client:
        c = client.create_database("db").create_container("items", PartitionKey(path="/pk"))
        for i in partitions_items:
            c.create_item({"id": i, "pk": "p", "n": i})


def wait_feed(emu, pred, what: str) -> dict:
    """Refresh the addresses (as a client does after a 410) until pred holds, bounded."""
    deadline = time.monotonic() + POLL_DEADLINE_S
    while time.monotonic() < deadline:
        f = feed(emu)
        if pred(f):
            return f
    raise AssertionError(f"the address feed never showed {what}")


async def connect(emu, entry) -> tuple:
    host, port, key = target(entry)
    return await Connection.open(host, port, emu.key), key


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except ConnectionRefusedError:
        return True


# ---- the address feed ---------------------------------------------------------------------
def test_address_feed_lists_four_replicas_on_distinct_nodes_with_one_primary(regionlab):
    setup(regionlab)
    east_ports = {n["port"] for n in regionlab.direct_nodes if n["region"] == EAST}
    f = feed(regionlab)
    assert list(f) == ["0"]
    entries = f["0"]["all"]
    assert len(entries) == 4 and sum(e["isPrimary"] for e in entries) == 1
    assert {e["protocol"] for e in entries} == {"rlmp"}
    ports = [target(e)[1] for e in entries]
    assert len(set(ports)) == 4 and set(ports) <= east_ports
    assert all(e["physcialUri"].startswith("rlmp://127.0.0.1:") for e in entries)
    # a regional endpoint answers for its own region
    west = feed(regionlab, regionlab.region_endpoints["West US"])["0"]["all"]
    assert {e["region"] for e in west} == {"West US"}
    # unsigned: 401; another protocol: empty (never our addresses under rntbd)
    assert addresses(regionlab.endpoint, regionlab.key, "db", "items", signed=False)[0] == 401
    status, body = addresses(regionlab.endpoint, regionlab.key, "db", "items", protocol="rntbd")
    assert status == 200 and body["Addresss"] == []


def test_topology_and_ready_line_list_nodes_ports_and_replicas(regionlab):
    setup(regionlab)
    status, topo = control(regionlab, "GET", "/topology")
    assert status == 200
    east = topo["direct"]["regions"][EAST]["nodes"]
    assert len(east) == 4 and all(n["listening"] for n in east)
    held = [r for n in east for r in n["replicas"]]
    assert sorted(r["replica"] for r in held) == [0, 1, 2, 3]
    f = feed(regionlab)["0"]["all"]
    for e in f:
        node = east[e["node"]]
        assert node["port"] == target(e)[1] and e["replica"] in [r["key"] for r in node["replicas"]]


# ---- handshake ----------------------------------------------------------------------------
def test_handshake_refuses_a_wrong_mac_and_a_foreign_version(regionlab):
    setup(regionlab)
    entry = feed(regionlab)["0"]["primary"]
    host, port, key = target(entry)

    async def main():
        with pytest.raises(ConnectionError, match="401"):
            await Connection.open(host, port, regionlab.key, mac=b"\x00" * 32)
        with pytest.raises(ConnectionError, match=str(D.SUB_VERSION)):
            await Connection.open(host, port, regionlab.key, versions=[99])
        conn = await Connection.open(host, port, regionlab.key)
        assert conn.challenge["max_in_flight"] == D.IN_FLIGHT_PER_CONNECTION_MAX
        assert conn.challenge["version"] == 2 and len(conn.challenge["nonce"]) == D.NONCE_BYTES
        assert (await conn.request("read", key, item="a", pk='["p"]'))["status"] == 200
        await conn.close()
        assert conn.closed_with == {"t": "bye"} and conn.reply_shapes == {list}
        # a version 1 client still gets version 1: the same answers, as maps
        old = await Connection.open(host, port, regionlab.key, versions=[1])
        assert old.challenge["version"] == 1
        r = await old.request("read", key, item="a", pk='["p"]')
        assert r["status"] == 200 and item_body(r)["id"] == "a" and r["role"] == "primary" and "etag" in r
        w = await old.request("upsert", key, pk='["p"]', body=b'{"id":"v1","pk":"p"}')
        assert w["status"] == 201 and w["session"].startswith("0:") and w["quorum_lsn"] >= w["item_lsn"]
        assert (await old.request("read", key, item="zz", pk='["p"]'))["status"] == 404
        await old.close()
        assert old.reply_shapes == {dict}
    asyncio.run(main())


# ---- point operations, roles, LSNs ----------------------------------------------------------
def test_writes_go_to_the_primary_reads_to_any_replica_and_roles_are_enforced(regionlab):
    setup(regionlab)
    f = feed(regionlab)["0"]

    async def main():
        primary, pkey = await connect(regionlab, f["primary"])
        created = await primary.request("create", pkey, pk='["p"]', body=b'{"id":"d","pk":"p","v":1}')
        assert created["status"] == 201 and created["role"] == "primary"
        assert created["quorum_lsn"] >= created["item_lsn"] and created["session"].startswith("0:")
        for entry in f["all"]:
            conn, key = await connect(regionlab, entry)
            r = await conn.request("read", key, item="d", pk='["p"]', session=created["session"])
            assert r["status"] == 200 and item_body(r)["v"] == 1
            assert r["role"] == ("primary" if entry["isPrimary"] else "secondary")
            assert r["lsn"] >= created["item_lsn"] and r["quorum_lsn"] >= created["item_lsn"]
            if not entry["isPrimary"]:
                w = await conn.request("upsert", key, pk='["p"]', body=b'{"id":"d","pk":"p"}')
                assert (w["status"], w["sub"]) == (410, D.SUB_NOT_PRIMARY)
                # a replica this node does not hold: 410, refresh
                other = f["primary"]["replica"]
                w = await conn.request("read", other, item="d", pk='["p"]')
                assert (w["status"], w["sub"]) == (410, D.SUB_REPLICA_NOT_HERE)
            await conn.close()
        for op, fields, status in [
                ("replace", dict(item="d", pk='["p"]', body=b'{"id":"d","pk":"p","v":2}'), 200),
                ("patch", dict(item="d", pk='["p"]', body=b'{"operations":[{"op":"set","path":"/v","value":3}]}'), 200),
                ("replace", dict(item="d", pk='["p"]', body=b'{"id":"d","pk":"p"}', if_match='"nope"'), 412),
                ("create", dict(pk='["p"]', body=b'{"id":"d","pk":"p"}'), 409),
                ("delete", dict(item="d", pk='["p"]'), 204),
                ("read", dict(item="d", pk='["p"]'), 404)]:
            r = await primary.request(op, pkey, **fields)
            assert r["status"] == status, (op, r)
        await primary.close()
    asyncio.run(main())
    # direct requests show in the counters
    status, topo = control(regionlab, "GET", "/topology")
    assert topo["direct_requests"][EAST]["create 201"] == 1
    with urllib.request.urlopen(regionlab.control_endpoint + "metrics", timeout=10) as r:
        text = r.read().decode()
    assert 'regionlab_direct_requests_total{region="East US",op="create",status="201",substatus="0"} 1' in text


@pytest.mark.regionlab_config(intra_region_delay_ms=0)
def test_a_lagging_secondary_answers_404_1002_for_a_session_it_cannot_serve(regionlab):
    setup(regionlab)
    f = feed(regionlab)["0"]
    lagging = next(e for e in f["all"] if not e["isPrimary"])
    index = int(lagging["replica"].rsplit("/", 1)[1])
    inject(regionlab, type="replica_slow", region=EAST, replica=index, delay_ms=60_000)

    async def main():
        primary, pkey = await connect(regionlab, f["primary"])
        w = await primary.request("upsert", pkey, pk='["p"]', body=b'{"id":"s","pk":"p"}')
        assert w["status"] == 201
        conn, key = await connect(regionlab, lagging)
        r = await conn.request("read", key, item="s", pk='["p"]', session=w["session"])
        assert (r["status"], r["sub"]) == (404, D.SUB_READ_SESSION_NOT_AVAILABLE)
        assert r["lsn"] < w["item_lsn"] <= r["quorum_lsn"]      # the LSNs say why
        # the primary serves it
        r = await primary.request("read", pkey, item="s", pk='["p"]', session=w["session"])
        assert r["status"] == 200
        # eventual consistency may read the lagging replica: it is simply not there yet
        r = await conn.request("read", key, item="s", pk='["p"]', consistency="Eventual")
        assert r["status"] == 404 and r["sub"] == 0
        await conn.close()
        await primary.close()
    asyncio.run(main())


def test_a_key_outside_the_named_replicas_range_is_410_1002(regionlab):
    with make_client(regionlab) as client:
        client.create_database("db").create_container("items", PartitionKey(path="/pk"), offer_throughput=12000)
    f = feed(regionlab)
    assert len(f) >= 2

    async def main():
        conn, key = await connect(regionlab, f["0"]["primary"])
        for n in range(50):
            r = await conn.request("create", key, pk=f'["k{n}"]', body=f'{{"id":"x","pk":"k{n}"}}'.encode())
            if r["status"] == 410:
                assert r["sub"] == D.SUB_PARTITION_KEY_RANGE_GONE
                break
            assert r["status"] == 201
        else:
            raise AssertionError("no key fell outside range 0")
        await conn.close()
    asyncio.run(main())


# ---- the same answers as the gateway --------------------------------------------------------
def _strip(doc):
    return {k: v for k, v in doc.items() if k not in ("_ts",)} if isinstance(doc, dict) else doc


def test_gateway_and_direct_give_the_same_answers_for_the_same_operations(regionlab):
    setup(regionlab)
    f = feed(regionlab)["0"]
    from sdk_harness import raw_request

    def gateway(method, path, body=None, headers=None):
        r = raw_request(regionlab, method, path, body, headers)
        return r.status, (json.loads(r.body) if r.body else None), r.headers

    async def main():
        conn, key = await connect(regionlab, f["all"][1])
        primary, pkey = await connect(regionlab, f["primary"])
        docs = "/dbs/db/colls/items/docs"
        pk = {"x-ms-documentdb-partitionkey": '["p"]'}
        # point read
        g = gateway("GET", docs + "/a", headers=pk)
        d = await conn.request("read", key, item="a", pk='["p"]')
        assert (g[0], g[1]) == (d["status"], item_body(d))
        # missing item, precondition, not modified
        g = gateway("GET", docs + "/zz", headers=pk)
        d = await conn.request("read", key, item="zz", pk='["p"]')
        assert g[0] == d["status"] == 404
        etag = item_body(await conn.request("read", key, item="a", pk='["p"]'))["_etag"]
        g = gateway("GET", docs + "/a", headers=dict(pk, **{"if-none-match": etag}))
        d = await conn.request("read", key, item="a", pk='["p"]', if_none_match=etag)
        assert g[0] == d["status"] == 304
        # query page, read feed page with continuation, change feed
        q = b'{"query":"SELECT c.id, c.n FROM c WHERE c.n >= @n ORDER BY c.id","parameters":[{"name":"@n","value":"b"}]}'
        g = gateway("POST", docs, q, dict(pk, **{"x-ms-documentdb-isquery": "true",
                                                  "content-type": "application/query+json"}))
        d = await conn.request("query", key, pk='["p"]', body=q)
        assert g[0] == d["status"] == 200 and g[1]["Documents"] == item_body(d)["Documents"] == [
            {"id": "b", "n": "b"}, {"id": "c", "n": "c"}]
        g = gateway("GET", docs, headers={"x-ms-max-item-count": "2"})
        d = await conn.request("read_feed", key, max_items=2)
        assert g[1]["Documents"] == item_body(d)["Documents"] and d["continuation"] == g[2]["x-ms-continuation"]
        d2 = await conn.request("read_feed", key, max_items=2, continuation=d["continuation"])
        assert [x["id"] for x in item_body(d2)["Documents"]] == ["c"]
        g = gateway("GET", docs, headers={"a-im": "Incremental Feed", "x-ms-documentdb-partitionkeyrangeid": "0"})
        d = await conn.request("change_feed", key)
        assert g[0] == d["status"] == 200 and g[1]["Documents"] == item_body(d)["Documents"]
        assert d["etag"] == g[2]["etag"]
        # a batch through the primary: the same result shape as the gateway's
        ops = json.dumps([{"operationType": "Create", "resourceBody": {"id": "b1", "pk": "p"}},
                          {"operationType": "Read", "id": "a"}]).encode()
        d = await primary.request("batch", pkey, pk='["p"]', body=ops)
        assert d["status"] == 200 and [r["statusCode"] for r in item_body(d)] == [201, 200]
        ops2 = json.dumps([{"operationType": "Create", "resourceBody": {"id": "b2", "pk": "p"}},
                           {"operationType": "Read", "id": "a"}]).encode()
        g = gateway("POST", docs, ops2, dict(pk, **{"x-ms-cosmos-is-batch-request": "true",
                                                    "x-ms-cosmos-batch-atomic": "true"}))
        assert g[0] == 200 and [r["statusCode"] for r in g[1]] == [201, 200]
        failing = json.dumps([{"operationType": "Create", "resourceBody": {"id": "a", "pk": "p"}}]).encode()
        d = await primary.request("batch", pkey, pk='["p"]', body=failing)
        g = gateway("POST", docs, failing, dict(pk, **{"x-ms-cosmos-is-batch-request": "true",
                                                       "x-ms-cosmos-batch-atomic": "true"}))
        assert g[0] == d["status"] == 207 and g[1][0]["statusCode"] == item_body(d)[0]["statusCode"] == 409
        # bad input answers the gateway's 400 with its message
        g = gateway("POST", docs, b'{"id": 5, "pk": "p"}', pk)
        d = await primary.request("create", pkey, pk='["p"]', body=b'{"id": 5, "pk": "p"}')
        assert g[0] == d["status"] == 400 and g[1]["code"] == item_body(d)["code"]
        await conn.close()
        await primary.close()
    asyncio.run(main())


# ---- faults: primary crash, replica move, node crash, blocked ports ---------------------------
@pytest.mark.regionlab_config(election_ms=50)
def test_a_client_follows_a_primary_crash_to_the_new_primary(regionlab):
    setup(regionlab)
    old = feed(regionlab)["0"]["primary"]
    inject(regionlab, type="primary_crash", region=EAST)

    async def main():
        conn, key = await connect(regionlab, old)
        r = await conn.request("upsert", key, pk='["p"]', body=b'{"id":"e","pk":"p"}')
        assert r["status"] == 410 and r["sub"] in (D.SUB_REPLICA_DOWN, D.SUB_NOT_PRIMARY)
        await conn.close()
        f = wait_feed(regionlab, lambda f: f["0"]["primary"]["replica"] != old["replica"], "a new primary")
        conn, key = await connect(regionlab, f["0"]["primary"])
        r = await conn.request("upsert", key, pk='["p"]', body=b'{"id":"e","pk":"p"}')
        assert r["status"] == 201
        await conn.close()
    asyncio.run(main())


@pytest.mark.regionlab_config(nodes_per_region=5)
def test_a_replica_move_makes_the_old_address_answer_410_and_the_feed_shows_the_new_one(regionlab):
    setup(regionlab)
    before = feed(regionlab)["0"]["all"][2]
    assert refused(target(before)[1]) is False

    async def main():
        old_conn, key = await connect(regionlab, before)
        assert (await old_conn.request("read", key, item="a", pk='["p"]'))["status"] == 200
        fid = inject(regionlab, type="replica_move", region=EAST, replica=2)
        r = await old_conn.request("read", key, item="a", pk='["p"]')
        assert (r["status"], r["sub"]) == (410, D.SUB_REPLICA_NOT_HERE)
        after = feed(regionlab)["0"]["all"][2]
        assert after["node"] != before["node"] and target(after)[1] != target(before)[1]
        new_conn, key2 = await connect(regionlab, after)
        assert key2 == key and (await new_conn.request("read", key, item="a", pk='["p"]'))["status"] == 200
        assert control(regionlab, "DELETE", f"/faults/{fid}")[0] == 200
        assert feed(regionlab)["0"]["all"][2]["node"] == before["node"]
        for c in (old_conn, new_conn):
            await c.close()
    asyncio.run(main())
    status, reply = control(regionlab, "POST", "/faults", {"type": "replica_move", "region": EAST, "replica": 0,
                                                           "to": feed(regionlab)["0"]["all"][1]["node"]})
    assert status == 400 and "already holds" in reply["error"]


@pytest.mark.regionlab_config(election_ms=50)
def test_a_node_crash_refuses_connections_downs_its_replicas_and_moves_the_primary(regionlab):
    setup(regionlab)
    old = feed(regionlab)["0"]["primary"]
    port = target(old)[1]
    fid = inject(regionlab, type="node_crash", region=EAST, node=old["node"])
    assert refused(port)
    f = wait_feed(regionlab, lambda f: f["0"]["primary"]["node"] != old["node"], "an election")
    crashed = [e for e in f["0"]["all"] if e["node"] == old["node"]]
    assert crashed and crashed[0]["state"] == "down"

    async def main():
        conn, key = await connect(regionlab, f["0"]["primary"])
        assert (await conn.request("upsert", key, pk='["p"]', body=b'{"id":"n","pk":"p"}'))["status"] == 201
        await conn.close()
    asyncio.run(main())
    assert control(regionlab, "DELETE", f"/faults/{fid}")[0] == 200
    assert not refused(port)
    assert all(e["state"] == "up" for e in feed(regionlab)["0"]["all"])


def test_blocked_direct_ports_refuse_connections_while_the_gateway_serves(regionlab):
    setup(regionlab)
    ports = [n["port"] for n in regionlab.emulator.ready_info()["direct"]["nodes"]]
    fid = inject(regionlab, type="direct_ports_blocked")
    assert all(refused(p) for p in ports)
    with make_client(regionlab) as client:
        assert client.get_database_client("db").get_container_client("items").read_item("a", "p")["id"] == "a"
    assert control(regionlab, "DELETE", f"/faults/{fid}")[0] == 200
    assert not any(refused(p) for p in ports)


def test_a_region_outage_in_the_refuse_mode_takes_its_nodes_down_with_its_gateway(regionlab):
    """The other modes: test_direct_acceptance.py (each fails the nodes as it fails the gateway)."""
    setup(regionlab)
    west = [n["port"] for n in regionlab.emulator.ready_info()["direct"]["nodes"] if n["region"] == "West US"]
    fid = inject(regionlab, type="region_outage", region="West US", mode="refuse")
    assert all(refused(p) for p in west)
    assert control(regionlab, "DELETE", f"/faults/{fid}")[0] == 200
    assert not any(refused(p) for p in west)


def test_a_region_added_at_runtime_gets_nodes_and_a_removed_one_loses_them(regionlab):
    setup(regionlab)
    status, region = control(regionlab, "POST", "/regions", {"name": "North Europe"})
    assert status == 201
    nodes = [n for n in regionlab.emulator.ready_info()["direct"]["nodes"] if n["region"] == "North Europe"]
    assert len(nodes) == 4
    f = feed(regionlab, region["endpoint"])["0"]
    assert {e["region"] for e in f["all"]} == {"North Europe"}

    async def main():
        conn, key = await connect(regionlab, f["all"][0])
        r = await conn.request("read", key, item="a", pk='["p"]')
        assert r["status"] == 200 and item_body(r)["id"] == "a"     # seeded from the write region
        await conn.close()
    asyncio.run(main())
    assert control(regionlab, "DELETE", "/regions/North%20Europe")[0] == 200
    assert all(refused(n["port"]) for n in nodes)


@pytest.mark.regionlab_config(consistency="Strong")
def test_strong_reads_carry_the_lsns_a_client_needs_to_judge_a_read_quorum(regionlab):
    setup(regionlab)
    f = feed(regionlab)["0"]
    secondaries = [e for e in f["all"] if not e["isPrimary"]]
    lagging, current = secondaries[0], secondaries[1]
    index = int(lagging["replica"].rsplit("/", 1)[1])
    inject(regionlab, type="replica_slow", region=EAST, replica=index, delay_ms=60_000)

    async def main():
        primary, pkey = await connect(regionlab, f["primary"])
        w = await primary.request("upsert", pkey, pk='["p"]', body=b'{"id":"q","pk":"p"}')
        assert w["status"] == 201 and w["global_lsn"] >= w["item_lsn"]   # Strong: a majority of regions has it
        replies = []
        for entry in (lagging, current):                 # a read quorum: two replicas
            conn, key = await connect(regionlab, entry)
            replies.append(await conn.request("read", key, item="q", pk='["p"]'))
            await conn.close()
        stale, fresh = replies
        assert stale["lsn"] < w["item_lsn"] <= stale["global_lsn"]     # this replica says it is behind
        assert stale["status"] == 404
        assert fresh["lsn"] >= fresh["global_lsn"] >= w["item_lsn"] and fresh["status"] == 200
        best = max(replies, key=lambda r: r["lsn"])        # what the service's quorum reader does
        assert item_body(best)["id"] == "q"
        await primary.close()
    asyncio.run(main())


def test_direct_point_reads_count_in_the_per_replica_read_counters(regionlab):
    """A direct read is a read its replica served: reads_served (GET /topology, /metrics) counts
    it as it counts the gateway's."""
    setup(regionlab)
    entry = next(e for e in feed(regionlab)["0"]["all"] if not e["isPrimary"])
    index = int(entry["replica"].rsplit("/", 1)[1])

    def served(account):
        rs = account.databases["db"].containers["items"].partitions[0].replica_sets[EAST]
        return rs.replicas[index].reads_served

    before = regionlab.call(served)

    async def main():
        conn, key = await connect(regionlab, entry)
        replies = [await conn.request("read", key, item="a", pk='["p"]') for _ in range(3)]
        assert [r["status"] for r in replies] == [200, 200, 200]
        await conn.close()
    asyncio.run(main())
    assert regionlab.call(served) == before + 3
