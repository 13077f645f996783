"""An emulator embedded in this process: the real server on loopback ports, on its own event loop
(uvloop where it installs) in a background thread, started and stopped in milliseconds.

testing.py builds the test handle on it (`running_emulator`: faults, failovers, drills), and a
drill that brings its own emulator starts one here (drill/runner.py).
"""
import asyncio
import threading

from regionlab.client import event_loop

from . import defaults

START_TIMEOUT_S = 10.0


class EmbeddedEmulator:
    """A started emulator: its endpoints, key and control port, and a way onto its loop."""

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

    @classmethod
    def started(cls, config) -> "EmbeddedEmulator":
        """An emulator of the ServerConfig, started on a loop of its own in a new thread."""
        return cls(*_start(config))

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


def _start(config) -> tuple:
    # The server (aiohttp and all) loads when one starts: the pytest plugin imports testing.py,
    # and so this module, in every project that has regionlab installed.
    from .server import Emulator
    loop = event_loop.new_event_loop()
    emu = Emulator(config)
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
    return emu, loop, thread
