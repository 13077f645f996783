"""The `regionlab` CLI, run as a real subprocess, prints a correct ready line, serves the control
port and the signed account endpoint (and the README's SDK and throttle examples), and exits 0 on
SIGTERM; a bad flag, variable, command or busy port ends it with one line and no traceback;
--help and --version say what a new user needs; every stderr line is JSON (one per request at
DEBUG); the Docker health check, run for real, follows the regions' state.

Every wait is on an event (the ready line, a socket reply, process exit) with a timeout; nothing
sleeps. Spawn-to-ready and SIGTERM-to-exit times are printed, never asserted.
"""
import email.utils
import json
import os
import queue
import re
import shlex
import signal
import socket
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

from regionlab.client.protocol.auth import authorization_header
from regionlab.emulator import defaults

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


REPO_ROOT = Path(__file__).resolve().parents[2]


def _clean_env(**overrides: str) -> dict:
    """The test's environment without any REGIONLAB_* setting of the developer's, plus overrides.
    The child imports this checkout's emulator (not whichever one is installed): it runs in
    tmp_path, so the repository root goes first on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REGIONLAB_")}
    # This checkout's code, whatever the venv has installed (the process runs in tmp_path).
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.update(overrides)
    return env


@contextmanager
def spawn(tmp_path: Path, *args: str, env: dict | None = None):
    stderr_path = tmp_path / "regionlab.stderr"
    with open(stderr_path, "wb") as stderr:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "regionlab.emulator", *args], stdin=subprocess.DEVNULL,
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
        assert info["direct_port_range"] == [0, 0]        # --port 0: the direct nodes take free ports too
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
    proc = subprocess.run([sys.executable, "-m", "regionlab.emulator", "--port", "0", "--control-port", "0",
                           "--multi-write", "--consistency", "Strong"],
                          capture_output=True, text=True, timeout=EXIT_TIMEOUT_S, env=_clean_env())
    assert proc.returncode == 2
    assert "Strong consistency cannot be combined with multi-write" in proc.stderr
    assert "Traceback" not in proc.stderr


# ---- a new user's first ten minutes: one-line errors, --help, --version, logs, health ----------

BAD_ARGUMENTS = [
    (["--regions", ""], "--regions '': names no region"),
    (["--regions", "A,A"], "--regions 'A,A': names 'A' twice"),
    (["--port", "99999"], "--port '99999': must be an integer from 0 to 65535"),
    (["--key", "notbase64!!"], "--key 'notbase64!!': must be the account key in base64"),
    (["--log-level", "LOUD"], "--log-level 'LOUD': must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL"),
    (["--partitions", "-1"], "--partitions '-1': must be an integer from 1 to 256"),
    (["--partitions", "0"], "--partitions '0': must be an integer from 1 to 256"),
    (["--intra-region-delay-ms", "-5"], "--intra-region-delay-ms '-5': must be an integer from 0"),
    (["--consistency", "Strongg"], "--consistency 'Strongg': must be one of Strong, BoundedStaleness"),
    (["--max-staleness-prefix", "0"], "--max-staleness-prefix '0': must be an integer from 1"),
    (["--prot", "5"], "unrecognized arguments: --prot 5"),
    (["foo"], "unknown command 'foo'; the commands are: topology, health"),
    (["topolgy"], "did you mean 'topology'?"),
]
BAD_VARIABLES = [
    ({"REGIONLAB_MULTI_WRITE": "maybe"}, "REGIONLAB_MULTI_WRITE='maybe': must be one of true/false, 1/0"),
    ({"REGIONLAB_PORT": "http"}, "REGIONLAB_PORT='http': must be an integer from 0 to 65535"),
    ({"REGIONLAB_CONSISTENCY": "Strongg"}, "REGIONLAB_CONSISTENCY='Strongg'"),
]


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "regionlab.emulator", *args], capture_output=True, text=True,
                          timeout=READY_TIMEOUT_S, env=_clean_env(**(env or {})), stdin=subprocess.DEVNULL)


def _assert_one_line_error(proc: subprocess.CompletedProcess, expected: str, status: int = 2) -> None:
    assert proc.returncode == status, f"exit {proc.returncode}; stderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("regionlab: error: "), proc.stderr
    assert expected in lines[0], lines[0]
    assert proc.stdout == "", "no ready line: nothing was served"


@pytest.mark.parametrize("args,expected", BAD_ARGUMENTS, ids=[" ".join(a) or "empty" for a, _ in BAD_ARGUMENTS])
def test_a_bad_flag_is_one_line_and_exit_2(args, expected):
    _assert_one_line_error(_run("--port", "0", "--control-port", "0", *args) if args[0].startswith("-")
                           else _run(*args), expected)


@pytest.mark.parametrize("env,expected", BAD_VARIABLES, ids=[next(iter(e)) for e, _ in BAD_VARIABLES])
def test_a_bad_variable_is_one_line_and_exit_2(env, expected):
    _assert_one_line_error(_run("--control-port", "0", env=env), expected)


def test_a_boolean_variable_takes_true(tmp_path):
    env = _clean_env(REGIONLAB_MULTI_WRITE="true", REGIONLAB_REGIONS="North Europe,West Europe")
    with spawn(tmp_path, "--port", "0", "--control-port", "0", env=env) as cli:
        assert [r["write"] for r in cli.info["regions"]] == [True, True]
        assert cli.terminate()[0] == 0


def test_help_lists_every_flag_level_variable_and_command():
    from regionlab.emulator import config, ctl
    proc = _run("--help")
    assert proc.returncode == 0 and proc.stderr == ""
    out = proc.stdout
    for option in config.OPTIONS:
        if option.flag:
            assert option.flag in out and option.variable in out, option.flag
    assert all(level in out for level in config.LOG_LEVELS)
    assert all(command in out for command in ctl.COMMANDS)
    assert "--version" in out and "in memory" in out
    assert " ".join(out.split()).count("(default:") >= 10, "defaults are shown"


def test_version_comes_from_the_package_metadata():
    from importlib import metadata
    proc = _run("--version")
    assert (proc.returncode, proc.stdout) == (0, f"regionlab {metadata.version('regionlab')}\n")


@pytest.mark.parametrize("which", ["--port", "--control-port"])
def test_a_port_in_use_names_the_port_and_suggests_free_ones(which):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        other = "--control-port" if which == "--port" else "--port"
        proc = _run(which, str(port), other, "0")
    _assert_one_line_error(proc, f"cannot listen on 127.0.0.1:{port}: Address already in use", status=1)
    assert "--port 0 --control-port 0" in proc.stderr


def test_every_stderr_line_is_json_and_debug_logs_one_line_per_request(tmp_path):
    with spawn(tmp_path, "--port", "0", "--control-port", "0", "--log-level", "debug") as cli:
        info = cli.info
        assert _get(info["account_endpoint"])[0] == 401
        assert _get(info["account_endpoint"], _signed_account_headers(info["key"]))[0] == 200
        west = info["regions"][-1]
        assert _get(west["endpoint"] + "dbs/nope", _signed_account_headers(info["key"]))[0] == 401, \
            "signed for GET /, not for this path"
        assert cli.terminate()[0] == 0
    lines = [json.loads(line) for line in cli.stderr().splitlines()]
    assert lines and all({"ts", "level", "logger", "msg"} <= set(line) for line in lines)
    requests = [line for line in lines if line["msg"] == "request"]
    assert [(r["method"], r["path"], r["status"], r["endpoint"]) for r in requests] == [
        ("GET", "/", 401, "global"), ("GET", "/", 200, "global"), ("GET", "/dbs/nope", 401, west["name"])]
    assert requests[0]["region"] == defaults.REGIONS[0] and requests[2]["region"] == west["name"]
    assert all(r["level"] == "DEBUG" and r["duration_ms"] >= 0 for r in requests)


def test_the_default_level_logs_no_request_lines(tmp_path):
    with spawn(tmp_path, "--port", "0", "--control-port", "0") as cli:
        assert _get(cli.info["account_endpoint"])[0] == 401
        assert cli.terminate()[0] == 0
    assert all(json.loads(line)["msg"] != "request" for line in cli.stderr().splitlines())


def _dockerfile_health_check_code() -> str:
    text = (REPO / "docker" / "Dockerfile").read_text().replace("\\\n", " ")
    command = json.loads(re.search(r"^HEALTHCHECK .*?CMD (\[.*\])\s*$", text, flags=re.M).group(1))
    assert command[:2] == ["python", "-c"]
    return command[2]


def test_the_docker_health_check_follows_regions_on_the_port_the_variable_names(tmp_path):
    code = _dockerfile_health_check_code()
    check = lambda port: subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=10,  # noqa: E731
                                        env=_clean_env(REGIONLAB_CONTROL_PORT=str(port))).returncode
    with spawn(tmp_path, "--port", "0", "--control-port", "0") as cli:
        control = cli.info["control_endpoint"]
        port = cli.info["control_port"]
        assert check(port) == 0
        faults = []
        for region in defaults.REGIONS:
            body = json.dumps({"type": "region_outage", "region": region}).encode()
            req = urllib.request.Request(control + "faults", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S) as resp:
                faults.append(json.loads(resp.read())["id"])
            assert check(port) == (0 if region != defaults.REGIONS[-1] else 1), \
                "healthy while any region serves; unhealthy when none does"
        req = urllib.request.Request(f"{control}faults/{faults[0]}", method="DELETE",
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S).close()
        assert check(port) == 0
        assert cli.terminate()[0] == 0
    assert check(port) == 1, "nothing listens any more"


def test_readme_throttle_example_runs_after_its_sdk_example(tmp_path):
    example = _readme_sdk_example()
    throttle = re.search(r"^regionlab (throttle container .*)$", (REPO / "README.md").read_text(), flags=re.M)
    with spawn(tmp_path, "--port", "0", "--control-port", "0") as cli:
        code = example.replace(README_GLOBAL_ENDPOINT, cli.info["account_endpoint"])
        exec(compile(code, "README.md", "exec"), {"__name__": "readme_example", "print": lambda *a: None})
        proc = _run(*shlex.split(throttle.group(1)), "--control", cli.info["control_endpoint"])
        assert proc.returncode == 0, proc.stderr
        assert cli.terminate()[0] == 0


def test_connections_max_caps_each_listener_and_must_be_positive(tmp_path):
    with spawn(tmp_path, "--port", "0", "--control-port", "0", "--connections-max", "1") as cli:
        host, port = urlsplit(cli.info["account_endpoint"]).netloc.split(":")
        with socket.create_connection((host, int(port)), timeout=5) as first:      # holds the one slot ...
            first.sendall(b"POST /dbs HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n"
                          b"Expect: 100-continue\r\n\r\n")
            # ... with a request in progress (the 100 Continue says its head was read; its body is
            # still to come): the next connection is turned away.
            assert first.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
            with socket.create_connection((host, int(port)), timeout=5) as second:
                second.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                reply = b""
                while chunk := second.recv(65536):
                    reply += chunk
            assert reply.startswith(b"HTTP/1.1 503 ") and b"at most 1 at once" in reply
            first.sendall(b"{}")
            assert first.recv(65536).startswith(b"HTTP/1.1 ")      # the first is served (401: unsigned)
        rc, _ = cli.terminate()
        assert rc == 0
    proc = subprocess.run([sys.executable, "-m", "regionlab.emulator", "--connections-max", "0"],
                          capture_output=True, text=True, timeout=EXIT_TIMEOUT_S, env=_clean_env())
    assert proc.returncode == 2 and "--connections-max '0': must be an integer from 1" in proc.stderr


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
