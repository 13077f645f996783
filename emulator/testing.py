"""Run a real emulator inside a test process: real loopback sockets on free ports, its own
event loop (uvloop) in a background thread, started and stopped in milliseconds.

    with running_emulator(partitions=4) as emu:
        client = CosmosClient(emu.endpoint, emu.key)
        emu.call(lambda account: ...)        # touch the core safely, on the emulator's loop

The pytest plugin (emulator/pytest_plugin.py) wraps this in the `regionlab` fixture.
"""
import asyncio
import threading
from contextlib import contextmanager

from . import defaults
from .core.account import AccountConfig
from .core.throttle import CREDITS_PER_S_DEFAULT, SERVERLESS_RU_PER_S_DEFAULT, ThrottleConfig

START_TIMEOUT_S = 10.0


class RunningEmulator:
    def __init__(self, emu, loop, thread):
        self.emulator = emu
        self.loop = loop
        self._thread = thread
        t = emu.topology
        self.endpoint = t.global_endpoint
        self.region_endpoints = {name: t.region_endpoint(name) for name in emu.account.config.regions}
        self.control_endpoint = t.url(t.control_port)
        self.key = emu.config.key or defaults.EMULATOR_KEY
        self.regions = list(emu.account.config.regions)

    @property
    def account(self):
        return self.emulator.account

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


def make_config(*, regions=defaults.REGIONS, consistency=defaults.CONSISTENCY, partitions=None,
                multi_write=False, key=defaults.EMULATOR_KEY, auth=True, intra_region_delay_ms=0,
                lag_ms=None, seed=0, header_timeout_s=None, primary_accepts_reads=True,
                detection_delay_ms=None, election_ms=None, write_ack_timeout_s=None,
                ru_limits=True, credits_per_s=None, burst=False, serverless=False,
                serverless_ru_per_s=SERVERLESS_RU_PER_S_DEFAULT, max_clock_skew_s=None):
    """Throughput knobs (docs/throughput.md): ru_limits enforces provisioned RU/s (429/3200),
    credits_per_s an account-wide credit budget (429/50009; True means the default 1000),
    burst the 300 s burst capacity, serverless a per-partition ceiling without offers.
    max_clock_skew_s: how far a signed request's x-ms-date may be from the server's clock
    (default 900 s, as the service; 0 turns the check off)."""
    from .runtime.server import ServerConfig
    throttle = ThrottleConfig(ru=ru_limits, burst=burst, serverless=serverless,
                              serverless_ru_per_s=serverless_ru_per_s,
                              credits_per_s=CREDITS_PER_S_DEFAULT if credits_per_s is True else credits_per_s)
    account = AccountConfig(regions=tuple(regions), consistency=consistency, partition_count=partitions,
                            multi_write=multi_write, intra_region_delay_ms=intra_region_delay_ms,
                            lag_ms=dict(lag_ms or {}), primary_accepts_reads=primary_accepts_reads,
                            throttle=throttle)
    if detection_delay_ms is not None:
        account.detection_delay_ms = detection_delay_ms
    if election_ms is not None:
        account.election_ms = election_ms
    cfg = ServerConfig(account=account, host="127.0.0.1", global_port=0, control_port=0,
                       key=key if auth else None, seed=seed)
    if header_timeout_s is not None:
        cfg.header_timeout_s = header_timeout_s
    if write_ack_timeout_s is not None:
        cfg.write_ack_timeout_s = write_ack_timeout_s
    if max_clock_skew_s is not None:
        cfg.max_clock_skew_s = max_clock_skew_s
    return cfg


def start(config=None, **kwargs) -> RunningEmulator:
    from .runtime.server import Emulator
    try:
        import uvloop
        loop = uvloop.new_event_loop()
    except ImportError:                     # pragma: no cover - uvloop is a dependency
        loop = asyncio.new_event_loop()
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
    handle = start(config, **kwargs)
    try:
        yield handle
    finally:
        handle.stop()
