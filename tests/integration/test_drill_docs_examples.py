"""Proves the drill examples of docs/drills.md and docs/chaos-playground.md as written: each JSON
scenario in the pages is taken verbatim, run through `regionlab drill run` (shortened only by the documented --duration-scale)
against its own in-process emulator, and its verdict is true to what happened: the exit status is
0 exactly when the report passed, and `checkout-failover` passes exactly when writes moved to
East US 2 while East US was out (so it fails while the bundled client does not follow the
service-managed failover, and passes once it does)."""
import json
import os
import re
import subprocess
import sys

import pytest

from regionlab.emulator.drill.scenario import parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGES = [os.path.join(ROOT, "docs", page) for page in ("drills.md", "chaos-playground.md")]
SCALE = "0.3"
RUN_TIMEOUT_S = 120

pytestmark = pytest.mark.slow          # each example runs for seconds


def examples() -> dict:
    """{name: scenario text} of every ```json block of the pages that is a whole scenario."""
    found = {}
    text = ""
    for page in PAGES:
        with open(page, encoding="utf-8") as f:
            text += f.read()
    for block in re.findall(r"```json\n(.*?)```", text, re.S):
        try:
            data = json.loads(block)
        except ValueError:
            continue                      # a fragment (a report's field), not a scenario
        # A scenario without a workload watches an application drive a running emulator:
        # test_drill_served.py runs the page's one with its application.
        if isinstance(data, dict) and "schedule" in data and not parse(data).served:
            found[data["name"]] = block
    return found


def test_the_page_has_its_examples():
    assert sorted(examples()) == ["checkout-brownout", "checkout-failover", "hedge-or-not"]


@pytest.mark.parametrize("name", sorted(examples()))
def test_each_docs_example_runs_verbatim_and_its_verdict_is_true(name, tmp_path):
    path = tmp_path / f"{name}.json"
    path.write_text(examples()[name])            # verbatim
    done = subprocess.run([sys.executable, "-m", "regionlab.emulator", "drill", "run", str(path),
                           "--duration-scale", SCALE, "--out", str(tmp_path / "out")],
                          cwd=ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode in (0, 1), done.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert done.returncode == (0 if report["passed"] else 1)
    assert report["duration_scale"] == float(SCALE) and report["ended"] == {"kind": "completed"}
    assert all(a["held"] is not None for a in report["assertions"]), report["assertions"]
    if name == "checkout-failover":
        outage = next(p for p in report["phases"] if p["name"].startswith("region_outage East US"))
        writes_moved = outage["served_by"].get("East US 2", 0) > 0
        assert report["passed"] == writes_moved, (writes_moved, report["assertions"])
        window = report["faults"][0]
        assert window["ops"] > 0 and 0 <= window["availability"] <= 1
        assert f"{window['availability']:.2%}" in done.stdout          # the real availability, shown
    if name == "hedge-or-not":
        plain, hedging = report["comparison"]
        assert hedging["p99_ms_in_fault_windows"] < plain["p99_ms_in_fault_windows"]
        assert hedging["hedged_extra_charge"] > 0 == plain["hedged_extra_charge"]
