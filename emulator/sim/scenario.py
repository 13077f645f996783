"""Scenarios as data: timed steps of faults, heals and failovers, in the control API's JSON.

A scenario is a JSON list of steps, or an object with a "schedule" list and optional run
settings (those of `SimConfig`: consistency, partitions, steps, clients, ...):

    {"consistency": "Session", "partitions": 2, "steps": 300,
     "schedule": [
       {"at_ms": 500,  "fault": {"type": "region_outage", "region": "East US"}, "as": "outage"},
       {"at_ms": 4000, "heal": "outage"},
       {"at_ms": 5000, "failover": {"region": "East US 2", "kind": "graceful"}}]}

The steps are checked as scenario_steps.py says (the one schedule format of the simulator and
of drills); the simulator has no sockets, so every region_outage mode is the same "down" region
to it.
"""
import json

from ..scenario_steps import ScenarioError, check_heals, check_step


def parse(data) -> tuple[list, dict]:
    """(steps sorted by at_ms, run settings) from JSON text or already-parsed data."""
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except ValueError as e:
            raise ScenarioError(f"a scenario is JSON: {e}") from None
    settings = {}
    if isinstance(data, dict):
        settings = {k: v for k, v in data.items() if k != "schedule"}
        data = data.get("schedule")
    if not isinstance(data, list):
        raise ScenarioError('a scenario is a list of steps, or {"schedule": [steps...], ...settings}')
    steps = [check_step(i, s) for i, s in enumerate(data)]
    steps.sort(key=lambda s: s["at_ms"])       # stable: steps at one time keep their order
    check_heals(steps)
    return steps, settings
