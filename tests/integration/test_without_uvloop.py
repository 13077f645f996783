"""Proves the emulator and the client keep working without uvloop (Windows has no wheels for it):
a subset of the suite — the official SDK against the fixture's emulator, the bundled client's
failover, direct mode — runs in a pytest process where importing uvloop fails and every
emulator it starts chooses asyncio's own loop (REGIONLAB_LOOP=asyncio), and passes."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUBSET = ("tests/integration/test_sdk_sync_items.py", "tests/integration/test_client_failover.py",
          "tests/integration/test_direct.py")
RUN_TIMEOUT_S = 600

pytestmark = pytest.mark.slow


def test_a_subset_of_the_suite_passes_without_uvloop():
    env = dict(os.environ, REGIONLAB_LOOP="asyncio",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "tests"), os.environ.get("PYTHONPATH")])))
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no_uvloop", "-p", "no:cacheprovider", "-q",
                           "-o", "addopts=", *SUBSET], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    tail = done.stdout[-3000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    assert " passed" in done.stdout.splitlines()[-1] and "failed" not in done.stdout.splitlines()[-1], tail
    assert "skipped" not in done.stdout.splitlines()[-1], tail
