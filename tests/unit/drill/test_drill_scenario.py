"""Proves the drill scenario schema: every built-in parses; each kind of bad field is refused with
one line naming the field and the rule (a DrillError, which is a ConfigError); setups, client steps
and throttle steps validate; options only the bundled client has are refused for azure-cosmos;
scaling moves every time of the schedule; the simulator's form drops what only a live run has."""
import json

import pytest

from regionlab.emulator.config import ConfigError
from regionlab.emulator.drill import builtin, builtin_names, resolve
from regionlab.emulator.drill.scenario import FAILOVER_WINDOW_MS, DrillError, parse

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
    for required in ("failover", "region-outage", "lag", "primary-crash", "throttle", "replica-move", "credits",
                     "hedging-vs-breaker", "outage-playbook"):
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
    ("workload.client_options", {"circuit_breaker": "on"}, "circuit_breaker must be true or false"),
    ("workload.client_options", {"availability_strategy": {"threshold_ms": 0}}, "positive integers"),
    ("setups", [{"name": "only"}], "setups must be a list of 2 to 8"),
    ("setups", [{"name": "a"}, {"name": "a"}], "setups[1].name must be a non-empty string, distinct"),
    ("setups", [{"name": "a"}, {"name": "b", "client_options": {"timeout_s": 0}}],
     "setups[1].client_options.timeout_s must be a number"),
    ("setups", [{"name": "a"}, {"name": "b", "color": 1}], "setups[1]: unknown field 'color'"),
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
    ([{"at_ms": 1, "client": {"preferred_locations": []}}], "step 0: client: unknown field 'preferred_locations'"),
    ([{"at_ms": 1, "client": {"excluded_locations": ["Mars"]}}], "step 0: client.excluded_locations must list regions"),
    ([{"at_ms": 1, "client": {}}], "a client step changes one of excluded_locations"),
    ([{"at_ms": 1, "throttle": {"credits_per_s": 0}}], "throttle.credits_per_s (null: off, true: 1000) must be"),
    ([{"at_ms": 1, "throttle": {"storms": 1}}], "throttle: unknown field 'storms'"),
    ([{"at_ms": 1, "throttle": {"ru": False}, "heal": "x"}], "exactly one of fault, heal, failover, client, throttle"),
    ([{"at_ms": 20000, "client": {"excluded_locations": []}}], "not before the end of the drill"),
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


def test_setups_lay_their_options_over_the_workloads():
    d = parse(with_("setups", [{"name": "plain"}, {"name": "hedged", "client_options": {"availability_strategy": True}}]))
    assert [s["name"] for s in d.setups] == ["plain", "hedged"]
    one = d.for_setup(d.setups[1])
    assert one.setups == [] and one.client_options == {"availability_strategy": True}
    assert d.scaled(0.5).setups == d.setups


def test_client_and_throttle_steps_sort_into_the_schedule_and_scale():
    d = parse(with_("schedule", GOOD["schedule"] + [
        {"at_ms": 2000, "client": {"excluded_locations": ["East US 2"]}},
        {"at_ms": 500, "throttle": {"credits_per_s": 100}, "as": "c", "window_ms": 1000}]))
    assert [next(k for k in ("fault", "heal", "failover", "client", "throttle") if k in s) for s in d.schedule] == \
        ["throttle", "fault", "client", "heal", "failover"]
    s = d.scaled(0.5)
    assert [x["at_ms"] for x in s.schedule] == [250, 500, 1000, 2000, 2500] and s.schedule[0]["window_ms"] == 500


@pytest.mark.parametrize("options,words", [
    ({"circuit_breaker": True}, "circuit_breaker is an option of the bundled client only (\"client\": "
                                "\"regionlab\"): the SDK's partition-level circuit breaker is the process-wide "
                                "environment variable AZURE_COSMOS_ENABLE_CIRCUIT_BREAKER"),
    ({"connection_mode": "direct"}, "connection_mode is an option of the bundled client only (\"client\": "
                                    "\"regionlab\"): the Python SDK speaks only gateway mode"),
])
def test_azure_cosmos_refuses_options_only_the_bundled_client_has(options, words):
    data = with_("workload.client", "azure-cosmos")
    data["workload"]["client_options"] = options
    with pytest.raises(DrillError) as e:
        parse(data)
    assert str(e.value).startswith("workload.client_options.") and words in str(e.value)
    data["workload"]["client_options"] = {}
    data["setups"] = [{"name": "a"}, {"name": "b", "client_options": options}]
    with pytest.raises(DrillError, match=r"setups\[1\]\.client_options\."):
        parse(data)
    data["workload"]["client_options"] = {"connection_mode": "gateway", "availability_strategy": True}
    data.pop("setups")
    assert parse(data).client == "azure-cosmos"


def test_the_simulators_form_drops_client_and_throttle_steps_and_their_heals():
    from regionlab.emulator.drill.scenario import sim_scenario
    data = with_("schedule", [{"at_ms": 100, "throttle": {"credits_per_s": 5}, "as": "c"},
                              {"at_ms": 200, "client": {"excluded_locations": []}},
                              {"at_ms": 300, "fault": {"type": "region_outage", "region": "East US 2"}, "as": "o"},
                              {"at_ms": 400, "heal": "c"}, {"at_ms": 500, "heal": "o"}])
    data["setups"] = [{"name": "a"}, {"name": "b"}]
    steps = sim_scenario(data, ("East US", "East US 2", "West US"), 100, 1000)["schedule"]
    assert steps == [{"at_ms": 300, "fault": {"type": "region_outage", "region": "East US 2"}, "as": "o"},
                     {"at_ms": 500, "heal": "o"}]


# ---- issue #24: what a drill asserts, and what is refused before anything starts ------------------
@pytest.mark.parametrize("path,value,words", [
    ("assertions.faults", {"rto": 1}, "assertions.faults: unknown field 'rto'"),
    ("assertions.faults", {"rto_ms_max": -1}, "assertions.faults.rto_ms_max must be a number"),
    ("assertions.steady_state", {"rto_ms_max": 1}, "assertions.steady_state: unknown field 'rto_ms_max'"),
    ("assertions.recovery", {"hold_ms": 0}, "assertions.recovery.hold_ms must be an integer from 1"),
    ("assertions.error_rate_max", 1.5, "assertions.error_rate_max must be a number from 0 to 1"),
    ("stop", {"over_ms": 100}, 'stop needs "error_rate_above"'),
    ("stop", {"error_rate_above": 0.5, "when": 1}, "stop: unknown field 'when'"),
    ("account.options", {"detection_delay": 5}, "account.options: unknown regionlab option 'detection_delay'"),
    ("account.options", {"election_ms": "soon"}, "account.options: election_ms="),
])
def test_new_assertion_stop_and_account_fields_are_checked(path, value, words):
    with pytest.raises(DrillError) as e:
        parse(with_(path, value))
    assert words in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("schedule,words", [
    ([{"at_ms": 1, "fault": {"type": "region_outgae", "region": "East US"}}],
     "step 0: unknown fault type 'region_outgae'; the catalogue has: region_outage"),
    ([{"at_ms": 1, "fault": {"type": "region_outage", "region": "East US", "mod": "refuse"}}],
     "step 0: a region_outage fault takes no field 'mod'; its fields are: type, duration_ms, region, mode"),
    ([{"at_ms": 1, "fault": {"type": "link_cut", "from": "East US", "to": "Mars"}}], "names region 'Mars'"),
    ([{"at_ms": 1, "fault": {"type": "region_outage", "region": "East US"}, "as": "o"}, {"at_ms": 2, "heal": "out"}],
     "step 1 heals 'out', which no earlier step names with \"as\" (the names before it: 'o')"),
    ([{"at_ms": 2, "fault": {"type": "region_outage", "region": "East US"}, "as": "o"}, {"at_ms": 1, "heal": "o"}],
     "step 0 heals 'o', which no earlier step names"),
    ([{"at_ms": 1, "heal": "all", "expect": {"rto_ms_max": 5}}], "expect judges a fault, failover or throttle"),
    ([{"at_ms": 1, "failover": {"region": "East US 2"}, "expect": {"rto": 5}}], "step 0: expect: unknown field 'rto'"),
])
def test_bad_fault_types_fields_references_and_expectations_are_refused(schedule, words):
    with pytest.raises(DrillError) as e:
        parse(with_("schedule", schedule))
    assert words in str(e.value) and "\n" not in str(e.value)


def test_good_expectations_stop_and_references_parse():
    d = parse(with_("schedule", [
        {"at_ms": 1, "throttle": {"credits_per_s": 5}, "as": "c", "expect": {"availability_min": 0.5}},
        {"at_ms": 2, "fault": {"type": "replica_move", "region": "East US", "replica": 0, "to": 3}, "as": "m"},
        {"at_ms": 3, "heal": "c"}, {"at_ms": 4, "heal": "m"}, {"at_ms": 5, "heal": 7}]))
    assert d.schedule[0]["expect"] == {"availability_min": 0.5}
    d = parse(with_("stop", {"error_rate_above": 0.9}))
    assert d.stop == {"error_rate_above": 0.9, "over_ms": 2000}
    assert d.recovery == {"availability_min": 0.95, "hold_ms": 1000, "stall_ms": 500}


def test_scaling_scales_the_accounts_times_and_lags_but_not_delays_client_timers_or_limits():
    d = parse({"duration_ms": 10000, "account": {"regions": ["East US", "East US 2"], "lag_ms": 300,
                                                 "options": {"detection_delay_ms": 5000}},
               "workload": {"client_options": {"timeout_s": 0.5}},
               "schedule": [{"at_ms": 1000, "fault": {"type": "link_lag", "from": "East US", "to": "East US 2",
                                                      "lag_ms": 2000}},
                            {"at_ms": 2000, "fault": {"type": "latency", "region": "East US", "delay_ms": 300}}],
               "assertions": {"p99_ms_max": 250, "faults": {"rto_ms_max": 8000}},
               "stop": {"error_rate_above": 0.5, "over_ms": 1000}})
    s = d.scaled(0.3)
    assert s.scale == 0.3 and s.lag_ms == 90
    assert s.account_options == {"detection_delay_ms": 1500, "election_ms": 150}     # the default 500 too
    assert s.schedule[0]["fault"]["lag_ms"] == 600 and s.schedule[1]["fault"]["delay_ms"] == 300
    assert s.client_options == {"timeout_s": 0.5}
    assert s.assertions["p99_ms_max"] == 250 and s.assertions["faults"] == {"rto_ms_max": 8000}
    assert s.recovery["hold_ms"] == 300 and s.recovery["stall_ms"] == 500 and s.stop["over_ms"] == 300
    assert d.scaled(1.0) is d
    floored = parse(dict(GOOD, duration_scale_min=0.6)).scaled(0.3)
    assert floored.scale == 0.6 and floored.duration_ms == 6000
