"""Proves a drill's workload runs through the official azure-cosmos aio SDK (`"client":
"azure-cosmos"`) against a real emulator, and that the report's figures, read off the SDK's HTTP
attempts, agree with the emulator's own counters: the 429/50009s it retried are the credit
refusals the emulator counted; the reads East US 2 served are the successes East US 2 answered;
after a client step excluding East US 2 no read goes there, also from a client restarted by a
later step (a new SDK client, the exclusion kept); hedged extra RU appears only in the
setup whose SDK client hedges (availability_strategy), and hedging cuts the p99 under a slow
region. No mocks: the SDK's own retry and hedging policies run unchanged."""
import pytest

from regionlab.emulator.testing import running_emulator
from test_drill import credit_refusals, docs_status_counts, seen_50009, served_2xx

pytestmark = pytest.mark.slow          # each drill runs for seconds

REGIONS = ["East US", "East US 2"]
SDK_WORKLOAD = {"client": "azure-cosmos", "concurrency": 4, "keys": 20,
                "client_options": {"preferred_locations": ["East US 2", "East US"]}}


def test_sdk_workload_report_agrees_with_the_emulator():
    # The SDK waits out a 429/50009's retry-after (2 s): the client step comes after those waits.
    drill = {"name": "sdk", "duration_ms": 4500, "account": {"regions": REGIONS},
             "workload": dict(SDK_WORKLOAD, mix={"read": 0.6, "write": 0.2, "query": 0.2}),
             "schedule": [{"at_ms": 800, "throttle": {"credits_per_s": 20}, "as": "credits"},
                          {"at_ms": 1200, "heal": "credits"},
                          {"at_ms": 3300, "client": {"excluded_locations": ["East US 2"]}, "label": "exclude"},
                          {"at_ms": 3300, "client": {"restart": True}}],
             "assertions": {"lost_writes_match": True}}
    with running_emulator(regions=REGIONS) as emu:
        refused, east2, docs = credit_refusals(emu), served_2xx(emu, "East US 2"), docs_status_counts(emu)
        report = emu.drill(drill)
        refused, east2 = credit_refusals(emu) - refused, served_2xx(emu, "East US 2") - east2
        docs_50009 = docs_status_counts(emu).get("429/50009", 0) - docs.get("429/50009", 0)
        assert emu.control("GET", "/throttle")["credits_per_s"] is None        # the step was undone
    total = report["total"]
    assert report.passed and report["workload"]["client"] == "azure-cosmos"
    assert total["ops"] > 0 and total["request_charge"] > 0 and total["p50_ms"] > 0
    assert seen_50009(total) == refused == docs_50009 > 0
    assert total["served_by"]["East US 2"] == east2 > 0
    steady, squeezed, healed, excluded = report.phases
    assert squeezed["retries_by_reason"].get("429/50009 credits spent", 0) > 0
    assert excluded["ok"] > 0 and excluded["served_by"] == {"East US": excluded["ok"]}
    assert [c["label"] for c in report["client_changes"]] == ["exclude", "client restart"]
    assert total["hedged_extra_charge"] == 0 and total["breaker_opened"] == 0


def test_sdk_hedging_setup_shows_hedged_extra_ru_and_a_lower_p99():
    drill = {"name": "sdk-hedging", "duration_ms": 2000, "account": {"regions": REGIONS},
             "workload": dict(SDK_WORKLOAD, mix={"read": 1}),
             "setups": [{"name": "plain", "client_options": {}},
                        {"name": "hedging",
                         "client_options": {"availability_strategy": {"threshold_ms": 100, "threshold_steps_ms": 50}}}],
             "schedule": [{"at_ms": 500, "fault": {"type": "latency", "region": "East US 2", "op": "read",
                                                   "delay_ms": 400}, "as": "slow"},
                          {"at_ms": 1500, "heal": "slow"}]}
    with running_emulator(regions=REGIONS) as emu:
        report = emu.drill(drill)
    plain, hedging = report["comparison"]
    assert plain["hedged_extra_charge"] == 0 < hedging["hedged_extra_charge"]
    assert hedging["p99_ms_in_fault_windows"] < plain["p99_ms_in_fault_windows"]
    assert plain["p99_ms_in_fault_windows"] >= 400
    assert report["setups"][1]["in_fault_windows"]["served_by"].get("East US", 0) > 0
