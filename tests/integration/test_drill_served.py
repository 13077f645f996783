"""Proves a drill without a workload judges your own application from the server's side: a real
emulator process, a separate process driving it with the official azure-cosmos SDK (the
"application"), and `regionlab drill run FILE --control URL` as a real subprocess running only
a timeline with a write-region outage. The report, built from GET /requests, shows the outage
(requests answered 503 by East US inside the fault window, its availability far below the
steady state's) and the recovery after the heal, and its verdicts gate: a failing fault-window
assertion exits 1, the same drill with assertions that hold exits 0. And the recipe of
docs/drills.md ("Your own application as the workload") as written: its pytest example (the
fixture's drill_in_background while the test drives the emulator with the SDK) passes in a
pytest subprocess, and its scenario file is the example's scenario. Every wait is on a line
from a process or its exit, with a timeout."""
import json
import os
import queue
import re
import subprocess
import sys
import threading

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
READY_TIMEOUT_S = 60.0         # generous: a loaded 2-core machine imports aiohttp, uvloop and the SDK first
RUN_TIMEOUT_S = 60
TWO = "East US,East US 2"

# The application: the official SDK, preferring East US, upserting and reading until stopped.
APP = r"""
import sys
from azure.cosmos import CosmosClient, PartitionKey, exceptions
client = CosmosClient(sys.argv[1], sys.argv[2], preferred_locations=["East US", "East US 2"])
c = client.create_database_if_not_exists("shop").create_container_if_not_exists("carts", PartitionKey("/pk"))
print("ready", flush=True)
i = 0
while True:
    i += 1
    try:
        c.upsert_item({"id": str(i % 20), "pk": "p"})
        c.read_item(str(i % 20), "p")
    except exceptions.CosmosHttpResponseError:
        pass
"""

pytestmark = pytest.mark.slow          # a real emulator, an SDK process and two drills of 4 s


def _line(proc, timeout_s: float) -> str | None:
    lines: queue.Queue = queue.Queue(maxsize=1)
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout_s)
    except queue.Empty:
        return None


def _start(args: list, env=None) -> tuple:
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            text=True, cwd=ROOT, env=env)
    line = _line(proc, READY_TIMEOUT_S)
    if not line:
        proc.kill()
        pytest.fail(f"{args[:3]}: no ready line (exit {proc.poll()})")
    return proc, line


def _stop(proc) -> None:
    proc.kill()
    proc.wait(RUN_TIMEOUT_S)
    proc.stdout.close()


def scenario(faults: dict) -> dict:
    return {"name": "app-outage", "duration_ms": 4000,
            "schedule": [{"at_ms": 1000, "fault": {"type": "region_outage", "region": "East US",
                                                   "mode": "unavailable"}, "as": "out"},
                         {"at_ms": 2000, "heal": "out"}],
            "assertions": {"faults": faults, "steady_state": {"availability_min": 0.95},
                           "recovery": {"availability_min": 0.95, "hold_ms": 500}}}


def drill(tmp_path, name: str, data: dict, control: str):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    done = subprocess.run([sys.executable, "-m", "regionlab.emulator", "drill", "run", str(path), "--control", control,
                           "--out", str(tmp_path / name)], cwd=ROOT, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    return done, json.loads((tmp_path / name / "report.json").read_text())


def test_a_drill_without_a_workload_reports_what_the_emulator_served_to_another_process(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("REGIONLAB_")}
    emulator, ready = _start([sys.executable, "-m", "regionlab.emulator", "--port", "0", "--control-port", "0",
                              "--direct-ports", "0", "--regions", TWO], env)
    info = json.loads(ready)
    try:
        app, _ = _start([sys.executable, "-c", APP, info["account_endpoint"], info["key"]])
        try:
            failing, report = drill(tmp_path, "strict", scenario({"availability_min": 0.9}), info["control_endpoint"])
            passing, lenient = drill(tmp_path, "lenient", scenario({"rto_ms_max": 5000}), info["control_endpoint"])
        finally:
            _stop(app)
    finally:
        _stop(emulator)
    assert failing.returncode == 1, failing.stderr
    assert passing.returncode == 0, (passing.stderr, lenient["assertions"])
    assert report["workload"]["served"] is True and report["ended"] == {"kind": "completed"}
    window = report["faults"][0]
    steady, outage, after = report["phases"]
    assert steady["ops"] > 20 and steady["availability"] >= 0.95, steady
    # Inside the window East US answered 503 (or the SDK stopped sending to it); either way the
    # window's server-side availability is far below the steady state's, and back after the heal.
    assert window["availability"] < 0.5 and window["missing_requests"] > 0, window
    east = window["requests_by_region"]["East US"]          # reads or writes, whichever the SDK sent first
    assert sum(statuses.get("503/0", 0) for statuses in east.values()) > 0, window["requests_by_region"]
    assert after["availability"] >= 0.95 and after["ops"] > 20, after
    assert window["rto_ms"] is not None and window["rto_ms"] >= 1000 - 100, window     # not before the heal
    assert lenient["faults"][0]["rto_ms"] <= 5000
    assert report["recovery"]["expected_per_bin"] >= 1.0
    held = {a["name"]: a["held"] for a in report["assertions"]}
    assert held["availability in [region_outage East US (unavailable)]"] is False
    assert held["availability after the last fault window"] is True
    assert "FAIL  availability in [region_outage East US (unavailable)]" in failing.stdout


def docs_example() -> tuple[str, dict]:
    """(the pytest example, the scenario file) of docs/drills.md's "Your own application" section."""
    with open(os.path.join(ROOT, "docs", "drills.md"), encoding="utf-8") as f:
        text = f.read()
    python = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "drill_in_background" in b)
    scenario = next(d for d in (json.loads(b) for b in re.findall(r"```json\n(.*?)```", text, re.S)
                                if b.lstrip().startswith('{"name": "east-us-outage"')))
    return python, scenario


def test_the_docs_recipe_runs_as_written(tmp_path):
    python, scenario = docs_example()
    names: dict = {}
    exec(compile(python, "docs/drills.md", "exec"), names)
    assert names["EAST_US_OUTAGE"] == scenario               # the file and the example are one scenario
    (tmp_path / "test_checkout_drill.py").write_text(python)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_checkout_drill.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr
