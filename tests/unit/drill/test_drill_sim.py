"""Proves a drill's scenario file runs in the simulator too (`regionlab sim --scenario FILE`): the
account and workload map onto the simulator's settings, every built-in runs there in virtual time
with no consistency violation, a seed reproduces the run, and a region the simulator lacks is
refused with one line; an azure-cosmos drill runs there too, its live-only parts left out."""
import json
from importlib import resources

import pytest

from regionlab.emulator.config import ConfigError
from regionlab.emulator.drill import builtin_names
from regionlab.emulator.drill.scenario import sim_scenario
from regionlab.emulator.sim import SimConfig, run
from regionlab.emulator.sim.run import CLIENTS_MAX, KEYS_MAX, REGIONS


def builtin_text(name: str) -> str:
    return resources.files("regionlab.emulator.drill").joinpath("builtin", f"{name}.json").read_text()


def test_account_and_workload_become_simulator_settings():
    data = json.loads(builtin_text("failover"))
    s = sim_scenario(data, REGIONS, CLIENTS_MAX, KEYS_MAX)
    assert s["consistency"] == "Session" and s["clients"] == 8 and s["keys"] == 100
    assert [300] * 6 == [ms for _, _, ms in s["lag_ms"]]
    assert [step["at_ms"] for step in s["schedule"]] == [5000, 12000]


@pytest.mark.slow
@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_runs_in_the_simulator_and_a_seed_reproduces_it(name):
    config = SimConfig.from_scenario(builtin_text(name))
    first, again = run(5, config), run(5, config)
    assert first.violations == [] and first.summary() == again.summary()


def test_a_region_the_simulator_lacks_is_refused():
    data = {"account": {"regions": ["East US", "Mars"]}, "schedule": []}
    with pytest.raises(ConfigError, match="this drill names 'Mars'"):
        SimConfig.from_scenario(json.dumps(data))


def test_an_sdk_drill_with_setups_and_live_only_steps_runs_in_the_simulator():
    """The simulator's clients are its own: a drill whose workload is the official SDK runs there
    as any other, its setups and its client and throttle steps left out."""
    data = {"account": {"regions": ["East US", "East US 2"]},
            "workload": {"client": "azure-cosmos", "concurrency": 3, "keys": 5},
            "setups": [{"name": "a"}, {"name": "b", "client_options": {"availability_strategy": True}}],
            "schedule": [{"at_ms": 100, "throttle": {"credits_per_s": 10}, "as": "c"},
                         {"at_ms": 200, "client": {"excluded_locations": ["East US 2"]}},
                         {"at_ms": 300, "fault": {"type": "region_outage", "region": "East US 2"}, "as": "o"},
                         {"at_ms": 900, "heal": "c"}, {"at_ms": 1000, "heal": "o"}]}
    config = SimConfig.from_scenario(json.dumps(data))
    assert [s.get("fault", s.get("heal")) for s in config.scenario] == [
        {"type": "region_outage", "region": "East US 2"}, "o"]
    first, again = run(2, config), run(2, config)
    assert first.violations == [] and first.summary() == again.summary() and first.summary()["faults"] == 1
