"""Proves a drill run with --control leaves the running emulator's databases as it found them:
the database the drill created is removed when the run ends, kept with --keep-database, and one
that was there before the run is never removed. Through the real command line against a real
emulator; a signal's end is test_drill_verdicts.py's (its run removes the database too)."""
import json
import os
import subprocess
import sys

import pytest

from regionlab.client import CosmosClient
from regionlab.emulator.drill.workload import DATABASE
from regionlab.emulator.testing import running_emulator

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN_TIMEOUT_S = 60
SHORT = {"name": "short", "duration_ms": 600, "workload": {"mix": {"read": 1, "write": 1}, "concurrency": 2, "keys": 5},
         "schedule": []}


@pytest.fixture(scope="module")
def emu():
    with running_emulator(regions=["East US"]) as e:
        yield e


def databases(emu) -> list:
    return [d["id"] for d in CosmosClient(emu.endpoint, emu.key).list_databases()]


def drill(emu, tmp_path, *args):
    path = tmp_path / "short.json"
    path.write_text(json.dumps(SHORT))
    done = subprocess.run([sys.executable, "-m", "regionlab.emulator", "drill", "run", str(path), "--out",
                           str(tmp_path / "out"), "--control", emu.control_endpoint, *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          env={**os.environ, "REGIONLAB_REPORT_NO_PLOTS": "1"})     # seconds of matplotlib saved
    assert done.returncode == 0, done.stderr
    return done


def test_the_database_the_drill_created_is_removed_unless_kept(emu, tmp_path):
    if DATABASE in databases(emu):
        CosmosClient(emu.endpoint, emu.key).delete_database(DATABASE)
    done = drill(emu, tmp_path)
    assert DATABASE not in databases(emu)
    assert f"removed the database '{DATABASE}' the drill created (--keep-database keeps it)" in done.stdout
    done = drill(emu, tmp_path, "--keep-database")
    assert DATABASE in databases(emu) and "removed the database" not in done.stdout


def test_a_database_that_was_there_before_is_kept(emu, tmp_path):
    CosmosClient(emu.endpoint, emu.key).create_database_if_not_exists(DATABASE)
    done = drill(emu, tmp_path)
    assert DATABASE in databases(emu) and "removed the database" not in done.stdout
