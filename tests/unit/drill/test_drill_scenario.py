"""Proves the drill scenario schema: every built-in parses; each kind of bad field is refused with
one line naming the field and the rule (a DrillError, which is a ConfigError); scaling moves every
time of the schedule."""
import json

import pytest

from emulator.config import ConfigError
from emulator.drill import builtin, builtin_names, resolve
from emulator.drill.scenario import FAILOVER_WINDOW_MS, DrillError, parse

GOOD = {"duration_ms": 10000, "account": {"regions": ["East US", "East US 2"]},
        "workload": {"mix": {"read": 3, "write": 1}},
        "schedule": [{"at_ms": 1000, "fault": {"type": "region_outage", "region": "East US 2"}, "as": "o"},
                     {"at_ms": 4000, "heal": "o"},
                     {"at_ms": 5000, "failover": {"region": "East US 2", "kind": "forced"}}],
        "assertions": {"availability_min": 0.99, "lost_writes_max": 3}}


def with_(path: str, value):
    data = json.loads(json.dumps(GOOD))
    *parents, last = path.split(".")
    node = data
    for p in parents:
        node = node.setdefault(p, {})
    node[last] = value
    return data


def test_builtins_parse_and_list_the_required_drills():
    names = builtin_names()
    for required in ("failover", "region-outage", "lag", "primary-crash", "throttle"):
        assert required in names
    for name in names:
        d = builtin(name)
        assert d.name == name and d.description and d.schedule


def test_good_scenario_normalizes_the_mix_and_keeps_the_schedule_sorted():
    d = parse(GOOD)
    assert d.mix == {"read": 0.75, "write": 0.25, "query": 0.0}
    assert [s["at_ms"] for s in d.schedule] == [1000, 4000, 5000]
    assert d.client == "regionlab" and d.regions == ("East US", "East US 2")


@pytest.mark.parametrize("path,value,words", [
    ("colour", 1, "unknown field 'colour'"),
    ("duration_ms", -5, "duration_ms must be an integer"),
    ("account.regions", [], "account.regions"),
    ("account.consistency", "Sometimes", "account.consistency 'Sometimes' is not one of"),
    ("account.multi_write", "yes", "account.multi_write must be true or false"),
    ("workload.mix", {"read": 0}, "positive share"),
    ("workload.mix", {"scan": 1}, "unknown field 'scan'"),
    ("workload.concurrency", 0, "workload.concurrency must be an integer from 1"),
    ("workload.client", "mongo", "workload.client 'mongo' is not one of"),
    ("workload.client", "azure-cosmos", "not built yet"),
    ("workload.client_options", {"connection_mode": "udp"}, "connection_mode 'udp'"),
    ("workload.client_options", {"preferred_locations": ["Mars"]}, "preferred_locations must list regions"),
    ("assertions.availability_min", 2, "assertions.availability_min must be a number from 0 to 1"),
    ("assertions.p99", 1, "unknown field 'p99'"),
])
def test_bad_fields_are_refused_with_one_line_naming_them(path, value, words):
    with pytest.raises(DrillError) as e:
        parse(with_(path, value))
    assert words in str(e.value) and "\n" not in str(e.value)
    assert isinstance(e.value, ConfigError)


@pytest.mark.parametrize("schedule,words", [
    ([{"at_ms": 20000, "heal": "all"}], "not before the end of the drill"),
    ([{"at_ms": 1, "fault": {"type": "region_outage", "region": "Mars"}}], "names region 'Mars'"),
    ([{"at_ms": 1, "failover": {"region": "East US", "kind": "sudden"}}], "failover is"),
    ([{"at_ms": 1, "fault": {"type": "region_outage", "region": "East US", "mode": "melt"}}], "mode 'melt'"),
    ([{"at_ms": 1}], "exactly one of"),
    ([{"at_ms": 1, "heal": "all", "when": 3}], "unknown field 'when'"),
])
def test_bad_steps_are_refused(schedule, words):
    with pytest.raises(DrillError, match=None) as e:
        parse(with_("schedule", schedule))
    assert words in str(e.value)


def test_not_json_and_missing_files_are_one_line_errors(tmp_path):
    with pytest.raises(DrillError, match="a scenario file is JSON"):
        parse("{nope")
    with pytest.raises(DrillError, match="cannot read the scenario file"):
        resolve(str(tmp_path / "absent.json"))


def test_scaling_moves_every_time():
    d = parse(with_("schedule", GOOD["schedule"] + [
        {"at_ms": 6000, "fault": {"type": "latency", "region": "East US", "delay_ms": 5, "duration_ms": 2000}}]))
    s = d.scaled(0.5)
    assert s.duration_ms == 5000
    assert [x["at_ms"] for x in s.schedule] == [500, 2000, 2500, 3000]
    assert s.schedule[2]["window_ms"] == FAILOVER_WINDOW_MS // 2
    assert s.schedule[3]["fault"]["duration_ms"] == 1000 and s.schedule[3]["fault"]["delay_ms"] == 5
    assert d.duration_ms == 10000                     # the original is unchanged
