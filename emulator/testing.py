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
import threading
from contextlib import contextmanager

from . import config as options_config
from .control_client import ControlError
from .embedded import EmbeddedEmulator
from .fault_handle import Fault, Faults

__all__ = ["BackgroundDrill", "ControlError", "Fault", "Faults", "RunningEmulator", "make_config", "running_emulator", "start"]


class RunningEmulator(EmbeddedEmulator):
    def __init__(self, emu, loop, thread):
        super().__init__(emu, loop, thread)
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


    def drill_in_background(self, file_or_name, *, scale: float = 1.0, seed: int = 0,
                            report_dir: str | None = None) -> "BackgroundDrill":
        """Start a drill against this emulator in a background thread and return at once: for a
        scenario without a `workload` section, whose report is built from what the emulator
        served while your own code drives it (docs/drills.md, "Your own application as the
        workload"). Use it as a context manager, or call .result():

            with emu.drill_in_background("outage.json") as drill:
                while not drill.finished:
                    my_service.checkout()          # your code, against emu.endpoint
            assert drill.result().passed
        """
        return BackgroundDrill(lambda: self.drill(file_or_name, scale=scale, seed=seed, report_dir=report_dir))


class BackgroundDrill:
    """A drill running in its own thread (RunningEmulator.drill_in_background)."""

    def __init__(self, run):
        self._report = self._error = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._main, args=(run,), name="regionlab-drill", daemon=True)
        self._thread.start()

    def _main(self, run) -> None:
        try:
            self._report = run()
        except BaseException as e:        # handed to the caller by result()
            self._error = e
        finally:
            self._done.set()

    @property
    def finished(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Until the drill has ended (or timeout_s): whether it has."""
        return self._done.wait(timeout_s)

    def result(self, timeout_s: float | None = None):
        """The drill's report (emulator.drill.Report) once it has ended; what it raised, if it did
        (a scenario that does not validate: DrillError); TimeoutError if still running after timeout_s."""
        if not self._done.wait(timeout_s):
            raise TimeoutError(f"the drill is still running after {timeout_s} s")
        if self._error is not None:
            raise self._error
        return self._report

    def __enter__(self) -> "BackgroundDrill":
        return self

    def __exit__(self, *exc) -> None:
        self._done.wait()


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
    reset_data=True to start empty; docs/durability.md). seed_data="file.json" or a directory
    loads databases, containers and items before the emulator serves (docs/seed-data.md). instance_id="..." fixes the emulator instance
    its direct addresses name (random per process by default; docs/direct-protocol.md, "Instances")."""
    return options_config.from_keywords(options)


def start(config=None, **kwargs) -> RunningEmulator:
    return RunningEmulator.started(config or make_config(**kwargs))


@contextmanager
def running_emulator(config=None, **kwargs):
    """A started emulator for the with-block: from a ServerConfig, or from keyword options
    (make_config); stopped at the end of the block."""
    handle = start(config, **kwargs)
    try:
        yield handle
    finally:
        handle.stop()
