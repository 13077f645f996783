"""The asyncio runtime: an account, its gateways and its control port, on real sockets.

`Emulator.start()` binds every listener first (ports may be 0, for tests), so the account
document can advertise the real addresses, then serves. `ready_info()` is the one
machine-readable line the CLI prints when everything is up.
"""
import asyncio
import errno
import logging
import random
import resource
import socket
from dataclasses import dataclass, field

from aiohttp import web

from .. import defaults
from ..core.account import Account, AccountConfig
from ..core.errors import CosmosError
from ..core.faults import OUTAGE_MODE_DEFAULT
from ..core.scheduler import Scheduler
from ..gateway.http import BLACKHOLE, RESET, HttpServer, HEADER_TIMEOUT_S_DEFAULT
from ..gateway.refusal import CONNECTIONS_PER_LISTENER_MAX, Refusals
from ..gateway.server import Gateway, WRITE_ACK_TIMEOUT_S
from .clock import LoopClock, SchedulerDriver
from .control import control_app
from .direct_server import DirectPlane
from .control_access import is_loopback

log = logging.getLogger("regionlab")

SWEEP_INTERVAL_S = 1.0
LISTEN_BACKLOG = 1024
# The control port (aiohttp) closes a connection idle this long, a new one that never sent a
# request included (aiohttp starts the timer at connect).
CONTROL_KEEPALIVE_TIMEOUT_S = 15.0


@dataclass
class ServerConfig:
    account: AccountConfig = field(default_factory=AccountConfig)
    host: str = defaults.HOST
    advertise_host: str | None = None         # what clients are told; default: host
    global_port: int = defaults.GLOBAL_PORT
    region_ports: list | None = None          # default: consecutive ports after global_port
    control_port: int = defaults.CONTROL_PORT
    key: str | None = defaults.EMULATOR_KEY   # None turns auth off
    seed: int = 0
    header_timeout_s: float = HEADER_TIMEOUT_S_DEFAULT
    connections_max: int = CONNECTIONS_PER_LISTENER_MAX    # per listener: each gateway port and the control port
    write_ack_timeout_s: float = WRITE_ACK_TIMEOUT_S   # then a write is answered 408 (indefinite)
    direct_port_range: tuple = (defaults.DIRECT_PORT_MIN, defaults.DIRECT_PORT_MAX)   # (0, 0): free ports
    direct_limits: dict = field(default_factory=dict)   # DirectPlane keyword limits (tests shorten timeouts)
    direct_tls_cert: str | None = None        # PEM certificate and key: TLS on the direct ports too
    direct_tls_key: str | None = None
    control_token: str | None = None          # Bearer token the control port requires (None: none)

    def ports(self) -> list[int]:
        n = len(self.account.regions)
        if self.region_ports is not None:
            if len(self.region_ports) != n:
                raise ValueError(f"{n} regions need {n} region ports, got {self.region_ports}")
            return list(self.region_ports)
        if self.global_port == 0:
            return [0] * n
        return [self.global_port + 1 + i for i in range(n)]


class Topology:
    """Where each endpoint is served, as clients must address it."""

    def __init__(self, host: str, scheme: str = "http"):
        self.host = host
        self.scheme = scheme
        self.global_port = 0
        self.region_ports: dict[str, int] = {}
        self.control_port = 0
        self.direct_ports: dict = {}      # (region, node index) -> its direct TCP port

    def url(self, port: int) -> str:
        return f"{self.scheme}://{self.host}:{port}/"

    @property
    def global_endpoint(self) -> str:
        return self.url(self.global_port)

    def region_endpoint(self, name: str) -> str:
        return self.url(self.region_ports[name])


def raise_file_limit() -> int:
    """Raise the soft limit on open files to the hard one (the default soft limit is often
    1,024, shared by every listener and connection of the process); the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft >= hard:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as e:
        log.debug("cannot raise the open-file limit from %d to %d: %s", soft, hard, e)
        return soft
    return hard


def _control_protocols(runner, refusals: Refusals):
    """The control port's protocol factory: aiohttp's, until it serves connections_max
    connections; past that, a refusal (gateway/refusal.py), as on the gateway ports."""
    server = runner.server

    def factory():
        if len(server.connections) >= refusals.connections_max:
            return refusals.protocol()
        return server()
    return factory


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise OSError(e.errno, f"cannot listen on {host}:{port}: {e.strerror}") from None
    sock.listen(LISTEN_BACKLOG)
    sock.setblocking(False)
    return sock


class Emulator:
    def __init__(self, config: ServerConfig | None = None):
        self.config = config or ServerConfig()
        self.account: Account | None = None
        self.topology = Topology(self.config.advertise_host or self.config.host)
        self.gateways: dict = {}
        self._servers: list = []
        self._http_servers: list = []
        self._driver = None
        self._sweeper = None
        self._control_runner = None
        self._control_server = None
        self.control_refusals: Refusals | None = None
        self._listeners: dict = {}               # region (None = global) -> (HttpServer, asyncio.Server)
        self.pending_sockets: dict = {}          # region being added -> its already bound socket
        self._settling: set = set()              # endpoint changes not yet complete (see settled)
        self.direct: DirectPlane | None = None   # the backend nodes' TCP listeners (direct mode)
        self.started = asyncio.Event()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        cfg = self.config
        raise_file_limit()
        clock = LoopClock(loop)
        scheduler = Scheduler()
        self._driver = SchedulerDriver(loop, clock, scheduler)
        self.account = Account(cfg.account, clock, scheduler, random.Random(cfg.seed))
        socks = [(None, _bind(cfg.host, cfg.global_port))]
        for name, port in zip(cfg.account.regions, cfg.ports()):
            socks.append((name, _bind(cfg.host, port)))
        control_sock = _bind(cfg.host, cfg.control_port)
        for name, sock in socks:
            port = sock.getsockname()[1]
            if name is None:
                self.topology.global_port = port
            else:
                self.topology.region_ports[name] = port
        self.topology.control_port = control_sock.getsockname()[1]
        self.direct = DirectPlane(self, **cfg.direct_limits)
        self.direct.bind_all()
        for name, sock in socks:
            http = self._endpoint(name)
            server = await loop.create_server(http, sock=sock)
            self._servers.append(server)
            self._listeners[name] = (http, server)
        self.account.region_listeners.append(self._on_region_state)
        await self.direct.start()
        self._control_runner = web.AppRunner(control_app(self), access_log=None,
                                             keepalive_timeout=CONTROL_KEEPALIVE_TIMEOUT_S)
        await self._control_runner.setup()
        self.control_refusals = Refusals(cfg.connections_max)
        self._control_server = await loop.create_server(
            _control_protocols(self._control_runner, self.control_refusals), sock=control_sock)
        if not is_loopback(cfg.host) and not cfg.control_token:
            log.warning("the control port listens on %s:%d without a token: anyone who can reach it can "
                        "inject faults and fail over regions; pass --control-token (or "
                        "$REGIONLAB_CONTROL_TOKEN) or listen on 127.0.0.1",
                        cfg.host, self.topology.control_port)
        self._sweeper = loop.call_later(SWEEP_INTERVAL_S, self._sweep)
        self.started.set()

    def _on_region_state(self, name: str, state: str) -> None:
        """A region outage fails its endpoint in the outage's mode (core/faults.py): `refuse`
        closes the listener and drops open connections (clients see refused connections);
        `reset` resets every connection; `unavailable` leaves the endpoint up (its gateway answers
        503); `blackhole` reads and never answers. Recovery serves again on the same port. An
        added region gets a new endpoint; a removed one loses it."""
        loop = asyncio.get_running_loop()
        if state == "added":
            self._add_endpoint(name, self.pending_sockets.pop(name))
        elif state == "removed":
            self._stop_listening(name)
            self.topology.region_ports.pop(name, None)
            self.gateways.pop(name, None)
            http, _server = self._listeners.pop(name)       # nothing of the region is kept
            self._http_servers.remove(http)
        elif state == "down":
            mode = self.account.region(name).outage_mode or OUTAGE_MODE_DEFAULT
            self._begin_outage(name, mode)  # at once: the next request must already meet it
        else:
            self._settling.add(loop.create_task(self._recover(name)))

    def _begin_outage(self, name: str, mode: str) -> None:
        if mode == "refuse":
            self._stop_listening(name)
        elif mode in (RESET, BLACKHOLE):
            http = self._listeners[name][0]
            reset = http.begin_outage(mode)
            self._settling.add(asyncio.get_running_loop().create_task(http.wait_closed(reset)))

    async def _recover(self, name: str) -> None:
        http = self._listeners[name][0]
        await http.wait_closed(http.end_outage())
        await self._listen_again(name)          # a no-op unless the outage closed the listener

    async def settled(self) -> None:
        """Until the endpoints have caught up with the regions' states: the connections of a
        region that went down are closed, and a region that came back listens again. The
        control port answers a fault only then, so a client acting on its answer sees the fault."""
        while self._settling:
            pending, self._settling = self._settling, set()
            await asyncio.gather(*pending, return_exceptions=True)

    def _stop_listening(self, name: str) -> None:
        http, server = self._listeners[name]
        if server is not None:
            server.close()
        http.abort_all()
        self._settling.add(asyncio.get_running_loop().create_task(http.wait_all_closed()))

    def _endpoint(self, name: str | None) -> HttpServer:
        """The gateway of one endpoint (None = global) and the HTTP server that feeds it."""
        cfg = self.config
        gw = Gateway(self.account, self.topology, name, cfg.key)
        gw.write_ack_timeout_s = cfg.write_ack_timeout_s
        self.gateways[name] = gw
        http = HttpServer(gw.handle, header_timeout_s=cfg.header_timeout_s, connections_max=cfg.connections_max)
        self._http_servers.append(http)
        return http

    def reserve_port(self, name: str, port: int) -> None:
        """Bind the listener of a region about to be added, before the account changes at all:
        a port that cannot be had refuses the whole add (409 or 400) and nothing is half-added.
        The region's "added" event then serves on this socket (release_port if the add fails)."""
        t = self.topology
        owners = {t.global_port: "the global endpoint", t.control_port: "the control port",
                  **{p: f"region '{n}'" for n, p in t.region_ports.items()}}
        if port in owners:
            raise CosmosError(409, 0, f"Port {port} is taken by {owners[port]}; pick another port, "
                                      f"or 0 for any free one.")
        try:
            sock = _bind(self.config.host, port)
        except OSError as e:
            status = 409 if e.errno == errno.EADDRINUSE else 400
            raise CosmosError(status, 0, f"Cannot add region '{name}': {e.strerror}; "
                                         f"pick another port, or 0 for any free one.") from None
        self.pending_sockets[name] = sock

    def release_port(self, name: str) -> None:
        sock = self.pending_sockets.pop(name, None)
        if sock is not None:
            sock.close()

    def _add_endpoint(self, name: str, sock: socket.socket) -> None:
        self.topology.region_ports[name] = sock.getsockname()[1]
        http = self._endpoint(name)
        self._listeners[name] = (http, None)

        async def serve():
            server = await asyncio.get_running_loop().create_server(http, sock=sock)
            self._servers.append(server)
            self._listeners[name] = (http, server)
        self._settling.add(asyncio.get_running_loop().create_task(serve()))

    async def _listen_again(self, name: str) -> None:
        http, server = self._listeners[name]
        if server is not None and server.is_serving():
            return
        port = self.topology.region_ports[name]
        sock = _bind(self.config.host, port)
        new = await asyncio.get_running_loop().create_server(http, sock=sock)
        self._servers.append(new)
        self._listeners[name] = (http, new)

    def _sweep(self) -> None:
        now = asyncio.get_running_loop().time()
        for http in self._http_servers:
            http.sweep(now)
        self._sweeper = asyncio.get_running_loop().call_later(SWEEP_INTERVAL_S, self._sweep)

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self.direct is not None:
            await self.direct.stop()
        for s in self._servers:
            s.close()
        for http in self._http_servers:
            await http.shutdown(1.0)
        for s in self._servers:
            await s.wait_closed()
        if self._control_server is not None:
            self._control_server.close()
            self.control_refusals.abort_all()
        if self._control_runner is not None:
            await self._control_runner.cleanup()
        if self._driver is not None:
            self._driver.close()

    def ready_info(self) -> dict:
        t = self.topology
        return {"ready": True, "account_endpoint": t.global_endpoint,
                "regions": [{"name": n, "endpoint": t.region_endpoint(n),
                             "write": n in self.account.write_regions} for n in self.account.config.regions],
                "control_port": t.control_port, "control_endpoint": t.url(t.control_port),
                "key": self.config.key, "auth": self.config.key is not None,
                "consistency": self.account.consistency,
                "direct_port_range": list(self.config.direct_port_range),
                "direct": self.direct.ready_info()}
