"""The deterministic simulator: the real core driven in virtual time from a seed.

    from regionlab.emulator.sim import run, SimConfig
    result = run(1234)                      # or run(1234, SimConfig(steps=500, consistency="Strong"))
    assert result.ok, result.violations

Modules: run.py (one run: build, compose the workloads, heal, check), world.py (the account
plus the gateway's waiting, in virtual time), workload.py (the clients), nemesis.py (random
faults and failovers, or a scenario's steps), scenario.py (scenarios as JSON data),
history.py (what happened), checker.py (what should have). `python -m emulator.sim --seed N`
runs one from the command line.
"""
from .checker import check
from .run import Result, SimConfig, run
from .scenario import ScenarioError, parse as parse_scenario

__all__ = ["run", "SimConfig", "Result", "check", "parse_scenario", "ScenarioError"]
