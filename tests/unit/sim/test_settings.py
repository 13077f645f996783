"""The simulator's settings — from a scenario file, its flags or SimConfig itself — pass the same
checks as the server's (emulator/config.py): a bad or unknown one is a one-line ScenarioError or
ConfigError, never a TypeError, and bounded staleness K and T reach the simulated account."""
import io

import pytest

from regionlab.emulator.config import ConfigError
from regionlab.emulator.sim import ScenarioError, SimConfig, run
from regionlab.emulator.sim.__main__ import main as sim_main
from regionlab.emulator.sim.run import build, resolve


@pytest.mark.parametrize("settings,message", [
    ({"partitons": 2}, "unknown scenario setting 'partitons'; the settings are: steps, clients"),
    ({"consistency": "Strongg"}, "scenario setting consistency='Strongg': must be one of Strong"),
    ({"partitions": 0}, "scenario setting partitions=0: must be an integer from 1 to 256"),
    ({"max_staleness_prefix": -1}, "max_staleness_prefix=-1: must be an integer from 1"),
    ({"faults": "sometimes"}, "faults='sometimes': must be one of true/false"),
])
def test_a_bad_scenario_setting_is_one_line(settings, message):
    with pytest.raises(ScenarioError) as e:
        SimConfig.from_scenario({"schedule": [], **settings})
    assert message in str(e.value) and "\n" not in str(e.value)
    assert isinstance(e.value, ConfigError), "one error type for every entry"


def test_simconfig_itself_is_checked():
    with pytest.raises(ConfigError, match="steps=0: must be an integer from 1"):
        SimConfig(steps=0)


@pytest.mark.parametrize("argv,message", [(["--consistency", "Strongg"], "consistency='Strongg'"),
                                          (["--seeds", "a-b"], "--seeds 'a-b': must be a seed or a range")])
def test_the_sim_command_refuses_a_bad_flag_with_one_line_and_status_2(capsys, argv, message):
    assert sim_main(argv, out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and err.startswith("python -m emulator.sim: error: ")


def test_bounded_staleness_settings_reach_the_simulated_account():
    config = resolve(3, SimConfig.from_scenario({"schedule": [], "consistency": "BoundedStaleness",
                                                 "max_staleness_prefix": 4, "max_interval_s": 2,
                                                 "lag_ms": [["East US", "West US", 50]]}))
    world, _, _ = build(3, config)
    assert (world.account.config.staleness_ops, world.account.config.staleness_s) == (4, 2)
    assert world.account.config.lag_ms == {("East US", "West US"): 50}, "JSON's [[src, dst, ms]] form"
    partitions = [p for db in world.account.databases.values() for c in db.containers.values()
                  for p in c.partitions]
    assert partitions and all((p.staleness_ops, p.staleness_s) == (4, 2) for p in partitions)


def test_a_bounded_staleness_run_with_a_small_k_still_checks_clean():
    result = run(5, SimConfig(steps=120, consistency="BoundedStaleness", max_staleness_prefix=3, faults=False))
    assert result.ok, result.violations
    assert result.config["max_staleness_prefix"] == 3
