"""Every direct-mode node of every region: ports, listening, the shared sweeper, and reporting.

Theory of operation: the plane binds every node's port at start (so the ready line and the
address feed know them) and keeps each node listening exactly while the node is up, its
region's ports are not blocked (core/placement.py says which; the fault catalogue changes it)
and its region is not out in the `refuse` mode; a region out in another mode fails its nodes in
that mode (node.py). It follows the account: a region added gets nodes, a removed one loses them,
and every placement change (a replica moved, a node crashed, ports blocked) reconciles the
region's nodes. Each region has one Service for its nodes, whose `requests_served` is the one
count of their replies (adapter.py): `counts`, `served` and `describe` sum it by region, by
operation and by replica. One sweeper per plane checks every connection's deadlines, so a slow
or silent peer is closed within a bounded time and leaves no task.

The server composes the plane (emulator/server.py) and hands it what it owns: the emulator (its
account, config, topology and `service` factory), and how to listen on a port and hold one.
"""
import asyncio
import collections
import errno
import logging

from regionlab.client.protocol import direct as D

from ..core.faults import OUTAGE_MODE_DEFAULT, OUTAGE_REFUSE
from . import tls
from .node import DirectNode

log = logging.getLogger("regionlab.direct")

SWEEP_INTERVAL_S_MIN = 0.05
SWEEP_INTERVAL_S_MAX = 1.0


class DirectPlane:
    def __init__(self, emu, *, listen, hold, handshake_timeout_s: float = D.HANDSHAKE_TIMEOUT_S,
                 idle_timeout_s: float = D.IDLE_TIMEOUT_S, frame_timeout_s: float = D.FRAME_TIMEOUT_S,
                 max_in_flight: int = D.IN_FLIGHT_PER_CONNECTION_MAX,
                 max_connections: int = D.CONNECTIONS_PER_NODE_MAX):
        self.emu = emu
        self.account = emu.account
        self.listen = listen                     # (host, port) -> a bound, listening socket
        self.hold = hold                         # (host, port) -> a hold with release()
        cfg = emu.config
        cert, key = cfg.direct_tls_cert, cfg.direct_tls_key
        gateway_cert = getattr(emu, "certificate", None)
        if cert is None and gateway_cert is not None:     # --https: the gateway's certificate, too
            cert, key = gateway_cert.cert_file, gateway_cert.key_file
        self.tls_context = tls.server_context(cert, key) if cert else None   # TLS on the same ports
        self.host = cfg.host
        self.key = cfg.key
        self.instance = emu.topology.instance    # what a hello's "instance" must name (session.py)
        # What each node's sessions are held to (session.py Limits).
        self.limits = {"handshake_timeout_s": handshake_timeout_s, "idle_timeout_s": idle_timeout_s,
                       "frame_timeout_s": frame_timeout_s, "max_in_flight": max_in_flight}
        self.max_connections = max_connections
        self.nodes: dict = {}                    # (region, index) -> DirectNode
        self.services: dict = {}                 # region -> the Service its nodes' requests run on
        lo, hi = cfg.direct_port_range
        self._port_range = (lo, hi)
        self._next_port = lo
        # The default range: a port another process holds is passed over (a second emulator on the
        # machine takes the next free ones). A range the user gave: each node takes exactly its port.
        self._skip_taken = not cfg.direct_ports_given
        self._sweeper = None
        self._sweep_interval_s = max(SWEEP_INTERVAL_S_MIN, min(SWEEP_INTERVAL_S_MAX, min(
            handshake_timeout_s, idle_timeout_s, frame_timeout_s) / 4))

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
        self._sweeper = asyncio.get_running_loop().call_later(self._sweep_interval_s, self._sweep)

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
            taken = " (the others are taken)" if self._skip_taken else ""
            raise OSError(errno.EADDRINUSE, f"the direct port range {lo}-{hi} has no port left for another "
                                            f"node{taken}; widen --direct-ports, or --direct-ports 0 for free ports")
        self._next_port += 1
        return port

    def _bind(self, dn: DirectNode) -> None:
        """Bind dn to the next port of the range (past the ones taken, in the default range)."""
        while True:
            dn.port = self._allocate_port()
            try:
                dn.bind()
                return
            except OSError as e:
                if not (self._skip_taken and e.errno == errno.EADDRINUSE):
                    raise

    def _add_region(self, name: str) -> None:
        svc = self.services[name] = self.emu.service(name, key=None)   # frames are authenticated at the handshake
        for node in self.account.placement.nodes(name):
            dn = DirectNode(self, name, node.index, 0, svc)
            self._bind(dn)
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
            node.slots.shed_overdue(now)
            for conn in list(node.connections):
                conn.check_deadlines(now)
        self._sweeper = asyncio.get_running_loop().call_later(self._sweep_interval_s, self._sweep)

    # ---- reporting ------------------------------------------------------------------------
    def describe(self) -> dict:
        """Each region's nodes, ports and the replicas they hold (for GET /topology)."""
        out = {"protocol": D.PROTOCOL, "host": self.emu.topology.host, "instance": self.instance, "regions": {}}
        placement = self.account.placement
        for region, svc in self.services.items():
            by_replica = _by_replica(svc.requests_served)
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
                                                    "requests": by_replica.get(key, 0)})
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
        """[(region, op, status, substatus, replies)], each region's over its replicas, sorted."""
        total: collections.Counter = collections.Counter()
        for region, svc in self.services.items():
            for (op, _, status, sub), n in svc.requests_served.items():
                total[(region, op, status, sub)] += n
        # A reply a request fault lost counts under its fault's name in place of its substatus
        # ("drop_after_apply"): sorted as text beside the numbers.
        return [(*k, n) for k, n in sorted(total.items(), key=lambda kv: (*kv[0][:3], str(kv[0][3])))]

    def served(self) -> dict:
        """{region: {"read 200": n, ...}}: every direct reply, as the services' counters."""
        out: dict = {}
        for region, op, status, sub, n in self.counts():
            d = out.setdefault(region, {})
            name = f"{op} {status}" + (f"/{sub}" if sub else "")
            d[name] = d.get(name, 0) + n
        return out


def _by_replica(counts) -> dict:
    """Replies by replica key, from a region's count (refusals, which reached none, left out)."""
    out: dict = {}
    for (_, key, _, _), n in counts.items():
        if key is not None:
            out[key] = out.get(key, 0) + n
    return out
