"""The emulator, composed: an account, its endpoints' services, the HTTP gateways and direct nodes
that feed them, and its control port, on the asyncio runtime (emulator/runtime) and real sockets.

`Emulator.start()` binds every listener first (ports may be 0, for tests), so the account
document can advertise the real addresses, then serves. `ready_info()` is the one
machine-readable line the CLI prints when everything is up.

With `https` every gateway port (global and regions) serves TLS through a TlsListener
(gateway/tls_listener.py) with the certificate of runtime/certificate.py (generated into
`cert_dir`, or the user's `tls_cert_file`/`tls_key_file`), and the endpoints become https://.
The control port stays plain HTTP: it is for tools and people on the machine, and faults never
touch it.
"""
import asyncio
import errno
import logging
import os
import random
import socket
import weakref
from dataclasses import dataclass, field

from aiohttp import web

from regionlab.client.protocol import direct as D
from regionlab.client.protocol.auth import CLOCK_SKEW_MAX_S

from . import defaults, interpreter
from .core.account import Account, AccountConfig
from .core.errors import CosmosError
from .core.faults import OUTAGE_BLACKHOLE, OUTAGE_MODE_DEFAULT, OUTAGE_REFUSE, OUTAGE_RESET, OUTAGE_UNAVAILABLE
from .service import responses
from .core.scheduler import Scheduler
from .gateway.hosts import HostRouter, regional_host
from .gateway.http import HttpServer
from .gateway.refusal import Refusals
from .gateway.server import Gateway
from .service.request_log import RequestLog
from .service.service import Service
from .runtime import certificate
from .runtime.clock import LoopClock, SchedulerDriver
from .gateway.tls_listener import TlsListener
from .runtime.listen import bind, raise_file_limit
from .runtime.script_engine import V8Engine
from .runtime.waits import LoopWaits
from .runtime.control import CONTROL_HTTP_LOG, control_app
from .runtime.control_connections import ControlConnections
from .direct.plane import DirectPlane
from .runtime.persistence import Persistence
from .runtime.port_hold import PortHold
from .runtime.control_access import is_loopback
from .core.limits import (
    CONNECTIONS_PER_LISTENER_MAX, CONTROL_KEEPALIVE_TIMEOUT_S, HEAD_DEADLINE_S, SCRIPT_TIMEOUT_MS,
    WRITE_ACK_DEADLINE_MS,
)

log = logging.getLogger("regionlab")

SWEEP_INTERVAL_S = 1.0


@dataclass
class ServerConfig:
    account: AccountConfig = field(default_factory=AccountConfig)
    host: str = defaults.HOST
    advertise_host: str | None = None         # what clients are told; default: host
    global_port: int = defaults.GLOBAL_PORT
    region_ports: list | None = None          # default: consecutive ports after global_port
    # The first region is served on global_port itself, its endpoint the account's URL (the
    # official emulator's one-region shape); the others follow on the next ports.
    region_on_account_port: bool = False
    # Every region on the account's port (no ports of their own), told apart by the Host header, advertised under the
    # names the SDKs compute (`localhost-eastus2`; gateway/hosts.py, docs/regional-hostnames.md).
    regional_hostnames: bool = False
    control_port: int = defaults.CONTROL_PORT
    key: str | None = defaults.EMULATOR_KEY   # None turns auth off
    seed: int = 0
    header_timeout_s: float = HEAD_DEADLINE_S
    connections_max: int = CONNECTIONS_PER_LISTENER_MAX    # per listener: each gateway port and the control port
    write_ack_timeout_s: float = WRITE_ACK_DEADLINE_MS / 1000   # then a write is answered 408 (indefinite)
    script_timeout_s: float = SCRIPT_TIMEOUT_MS / 1000     # a script's time bound (docs/scripts.md): then 408
    direct_port_range: tuple = (defaults.DIRECT_PORT_MIN, defaults.DIRECT_PORT_MAX)   # (0, 0): free ports
    # Given (--direct-ports): node j of region i takes exactly port MIN + i * nodes + j, or start-up
    # fails. Not given (the default range): the nodes take the first free ports of the range.
    direct_ports_given: bool = False
    direct_limits: dict = field(default_factory=dict)   # DirectPlane keyword limits (tests shorten timeouts)
    direct_tls_cert: str | None = None        # PEM certificate and key: TLS on the direct ports too
    direct_tls_key: str | None = None
    control_token: str | None = None          # Bearer token the control port requires (None: none)
    # HTTPS on the gateway ports. With cert_dir, the certificate is generated there (or reused)
    # at start, and tls_cert_file/tls_key_file/tls_trust_file name its files; without it, they
    # are the user's own (--cert/--cert-key; the trust file is the certificate itself). Direct
    # mode may serve TLS from the same tls_cert_file/tls_key_file pair.
    query_mode: str = "whole"                 # "service": 400/1004 as the service (gateway/queries.py)
    https: bool = False
    cert_dir: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_trust_file: str | None = None
    read_only_endpoints: bool = False         # one more endpoint per region: reads from secondaries only
    # Durability (runtime/persistence.py, docs/durability.md): None keeps everything in memory.
    data_dir: str | None = None
    durability: str = "strict"                # strict: fsync per group; relaxed: survives a crash, not power loss
    reset_data: bool = False                  # start empty, discarding what data_dir holds
    seed_data: str | None = None              # a seed file or directory (runtime/seed_data.py)
    # The emulator instance id its direct addresses name and its nodes check (docs/direct-protocol.md,
    # "Instances"): None makes a random one per process; a fixed one is for deterministic tests.
    instance_id: str | None = None

    def read_only_ports(self) -> list[int]:
        """Free ports when the account's are free, else the ports after the regions'."""
        n = len(self.account.regions)
        last = max(self.ports(), default=self.global_port)
        return [0] * n if self.global_port == 0 else [last + 1 + i for i in range(n)]
    max_clock_skew_s: float = CLOCK_SKEW_MAX_S  # a signed request's date vs our clock; 0 = off

    def ports(self) -> list[int]:
        n = len(self.account.regions)
        if self.region_ports is not None:
            if len(self.region_ports) != n:
                raise ValueError(f"{n} regions need {n} region ports, got {self.region_ports}")
            return list(self.region_ports)
        if self.global_port == 0:
            return [0] * n
        if self.region_on_account_port:
            return [self.global_port + i for i in range(n)]
        return [self.global_port + 1 + i for i in range(n)]


INSTANCE_BYTES = 8                            # a random instance id: 64 bits, 16 hex digits


def new_instance_id() -> str:
    """A fresh id for this emulator process. Random, not derived from anything the process
    shares with another (seed, ports, data dir): two emulators on one machine hold the same
    replica keys, and this is what tells their direct nodes apart."""
    return os.urandom(INSTANCE_BYTES).hex()


class Topology:
    """Where each endpoint is served, as clients must address it; `instance` is the id of this
    emulator process, which its direct addresses carry (docs/direct-protocol.md, "Instances")."""

    def __init__(self, host: str, scheme: str = "http", instance: str | None = None):
        self.host = host
        self.scheme = scheme
        self.instance = instance
        self.global_port = 0
        self.region_ports: dict[str, int] = {}   # listen_region and forget_region keep it
        self._region_urls: dict[str, str] = {}   # region -> its endpoint's URL, made when it listens
        self.read_only_ports: dict[str, int] = {}
        self.control_port = 0
        self.direct_ports: dict = {}      # (region, node index) -> its direct TCP port
        self.regional_hostnames = False   # regions served on global_port, named by Host (gateway/hosts.py)

    def url(self, port: int) -> str:
        return f"{self.scheme}://{self.host}:{port}/"

    @property
    def global_endpoint(self) -> str:
        return self.url(self.global_port)

    def region_endpoint(self, name: str) -> str:
        return self._region_urls[name]

    def listen_region(self, name: str, port: int) -> None:
        """The region's endpoint is served on port (its URL is made once, here: every point
        read's Content-Location starts with it); with regional host names, under its own name."""
        self.region_ports[name] = port
        host = regional_host(self.host, name) if self.regional_hostnames else self.host
        self._region_urls[name] = f"{self.scheme}://{host}:{port}/"

    def forget_region(self, name: str) -> None:
        self.region_ports.pop(name, None)
        self._region_urls.pop(name, None)

    def read_only_endpoints(self) -> dict:
        return {name: self.url(port) for name, port in self.read_only_ports.items()}
    @property
    def control_url(self) -> str:
        return f"http://{self.host}:{self.control_port}/"      # always plain HTTP


class Emulator:
    def __init__(self, config: ServerConfig | None = None):
        self.config = config or ServerConfig()
        self.account: Account | None = None
        instance = self.config.instance_id
        if instance is not None and not D.valid_instance(instance):
            raise ValueError(f"instance_id must be 1-{D.INSTANCE_MAX_CHARS} of the characters A-Z a-z 0-9 . _ -; "
                             f"got {str(instance)[:80]!r}")
        self.topology = Topology(self.config.advertise_host or self.config.host,
                                 "https" if self.config.https else "http", instance or new_instance_id())
        self.topology.regional_hostnames = self.config.regional_hostnames
        self.router: HostRouter | None = None    # with regional_hostnames: the account port's requests by Host
        self._front: HttpServer | None = None    # ... and the HttpServer its new connections start in
        self._global_handle = None               # the global endpoint's gateway (an outage may stand in)
        self.certificate: certificate.Certificate | None = None
        self._tls = None                         # the gateway ports' ssl.SSLContext, with --https
        self.services: dict = {}                 # endpoint name (None = global) -> its Service
        self.waits: LoopWaits | None = None      # how the services' requests wait (runtime/waits.py)
        self.script_engine: V8Engine | None = None   # runs stored procedures, triggers, UDFs
        self._servers: list = []
        self._http_servers: list = []
        self._driver = None
        self._sweeper = None
        self._control_runner = None
        self._control_server = None
        self.control_refusals: Refusals | None = None
        self.control_connections: ControlConnections | None = None
        self._listeners: dict = {}               # region (None = global) -> (HttpServer, asyncio.Server)
        self._port_holds: dict = {}              # region -> PortHold while a refuse outage closes it
        self.pending_sockets: dict = {}          # region being added -> its already bound socket
        self._settling: set = set()              # endpoint changes not yet complete (see settled)
        self.direct: DirectPlane | None = None   # the backend nodes' TCP listeners (direct mode)
        self.persistence: Persistence | None = None   # with a data dir
        self.restored_items = 0
        self.seeded_items = 0                    # items --seed-data wrote at this start
        self.collector = None                    # runtime/collector.py, in a serving process (cli.serve)
        self.request_log = RequestLog()          # every endpoint's replies: GET /requests
        # Recording begins with the first GET /requests (record_requests): until somebody asks,
        # no request pays for its log entry. Every Service made is kept here to be told.
        self.recording_requests = False
        self._services_made = weakref.WeakSet()
        self.started = asyncio.Event()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        cfg = self.config
        raise_file_limit()
        interpreter.install()
        if cfg.https:
            self._prepare_tls()
        clock = LoopClock(loop)
        scheduler = Scheduler()
        self._driver = SchedulerDriver(loop, clock, scheduler)
        self.waits = LoopWaits(loop)
        self.script_engine = V8Engine(loop)
        self.account = Account(cfg.account, clock, scheduler, random.Random(cfg.seed))
        if cfg.data_dir is not None:
            # Before anything listens: a data dir that cannot be used ends start-up (PersistenceError).
            persistence = Persistence(cfg.data_dir, cfg.durability, cfg.reset_data)
            self.restored_items = persistence.open(self.account)
            persistence.start(loop)
            self.persistence = persistence
        if cfg.seed_data is not None:
            # Before anything listens: a bad seed ends start-up (SeedError, exit 2).
            from .runtime import seed_data
            try:
                self.seeded_items = seed_data.load(self.service(None), cfg.seed_data)
            except seed_data.SeedError:
                if self.persistence is not None:
                    await self.persistence.close()      # what was seeded before the bad file is kept
                raise
        socks = self._bind_endpoints()
        control_sock = bind(cfg.host, cfg.control_port)
        for name, sock in socks:
            port = sock.getsockname()[1]
            if name is None or self._on_account_port(name):
                self.topology.global_port = port
            if name is not None:
                self.topology.listen_region(name, port)
        if cfg.regional_hostnames:
            for r in self.account.regions:
                self.topology.listen_region(r.name, self.topology.global_port)
        self.topology.control_port = control_sock.getsockname()[1]
        self.direct = DirectPlane(self, listen=bind, hold=PortHold, **cfg.direct_limits)
        self.direct.bind_all()
        if cfg.regional_hostnames:
            await self._serve_by_host(socks[0][1])
        for name, sock in socks if self.router is None else ():
            http = self._endpoint(name)
            server = await self._serve(http, sock)
            self._listeners[name] = (http, server)
        if cfg.read_only_endpoints:
            for name, port in zip(cfg.account.regions, cfg.read_only_ports()):
                if self.account.region_state(name) is not None:     # not removed (a data dir's)
                    await self.add_read_only_endpoint(name, port)
        self.account.region_listeners.append(self._on_region_state)
        if None in self._listeners:            # an account with a global endpoint of its own
            self.account.global_endpoint_listeners.append(self._on_global_endpoint)
        await self.direct.start()
        app = control_app(self)
        self._control_runner = web.AppRunner(app, access_log=None, logger=CONTROL_HTTP_LOG,
                                             keepalive_timeout=CONTROL_KEEPALIVE_TIMEOUT_S)
        # The control port keeps its connections by the gateways' shedding policy; past it, their 503.
        self.control_refusals = Refusals(cfg.connections_max)
        control = self.control_connections = ControlConnections(None, cfg.connections_max,
                                                                 self.control_refusals.protocol)
        app.middlewares.insert(0, control.middleware)
        await self._control_runner.setup()
        control.server = self._control_runner.server
        self._control_server = await loop.create_server(control, sock=control_sock)
        if not is_loopback(cfg.host) and not cfg.control_token:
            log.warning("the control port listens on %s:%d without a token: anyone who can reach it can "
                        "inject faults and fail over regions; pass --control-token (or "
                        "$REGIONLAB_CONTROL_TOKEN) or listen on 127.0.0.1",
                        cfg.host, self.topology.control_port)
        self._sweeper = loop.call_later(SWEEP_INTERVAL_S, self._sweep)
        self.started.set()

    def _on_account_port(self, region: str) -> bool:
        return self.config.region_on_account_port and region == self.config.account.regions[0]

    def _bind_endpoints(self) -> list:
        """[(region or None for the global endpoint, its bound socket)]. With region_on_account_port
        the first region's socket is the account's: there is no separate global endpoint (unless a
        data dir's account no longer has that region)."""
        cfg = self.config
        names = [r.name for r in self.account.regions]     # a data dir's regions added at runtime too
        if cfg.regional_hostnames:
            return [(None, bind(cfg.host, cfg.global_port))]     # the one port (_serve_by_host)
        shared = cfg.region_on_account_port and cfg.account.regions[0] in names
        socks = [] if shared else [(None, bind(cfg.host, cfg.global_port))]
        ports = dict(zip(cfg.account.regions, cfg.ports()))
        kept = self.persistence.region_ports if self.persistence is not None else {}
        for name in names:
            port = cfg.global_port if self._on_account_port(name) else ports.get(name, kept.get(name, 0))
            socks.append((name, bind(cfg.host, port)))
        return socks

    async def _serve_by_host(self, sock: socket.socket) -> None:
        """The account's port, for the global endpoint and every region, by Host (gateway/hosts.py):
        a front HttpServer takes new connections, and each request's Host moves its connection
        to that endpoint's HttpServer. They share the front's slots: one listener, one cap."""
        cfg = self.config
        self.router = HostRouter(self.topology.host, None)
        front = HttpServer(self.router.handle, header_timeout_s=cfg.header_timeout_s,
                           connections_max=cfg.connections_max)
        self._http_servers.append(front)
        for name in [None] + [r.name for r in self.account.regions]:
            self._hosted_endpoint(name, front)
        self._front = front
        await self._serve(front, sock)

    def _hosted_endpoint(self, name: str | None, front: HttpServer) -> None:
        http = self._endpoint(name)
        http.slots, http.refusals = front.slots, front.refusals
        self._listeners[name] = (http, None)
        if name is None:
            self.router.default = (http, http.handler)
        else:
            self.router.add(name, http, http.handler)

    def _prepare_tls(self) -> None:
        """The certificate and TLS context of the gateway ports (CertificateError if unusable)."""
        cfg = self.config
        if cfg.cert_dir is not None:
            names = certificate.host_names(cfg.host, cfg.advertise_host)
            if cfg.regional_hostnames:
                names += [regional_host(self.topology.host, r) for r in cfg.account.regions]
            self.certificate = certificate.ensure(cfg.cert_dir, names)
        else:
            self.certificate = certificate.Certificate(cfg.tls_cert_file, cfg.tls_key_file, cfg.tls_trust_file)
        self._tls = self.certificate.server_context()

    async def _serve(self, http: HttpServer, sock: socket.socket):
        """Serve one gateway endpoint on its bound socket: plain HTTP, or TLS with --https."""
        if self._tls is None:
            server = await asyncio.get_running_loop().create_server(http, sock=sock)
        else:
            url = self.topology.url(sock.getsockname()[1])
            server = TlsListener(sock, http, self._tls, url, first_byte_timeout_s=self.config.header_timeout_s)
        self._servers.append(server)
        return server

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
            hold = self._port_holds.pop(name, None)
            if hold is not None:
                hold.release()
            self.topology.forget_region(name)
            self.services.pop(name, None)
            http, _server = self._listeners.pop(name)       # nothing of the region is kept
            self._http_servers.remove(http)
            if self.router is not None:
                self.router.remove(name)
        elif state == "down":
            mode = self.account.region(name).outage_mode or OUTAGE_MODE_DEFAULT
            self._begin_outage(name, mode)  # at once: the next request must already meet it
        else:
            self._settling.add(loop.create_task(self._recover(name)))

    def _begin_outage(self, name: str | None, mode: str) -> None:
        if mode == OUTAGE_REFUSE and self.router is not None:
            mode = OUTAGE_RESET         # one port for every name: it cannot refuse for one of them
        if mode == OUTAGE_REFUSE:
            self._stop_listening(name)
            # Nobody else may take the port meanwhile: the region listens on it again.
            self._port_holds[name] = PortHold(self.config.host, self._port_of(name))
        elif mode in (OUTAGE_RESET, OUTAGE_BLACKHOLE):
            http = self._listeners[name][0]
            reset = http.begin_outage(mode)
            self._settling.add(asyncio.get_running_loop().create_task(http.wait_closed(reset)))

    def _on_global_endpoint(self, state: str) -> None:
        """A global_endpoint_outage (core/faults.py): the global endpoint fails in its mode, as a
        region's endpoint does in a region outage (`unavailable`: 503 to everything, GET / too);
        the regions' endpoints serve on."""
        mode = self.account.global_outage_mode
        if state == "down" and mode == OUTAGE_UNAVAILABLE:
            self._set_global_handler(_global_unavailable)
        elif state == "down":
            self._begin_outage(None, mode)
        else:
            self._set_global_handler(self._global_handle)
            self._settling.add(asyncio.get_running_loop().create_task(self._recover(None)))

    def _set_global_handler(self, handler) -> None:
        http = self._listeners[None][0]
        if self.router is not None:
            self.router.default = (http, handler)
        else:
            http.handler = handler

    def _port_of(self, name: str | None) -> int:
        return self.topology.global_port if name is None else self.topology.region_ports[name]

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

    def service(self, region: str | None, read_only: bool = False, key: str | None = "") -> Service:
        """A Service for one endpoint (region None: the global one), as configured; its requests
        are signed with the account key (key None: they are not, as direct mode's frames)."""
        cfg = self.config
        svc = Service(self.account, self.topology, region, cfg.key if key == "" else key, self.waits,
                      read_only=read_only)
        svc.write_ack_timeout_ms = round(cfg.write_ack_timeout_s * 1000)
        svc.script_engine = self.script_engine
        svc.script_timeout_ms = round(cfg.script_timeout_s * 1000)
        svc.max_clock_skew_s = cfg.max_clock_skew_s
        svc.query_mode = cfg.query_mode
        svc.request_log = self.request_log if self.recording_requests else None
        self._services_made.add(svc)
        if self.persistence is not None:
            svc.make_durable(self.persistence)
        return svc

    def record_requests(self) -> None:
        """From now on every endpoint's service logs its replies (service/request_log.py): the
        control port's GET /requests calls this before it answers, so what an observer reads
        starts with its first look (a drill without a workload looks before its first step)."""
        if not self.recording_requests:
            self.recording_requests = True
            self.request_log.recording_since_ms = self.account.clock.now_ms()
            for svc in self._services_made:
                svc.request_log = self.request_log

    def _endpoint(self, name: str | None) -> HttpServer:
        """The service of one endpoint (None = global) and the HTTP server that feeds it."""
        cfg = self.config
        svc = self.services[name] = self.service(name)
        gw = Gateway(svc, self.certificate.trust_pem() if self.certificate is not None else None)
        http = HttpServer(gw.handle, header_timeout_s=cfg.header_timeout_s, connections_max=cfg.connections_max)
        self._http_servers.append(http)
        if name is None:
            self._global_handle = gw.handle
        return http

    def reserve_port(self, name: str, port: int) -> None:
        """Bind the listener of a region about to be added, before the account changes at all:
        a port that cannot be had refuses the whole add (409 or 400) and nothing is half-added.
        The region's "added" event then serves on this socket (release_port if the add fails)."""
        t = self.topology
        if self.router is not None:
            self.pending_sockets[name] = None   # served on the account's port, by its host name
            return
        owners = {t.global_port: "the global endpoint", t.control_port: "the control port",
                  **{p: f"region '{n}'" for n, p in t.region_ports.items()}}
        if port in owners:
            raise CosmosError(409, 0, f"Port {port} is taken by {owners[port]}; pick another port, "
                                      f"or 0 for any free one.")
        try:
            sock = bind(self.config.host, port)
        except OSError as e:
            status = 409 if e.errno == errno.EADDRINUSE else 400
            raise CosmosError(status, 0, f"Cannot add region '{name}': {e.strerror}; "
                                         f"pick another port, or 0 for any free one.") from None
        self.pending_sockets[name] = sock

    def release_port(self, name: str) -> None:
        sock = self.pending_sockets.pop(name, None)
        if sock is not None:
            sock.close()

    async def add_read_only_endpoint(self, name: str, port: int = 0) -> str:
        """Serve region `name`'s read-only endpoint on port (0: a free one); its URL. While the
        region is out it answers 503, as the region's gateway does to data requests."""
        if name in self.topology.read_only_ports:
            return self.topology.url(self.topology.read_only_ports[name])
        sock = bind(self.config.host, port)
        cfg = self.config
        svc = self.services[f"{name} (read-only)"] = self.service(name, read_only=True)
        gw = Gateway(svc, self.certificate.trust_pem() if self.certificate is not None else None)
        http = HttpServer(gw.handle, header_timeout_s=cfg.header_timeout_s, connections_max=cfg.connections_max)
        self._http_servers.append(http)
        self._servers.append(await asyncio.get_running_loop().create_server(http, sock=sock))
        self.topology.read_only_ports[name] = sock.getsockname()[1]
        return self.topology.url(self.topology.read_only_ports[name])

    def _add_endpoint(self, name: str, sock: socket.socket | None) -> None:
        if self.router is not None:
            self.topology.listen_region(name, self.topology.global_port)
            self._hosted_endpoint(name, self._front)
            return
        self.topology.listen_region(name, sock.getsockname()[1])
        http = self._endpoint(name)
        self._listeners[name] = (http, None)

        async def serve():
            self._listeners[name] = (http, await self._serve(http, sock))
        self._settling.add(asyncio.get_running_loop().create_task(serve()))

    async def _listen_again(self, name: str) -> None:
        http, server = self._listeners[name]
        if server is not None and server.is_serving() or self.router is not None:
            return                      # (by host name: the account's port never closed)
        port = self._port_of(name)
        sock = bind(self.config.host, port)
        hold = self._port_holds.pop(name, None)
        if hold is not None:
            hold.release()
        self._listeners[name] = (http, await self._serve(http, sock))

    def _sweep(self) -> None:
        now = asyncio.get_running_loop().time()
        for http in self._http_servers:
            http.sweep(now)
        if self.control_connections is not None:
            self.control_connections.sweep(now)
        self._sweeper = asyncio.get_running_loop().call_later(SWEEP_INTERVAL_S, self._sweep)

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self.direct is not None:
            await self.direct.stop()
        for hold in self._port_holds.values():
            hold.release()
        self._port_holds.clear()
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
        if self.persistence is not None:
            await self.persistence.close()

    def ready_info(self) -> dict:
        t = self.topology
        tls = {"https": self.certificate is not None}
        if self.certificate is not None:
            tls["certificate"] = self.certificate.trust_file
        return {"ready": True, "account_endpoint": t.global_endpoint, **tls,
                "regions": [{"name": n, "endpoint": t.region_endpoint(n),
                             "write": n in self.account.write_regions} for n in (r.name for r in self.account.regions)],
                "control_port": t.control_port, "control_endpoint": t.control_url,
                "key": self.config.key, "auth": self.config.key is not None,
                "consistency": self.account.consistency,
                "direct_port_range": list(self.config.direct_port_range),
                "direct": self.direct.ready_info(),
                "read_only_endpoints": t.read_only_endpoints(),
                "data_dir": self.config.data_dir, "restored_items": self.restored_items,
                "seeded_items": self.seeded_items}


async def _global_unavailable(req) -> responses.Reply:
    """What the global endpoint answers in a global_endpoint_outage of mode `unavailable`."""
    return responses.error(CosmosError(503, 0, "The account's global endpoint is unavailable (a "
                                                "global_endpoint_outage fault); the regions' endpoints "
                                                "still serve."), responses.activity_id())
