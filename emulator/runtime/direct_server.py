"""The direct TCP server: one listener per backend node, speaking docs/direct-protocol.md.

Theory of operation:
* `DirectPlane` owns every node of every region: it binds their ports at start (so the ready
  line and the address feed know them), and keeps each node listening exactly while the node is
  up, its region's ports are not blocked (core/placement.py says which, the fault catalogue
  changes it) and its region is not out in the `refuse` mode. A node that stops listening also
  drops its connections. A region out in another mode fails its nodes in that mode, as its
  gateway fails (docs/control-api.md, "Region outage modes"): `unavailable` answers every
  request 503, `reset` resets every connection as soon as it sends anything, `blackhole` reads
  and never answers, and its heal closes every connection it held.
* `DirectConnection` is one client connection: a sans-IO FrameDecoder (client/protocol/direct.py)
  turns bytes into frames; the handshake (the emulator instance the client's address named,
  the version, then HMAC of a nonce) must finish first; then
  requests run concurrently, each answered by id as it finishes. Replies produced while handling
  one batch of received bytes go out in one transport write (coalesced).
* A request runs the gateway's own handler for the same operation (gateway/documents.py) through
  a `DirectCall`, so both surfaces share one code path; the node first enforces what only a
  replica can: that the replica is here, is up, and (for a write) is the primary. A point read
  runs the gateway's read steps without a Call (direct_ops.py) and is served by the named replica
  itself (core/documents.py read_at), never waiting; a point write is staged and committed by the
  gateway's functions and answered at once when it is already acknowledged (no coroutine).
* Version 2 connections exchange requests and replies as positional arrays; version 1 as maps
  (client/protocol/direct.py). TLS, when the node has a certificate, runs in memory under the
  same connection object (direct_tls.py), detected by the first byte the client sends.
* Every limit is a named constant (client/protocol/direct.py); timeouts are checked by one
  sweeper per plane, so a slow or silent peer is closed within a bounded time and leaves no task.
"""
import asyncio
import collections
import logging
import os

from regionlab.client.protocol import direct as D
from regionlab.client.protocol import headers as H

from ..core.errors import CosmosError, bad_request
from ..core.faults import (OUTAGE_BLACKHOLE, OUTAGE_MODE_DEFAULT, OUTAGE_REFUSE, OUTAGE_RESET,
                           OUTAGE_UNAVAILABLE)
from ..core.replica import PRIMARY, UP
from ..core.tally import Tally
from ..service.call import Call
from ..gateway.http import carry_on as http_carry_on
from . import direct_tls
from .port_hold import PortHold

HOT_READ_200, HOT_CREATED = 0, 1          # DirectNode.hot's slots
HOT_KEYS = ((D.READ, 200, 0), (D.CREATE, 201, 0))

log = logging.getLogger("regionlab.direct")

WRITE_BUFFER_HIGH_BYTES = 1024 * 1024     # stop reading a peer that does not read its replies
CLOSE_GRACE_S = 1.0                       # an error frame gets this long to drain, then abort
SWEEP_INTERVAL_S_MIN = 0.05
SWEEP_INTERVAL_S_MAX = 1.0
REPLICA_KEYS_CACHE_MAX = 65_536
TARGETS_CACHE_MAX = 65_536                # resolved replicas per node

_SCOPED_FEEDS = frozenset((D.QUERY, D.CHANGE_FEED, D.READ_FEED))
_OP_HEADERS = {
    D.UPSERT: {H.IS_UPSERT: "true"},
    D.BATCH: {H.IS_BATCH: "true", H.BATCH_ATOMIC: "true"},
    D.QUERY: {H.IS_QUERY: "true", H.CONTENT_TYPE: "application/query+json"},
    D.CHANGE_FEED: {H.A_IM: H.A_IM_INCREMENTAL},
}
_HANDSHAKE, _AUTH, _READY, _CLOSING = "hello", "auth", "ready", "closing"


class DirectCall(Call):
    """A gateway Call made from a request frame: what the gateway handler would have parsed."""
    __slots__ = ()

    def __init__(self, svc, method: str, headers: dict, raw: bytes, activity_id: str, replica):
        self.svc = svc
        self.source = None
        self.method = method
        self.path = ""
        self.segs = ()
        self.headers = headers
        self.activity_id = activity_id
        self.region = svc.region
        self.raw = raw
        self.replica = replica
        self.serving = ()


class _Target:
    """The replica a request names, resolved on this node."""
    __slots__ = ("key", "container", "partition", "rs", "replica", "served", "token", "split", "pk_paths")

    def __init__(self, key, container, partition, rs, replica, served: list):
        # A container's partitions and partition key are fixed when it is made: whether a key
        # needs the range check (more than one partition), and how many values a key has.
        self.split = len(container.partitions) > 1
        self.pk_paths = len(container.pk_def.paths)
        # The replica's replies in this region: a one-element list, the same one for every
        # target of this key (DirectNode.replica_requests), so `served[0] += 1` counts without
        # hashing a key.
        self.served = served
        self.token = None                    # the last session token text (direct_ops._session_token)
        self.key = key
        self.container = container
        self.partition = partition
        self.rs = rs
        self.replica = replica


_replica_keys: dict = {}


def _parse_replica_key(key) -> tuple | None:
    """(coll rid, range id, index) of a replica key, or None when it is not one."""
    if type(key) is not str:         # first: a list or map is not even hashable
        return None
    hit = _replica_keys.get(key)
    if hit is not None:
        return hit
    parts = key.split("/")
    if len(parts) != 6 or parts[0] != "colls" or parts[2] != "pkranges" or parts[4] != "replicas" \
            or not parts[5].isdigit() or not 0 <= int(parts[5]) < 4:
        return None
    if len(_replica_keys) >= REPLICA_KEYS_CACHE_MAX:
        _replica_keys.clear()
    hit = _replica_keys[key] = (parts[1], parts[3], int(parts[5]))
    return hit


def _gone(sub: int, message: str) -> CosmosError:
    return CosmosError(410, sub, message)


class DirectNode:
    """One backend node of a region: its port, listener and connections."""

    def __init__(self, plane, region: str, index: int, port: int):
        self.plane = plane
        self.region = region
        self.index = index
        self.port = port
        self.server = None
        self._sock = None
        self._hold = None               # PortHold while a fault keeps the node from listening
        self.connections: set = set()
        self.outage = None                   # the outage mode of its region while it is out and listening
        self.unavailable = False             # outage UNAVAILABLE: every request is answered 503
        self.silent = False                  # outage RESET or BLACKHOLE: connections are not served
        # Replies by (op, status, substatus). The two of nearly every request, a read's 200 and
        # a create's 201, are counted in `hot` instead (a list slot, no key to hash: the count
        # is a quarter of a direct read's envelope otherwise); request_counts() has them all.
        self.requests = Tally()
        self.hot = [0, 0]                    # [HOT_READ_200, HOT_CREATED]
        self.replica_requests = plane.replica_requests.setdefault(region, {})   # replica key -> [replies]
        self._targets: dict = {}             # replica key -> (placement version, _Target)
        self.account = plane.account

    def __call__(self):
        from .direct_connection import DirectConnection
        return DirectConnection(self)

    def request_counts(self) -> Tally:
        """Replies by (op, status, substatus), the hot two included."""
        counts = Tally(self.requests)
        for k, n in zip(HOT_KEYS, self.hot):
            if n:
                counts[k] += n
        return counts

    # ---- what a request may be served by ------------------------------------------------
    def resolve(self, key, write: bool) -> _Target:
        """The replica `key` names, if this node holds it and it may serve the request (else
        410 with the substatus that says why)."""
        if self.unavailable:
            raise CosmosError(503, 0, f"Region {self.region} is unavailable (a region outage); its direct "
                                      "nodes answer nothing else until it is back.")
        account = self.account
        try:
            hit = self._targets.get(key)
        except TypeError:                    # a list or map for 'replica': _resolve answers the 400
            hit = None
        # hit: (placement version, target). The version moves with every replica move, node
        # state, container and region that comes or goes (Placement.layout_changed), so a hit
        # of the current version is still placed here, in the same container and replica set.
        if hit is not None and hit[0] == account.placement.version:
            target = hit[1]
        else:
            target = self._resolve(key)
            if len(self._targets) >= TARGETS_CACHE_MAX:
                self._targets.clear()
            self._targets[key] = (account.placement.version, target)
        replica = target.replica
        if replica.state != UP:
            raise _gone(D.SUB_REPLICA_DOWN, f"Replica {key} in {self.region} is down; refresh the addresses.")
        if write and replica.role != PRIMARY:
            raise _gone(D.SUB_NOT_PRIMARY, f"Replica {key} in {self.region} is a secondary; writes go to the "
                                           "primary. Refresh the addresses.")
        return target

    def _resolve(self, key) -> _Target:
        parsed = _parse_replica_key(key)
        if parsed is None:
            raise bad_request(f"'replica' must be a replica key colls/<rid>/pkranges/<range>/replicas/<0-3> "
                              f"from the address feed; got {str(key)[:120]!r}.")
        coll_rid, range_id, index = parsed
        account = self.plane.account
        container = account.colls_by_rid.get(coll_rid)
        partition = None
        if container is not None:
            for p in container.partitions:
                if p.range_id == range_id:
                    partition = p
                    break
        rs = partition.replica_sets.get(self.region) if partition is not None else None
        if rs is None or account.placement.node_of(self.region, coll_rid, range_id, index) != self.index:
            raise _gone(D.SUB_REPLICA_NOT_HERE, f"Replica {key} is not on node {self.index} of {self.region} "
                                                "(it moved, or never was here); refresh the addresses.")
        return _Target(key, container, partition, rs, rs.replicas[index], self.replica_requests.setdefault(key, [0]))

    # ---- listening ------------------------------------------------------------------------
    def bind(self) -> None:
        from .listen import bind as _bind
        try:
            self._sock = _bind(self.plane.host, self.port)
        except OSError as e:             # name the flag that picks this port, not the gateway's
            raise OSError(e.errno, f"node {self.index} of {self.region} (direct mode) cannot listen on "
                                   f"{self.plane.host}:{self.port}: {os.strerror(e.errno) if e.errno else e}; "
                                   "choose another range with --direct-ports, or --direct-ports 0 for free "
                                   "ports") from None
        self.port = self._sock.getsockname()[1]

    async def serve(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            self.server = await asyncio.get_running_loop().create_server(self, sock=sock)

    def set_listening(self, want: bool, hold: bool = True) -> asyncio.Task | None:
        """Listen or not; a node that stops listening keeps its port (port_hold.py) unless
        `hold` is False (the node goes away), so it comes back on the same address."""
        if want and self.server is None and self._sock is None:
            self.bind()
            self._release_hold()
            return asyncio.get_running_loop().create_task(self.serve())
        if not want:
            was_listening = self.server is not None or self._sock is not None
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            if self.server is not None:
                self.server.close()
                self.server = None
            for conn in list(self.connections):
                conn.abort()
            if not hold:
                self._release_hold()
            elif was_listening and self._hold is None:
                self._hold = PortHold(self.plane.host, self.port)
        return None

    def set_outage(self, mode: str | None) -> None:
        """Fail in a region outage mode that keeps the node listening (UNAVAILABLE, RESET,
        BLACKHOLE), or serve again (None), as gateway/http.py fails a region's endpoint."""
        was = self.outage
        if mode == was:
            return
        self.outage = mode
        self.unavailable = mode == OUTAGE_UNAVAILABLE
        self.silent = mode in (OUTAGE_RESET, OUTAGE_BLACKHOLE)
        if was == OUTAGE_BLACKHOLE:
            for conn in list(self.connections):
                conn.abort()                 # the connections a blackhole held: their clients gave up
        if mode == OUTAGE_RESET:
            for conn in list(self.connections):
                conn.reset_now()
        elif mode == OUTAGE_BLACKHOLE:
            for conn in self.connections:
                conn.silence()

    def _release_hold(self) -> None:
        if self._hold is not None:
            self._hold.release()
            self._hold = None

    def describe(self) -> dict:
        return {"region": self.region, "node": self.index, "port": self.port,
                "listening": self.server is not None or self._sock is not None,
                "state": self.plane.account.placement.node(self.region, self.index).state,
                "outage_mode": self.outage, "connections": len(self.connections)}


class DirectPlane:
    """Every node of every region, their ports and the shared sweeper."""

    def __init__(self, emu, *, handshake_timeout_s: float = D.HANDSHAKE_TIMEOUT_S,
                 idle_timeout_s: float = D.IDLE_TIMEOUT_S, frame_timeout_s: float = D.FRAME_TIMEOUT_S,
                 max_in_flight: int = D.IN_FLIGHT_PER_CONNECTION_MAX,
                 max_connections: int = D.CONNECTIONS_PER_NODE_MAX):
        self.emu = emu
        self.account = emu.account
        cfg = emu.config
        cert, key = cfg.direct_tls_cert, cfg.direct_tls_key
        gateway_cert = getattr(emu, "certificate", None)
        if cert is None and gateway_cert is not None:     # --https: the gateway's certificate, too
            cert, key = gateway_cert.cert_file, gateway_cert.key_file
        self.tls_context = direct_tls.server_context(cert, key) if cert else None   # TLS on the same ports
        self.host = emu.config.host
        self.key = emu.config.key
        self.instance = emu.topology.instance    # what a hello's "instance" must name (direct_connection._hello)
        self.handshake_timeout_s = handshake_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.frame_timeout_s = frame_timeout_s
        self.max_in_flight = max_in_flight
        self.max_connections = max_connections
        self.nodes: dict = {}                    # (region, index) -> DirectNode
        self.services: dict = {}                 # region -> the Gateway whose handlers requests run
        self.replica_requests: dict = {}         # region -> {replica key -> [replies]} (_Target.served)
        lo, hi = emu.config.direct_port_range
        self._port_range = (lo, hi)
        self._next_port = lo
        self._sweeper = None

    # ---- lifecycle ------------------------------------------------------------------------
    def bind_all(self) -> None:
        """Bind every node's port now (before the ready line); `start` then serves them."""
        for region in self.account.regions:
            self._add_region(region.name)
        self.account.placement.listeners.append(self._reconcile)
        self.account.region_listeners.append(self._on_region_state)

    async def start(self) -> None:
        for node in self.nodes.values():
            await node.serve()
        self._reconcile_all()
        loop = asyncio.get_running_loop()
        interval = min(self.handshake_timeout_s, self.idle_timeout_s, self.frame_timeout_s) / 4
        self._sweep_interval_s = max(SWEEP_INTERVAL_S_MIN, min(SWEEP_INTERVAL_S_MAX, interval))
        self._sweeper = loop.call_later(self._sweep_interval_s, self._sweep)

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        for node in self.nodes.values():
            for conn in list(node.connections):
                conn.goodbye()
            node.set_listening(False, hold=False)

    def _allocate_port(self) -> int:
        lo, hi = self._port_range
        if lo == 0:
            return 0
        port = self._next_port
        if port > hi:
            raise OSError(f"the direct port range {lo}-{hi} has no port left for another node; widen --direct-ports")
        self._next_port += 1
        return port

    def _add_region(self, name: str) -> None:
        self.services[name] = self.emu.service(name, key=None)      # frames are authenticated at the handshake
        for node in self.account.placement.nodes(name):
            dn = DirectNode(self, name, node.index, self._allocate_port())
            dn.bind()
            self.nodes[(name, node.index)] = dn
            self.emu.topology.direct_ports[(name, node.index)] = dn.port

    def _on_region_state(self, name: str, state: str) -> None:
        if state == "added":
            try:
                self._add_region(name)
            except OSError as e:             # no port left in the range: the gateway still serves
                log.error("region %s has no direct-mode nodes: %s", name, e)
                return
            for node in self.region_nodes(name):
                self._settle(node.serve())
        elif state == "removed":
            for node in self.region_nodes(name):
                node.set_listening(False, hold=False)
                del self.nodes[(name, node.index)]
                self.emu.topology.direct_ports.pop((name, node.index), None)
            self.services.pop(name, None)
        else:
            self._reconcile(name)

    def region_nodes(self, region: str) -> list:
        return [n for (r, _), n in self.nodes.items() if r == region]

    def _reconcile_all(self) -> None:
        for region in list(self.services):
            self._reconcile(region)

    def _reconcile(self, region: str) -> None:
        """Listen on exactly the nodes that should (ALL_REGIONS: every region), failing in the
        mode of their region's outage."""
        if region not in self.services:
            self._reconcile_all()
            return
        mode = None
        if self.account.region_state(region) != "up":
            mode = self.account.region(region).outage_mode or OUTAGE_MODE_DEFAULT
        placement = self.account.placement
        for node in self.region_nodes(region):
            listening = mode != OUTAGE_REFUSE and placement.listening(region, node.index)
            node.set_outage(mode if listening else None)
            task = node.set_listening(listening)
            if task is not None:
                self._settle(task)

    def _settle(self, aw) -> None:
        """Track an endpoint change so the control port answers only once it is done."""
        task = aw if isinstance(aw, asyncio.Task) else asyncio.get_running_loop().create_task(aw)
        self.emu._settling.add(task)

    def _sweep(self) -> None:
        now = asyncio.get_running_loop().time()
        for node in self.nodes.values():
            for conn in list(node.connections):
                conn.check_deadlines(now)
        self._sweeper = asyncio.get_running_loop().call_later(self._sweep_interval_s, self._sweep)

    # ---- reporting ------------------------------------------------------------------------
    def describe(self) -> dict:
        """Each region's nodes, ports and the replicas they hold (for GET /topology)."""
        out = {"protocol": D.PROTOCOL, "host": self.emu.topology.host, "instance": self.instance, "regions": {}}
        placement = self.account.placement
        for region in self.services:
            nodes = [dict(n.describe(), replicas=[]) for n in self.region_nodes(region)]
            for c, p in self.account.partitions():
                rs = p.replica_sets.get(region)
                if rs is None:
                    continue
                for i, node in enumerate(placement.replica_nodes(region, c.rid, p.range_id)):
                    key = D.replica_key(c.rid, p.range_id, i)
                    nodes[node]["replicas"].append({"database": c.db.id, "container": c.id, "partition": p.range_id,
                                                    "replica": i, "key": key, "role": rs.replicas[i].role,
                                                    "state": rs.replicas[i].state,
                                                    "requests": self.replica_requests.get(region, {}).get(key, (0,))[0]})
            out["regions"][region] = {"blocked": placement.is_blocked(region), "nodes": nodes}
        return out

    def ready_info(self) -> dict:
        """Every node with its port and the replica keys it holds (none before a container exists)."""
        held: dict = {}
        placement = self.account.placement
        for c, p in self.account.partitions():
            for region in p.replica_sets:
                if region not in self.services:
                    continue
                for i, node in enumerate(placement.replica_nodes(region, c.rid, p.range_id)):
                    held.setdefault((region, node), []).append(D.replica_key(c.rid, p.range_id, i))
        return {"protocol": D.PROTOCOL, "instance": self.instance,
                "nodes": [{"region": r, "node": i, "port": n.port, "replicas": held.get((r, i), [])}
                          for (r, i), n in self.nodes.items()]}

    def counts(self) -> list:
        """[(region, op, status, substatus, replies)] summed over each region's nodes, sorted."""
        total: collections.Counter = collections.Counter()
        for (region, _), node in self.nodes.items():
            for (op, status, sub), n in node.request_counts().items():
                total[(region, op, status, sub)] += n
        # A reply a request fault lost counts under its fault's name in place of its substatus
        # ("drop_after_apply"): sorted as text beside the numbers.
        return [(*k, n) for k, n in sorted(total.items(), key=lambda kv: (*kv[0][:3], str(kv[0][3])))]

    def served(self) -> dict:
        """{region: {"read 200": n, ...}}: every direct reply, as the services' counters."""
        out: dict = {}
        for (region, _), node in self.nodes.items():
            d = out.setdefault(region, {})
            for (op, status, sub), n in node.request_counts().items():
                name = f"{op} {status}" + (f"/{sub}" if sub else "")
                d[name] = d.get(name, 0) + n
        return out


# A handler's rest after its first step ran outside any task: the gateway's handoff (gateway/http.py).
carry_on = http_carry_on
