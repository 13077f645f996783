"""Acceptance of issue #12 (direct mode) through its public surfaces only: the CLI flags and ready
line, the gateway's signed address feed, the control port (faults, /topology, /throttle,
/metrics) and the nodes' TCP ports, driven by a small blocking client written here from
client/protocol/direct.py and docs/direct-protocol.md alone (no emulator internals, none of the
other tests' helpers for the wire). Each test names the promise of the issue it checks; real
emulators and processes, real sockets, the official SDK to create containers; nothing sleeps:
waits are on replies, closes and the control port."""
import json
import os
import random
import signal
import socket
import urllib.error
import urllib.request
from email.utils import formatdate

import pytest
from azure.cosmos import CosmosClient, PartitionKey

from client.protocol import direct as D
from client.protocol.auth import authorization_header
from sdk_harness import client_kwargs
from test_cli import EXIT_TIMEOUT_S, spawn

EAST, WEST = "East US", "West US"
PK = '["p"]'
REPLY_TIMEOUT_S = 10.0                   # a guard against hanging, never a wait for something
NODES = 4                                # --nodes-per-region's default
REGIONS = ("East US", "East US 2", "West US")
NO_LAG = {(a, b): 0 for a in REGIONS for b in REGIONS if a != b}     # reads in West US see East's writes


# ---- the black-box client -------------------------------------------------------------------
class Probe:
    """One blocking connection to a node: hello, challenge, auth (HMAC-SHA256 of the nonce with
    the account key), ready; then requests by id, answered in any order."""

    def __init__(self, host: str, port: int, key: str, versions=D.PROTOCOL_VERSIONS):
        self.sock = socket.create_connection((host, port), timeout=REPLY_TIMEOUT_S)
        self.decoder = D.FrameDecoder()
        self.queue: list = []
        self.replies: dict = {}
        self.next_id = 0
        self.send(D.hello(versions, agent="acceptance-probe"))
        self.challenge = self.frame()
        if self.challenge["t"] != D.CHALLENGE:
            raise ConnectionError(f"handshake refused: {self.challenge}")
        self.version = self.challenge["version"]
        self.send(D.auth(D.handshake_mac(key, self.challenge["nonce"])))
        ready = self.frame()
        if ready["t"] != D.READY:
            raise ConnectionError(f"handshake refused: {ready}")

    def send(self, frame) -> None:
        self.sock.sendall(D.encode(frame))

    def frame(self):
        while not self.queue:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by the node")
            self.queue += self.decoder.feed(data)
        return self.queue.pop(0)

    def submit(self, op: str, replica: str, item=None, pk=None, body=None, **options) -> int:
        self.next_id += 1
        self.send(D.request(self.version, self.next_id, op, replica, item=item, pk=pk, body=body, **options))
        return self.next_id

    def reply(self, rid: int) -> dict:
        while rid not in self.replies:
            f = self.frame()
            if D.frame_type(f) != D.RESPONSE:
                raise ConnectionError(f"the node sent {f} instead of reply {rid}")
            self.replies[D.reply_id(f)] = D.named_reply(f)
        return self.replies.pop(rid)

    def call(self, op: str, replica: str, **fields) -> dict:
        return self.reply(self.submit(op, replica, **fields))

    def close(self) -> None:
        self.sock.close()


def ended(sock) -> tuple[list, str]:
    """(frames, "eof" or "reset"): what a connection received until the node closed it."""
    decoder, frames = D.FrameDecoder(), []
    sock.settimeout(REPLY_TIMEOUT_S)
    while True:
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            return frames, "reset"
        if not data:
            return frames, "eof"
        frames += decoder.feed(data)


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=REPLY_TIMEOUT_S).close()
        return False
    except ConnectionRefusedError:
        return True


def body(reply: dict):
    return json.loads(reply["body"]) if reply.get("body") else None


# ---- the gateway and the control port, as any client reaches them -----------------------------
def address_feed(endpoint: str, key: str, db="db", coll="items", ranges=None, protocol=D.PROTOCOL):
    """(status, body) of GET /addresses/, signed as docs/direct-protocol.md says."""
    query = f"$resolveFor=dbs/{db}/colls/{coll}/docs&$filter=protocol%20eq%20{protocol}"
    if ranges is not None:
        query += "&$partitionKeyRangeIds=" + ",".join(ranges)
    date = formatdate(usegmt=True)
    headers = {"x-ms-date": date, "x-ms-version": "2020-07-15",
               "authorization": authorization_header(key, "GET", "addresses", "", date)}
    req = urllib.request.Request(f"{endpoint}addresses/?{query}", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=REPLY_TIMEOUT_S) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def replicas(endpoint: str, key: str, range_id="0") -> list:
    """The address feed's entries of one range, by replica index."""
    status, feed = address_feed(endpoint, key)
    assert status == 200, feed
    return sorted((a for a in feed["Addresss"] if a["partitionKeyRangeId"] == range_id),
                  key=lambda a: int(D.parse_uri(a["physcialUri"])[2].rsplit("/", 1)[1]))


def primary_of(entries: list) -> dict:
    (p,) = [a for a in entries if a["isPrimary"]]
    return p


def open_probe(emu, entry: dict) -> tuple[Probe, str]:
    host, port, key = D.parse_uri(entry["physcialUri"])
    return Probe(host, port, emu.key), key


def control(control_endpoint: str, method: str, path: str, payload=None):
    data = json.dumps(payload).encode() if payload is not None else None
    req = urllib.request.Request(control_endpoint.rstrip("/") + path, data=data, method=method,
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read()
            return r.status, (json.loads(text) if r.headers.get_content_type() == "application/json" else text.decode())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def fault(emu, **spec) -> int:
    status, reply = control(emu.control_endpoint, "POST", "/faults", spec)
    assert status == 201, reply
    return reply["id"]


def heal(emu, fid: int) -> None:
    status, reply = control(emu.control_endpoint, "DELETE", f"/faults/{fid}")
    assert status == 200, reply


def topology(emu) -> dict:
    status, topo = control(emu.control_endpoint, "GET", "/topology")
    assert status == 200, topo
    return topo


def metrics(emu) -> str:
    with urllib.request.urlopen(emu.control_endpoint + "metrics", timeout=REPLY_TIMEOUT_S) as r:
        return r.read().decode()


def setup(endpoint: str, key: str, **container) -> None:
    with CosmosClient(endpoint, key, **client_kwargs()) as client:
        c = client.create_database("db").create_container("items", PartitionKey(path="/pk"), **container)
        for i in "abc":
            c.create_item({"id": i, "pk": "p", "n": i})


def doc(id: str, **extra) -> bytes:
    return json.dumps({"id": id, "pk": "p", **extra}).encode()


# ---- "a region outage takes its nodes down in the same mode as its gateway" -------------------
def _node_connections(emu, region: str, node: int) -> int:
    (n,) = [n for n in topology(emu)["direct"]["regions"][region]["nodes"] if n["node"] == node]
    return n["connections"]


@pytest.mark.parametrize("mode", ["unavailable", "refuse", "reset", "blackhole"])
@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_a_region_outage_fails_its_nodes_in_the_mode_its_gateway_fails(regionlab, mode):
    emu = regionlab
    setup(emu.endpoint, emu.key)
    west = emu.region_endpoints[WEST]
    entry = replicas(west, emu.key)[0]
    host, port, _ = D.parse_uri(entry["physcialUri"])
    probe, key = open_probe(emu, entry)
    assert probe.call("read", key, item="a", pk=PK)["status"] == 200
    fid = fault(emu, type="region_outage", region=WEST, mode=mode)
    if mode == "unavailable":
        # the node stays up and answers every request 503, as the region's gateway does
        assert address_feed(west, emu.key)[0] == 503
        r = probe.call("read", key, item="a", pk=PK)
        assert (r["status"], r["sub"]) == (503, 0) and body(r)["code"] == "ServiceUnavailable"
        fresh = Probe(host, port, emu.key)                   # new connections are accepted too
        w = fresh.call("upsert", key, pk=PK, body=doc("o1"))
        assert w["status"] == 503 and w["activity_id"]
        assert topology(emu)["direct_requests"][WEST].get("read 503", 0) >= 1
        heal(emu, fid)
        assert probe.call("read", key, item="a", pk=PK)["status"] == 200    # the same connection
        assert fresh.call("read", key, item="o1", pk=PK)["status"] == 404   # nothing was applied
    elif mode == "refuse":
        frames, _ = ended(probe.sock)
        assert frames == []                                  # dropped, no goodbye
        assert refused(port)
        heal(emu, fid)
        assert Probe(host, port, emu.key).call("read", key, item="a", pk=PK)["status"] == 200
    elif mode == "reset":
        assert ended(probe.sock) == ([], "reset")            # the open connection is reset
        new = socket.create_connection((host, port), timeout=REPLY_TIMEOUT_S)   # accepted ...
        new.sendall(D.encode(D.hello()))
        assert ended(new) == ([], "reset")                   # ... and reset once it speaks
        heal(emu, fid)
        assert Probe(host, port, emu.key).call("read", key, item="a", pk=PK)["status"] == 200
    else:
        probe.submit("read", key, item="a", pk=PK)            # never answered
        silent = socket.create_connection((host, port), timeout=REPLY_TIMEOUT_S)
        silent.sendall(D.encode(D.hello()))                  # accepted and read, never answered
        while _node_connections(emu, WEST, entry["node"]) < 2:
            pass                                             # each look is a control-port round trip
        heal(emu, fid)                                       # the heal closes what the blackhole held
        for sock in (probe.sock, silent):
            assert ended(sock)[0] == [], "a blackholed node answered"
        assert Probe(host, port, emu.key).call("read", key, item="a", pk=PK)["status"] == 200


# ---- "Addresses use the advertised host (--advertise-host)" -----------------------------------
def test_the_address_feed_and_the_topology_use_the_advertise_host(tmp_path):
    with spawn(tmp_path, "--port", "0", "--control-port", "0", "--advertise-host", "localhost") as cli:
        endpoint, key = cli.info["account_endpoint"], cli.info["key"]
        assert endpoint.startswith("http://localhost:")
        setup(endpoint, key)
        entries = replicas(endpoint, key)
        assert len(entries) == 4
        assert all(a["physcialUri"].startswith("rlmp://localhost:") and a["logicalUri"] == a["physcialUri"]
                   for a in entries)
        host, port, replica = D.parse_uri(primary_of(entries)["physcialUri"])
        assert host == "localhost"
        probe = Probe(host, port, key)                       # reachable under the advertised name
        assert body(probe.call("read", replica, item="a", pk=PK))["id"] == "a"
        status, topo = control(cli.info["control_endpoint"], "GET", "/topology")
        assert status == 200 and topo["direct"]["host"] == "localhost"


# ---- "--direct-ports 10000-20000 ... 0 = free ports" -----------------------------------------
def _free_block(size: int) -> int:
    """The first port of `size` consecutive ports nobody listens on or holds now, below the
    ephemeral range (32768+ on Linux), where --port 0 and outgoing connections take theirs."""
    rng = random.Random(os.getpid())
    for _ in range(200):
        lo = rng.randrange(21000, 32768 - size)
        socks = []
        try:
            for p in range(lo, lo + size):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return lo
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError("no free block of ports")


def test_a_direct_port_range_gives_node_j_of_region_i_port_min_plus_i_times_nodes_plus_j(tmp_path):
    lo = _free_block(16)
    with spawn(tmp_path, "--port", "0", "--control-port", "0", "--direct-ports", f"{lo}-{lo + 15}") as cli:
        regions = [r["name"] for r in cli.info["regions"]]
        assert cli.info["direct_port_range"] == [lo, lo + 15]
        ports = {(n["region"], n["node"]): n["port"] for n in cli.info["direct"]["nodes"]}
        assert ports == {(r, j): lo + i * NODES + j for i, r in enumerate(regions) for j in range(NODES)}
        for (region, node), port in ports.items():
            probe = Probe("127.0.0.1", port, cli.info["key"])
            assert (probe.challenge["region"], probe.challenge["node"]) == (region, node)
            probe.close()


def test_direct_ports_0_takes_free_ports_beside_fixed_gateway_ports(tmp_path):
    lo = _free_block(4)
    with spawn(tmp_path, "--port", str(lo), "--control-port", "0", "--direct-ports", "0") as cli:
        assert cli.info["direct_port_range"] == [0, 0]
        ports = [n["port"] for n in cli.info["direct"]["nodes"]]
        assert len(ports) == 3 * NODES and len(set(ports)) == len(ports) and 0 not in ports
        assert not set(ports) & set(range(lo, lo + 4))
        assert Probe("127.0.0.1", ports[0], cli.info["key"]).challenge["t"] == D.CHALLENGE


def test_a_taken_port_in_the_direct_range_stops_the_server_with_a_message_naming_it(tmp_path):
    lo = _free_block(16)
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", lo + 5))
    squatter.listen()
    try:
        proc = spawn_exit(tmp_path, "--port", "0", "--control-port", "0", "--direct-ports", f"{lo}-{lo + 15}")
    finally:
        squatter.close()
    assert proc.returncode != 0 and str(lo + 5) in proc.stderr and "Traceback" not in proc.stderr
    assert "--direct-ports" in proc.stderr and "--control-port" not in proc.stderr    # the flag to change


def spawn_exit(tmp_path, *args):
    import subprocess
    import sys
    from test_cli import _clean_env
    return subprocess.run([sys.executable, "-m", "emulator", *args], capture_output=True, text=True,
                          timeout=EXIT_TIMEOUT_S, env=_clean_env(), cwd=tmp_path)


# ---- "The ready line ... list each region's nodes, ports and which replicas they hold" ---------
def test_the_ready_line_lists_the_replicas_each_node_holds(tmp_path):
    data = tmp_path / "data"
    with spawn(tmp_path, "--port", "0", "--control-port", "0", "--data-dir", str(data)) as cli:
        assert all(n["replicas"] == [] for n in cli.info["direct"]["nodes"])      # nothing yet
        setup(cli.info["account_endpoint"], cli.info["key"])
        cli.proc.send_signal(signal.SIGTERM)
        assert cli.proc.wait(EXIT_TIMEOUT_S) == 0
    with spawn(tmp_path, "--port", "0", "--control-port", "0", "--data-dir", str(data)) as cli:
        nodes = cli.info["direct"]["nodes"]
        for region in (r["name"] for r in cli.info["regions"]):
            endpoint = next(r["endpoint"] for r in cli.info["regions"] if r["name"] == region)
            held = {k: (n["node"], n["port"]) for n in nodes if n["region"] == region for k in n["replicas"]}
            entries = replicas(endpoint, cli.info["key"])
            assert len(held) == 4 and set(held) == {a["replica"] for a in entries}
            for a in entries:
                assert held[a["replica"]] == (a["node"], D.parse_uri(a["physcialUri"])[1])
