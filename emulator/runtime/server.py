"""The asyncio runtime: an account, its gateways and its control port, on real sockets.

`Emulator.start()` binds every listener first (ports may be 0, for tests), so the account
document can advertise the real addresses, then serves. `ready_info()` is the one
machine-readable line the CLI prints when everything is up.
"""
import asyncio
import logging
import random
import socket
from dataclasses import dataclass, field

from aiohttp import web

from client.protocol.auth import CLOCK_SKEW_S_MAX_DEFAULT

from .. import defaults
from ..core.account import Account, AccountConfig
from ..core.scheduler import Scheduler
from ..gateway.http import HttpServer, HEADER_TIMEOUT_S_DEFAULT
from ..gateway.server import Gateway, WRITE_ACK_TIMEOUT_S
from .clock import LoopClock, SchedulerDriver
from .control import control_app

log = logging.getLogger("regionlab")

SWEEP_INTERVAL_S = 1.0
LISTEN_BACKLOG = 1024


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
    write_ack_timeout_s: float = WRITE_ACK_TIMEOUT_S   # then a write is answered 408 (indefinite)
    max_clock_skew_s: float = CLOCK_SKEW_S_MAX_DEFAULT  # a signed request's date vs our clock; 0 = off
    direct_port_range: tuple = (defaults.DIRECT_PORT_MIN, defaults.DIRECT_PORT_MAX)

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

    def url(self, port: int) -> str:
        return f"{self.scheme}://{self.host}:{port}/"

    @property
    def global_endpoint(self) -> str:
        return self.url(self.global_port)

    def region_endpoint(self, name: str) -> str:
        return self.url(self.region_ports[name])


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
        self._listeners: dict = {}               # region (None = global) -> (HttpServer, asyncio.Server)
        self.pending_ports: dict = {}            # region being added -> the port it should listen on
        self._settling: set = set()              # endpoint changes not yet complete (see settled)
        self.started = asyncio.Event()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        cfg = self.config
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
        for name, sock in socks:
            http = self._endpoint(name)
            server = await loop.create_server(http, sock=sock)
            self._servers.append(server)
            self._listeners[name] = (http, server)
        self.account.region_listeners.append(self._on_region_state)
        self._control_runner = web.AppRunner(control_app(self), access_log=None)
        await self._control_runner.setup()
        site = web.SockSite(self._control_runner, control_sock)
        await site.start()
        self._sweeper = loop.call_later(SWEEP_INTERVAL_S, self._sweep)
        self.started.set()

    def _on_region_state(self, name: str, state: str) -> None:
        """A region outage stops its endpoint: the listener closes and open connections drop, so
        clients see refused connections, as when a region is unreachable. Recovery re-listens
        on the same port. An added region gets a new endpoint; a removed one loses it."""
        loop = asyncio.get_running_loop()
        if state == "added":
            self._add_endpoint(name, self.pending_ports.pop(name, 0))
        elif state == "removed":
            self._stop_listening(name)
            self.topology.region_ports.pop(name, None)
            self.gateways.pop(name, None)
        elif state == "down":
            self._stop_listening(name)      # at once: the next request must already be refused
        else:
            self._settling.add(loop.create_task(self._listen_again(name)))

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
        gw.max_clock_skew_s = cfg.max_clock_skew_s
        self.gateways[name] = gw
        http = HttpServer(gw.handle, header_timeout_s=cfg.header_timeout_s)
        self._http_servers.append(http)
        return http

    def _add_endpoint(self, name: str, port: int) -> None:
        sock = _bind(self.config.host, port)
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
        for s in self._servers:
            s.close()
        for http in self._http_servers:
            await http.shutdown(1.0)
        for s in self._servers:
            await s.wait_closed()
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
                "direct_port_range": list(self.config.direct_port_range)}
