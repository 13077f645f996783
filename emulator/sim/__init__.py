"""The deterministic simulator: the product's request layer and core driven in virtual time from a seed.

    from regionlab.emulator.sim import run, SimConfig
    result = run(1234)                      # or run(1234, SimConfig(steps=500, consistency="Strong"))
    assert result.ok, result.violations

What it runs is the product, not a copy: each client operation is the REST request an SDK would
send, handled by the same Service (emulator/service) the gateway and direct mode serve from, on
the same core (emulator/core), with its waits in virtual time instead of on an event loop.

Modules: run.py (one run: build, compose the workloads, heal, check), world.py (the account,
a Service per region, operations as requests and replies as history), driver.py (the service's
waits on the core scheduler, and the trampoline that runs request coroutines), workload.py (the
clients), nemesis.py (random faults and failovers, or a scenario's steps), scenario.py
(scenarios as JSON data), history.py (what happened), checker.py (what should have).
`python -m regionlab.emulator.sim --seed N` runs one from the command line.
"""
from .checker import check
from .run import Result, SimConfig, run
from .scenario import ScenarioError, parse as parse_scenario

__all__ = ["run", "SimConfig", "Result", "check", "parse_scenario", "ScenarioError"]
