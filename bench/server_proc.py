"""Start the real `python -m emulator` as a child process and read what it costs.

Used by the benchmarks: spawn-to-ready time, server CPU time (user+system, from /proc), and
resident memory. Nothing here imports the emulator: the server is measured from outside.
"""
import json
import os
import selectors
import subprocess
import sys
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
READY_TIMEOUT_S = 20.0


class ServerProcess:
    """`python -m emulator`; or, with `script`, a Python server script; or any `cmd`. Ready when
    it prints its first line, which `parse` turns into `ready` (JSON by default)."""

    def __init__(self, *args: str, script: str | None = None, cmd: list | None = None, parse=json.loads,
                 ready_timeout_s: float = READY_TIMEOUT_S, cwd: str | None = None):
        self.cmd = cmd or ([sys.executable, script] if script else [
            sys.executable, "-m", "regionlab.emulator", "--port", "0", "--control-port", "0", *args])
        self.parse = parse
        self.ready_timeout_s = ready_timeout_s
        self.cwd = cwd                   # another checkout's server runs from its own tree
        self.proc = None
        self.ready = None
        self.spawn_to_ready_ms = None

    def __enter__(self):
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(self.cmd, cwd=self.cwd,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        if not sel.select(self.ready_timeout_s):
            self.proc.kill()
            raise RuntimeError(f"{' '.join(self.cmd)} printed no ready line")
        self.ready = self.parse(self.proc.stdout.readline())
        self.spawn_to_ready_ms = (time.perf_counter() - t0) * 1000
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(10)

    def cpu_s(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")
