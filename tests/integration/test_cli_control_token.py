"""Proves the CLI keeps working against a guarded control port and says when the port is open:
`regionlab <command>` sends the token from --control-token or $REGIONLAB_CONTROL_TOKEN (and JSON
content types) to a real in-process emulator started with a token; `regionlab lost-writes | head`
exits quietly (a real subprocess whose stdout reader has gone); a real `python -m emulator` on
0.0.0.0 without a token warns on stderr, and with one does not."""
import json
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from regionlab.emulator import cli
from regionlab.emulator.testing import running_emulator
from test_cli import REPO, _clean_env, spawn

TOKEN = "cli-token"
CODE = {"PYTHONPATH": str(REPO)}          # the subprocess runs this checkout, not an installed copy
EXIT_TIMEOUT_S = 30.0


@pytest.fixture
def emu():
    with running_emulator(auth=False, control_token=TOKEN) as handle:
        yield handle


def _regionlab(capsys, *argv):
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_every_kind_of_command_sends_the_token(capsys, emu, monkeypatch):
    monkeypatch.delenv("REGIONLAB_CONTROL_TOKEN", raising=False)
    url = emu.control_endpoint
    rc, _, err = _regionlab(capsys, "topology", "--control", url)
    assert rc == 1 and "401" in err and "--control-token" in err
    commands = [["fault", "region-outage", "West US"], ["faults"], ["fault", "heal", "all"],
                ["throttle", "set", "--burst", "on"], ["throttle", "storm", "West US", "--share", "0.5"],
                ["throttle", "storm", "West US", "--off"], ["region", "add", "North Europe"],
                ["region", "remove", "North Europe"], ["failover", "East US 2", "--forced"], ["lost-writes"]]
    for argv in commands:
        rc, out, err = _regionlab(capsys, *argv, "--control", url, "--control-token", TOKEN)
        assert rc == 0, (argv, err)
        json.loads(out)
    assert emu.call(lambda a: list(a.write_regions)) == ["East US 2"]
    monkeypatch.setenv("REGIONLAB_CONTROL_TOKEN", TOKEN)
    rc, out, _ = _regionlab(capsys, "failover", "East US", "--control", url)
    assert rc == 0 and json.loads(out)["state"] == "completed"


def test_lost_writes_into_a_closed_pipe_exits_quietly(emu):
    proc = subprocess.Popen([sys.executable, "-m", "regionlab.emulator", "lost-writes", "--control", emu.control_endpoint,
                             "--control-token", TOKEN], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_clean_env(**CODE))
    proc.stdout.close()                  # the reader is gone before the reply is written: `| head -0`
    _, err = proc.communicate(timeout=EXIT_TIMEOUT_S)
    assert proc.returncode == 0 and b"Traceback" not in err, err.decode()


def _get(url: str):
    try:
        with urllib.request.urlopen(url, timeout=EXIT_TIMEOUT_S) as reply:
            return reply.status
    except urllib.error.HTTPError as e:
        return e.code


def test_an_exposed_control_port_without_a_token_is_named_on_stderr(tmp_path):
    with spawn(tmp_path, "--host", "0.0.0.0", "--port", "0", "--control-port", "0", env=_clean_env(**CODE)) as server:
        assert "without a token" in server.stderr() and "--control-token" in server.stderr()
        assert _get(server.info["control_endpoint"] + "topology") == 200


def test_with_a_token_the_exposed_port_is_guarded_and_quiet(tmp_path):
    env = _clean_env(REGIONLAB_CONTROL_TOKEN=TOKEN, **CODE)
    with spawn(tmp_path, "--host", "0.0.0.0", "--port", "0", "--control-port", "0", env=env) as server:
        assert "without a token" not in server.stderr()
        assert _get(server.info["control_endpoint"] + "topology") == 401
        assert _get(server.info["control_endpoint"] + "health") == 200
