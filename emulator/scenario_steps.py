"""A scenario's steps: faults, heals and failovers at their times, in the control API's JSON. The
one schedule format of the simulator's scenarios (sim/scenario.py) and of drills (drill/scenario.py,
which adds steps of its own).

* "fault" is exactly the body of `POST /faults` (core/faults.py lists the catalogue), including
  an optional duration_ms; "as" names it for a later "heal" step. A region_outage's `mode`
  (refuse, reset, unavailable, blackhole) is checked here.
* "heal" is a name given by "as", a fault id as the registry numbers them (1, 2, ... in the
  order faults were injected), or "all".
* "failover" is exactly the body of `POST /failover`: {"region": ..., "kind": "graceful"|"forced"}.
* at_ms counts from the start of the run (in virtual time in the simulator).
"""
from .config import ConfigError
from .core.faults import FAULT_FIELDS, FAULT_TYPES, OUTAGE_MODES

STEP_KINDS = ("fault", "heal", "failover")


class ScenarioError(ConfigError):
    """A scenario that cannot run: one line saying which step or setting, and why."""


def check_step(i: int, step) -> dict:
    if not isinstance(step, dict):
        raise ScenarioError(f"step {i} must be an object")
    kinds = [k for k in STEP_KINDS if k in step]
    if len(kinds) != 1:
        raise ScenarioError(f"step {i} needs exactly one of {', '.join(STEP_KINDS)}")
    at = step.get("at_ms", 0)
    if not isinstance(at, int) or at < 0:
        raise ScenarioError(f"step {i}: at_ms must be a non-negative integer")
    kind = kinds[0]
    if kind == "fault":
        _check_fault(i, step["fault"])
    if kind == "failover":
        body = step["failover"]
        if not isinstance(body, dict) or not isinstance(body.get("region"), str) or \
                body.get("kind", "graceful") not in ("graceful", "forced"):
            raise ScenarioError(f'step {i}: failover is {{"region": "...", "kind": "graceful"|"forced"}}')
    if kind == "heal" and not isinstance(step["heal"], (int, str)):
        raise ScenarioError(f"step {i}: heal names a fault ('as'), an id, or 'all'")
    return dict(step, at_ms=at)


def _check_fault(i: int, fault) -> None:
    """What can be judged before the run: the type, the fields it takes (core/faults.py
    FAULT_FIELDS) and the outage mode. (Selectors and values are checked by the registry when
    the step runs, against the account as it is then; a drill also checks the regions.)"""
    if not isinstance(fault, dict):
        raise ScenarioError(f"step {i}: a fault is a JSON object, as POST /faults takes")
    kind = fault.get("type")
    if kind not in FAULT_TYPES:
        raise ScenarioError(f"step {i}: unknown fault type {kind!r}; the catalogue has: {', '.join(FAULT_TYPES)}")
    allowed = ("type", "duration_ms") + FAULT_FIELDS[kind]
    unknown = [k for k in fault if k not in allowed]
    if unknown:
        raise ScenarioError(f"step {i}: a {kind} fault takes no field {unknown[0]!r}; its fields are: "
                            f"{', '.join(allowed)}")
    if fault.get("type") == "region_outage" and fault.get("mode", OUTAGE_MODES[0]) not in OUTAGE_MODES:
        raise ScenarioError(f"step {i}: region_outage mode {fault['mode']!r} is not one of "
                            f"{', '.join(OUTAGE_MODES)} (the simulator treats them all as the region being down)")


def check_heals(steps: list) -> None:
    """Every heal names what an earlier step named with "as" (a fault; in a drill also a
    throttle step), a fault id (an integer: the registry's numbering, which a running emulator
    may have given to faults of its own), or "all"."""
    named = set()
    for i, s in enumerate(steps):
        if "as" in s:
            named.add(s["as"])
        heal = s.get("heal")
        if isinstance(heal, str) and heal != "all" and heal not in named:
            earlier = ", ".join(repr(n) for n in sorted(named, key=str)) or "none"
            raise ScenarioError(f"step {i} heals {heal!r}, which no earlier step names with \"as\" "
                                f"(the names before it: {earlier}); or give a fault id, or \"all\"")
