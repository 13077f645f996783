"""The `regionlab` CLI, run as a real subprocess, prints a correct ready line, serves the control
port and the signed account endpoint (and the README's SDK example), and exits 0 on SIGTERM.

Every wait is on an event (the ready line, a socket reply, process exit) with a timeout; nothing
sleeps. Spawn-to-ready and SIGTERM-to-exit times are printed, never asserted.
"""
import email.utils
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from client.protocol.auth import authorization_header
from emulator import defaults

REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 30.0        # generous: a cold CI machine imports aiohttp and uvloop first
EXIT_TIMEOUT_S = 10.0
HTTP_TIMEOUT_S = 5.0
README_GLOBAL_ENDPOINT = f"http://{defaults.HOST}:{defaults.GLOBAL_PORT}/"


class Cli:
    """One `python -m emulator` process and the ready line it printed."""

    def __init__(self, proc: subprocess.Popen, info: dict, ready_s: float, stderr_path: Path):
        self.proc = proc
        self.info = info
        self.ready_s = ready_s
        self.stderr_path = stderr_path

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def terminate(self) -> tuple[int, float]:
        """Send SIGTERM; return (exit code, seconds until exit)."""
        t0 = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(EXIT_TIMEOUT_S)
        return rc, time.perf_counter() - t0


def _read_line(stream, timeout_s: float) -> str | None:
    """The next line of `stream`, or None if none arrives in time ('' means the stream closed)."""
    lines: queue.Queue = queue.Queue(maxsize=1)
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout_s)
    except queue.Empty:
        return None


def _clean_env(**overrides: str) -> dict:
    """The test's environment without any REGIONLAB_* setting of the developer's, plus overrides."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REGIONLAB_")}
    env.update(overrides)
    return env


@contextmanager
def spawn(tmp_path: Path, *args: str, env: dict | None = None):
    stderr_path = tmp_path / "regionlab.stderr"
    with open(stderr_path, "wb") as stderr:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "emulator", *args], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=stderr, text=True,
                                env=env if env is not None else _clean_env(), cwd=tmp_path)
    try:
        line = _read_line(proc.stdout, READY_TIMEOUT_S)
        ready_s = time.perf_counter() - t0
        if not line:
            proc.kill()
            proc.wait(EXIT_TIMEOUT_S)
            what = "no ready line" if line is None else f"exit {proc.returncode} before the ready line"
            pytest.fail(f"regionlab {' '.join(args)}: {what}; stderr:\n{stderr_path.read_text(errors='replace')}")
        yield Cli(proc, json.loads(line), ready_s, stderr_path)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(EXIT_TIMEOUT_S)
        proc.stdout.close()


def _get(url: str, headers: dict | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def _signed_account_headers(key: str) -> dict:
    date = email.utils.formatdate(usegmt=True)
    return {"x-ms-date": date, "x-ms-version": "2020-07-15",
            "authorization": authorization_header(key, "GET", "", "", date)}


def _port(url: str) -> int:
    return urlsplit(url).port


def _readme_sdk_example() -> str:
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    sdk = [b for b in blocks if "from azure.cosmos import CosmosClient" in b]
    assert sdk, "README.md has no ```python block using azure.cosmos.CosmosClient"
    assert README_GLOBAL_ENDPOINT in sdk[0], f"the README example should point at {README_GLOBAL_ENDPOINT}"
    return sdk[0]


def test_cli_ready_line_serves_and_exits_0_on_sigterm(tmp_path, capsys):
    with spawn(tmp_path, "--port", "0", "--control-port", "0") as cli:
        info = cli.info
        assert info["ready"] is True
        assert info["key"] == defaults.EMULATOR_KEY and info["auth"] is True
        assert info["consistency"] == defaults.CONSISTENCY
        assert info["direct_port_range"] == [defaults.DIRECT_PORT_MIN, defaults.DIRECT_PORT_MAX]
        assert urlsplit(info["account_endpoint"]).hostname == defaults.HOST
        assert [r["name"] for r in info["regions"]] == list(defaults.REGIONS)
        assert [r["write"] for r in info["regions"]] == [True] + [False] * (len(defaults.REGIONS) - 1)
        ports = [_port(info["account_endpoint"])] + [_port(r["endpoint"]) for r in info["regions"]]
        ports.append(info["control_port"])
        assert all(ports) and len(set(ports)) == len(ports), f"port 0 must give distinct real ports: {ports}"
        assert info["control_endpoint"] == f"http://{defaults.HOST}:{info['control_port']}/"

        status, health = _get(info["control_endpoint"] + "health")
        assert status == 200 and health["status"] == "ok"
        assert health["regions"] == {name: "up" for name in defaults.REGIONS}

        status, _ = _get(info["account_endpoint"])
        assert status == 401, "an unsigned request must be refused when auth is on"
        status, account = _get(info["account_endpoint"], _signed_account_headers(info["key"]))
        assert status == 200
        readable = {loc["name"]: loc["databaseAccountEndpoint"] for loc in account["readableLocations"]}
        assert readable == {r["name"]: r["endpoint"] for r in info["regions"]}
        assert [loc["name"] for loc in account["writableLocations"]] == [defaults.REGIONS[0]]

        rc, exit_s = cli.terminate()
        assert rc == 0, f"SIGTERM must end regionlab cleanly; stderr:\n{cli.stderr()}"
    with capsys.disabled():
        print(f"\nregionlab CLI: spawn to ready line {cli.ready_s * 1000:.0f} ms, "
              f"SIGTERM to exit {exit_s * 1000:.0f} ms")


def test_readme_sdk_example_runs_against_the_cli(tmp_path, capsys):
    example = _readme_sdk_example()
    with spawn(tmp_path, "--port", "0", "--control-port", "0") as cli:
        code = example.replace(README_GLOBAL_ENDPOINT, cli.info["account_endpoint"])
        exec(compile(code, "README.md", "exec"), {"__name__": "readme_example"})
        assert capsys.readouterr().out.strip(), "the README example should print what it read back"
        rc, _ = cli.terminate()
        assert rc == 0


def test_environment_sets_the_topology_and_flags_override_it(tmp_path):
    env = _clean_env(REGIONLAB_REGIONS="North Europe,West Europe", REGIONLAB_CONSISTENCY="Eventual",
                     REGIONLAB_CONTROL_PORT="1")      # a port we cannot bind: the flag must win
    with spawn(tmp_path, "--port", "0", "--control-port", "0", "--multi-write", env=env) as cli:
        info = cli.info
        assert [r["name"] for r in info["regions"]] == ["North Europe", "West Europe"]
        assert [r["write"] for r in info["regions"]] == [True, True]
        assert info["consistency"] == "Eventual"
        assert info["control_port"] not in (0, 1)
        status, health = _get(info["control_endpoint"] + "health")   # also: the loop is serving
        assert status == 200 and list(health["regions"]) == ["North Europe", "West Europe"]
        rc, _ = cli.terminate()
        assert rc == 0


def test_sigterm_right_after_the_ready_line_exits_0(tmp_path):
    with spawn(tmp_path, "--port", "0", "--control-port", "0") as cli:
        rc, _ = cli.terminate()
        assert rc == 0, f"exit {rc}; stderr:\n{cli.stderr()}"


def test_binding_all_interfaces_advertises_loopback(tmp_path):
    """--host 0.0.0.0 (as in Docker) must not advertise 0.0.0.0 URLs to clients."""
    with spawn(tmp_path, "--host", "0.0.0.0", "--port", "0", "--control-port", "0") as cli:
        ready = cli.info
        assert ready["account_endpoint"].startswith("http://127.0.0.1:")
        assert all(r["endpoint"].startswith("http://127.0.0.1:") for r in ready["regions"])
        rc, _ = cli.terminate()
        assert rc == 0


def test_strong_with_multi_write_is_refused_with_a_clear_message(tmp_path):
    """An impossible topology ends with one readable line on stderr and exit 2, no traceback."""
    proc = subprocess.run([sys.executable, "-m", "emulator", "--port", "0", "--control-port", "0",
                           "--multi-write", "--consistency", "Strong"],
                          capture_output=True, text=True, timeout=EXIT_TIMEOUT_S, env=_clean_env())
    assert proc.returncode == 2
    assert "Strong consistency cannot be combined with multi-write" in proc.stderr
    assert "Traceback" not in proc.stderr


def _signed_account_headers_dated(key: str, offset_s: float) -> dict:
    date = email.utils.formatdate(time.time() + offset_s, usegmt=True)
    return {"x-ms-date": date, "x-ms-version": "2020-07-15",
            "authorization": authorization_header(key, "GET", "", "", date)}


def test_max_clock_skew_flag_and_environment(tmp_path):
    """REGIONLAB_MAX_CLOCK_SKEW_S=0 accepts a request signed an hour ago; --max-clock-skew-s
    900 (winning over the variable) refuses it with 401 and accepts a fresh one."""
    env = _clean_env(REGIONLAB_MAX_CLOCK_SKEW_S="0", PYTHONPATH=str(REPO))     # this checkout's code
    hour_ago = _signed_account_headers_dated(defaults.EMULATOR_KEY, -3600)
    with spawn(tmp_path, "--port", "0", "--control-port", "0", env=env) as cli:
        status, _ = _get(cli.info["account_endpoint"], hour_ago)
        assert status == 200
        assert cli.terminate()[0] == 0
    with spawn(tmp_path, "--port", "0", "--control-port", "0", "--max-clock-skew-s", "900", env=env) as cli:
        status, body = _get(cli.info["account_endpoint"], hour_ago)
        assert status == 401 and "x-ms-date" in body["message"], body
        assert _get(cli.info["account_endpoint"], _signed_account_headers(defaults.EMULATOR_KEY))[0] == 200
        assert cli.terminate()[0] == 0
