"""Run a real emulator inside a test process: real loopback sockets on free ports, its own
event loop (uvloop) in a background thread, started and stopped in milliseconds.

    with running_emulator(partitions=4) as emu:
        client = CosmosClient(emu.endpoint, emu.key)
        with emu.faults.region_outage("East US", mode="unavailable"):
            ...                              # East US is down here; healed on exit
        emu.failover("East US 2", forced=True)
        emu.lost_writes()                    # what the forced failover discarded
        emu.call(lambda account: ...)        # touch the core safely, on the emulator's loop

Faults, failovers, topology and lost writes go through the control port's HTTP API (the same
JSON and validation as curl or the CLI; see emulator/fault_handle.py and docs/control-api.md).

The pytest plugin (emulator/pytest_plugin.py) wraps this in the `regionlab` fixture.
"""
import asyncio
import threading
from contextlib import contextmanager

from regionlab.client import event_loop

from . import config as options_config, defaults
from .ctl import ControlError
from .fault_handle import Fault, Faults

__all__ = ["ControlError", "Fault", "Faults", "RunningEmulator", "make_config", "running_emulator", "start"]

START_TIMEOUT_S = 10.0


class RunningEmulator:
    def __init__(self, emu, loop, thread):
        self.emulator = emu
        self.loop = loop
        self._thread = thread
        t = emu.topology
        self.endpoint = t.global_endpoint
        self.region_endpoints = {name: t.region_endpoint(name) for name in emu.account.config.regions}
        self.control_endpoint = t.control_url
        # With https: the file a client trusts (connection_verify=, NODE_EXTRA_CA_CERTS); else None.
        self.certificate = emu.certificate.trust_file if emu.certificate is not None else None
        self.key = emu.config.key or defaults.EMULATOR_KEY
        self.control_token = emu.config.control_token     # send as "Authorization: Bearer ..."
        self.regions = list(emu.account.config.regions)
        self.faults = Faults(self.control_endpoint, self.control_token)

    def control(self, method: str, path: str, body=None):
        """One request to the control port (with the token, as JSON); its JSON reply.
        ControlError (with .status and the server's message) if it is refused."""
        return self.faults.control(method, path, body)

    def topology(self) -> dict:
        """GET /topology: regions, links, faults, failovers, partitions and replicas."""
        return self.control("GET", "/topology")

    def failover(self, region: str, forced: bool = False, wait: bool = True) -> dict:
        """POST /failover: make `region` the write region, gracefully (nothing acknowledged is
        lost; with wait, returns once the drain finished) or forced (at once, at whatever the
        region has applied: lost_writes() lists what it discards). The failover as the control
        port describes it ({"id", "from", "to", "kind", "state", "lost_writes", ...})."""
        body = {"region": region, "kind": "forced" if forced else "graceful", "wait": wait}
        return self.control("POST", "/failover", body)

    def failovers(self) -> list[dict]:
        """GET /failovers: every failover so far."""
        return self.control("GET", "/failovers")["failovers"]

    def lost_writes(self) -> list[dict]:
        """GET /lost-writes: every write forced failovers discarded, in LSN order, each with
        database, container, partition, lsn, id, partition_key, operation, region and reason."""
        return self.control("GET", "/lost-writes")["writes"]

    @property
    def read_only_endpoints(self) -> dict:
        """{region: URL} of the read-only endpoints open now (read_only_endpoints=True, or opened
        later on the control port)."""
        return self.emulator.topology.read_only_endpoints()

    @property
    def account(self):
        return self.emulator.account

    @property
    def direct_nodes(self) -> list:
        """Every direct-mode node as {"region", "node", "port", "replicas"} (free ports, the
        replica keys it holds; docs/direct.md), read on the emulator's loop."""
        return self.call(lambda account: self.emulator.direct.ready_info()["nodes"])

    def drill(self, file_or_name, *, scale: float = 1.0, seed: int = 0, out=None, report_dir: str | None = None):
        """Run a drill (a built-in's name, a scenario file's path, or its parsed JSON) against this
        emulator and return its report (emulator.drill.Report: report.json's dict, with `.passed`).
        The drill's "account" section is not applied: the steps run against this account, and a
        step naming a region it lacks is refused (ControlError 400). `scale` multiplies every time
        of the drill; with report_dir, report.json and report.html are written there."""
        from . import drill
        from .drill.runner import Target
        target = Target(self.endpoint, self.key, self.control_endpoint, self.control_token)
        return drill.run(file_or_name, target=target, scale=scale, seed=seed, out=out or _Discard(),
                         report_dir=report_dir)

    def call(self, fn, *args, timeout: float = 10.0):
        """Run fn(account, *args) on the emulator's loop and return its result."""
        async def run():
            return fn(self.emulator.account, *args)
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def stop(self) -> None:
        if not self.loop.is_running():
            return
        asyncio.run_coroutine_threadsafe(self.emulator.stop(), self.loop).result(START_TIMEOUT_S)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(START_TIMEOUT_S)


class _Discard:
    """A quiet progress line for drills run inside tests."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def make_config(**options):
    """The ServerConfig of running_emulator(**options), on loopback and free ports. The options
    are config.OPTIONS' keywords (regions, consistency, partitions, multi_write, key, auth,
    intra_region_delay_ms, lag_ms, seed, max_staleness_prefix, max_interval_s, nodes_per_region,
    direct_limits, ...), each
    checked as its flag is: a bad or unknown one raises emulator.config.ConfigError. Throughput knobs
    (docs/throughput.md): ru_limits enforces provisioned RU/s (429/3200), credits_per_s an
    account-wide credit budget (429/50009; True means the default 1000), burst the 300 s burst
    capacity, serverless a per-partition ceiling without offers. https=True (with cert_dir=..., or
    cert=/cert_key= for your own) serves the gateway ports over TLS (docs/https.md; the handle's
    `certificate` is the file to trust); query_mode="service" answers cross-partition queries
    that need client-side work 400/1004 as the service does (docs/queries.md). data_dir=... keeps
    the account on disk and restores it on the next start there (durability="strict"|"relaxed",
    reset_data=True to start empty; docs/durability.md). instance_id="..." fixes the emulator instance
    its direct addresses name (random per process by default; docs/direct-protocol.md, "Instances")."""
    return options_config.from_keywords(options)


def start(config=None, **kwargs) -> RunningEmulator:
    from .runtime.server import Emulator
    loop = event_loop.new_event_loop()
    emu = Emulator(config or make_config(**kwargs))
    started = threading.Event()
    failure = []

    def main():
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(emu.start())
        except BaseException as e:          # report start-up failures to the caller
            failure.append(e)
            started.set()
            return
        started.set()
        loop.run_forever()
        loop.close()

    thread = threading.Thread(target=main, name="regionlab-emulator", daemon=True)
    thread.start()
    if not started.wait(START_TIMEOUT_S):
        raise RuntimeError("regionlab did not start in time")
    if failure:
        raise failure[0]
    return RunningEmulator(emu, loop, thread)


@contextmanager
def running_emulator(config=None, **kwargs):
    """A started emulator for the with-block: from a ServerConfig, or from keyword options
    (make_config); stopped at the end of the block."""
    handle = start(config, **kwargs)
    try:
        yield handle
    finally:
        handle.stop()
