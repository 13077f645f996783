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
import subprocess
import sys
import time
import urllib.error
import urllib.request
from email.utils import formatdate

import pytest
from azure.cosmos import CosmosClient, PartitionKey

from regionlab.client.protocol import direct as D
from regionlab.client.protocol.auth import authorization_header
from sdk_harness import client_kwargs, no_lag
from test_cli import EXIT_TIMEOUT_S, _clean_env, spawn

EAST, WEST = "East US", "West US"
PK = '["p"]'
REPLY_TIMEOUT_S = 10.0                   # a guard against hanging, never a wait for something
NODES = 4                                # --nodes-per-region's default
REGIONS = ("East US", "East US 2", "West US")
NO_LAG = no_lag(REGIONS)     # reads in West US see East's writes


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


def until(done, what: str) -> None:
    """Look again (each look a round trip to the server) until done(), within REPLY_TIMEOUT_S."""
    deadline = time.monotonic() + REPLY_TIMEOUT_S
    while not done():
        assert time.monotonic() < deadline, f"never saw {what}"


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
        topo = topology(emu)
        assert topo["direct_requests"][WEST].get("read 503", 0) >= 1
        assert {n["outage_mode"] for n in topo["direct"]["regions"][WEST]["nodes"]} == {"unavailable"}
        assert {n["outage_mode"] for n in topo["direct"]["regions"][EAST]["nodes"]} == {None}
        heal(emu, fid)
        assert {n["outage_mode"] for n in topology(emu)["direct"]["regions"][WEST]["nodes"]} == {None}
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
        until(lambda: _node_connections(emu, WEST, entry["node"]) == 2, "the node holding both connections")
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


def spawn_exit(tmp_path, *args) -> subprocess.CompletedProcess:
    """A `python -m emulator` run expected to exit before its ready line."""
    return subprocess.run([sys.executable, "-m", "regionlab.emulator", *args], capture_output=True, text=True,
                          timeout=EXIT_TIMEOUT_S, env=_clean_env(), cwd=tmp_path)


# ---- "The ready line ... list each region's nodes, ports and which replicas they hold" ---------
def test_the_ready_line_lists_the_replicas_each_node_holds(tmp_path):
    data = tmp_path / "data"
    with spawn(tmp_path, "--port", "0", "--control-port", "0", "--data-dir", str(data)) as cli:
        assert all(n["replicas"] == [] for n in cli.info["direct"]["nodes"])      # nothing yet
        setup(cli.info["account_endpoint"], cli.info["key"])
        placed = {a["replica"]: a["node"] for a in replicas(cli.info["account_endpoint"], cli.info["key"])}
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
        east = cli.info["account_endpoint"]
        assert {a["replica"]: a["node"] for a in replicas(east, cli.info["key"])} == placed   # same seed, same nodes


# ---- the address feed: per partition key range and region, the service's shape ----------------
def test_the_address_feed_is_per_range_and_region_with_the_primary_marked(regionlab):
    emu = regionlab
    setup(emu.endpoint, emu.key, offer_throughput=12000)
    status, whole = address_feed(emu.endpoint, emu.key)
    assert status == 200
    ranges = sorted({a["partitionKeyRangeId"] for a in whole["Addresss"]})
    assert len(ranges) >= 2 and whole["_count"] == len(whole["Addresss"]) == 4 * len(ranges)
    status, one = address_feed(emu.endpoint, emu.key, ranges=[ranges[1]])
    assert status == 200 and one["_count"] == 4 and {a["partitionKeyRangeId"] for a in one["Addresss"]} == {ranges[1]}
    assert one["_rid"] == whole["_rid"]
    for entry in one["Addresss"]:
        assert entry["protocol"] == "rlmp" and entry["partitionIndex"] == ranges[1]
        assert {"id", "_rid", "isPrimary", "logicalUri", "physcialUri"} <= set(entry)
        assert entry["physcialUri"].endswith("p/") == entry["isPrimary"]     # the service marks primaries
    assert sum(a["isPrimary"] for a in one["Addresss"]) == 1
    assert len({D.parse_uri(a["physcialUri"])[1] for a in one["Addresss"]}) == 4          # distinct nodes
    for region in (EAST, WEST):
        status, regional = address_feed(emu.region_endpoints[region], emu.key, ranges=[ranges[0]])
        assert status == 200 and {a["region"] for a in regional["Addresss"]} == {region}
        nodes = {n["port"] for n in emu.direct_nodes if n["region"] == region}
        assert {D.parse_uri(a["physcialUri"])[1] for a in regional["Addresss"]} <= nodes
    for other in ("rntbd", "https"):
        status, foreign = address_feed(emu.endpoint, emu.key, protocol=other)
        assert status == 200 and foreign["Addresss"] == [] and "rntbd" not in json.dumps(foreign)
    assert "rntbd" not in json.dumps(whole)


# ---- the handshake ---------------------------------------------------------------------------
def test_the_challenge_states_the_limits_and_versions_are_negotiated(regionlab):
    emu = regionlab
    setup(emu.endpoint, emu.key)
    host, port, key = D.parse_uri(replicas(emu.endpoint, emu.key)[0]["physcialUri"])
    probe = Probe(host, port, emu.key)
    c = probe.challenge
    assert c["version"] == max(D.PROTOCOL_VERSIONS) and len(c["nonce"]) == D.NONCE_BYTES
    assert c["max_in_flight"] == D.IN_FLIGHT_PER_CONNECTION_MAX and c["max_frame_bytes"] == D.FRAME_MAX_BYTES
    assert c["idle_timeout_ms"] == D.IDLE_TIMEOUT_S * 1000 and c["heartbeat_ms"] == D.HEARTBEAT_INTERVAL_S * 1000
    assert (c["region"], c["node"]) == (EAST, replicas(emu.endpoint, emu.key)[0]["node"])
    assert Probe(host, port, emu.key, versions=[2, 99]).version == 2
    assert Probe(host, port, emu.key, versions=[1]).version == 1
    other = Probe(host, port, emu.key)
    assert other.challenge["nonce"] != c["nonce"]                      # a fresh nonce per connection
    # a request between the challenge and auth is a frame out of place
    sock = socket.create_connection((host, port), timeout=REPLY_TIMEOUT_S)
    sock.sendall(D.encode(D.hello()))
    sock.sendall(D.encode(D.request(2, 1, "read", key, item="a", pk=PK)))
    frames, _ = ended(sock)
    assert frames[0]["t"] == D.CHALLENGE and (frames[-1]["t"], frames[-1]["sub"]) == ("error", D.SUB_HANDSHAKE)
    # the mac of another connection's nonce is refused: no replay
    sock = socket.create_connection((host, port), timeout=REPLY_TIMEOUT_S)
    sock.sendall(D.encode(D.hello()))
    sock.sendall(D.encode(D.auth(D.handshake_mac(emu.key, c["nonce"]))))
    frames, _ = ended(sock)
    assert frames[-1]["t"] == "error" and frames[-1]["status"] == 401


# ---- "a clean close" and "a node shutting down sends bye too" ---------------------------------
def _slow_secondaries(emu, entries: list, delay_ms: int) -> None:
    """Two secondaries apply late: a write waits delay_ms for its quorum (3 of 4)."""
    for a in [a for a in entries if not a["isPrimary"]][:2]:
        fault(emu, type="replica_slow", region=EAST, replica=int(a["replica"].rsplit("/", 1)[1]), delay_ms=delay_ms)


def test_bye_answers_what_is_in_flight_then_says_bye_and_closes(regionlab):
    emu = regionlab
    setup(emu.endpoint, emu.key)
    entries = replicas(emu.endpoint, emu.key)
    probe, key = open_probe(emu, primary_of(entries))
    _slow_secondaries(emu, entries, 300)
    rid = probe.submit("upsert", key, pk=PK, body=doc("slow"))       # waits for its quorum
    probe.send(D.bye())
    probe.submit("read", key, item="a", pk=PK)                        # after bye: not served
    frames, how = ended(probe.sock)
    replies = [D.named_reply(f) for f in frames if D.frame_type(f) == D.RESPONSE]
    assert [r["status"] for r in replies] == [201] and D.reply_id(frames[0]) == rid
    assert frames[-1] == {"t": D.BYE} and how == "eof"


def test_a_stopping_server_says_bye_on_its_open_connections(tmp_path):
    with spawn(tmp_path, "--port", "0", "--control-port", "0") as cli:
        node = cli.info["direct"]["nodes"][0]
        probe = Probe("127.0.0.1", node["port"], cli.info["key"])
        cli.proc.send_signal(signal.SIGTERM)
        frames, how = ended(probe.sock)
        assert frames == [{"t": D.BYE}] and how == "eof"
        assert cli.proc.wait(EXIT_TIMEOUT_S) == 0


# ---- "Live read routing and throttling apply to direct requests ... counters" ----------------
def test_a_throttle_storm_refuses_direct_requests_with_429_and_retry_after(regionlab):
    emu = regionlab
    setup(emu.endpoint, emu.key)
    probe, key = open_probe(emu, replicas(emu.endpoint, emu.key)[1])
    status, storm = control(emu.control_endpoint, "PUT", "/throttle/storms/East%20US",
                            {"share": 1, "retry_after_ms": 250})
    assert status == 200, storm
    r = probe.call("read", key, item="a", pk=PK)
    assert (r["status"], r["sub"], r["retry_after_ms"]) == (429, 3200, 250) and body(r)["code"]
    status, throttle = control(emu.control_endpoint, "GET", "/throttle")
    assert [s["requests_throttled"] for s in throttle["storms"] if s["region"] == EAST] == [1]
    assert control(emu.control_endpoint, "DELETE", "/throttle/storms/East%20US")[0] == 200
    assert probe.call("read", key, item="a", pk=PK)["status"] == 200


def test_a_containers_ru_budget_charges_and_refuses_direct_writes(regionlab):
    emu = regionlab
    setup(emu.endpoint, emu.key)
    probe, key = open_probe(emu, primary_of(replicas(emu.endpoint, emu.key)))
    status, offer = control(emu.control_endpoint, "PUT", "/throttle/containers/db/items", {"ru_per_s": 400})
    assert status == 200, offer

    def accepted() -> int:
        _, t = control(emu.control_endpoint, "GET", "/throttle")
        (c,) = [c for c in t["containers"] if c["container"] == "items"]
        return sum(p["regions"].get(EAST, {}).get("accepted", 0) for p in c["partitions"])

    before = accepted()
    ids = [probe.submit("create", key, pk=PK, body=doc(f"ru{n}", pad="x" * 400)) for n in range(200)]
    replies = [probe.reply(i) for i in ids]                  # far more than 400 RU in one second
    created = [r for r in replies if r["status"] == 201]
    throttled = [r for r in replies if r["status"] == 429]
    assert created and throttled and len(created) + len(throttled) == 200
    assert all(r["charge"] > 0 for r in created) and all(r["retry_after_ms"] > 0 for r in throttled)
    assert accepted() - before == len(created)
    _, t = control(emu.control_endpoint, "GET", "/throttle")
    assert any(x["region"] == EAST and x["container"] == "items" and x["reason"] == "ru" for x in t["throttled"])


def test_account_credits_refuse_direct_requests_past_the_window(regionlab):
    emu = regionlab
    setup(emu.endpoint, emu.key)
    probe, key = open_probe(emu, replicas(emu.endpoint, emu.key)[2])
    status, knobs = control(emu.control_endpoint, "PUT", "/throttle", {"credits_per_s": 5})
    assert status == 200, knobs
    ids = [probe.submit("read", key, item="a", pk=PK) for _ in range(60)]
    replies = [probe.reply(i) for i in ids]
    refused_ = [r for r in replies if r["status"] == 429]
    assert refused_ and {r["sub"] for r in refused_} == {50009} and all(r["retry_after_ms"] > 0 for r in refused_)
    assert control(emu.control_endpoint, "PUT", "/throttle", {"credits_per_s": None})[0] == 200
    assert probe.call("read", key, item="a", pk=PK)["status"] == 200


def test_direct_reads_count_per_region_and_per_replica_in_topology_and_metrics(regionlab):
    emu = regionlab
    setup(emu.endpoint, emu.key)
    entry = next(a for a in replicas(emu.endpoint, emu.key) if not a["isPrimary"])
    index = entry["replica"].rsplit("/", 1)[1]
    probe, key = open_probe(emu, entry)

    def counts():
        topo = topology(emu)
        (node,) = [n for n in topo["direct"]["regions"][EAST]["nodes"] if n["node"] == entry["node"]]
        (held,) = [r for r in node["replicas"] if r["key"] == key]
        text = metrics(emu)
        served = next(line for line in text.splitlines() if line.startswith(
            f'regionlab_replica_reads_served_total{{region="East US",database="db",container="items",'
            f'partition="0",replica="{index}",'))
        direct = [line for line in text.splitlines() if line.startswith(
            'regionlab_direct_requests_total{region="East US",op="read",status="200",substatus="0"}')]
        return (held["requests"], int(float(served.rsplit(" ", 1)[1])),
                int(direct[0].rsplit(" ", 1)[1]) if direct else 0,
                topo["direct_requests"].get(EAST, {}).get("read 200", 0))

    before = counts()
    assert [probe.call("read", key, item=i, pk=PK)["status"] for i in "abc"] == [200, 200, 200]
    after = counts()
    assert [a - b for a, b in zip(after, before)] == [3, 3, 3, 3]


# ---- roles, faults and the answers a client acts on ------------------------------------------
@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_a_write_to_the_primary_of_a_read_region_is_403_3_as_from_the_gateway(regionlab):
    emu = regionlab
    setup(emu.endpoint, emu.key)
    probe, key = open_probe(emu, primary_of(replicas(emu.region_endpoints[WEST], emu.key)))
    w = probe.call("create", key, pk=PK, body=doc("ro"))
    assert (w["status"], w["sub"]) == (403, 3) and body(w)["code"]
    assert probe.call("read", key, item="a", pk=PK)["status"] == 200


def test_a_node_crash_drops_its_open_connections_and_heals(regionlab):
    emu = regionlab
    setup(emu.endpoint, emu.key)
    entry = next(a for a in replicas(emu.endpoint, emu.key) if not a["isPrimary"])
    port = D.parse_uri(entry["physcialUri"])[1]
    probe, key = open_probe(emu, entry)
    fid = fault(emu, type="node_crash", region=EAST, node=entry["node"])
    assert ended(probe.sock)[0] == [] and refused(port)
    (down,) = [a for a in replicas(emu.endpoint, emu.key) if a["replica"] == key]
    assert down["state"] == "down"
    heal(emu, fid)
    assert all(a["state"] == "up" for a in replicas(emu.endpoint, emu.key))
    assert Probe("127.0.0.1", port, emu.key).call("read", key, item="a", pk=PK)["status"] == 200


@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_direct_ports_blocked_in_one_region_leave_the_other_regions_and_the_gateway(regionlab):
    emu = regionlab
    setup(emu.endpoint, emu.key)
    west_entry = replicas(emu.region_endpoints[WEST], emu.key)[0]
    probe, key = open_probe(emu, west_entry)
    fid = fault(emu, type="direct_ports_blocked", region=WEST)
    assert ended(probe.sock)[0] == []                        # open connections go too
    nodes = emu.direct_nodes
    assert all(refused(n["port"]) for n in nodes if n["region"] == WEST)
    assert not any(refused(n["port"]) for n in nodes if n["region"] != WEST)
    assert address_feed(emu.region_endpoints[WEST], emu.key)[0] == 200       # the gateway serves
    assert topology(emu)["direct"]["regions"][WEST]["blocked"] is True
    heal(emu, fid)
    host, port, _ = D.parse_uri(west_entry["physcialUri"])
    assert Probe(host, port, emu.key).call("read", key, item="a", pk=PK)["status"] == 200


@pytest.mark.regionlab_config(election_ms=50)
def test_a_primary_crash_changes_which_address_is_primary(regionlab):
    emu = regionlab
    setup(emu.endpoint, emu.key)
    old = primary_of(replicas(emu.endpoint, emu.key))
    probe, key = open_probe(emu, old)
    fid = fault(emu, type="primary_crash", region=EAST)
    w = probe.call("upsert", key, pk=PK, body=doc("pc"))
    assert (w["status"], w["sub"]) in ((410, D.SUB_REPLICA_DOWN), (410, D.SUB_NOT_PRIMARY))
    until(lambda: [a["replica"] for a in replicas(emu.endpoint, emu.key) if a["isPrimary"]] not in
          ([], [old["replica"]]), "an election")           # none may be primary while it runs
    new = primary_of(replicas(emu.endpoint, emu.key))
    assert new["physcialUri"] != old["physcialUri"] and new["physcialUri"].endswith("p/")
    assert not any(a["physcialUri"].endswith("p/") for a in replicas(emu.endpoint, emu.key) if a is not new
                   and a["replica"] != new["replica"])
    p2, key2 = open_probe(emu, new)
    assert p2.call("upsert", key2, pk=PK, body=doc("pc"))["status"] == 201
    w = probe.call("upsert", key, pk=PK, body=doc("pc"))
    assert (w["status"], w["sub"]) == (410, D.SUB_REPLICA_DOWN)          # still down, though another leads
    heal(emu, fid)
    w = probe.call("upsert", key, pk=PK, body=doc("pc"))
    assert (w["status"], w["sub"]) == (410, D.SUB_NOT_PRIMARY)           # back, as a secondary


# ---- the rest of the protocol's promises -----------------------------------------------------
def test_an_id_already_in_flight_is_answered_400_at_once_and_the_first_still_finishes(regionlab):
    emu = regionlab
    setup(emu.endpoint, emu.key)
    entries = replicas(emu.endpoint, emu.key)
    probe, key = open_probe(emu, primary_of(entries))
    _slow_secondaries(emu, entries, 300)
    probe.send(D.request(probe.version, 7, "upsert", key, pk=PK, body=doc("dup")))      # waits for its quorum
    probe.send(D.request(probe.version, 7, "read", key, item="a", pk=PK))
    first, second = (D.named_reply(probe.frame()) for _ in range(2))
    assert (first["status"], first["sub"]) == (400, D.SUB_BAD_REQUEST_FRAME)
    assert second["status"] == 201


@pytest.mark.regionlab_config(auth=False)
def test_a_server_without_a_key_accepts_any_mac(regionlab):
    emu = regionlab
    setup(emu.endpoint, emu.key)
    host, port, key = D.parse_uri(replicas(emu.endpoint, emu.key)[0]["physcialUri"])
    sock = socket.create_connection((host, port), timeout=REPLY_TIMEOUT_S)
    sock.sendall(D.encode(D.hello()))
    decoder, frames = D.FrameDecoder(), []
    while not frames:
        frames = decoder.feed(sock.recv(65536))
    sock.sendall(D.encode(D.auth(b"\x00" * 32)))
    while len(frames) < 2:
        frames += decoder.feed(sock.recv(65536))
    assert frames[1] == {"t": D.READY}


def test_feed_pages_are_scoped_to_the_named_replicas_range(regionlab):
    emu = regionlab
    setup(emu.endpoint, emu.key, offer_throughput=12000)
    with CosmosClient(emu.endpoint, emu.key, **client_kwargs()) as client:
        c = client.get_database_client("db").get_container_client("items")
        for n in range(40):
            c.create_item({"id": f"s{n}", "pk": f"k{n}"})
    status, feed = address_feed(emu.endpoint, emu.key)
    assert status == 200
    ranges = sorted({a["partitionKeyRangeId"] for a in feed["Addresss"]})
    seen = {}
    for range_id in ranges:
        probe, key = open_probe(emu, replicas(emu.endpoint, emu.key, range_id)[1])
        pages = {op: body(probe.call(op, key, max_items=1000)) for op in ("read_feed", "change_feed")}
        q = probe.call("query", key, body=b'{"query":"SELECT VALUE c.id FROM c","parameters":[]}')
        pages["query"] = body(q)
        ids = {op: sorted(d if isinstance(d, str) else d["id"] for d in page["Documents"]) for op, page in pages.items()}
        assert ids["read_feed"] == ids["change_feed"] == ids["query"], range_id
        seen[range_id] = set(ids["read_feed"])
    every = [i for s in seen.values() for i in s]
    assert len(every) == len(set(every)) == 43                 # disjoint, and together every item
    assert all(seen.values())                                  # each range holds some


def test_placement_is_deterministic_from_the_seed():
    from regionlab.emulator.testing import running_emulator

    def placement(seed: int) -> dict:
        with running_emulator(seed=seed) as emu:
            setup(emu.endpoint, emu.key, offer_throughput=12000)
            status, feed = address_feed(emu.endpoint, emu.key)
            assert status == 200
            return {(a["partitionKeyRangeId"], a["replica"].rsplit("/", 1)[1]): a["node"] for a in feed["Addresss"]}

    first = placement(5)
    assert placement(5) == first
    for range_id in {r for r, _ in first}:
        assert len({n for (r, _), n in first.items() if r == range_id}) == 4     # four distinct nodes


# No lag: the items' deliveries to the other regions are done before the first read, so the
# global LSN both replies carry cannot move between them (with the default 2 and 30 ms lags it
# could, on a loaded machine: 3 against 2).
@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_frames_sent_byte_by_byte_get_the_answers_of_frames_sent_whole(regionlab):
    emu = regionlab
    setup(emu.endpoint, emu.key)
    probe, key = open_probe(emu, replicas(emu.endpoint, emu.key)[0])
    probe.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    whole = probe.call("read", key, item="a", pk=PK)
    data = D.encode(D.request(probe.version, 99, "read", key, item="a", pk=PK)) + D.encode(D.ping())
    for byte in data:
        probe.sock.sendall(bytes([byte]))
    split = D.named_reply(probe.frame())
    assert probe.frame() == {"t": D.PONG}
    assert {k: v for k, v in split.items() if k != "activity_id"} == \
        {k: v for k, v in whole.items() if k != "activity_id"}


@pytest.mark.parametrize("versions", [[1], [2]])
def test_a_replica_field_that_is_nil_a_list_or_a_map_is_a_400_reply_and_the_connection_lives_on(regionlab,
                                                                                                versions):
    """Found by fuzzing: an unhashable 'replica' raised out of the node's request handler, and a
    nil one in a read reused a target never resolved (the connection died with no frame, 'Fatal
    error on transport' in the log)."""
    emu = regionlab
    setup(emu.endpoint, emu.key)
    host, port, key = D.parse_uri(replicas(emu.endpoint, emu.key)[0]["physcialUri"])
    probe = Probe(host, port, emu.key, versions=versions)
    for op in ("read", "create", "query", "upsert"):
        for bad in ([key], {"key": key}, None):
            r = probe.call(op, bad, item="a", pk=PK, body=doc("x"))
            assert r["status"] == 400 and "replica key" in body(r)["message"], (op, bad, r)
    probe.send(D.ping())
    assert probe.frame() == {"t": D.PONG}
    assert probe.call("read", key, item="a", pk=PK)["status"] == 200


FRAME_TIMEOUT_S = 0.3


@pytest.mark.regionlab_config(direct_limits={"frame_timeout_s": FRAME_TIMEOUT_S})
def test_a_busy_sender_whose_reads_end_mid_frame_is_not_taken_for_a_trickler(regionlab):
    """The frame timer times the frame that is incomplete now, not the first one that ever was:
    a client streaming requests so that every read the node makes ends inside the next frame
    (as a bulk loader's large frames do) is served for as long as it goes on. It used to be
    closed with 408 once frame_timeout_s had passed since the first incomplete frame."""
    emu = regionlab
    setup(emu.endpoint, emu.key)
    probe, key = open_probe(emu, replicas(emu.endpoint, emu.key)[0])
    probe.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    frame = lambda rid: D.encode(D.request(probe.version, rid, "read", key, item="a", pk=PK))
    cut = len(frame(1)) // 2
    probe.sock.sendall(frame(1)[:cut])                   # each send: the rest of one, half of the next
    rid, started = 1, time.monotonic()
    while time.monotonic() - started < 4 * FRAME_TIMEOUT_S:
        probe.sock.sendall(frame(rid)[cut:] + frame(rid + 1)[:cut])
        assert probe.reply(rid)["status"] == 200, "the node ended a connection that kept completing frames"
        rid += 1
    probe.sock.sendall(frame(rid)[cut:])
    assert probe.reply(rid)["status"] == 200


@pytest.mark.parametrize("versions", [[1], [2]])
def test_a_batch_whose_reply_exceeds_the_frame_limit_is_answered_413_and_the_connection_lives_on(regionlab,
                                                                                                  versions):
    """Found by probing: a transactional batch reading five items of 1.9 MB has an 9.5 MB reply
    (the gateway sends it), over FRAME_MAX_BYTES; the node's encoder raised and the connection
    died with no frame ('Fatal error on transport' in the log)."""
    emu = regionlab
    setup(emu.endpoint, emu.key)
    host, port, key = D.parse_uri(primary_of(replicas(emu.endpoint, emu.key))["physcialUri"])
    probe = Probe(host, port, emu.key, versions=versions)
    for n in range(5):
        assert probe.call("upsert", key, pk=PK, body=doc(f"big{n}", pad="x" * 1_900_000),
                          prefer="return=minimal")["status"] in (200, 201)
    reads = json.dumps([{"operationType": "Read", "id": f"big{n}"} for n in range(5)]).encode()
    r = probe.call("batch", key, pk=PK, body=reads)
    assert (r["status"], r["sub"]) == (413, D.SUB_REPLY_TOO_LARGE)
    assert str(D.FRAME_MAX_BYTES) in body(r)["message"] and r["session"] and r["charge"] > 0
    assert topology(emu)["direct_requests"][EAST].get(f"batch 413/{D.SUB_REPLY_TOO_LARGE}") == 1
    one = json.dumps([{"operationType": "Read", "id": "big0"}]).encode()
    assert probe.call("batch", key, pk=PK, body=one)["status"] == 200        # a reply that fits
    probe.send(D.ping())
    assert probe.frame() == {"t": D.PONG}


def test_a_page_whose_partition_key_is_outside_the_named_replicas_range_is_410_1002(regionlab):
    """Found by probing: a query with a partition key of another range was served, through the
    named replica, from the key's own range (and a read feed ignored the key), where a point
    operation answers 410/1002. Now every operation does, and in its own range a page with a key
    holds that key's items."""
    emu = regionlab
    setup(emu.endpoint, emu.key, offer_throughput=12000)
    status, feed = address_feed(emu.endpoint, emu.key)
    ranges = sorted({a["partitionKeyRangeId"] for a in feed["Addresss"]})
    assert len(ranges) >= 2
    query = b'{"query":"SELECT VALUE c.id FROM c"}'
    owner = None
    for range_id in ranges:
        probe, key = open_probe(emu, replicas(emu.endpoint, emu.key, range_id)[0])
        point = probe.call("read", key, item="a", pk=PK)
        pages = [probe.call("query", key, pk=PK, body=query), probe.call("read_feed", key, pk=PK),
                 probe.call("change_feed", key, pk=PK)]
        if point["status"] == 200:
            owner = range_id
            assert [p["status"] for p in pages] == [200, 200, 200]
            assert sorted(body(pages[0])["Documents"]) == ["a", "b", "c"]
            assert sorted(d["id"] for d in body(pages[1])["Documents"]) == ["a", "b", "c"]
        else:
            assert (point["status"], point["sub"]) == (410, D.SUB_PARTITION_KEY_RANGE_GONE)
            assert [(p["status"], p["sub"]) for p in pages] == [(410, D.SUB_PARTITION_KEY_RANGE_GONE)] * 3
    assert owner is not None


def test_binding_every_interface_hands_out_loopback_addresses_not_the_bind_address(tmp_path):
    """--host 0.0.0.0 (as in Docker) without --advertise-host: the nodes listen everywhere, the
    feed names 127.0.0.1, never 0.0.0.0 (the official emulator's container-internal address bug)."""
    with spawn(tmp_path, "--host", "0.0.0.0", "--port", "0", "--control-port", "0") as cli:
        endpoint, key = cli.info["account_endpoint"], cli.info["key"]
        setup(endpoint, key)
        uris = [a["physcialUri"] for a in replicas(endpoint, key)]
        assert len(uris) == 4 and all(u.startswith("rlmp://127.0.0.1:") for u in uris), uris
        host, port, replica = D.parse_uri(uris[0])
        assert Probe(host, port, key).call("read", replica, item="a", pk=PK)["status"] == 200


@pytest.mark.regionlab_config(nodes_per_region=5)
def test_the_fixtures_fault_handles_drive_the_direct_faults(regionlab):
    """emu.faults.replica_move / node_crash / direct_ports_blocked (docs/control-api.md), each
    healed by leaving its block."""
    emu = regionlab
    setup(emu.endpoint, emu.key)
    before = replicas(emu.endpoint, emu.key)
    moved = before[1]
    old_port = D.parse_uri(moved["physcialUri"])[1]
    probe, key = open_probe(emu, moved)
    with emu.faults.replica_move(EAST, 1, container="items"):
        gone = probe.call("read", key, item="a", pk=PK)
        assert (gone["status"], gone["sub"]) == (410, D.SUB_REPLICA_NOT_HERE)
        now = replicas(emu.endpoint, emu.key)[1]
        assert now["node"] != moved["node"] and D.parse_uri(now["physcialUri"])[1] != old_port
        assert open_probe(emu, now)[0].call("read", key, item="a", pk=PK)["status"] == 200
    assert replicas(emu.endpoint, emu.key)[1]["node"] == moved["node"]
    assert probe.call("read", key, item="a", pk=PK)["status"] == 200               # back home
    with emu.faults.node_crash(EAST, moved["node"]):
        assert refused(old_port)
    assert not refused(old_port)
    with emu.faults.direct_ports_blocked():
        assert all(refused(n["port"]) for n in emu.direct_nodes)
    assert not any(refused(n["port"]) for n in emu.direct_nodes)


@pytest.mark.slow
def test_ten_thousand_request_ids_sent_at_once_are_each_answered_once_at_the_default_cap(regionlab):
    """All 10,000 writes in one send while the first ones wait for their quorum: the first
    max_in_flight (stated in the challenge) are applied, every other one is 429/21004 at once,
    each id is answered exactly once and the connection serves on."""
    emu = regionlab
    setup(emu.endpoint, emu.key)
    entries = replicas(emu.endpoint, emu.key)
    probe, key = open_probe(emu, primary_of(entries))
    _slow_secondaries(emu, entries, 8000)         # far longer than the node takes to read all 10,000
    cap = probe.challenge["max_in_flight"]
    n = 10_000
    probe.sock.sendall(b"".join(D.encode(D.request(probe.version, i, "upsert", key, pk=PK, body=doc(f"t{i}")))
                                for i in range(1, n + 1)))
    seen: dict = {}
    while len(seen) < n:
        f = probe.frame()
        assert D.frame_type(f) == D.RESPONSE and D.reply_id(f) not in seen
        r = D.named_reply(f)
        seen[D.reply_id(f)] = (r["status"], r.get("sub", 0))
    assert sorted(seen) == list(range(1, n + 1))
    assert [seen[i] for i in range(1, cap + 1)] == [(201, 0)] * cap
    assert {seen[i] for i in range(cap + 1, n + 1)} == {(429, D.SUB_BUSY)}
    assert probe.call("read", key, item=f"t{cap}", pk=PK)["status"] == 200
    assert probe.call("read", key, item=f"t{cap + 1}", pk=PK)["status"] == 404      # busy: never applied
