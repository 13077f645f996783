"""Proves a direct address reaches only the emulator that published it: two emulators on one
machine hold the same replica keys (resource ids are sequential) and accept the same key, yet a
hello naming emulator A's instance is refused 410/21005 and closed by B's node, before any
request; a hello naming none (an older client) is still served; and the bundled client, whose
cached addresses of A lead to B's nodes after A restarts (B took A's node ports), refreshes its
addresses and reads and writes A's data, never B's. Real emulator processes and in-process
emulators, real sockets, the official SDK for the gateway side."""
import asyncio
import dataclasses
import json
import urllib.request

import pytest
from azure.cosmos import CosmosClient as SdkClient, PartitionKey
from azure.cosmos.exceptions import CosmosResourceNotFoundError

from regionlab.client import CosmosClient
from regionlab.client.protocol import direct as D
from direct_client import Connection, HandshakeRefused, addresses, item_body
from regionlab.emulator.testing import make_config, running_emulator, start
from sdk_harness import make_client
from test_cli import spawn
from test_direct_acceptance import _free_block

EAST = "East US"
NODES = 4                                           # --nodes-per-region's default
REPLICAS = 4                                        # of one partition's replica set


def _setup(sdk, owner: str) -> None:
    """The same database and containers, created in the same order: the same rids, so the
    same replica keys, in every emulator."""
    db = sdk.create_database("db")
    db.create_container("reads", PartitionKey(path="/pk")).upsert_item({"id": "i", "pk": "p", "owner": owner})
    db.create_container("writes", PartitionKey(path="/pk"))


def _feed(endpoint: str, key: str, coll: str = "reads") -> list:
    status, body = addresses(endpoint, key, "db", coll)
    assert status == 200, body
    return body["Addresss"]


def _by_key(entries: list) -> dict:
    """{replica key: (host, port, instance)} of a feed."""
    out = {}
    for e in entries:
        host, port, key, instance = D.parse_address(e["physcialUri"])
        out[key] = (host, port, instance)
    return out


async def _read(host, port, key, replica, instance=None):
    conn = await Connection.open(host, port, key, instance=instance)
    try:
        return item_body(await conn.request(D.READ, replica, item="i", pk='["p"]'))
    finally:
        await conn.close()


async def _refused(host, port, key, instance) -> tuple:
    """The error frame a node answered the hello with (through the test client), and every frame
    a second such hello on a raw socket got until the node closed it."""
    with pytest.raises(HandshakeRefused) as refused:
        await Connection.open(host, port, key, instance=instance)
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(D.encode(D.hello(instance=instance)))
    decoder, frames = D.FrameDecoder(), []
    while True:
        data = await asyncio.wait_for(reader.read(65536), 10)
        if not data:
            break                                   # the node closed: nothing more comes
        frames += decoder.feed(data)
    writer.close()
    return refused.value.frame, frames


# ---- two emulators at once: the node checks the instance the hello names ---------------------------
def test_another_emulators_node_refuses_a_hello_naming_this_emulators_instance_and_serves_old_hellos():
    with running_emulator(regions=[EAST]) as a, running_emulator(regions=[EAST]) as b:
        for emu, owner in ((a, "A"), (b, "B")):
            with make_client(emu) as sdk:
                _setup(sdk, owner)
        feed_a, feed_b = _by_key(_feed(a.endpoint, a.key)), _by_key(_feed(b.endpoint, b.key))
        assert set(feed_a) == set(feed_b) and len(feed_a) == REPLICAS    # the same replica keys in both
        ids = {emu.emulator.direct.ready_info()["instance"] for emu in (a, b)}
        assert len(ids) == 2 and {i for _, _, i in feed_a.values()} == {a.emulator.topology.instance}
        assert {i for _, _, i in feed_b.values()} == {b.emulator.topology.instance}
        replica = sorted(feed_a)[0]
        host, port_a, instance_a = feed_a[replica]
        _, port_b, instance_b = feed_b[replica]
        assert a.key == b.key and port_a != port_b

        async def main():
            refusal, frames = await _refused(host, port_b, b.key, instance_a)   # A's address, B's node
            assert frames == [refusal]                  # no challenge, nothing after the error: closed
            assert (refusal["status"], refusal["sub"]) == (410, D.SUB_INSTANCE_MISMATCH)
            assert instance_a in refusal["message"] and "refresh the addresses" in refusal["message"]
            assert (await _read(host, port_a, a.key, replica, instance_a))["owner"] == "A"
            assert (await _read(host, port_b, b.key, replica, instance_b))["owner"] == "B"
            # An older client's hello names no instance: not checked, served as before.
            assert (await _read(host, port_b, b.key, replica))["owner"] == "B"
            bad, _ = await _refused(host, port_b, b.key, ["not", "a", "string"])
            assert (bad["status"], bad["sub"]) == (400, D.SUB_HANDSHAKE)
        asyncio.run(main())
        assert b.control("GET", "/topology")["direct_requests"].get(EAST, {}).get("read 200") == 2


def test_a_configured_instance_id_is_what_the_addresses_and_the_challenge_carry():
    with running_emulator(regions=[EAST], instance_id="ci-run-7") as emu:
        with make_client(emu) as sdk:
            _setup(sdk, "A")
        entries = _feed(emu.endpoint, emu.key)
        assert all("/apps/ci-run-7/colls/" in e["physcialUri"] for e in entries)
        assert all(e["logicalUri"] == e["physcialUri"] for e in entries)
        host, port, replica = D.parse_uri(entries[0]["physcialUri"])
        assert replica == entries[0]["replica"]         # the key a request names carries no instance

        async def main():
            conn = await Connection.open(host, port, emu.key, instance="ci-run-7")
            await conn.close()
            return conn.challenge
        assert D.challenge_fields(asyncio.run(main()))["instance"] == "ci-run-7"
    with pytest.raises(ValueError, match="instance_id"):
        start(dataclasses.replace(make_config(), instance_id="a/b"))


# ---- a restart: the bundled client's stale addresses lead to another emulator's nodes --------------
def _args(*args) -> tuple:
    return ("--regions", EAST, "--control-port", "0", *args)


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def _hops(result) -> list:
    return [(int(r["address"].rsplit(":", 1)[1]), r.get("status"), r.get("sub"))
            for r in result.diagnostics.to_dict()["replicas_contacted"]]


def test_after_a_restart_the_client_refreshes_addresses_another_emulator_took_and_never_touches_its_data(tmp_path):
    block = _free_block(2 + NODES)                  # A's gateway (global, East US), then its nodes
    port, nodes = block, f"{block + 2}-{block + 1 + NODES}"
    node_ports = set(range(block + 2, block + 2 + NODES))
    data = tmp_path / "data"
    for d in ("a", "b", "a2"):
        (tmp_path / d).mkdir()
    first = spawn(tmp_path / "a", *_args("--port", str(port), "--direct-ports", nodes, "--data-dir", str(data)))
    cli = first.__enter__()
    try:
        key, instance_a = cli.info["key"], cli.info["direct"]["instance"]
        with SdkClient(cli.info["account_endpoint"], key) as sdk:
            _setup(sdk, "A")
        client = CosmosClient(f"http://127.0.0.1:{port}/", credential=key, connection_mode="direct")
        reads = client.get_database_client("db").get_container_client("reads")
        writes = client.get_database_client("db").get_container_client("writes")
        assert reads.read_item("i", partition_key="p")["owner"] == "A"     # the addresses of A, cached
        writes.upsert_item({"id": "seed", "pk": "p"})
        old = _by_key(_feed(cli.info["account_endpoint"], key))
        first.__exit__(None, None, None)
        first = None
        with spawn(tmp_path / "b", *_args("--port", "0", "--direct-ports", nodes)) as b:   # A's node ports
            with SdkClient(b.info["account_endpoint"], key) as sdk_b:
                _setup(sdk_b, "B")
                assert _by_key(_feed(b.info["account_endpoint"], key)) == {
                    k: (h, p, b.info["direct"]["instance"]) for k, (h, p, _) in old.items()}   # same keys, same ports
                with spawn(tmp_path / "a2", *_args("--port", str(port), "--direct-ports", "0",
                                                   "--data-dir", str(data))) as a2:
                    assert a2.info["restored_items"] > 0 and a2.info["direct"]["instance"] != instance_a
                    read = reads.read_item("i", partition_key="p")
                    written = writes.upsert_item({"id": "w", "pk": "p", "owner": "client"})
                    b_served = _get(b.info["control_endpoint"] + "topology")["direct_requests"]
                    with SdkClient(a2.info["account_endpoint"], key) as sdk_a2:
                        in_a2 = sdk_a2.get_database_client("db").get_container_client("writes").read_item("w", "p")
                with pytest.raises(CosmosResourceNotFoundError):
                    sdk_b.get_database_client("db").get_container_client("writes").read_item("w", "p")
                assert sdk_b.get_database_client("db").get_container_client("reads").read_item("i", "p")["owner"] == "B"
        client.close()
    finally:
        if first is not None:
            first.__exit__(None, None, None)
    assert read["owner"] == "A" and in_a2["owner"] == "client"
    for result in (read, written):
        hops = _hops(result)
        assert hops[0][0] in node_ports and hops[0][1:] == (410, D.SUB_INSTANCE_MISMATCH), hops
        assert hops[-1][0] not in node_ports and hops[-1][1] in (200, 201), hops       # A's new node
        assert result.diagnostics.to_dict()["attempts"][-1]["direct"]["refreshes"] == [
            f"410/{D.SUB_INSTANCE_MISMATCH}"]
    assert sum(sum(by_op.values()) for by_op in b_served.values()) == 0      # B's nodes served nothing
