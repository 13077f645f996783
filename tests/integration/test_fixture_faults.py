"""Proves the fixture's fault handle (emulator/fault_handle.py) against a real emulator driven by
the official azure-cosmos SDK: a context-managed outage moves reads and fails writes, then heals on
exit so writes succeed again; emu.failover moves the write region; emu.lost_writes lists exactly
the writes a forced failover discarded; a bad spec raises the control port's 400 and changes
nothing; and types are reached generically from the catalogue, so new ones need no edit."""
import inspect

import pytest
from azure.cosmos import CosmosClient, PartitionKey, exceptions

from regionlab.emulator.core.faults import FAULT_TYPES
from regionlab.emulator.testing import ControlError, Fault, Faults
from sdk_harness import make_client, no_lag, wait_replicated

EAST, EAST2, WEST = "East US", "East US 2", "West US"
REGIONS = (EAST, EAST2, WEST)
NO_LAG = no_lag(REGIONS)
NO_AUTO_FAILOVER = 600_000          # detection_delay_ms: no service-managed failover mid-test
TIMEOUT_S = 1


def doc_reads(emu) -> dict:
    """Successful point reads served so far, per region."""
    return {region: counts.get("GET docs 200", 0) for region, counts in emu.topology()["requests"].items()}


def delta(after: dict, before: dict) -> dict:
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


@pytest.fixture
def items(regionlab):
    with CosmosClient(regionlab.endpoint, regionlab.key) as admin:
        admin.create_database("db").create_container("c", PartitionKey(path="/pk")).upsert_item(
            {"id": "a", "pk": "p", "v": 1})
    with CosmosClient(regionlab.endpoint, regionlab.key, preferred_locations=[EAST, EAST2],
                      read_timeout=TIMEOUT_S, connection_timeout=TIMEOUT_S) as client:
        c = client.get_database_client("db").get_container_client("c")
        c.read_item("a", partition_key="p")                 # the client knows every region now
        yield c


@pytest.mark.slow
@pytest.mark.regionlab_config(lag_ms=NO_LAG, detection_delay_ms=NO_AUTO_FAILOVER)
def test_a_context_managed_outage_moves_reads_fails_writes_and_heals_on_exit(regionlab, items):
    emu = regionlab
    with emu.faults.region_outage(EAST, mode="unavailable") as outage:
        assert isinstance(outage, Fault) and outage.type == "region_outage"
        assert outage.spec["mode"] == "unavailable" and outage.active
        assert emu.topology()["regions"][0] == dict(emu.topology()["regions"][0], name=EAST, state="down")
        before = doc_reads(emu)
        assert items.read_item("a", partition_key="p")["v"] == 1
        assert delta(doc_reads(emu), before) == {EAST2: 1}                 # the read moved
        with pytest.raises(exceptions.CosmosHttpResponseError) as raised:
            items.upsert_item({"id": "b", "pk": "p"})
        assert raised.value.status_code == 503
    assert emu.faults.active() == [] and not outage.active
    assert emu.topology()["regions"][0]["state"] == "up"
    items.upsert_item({"id": "b", "pk": "p"})                             # healed: writes go on
    before = doc_reads(emu)
    assert items.read_item("b", partition_key="p")["id"] == "b"
    assert delta(doc_reads(emu), before) == {EAST: 1}


@pytest.mark.slow
@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_failover_through_the_handle_moves_writes(regionlab, items):
    emu = regionlab
    failover = emu.failover(EAST2)
    assert (failover["from"], failover["to"], failover["kind"], failover["state"]) == (EAST, EAST2, "graceful",
                                                                                      "completed")
    assert emu.topology()["write_regions"] == [EAST2] and emu.failovers() == [failover]
    before = emu.topology()["requests"]
    items.upsert_item({"id": "after", "pk": "p"})
    after = emu.topology()["requests"]
    assert after[EAST2].get("POST docs 200", 0) + after[EAST2].get("POST docs 201", 0) > \
        before[EAST2].get("POST docs 200", 0) + before[EAST2].get("POST docs 201", 0)
    assert emu.lost_writes() == []


@pytest.mark.regionlab_config(lag_ms=NO_LAG)
def test_lost_writes_lists_what_a_forced_failover_discarded(regionlab):
    emu = regionlab
    with make_client(emu) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "kept", "pk": "p"})
        wait_replicated(emu, "db", "c", EAST2)
        with emu.faults.link_cut(EAST, EAST2, one_way=True):
            for i in range(5):
                c.create_item({"id": f"lost{i}", "pk": "p"})
            failover = emu.failover(EAST2, forced=True)
    assert failover["kind"] == "forced" and failover["lost_writes"] == 5
    lost = emu.lost_writes()
    assert sorted(w["id"] for w in lost) == [f"lost{i}" for i in range(5)]
    assert {(w["region"], w["operation"], w["database"], w["container"]) for w in lost} == {(EAST, "create", "db", "c")}
    with make_client(emu, preferred_locations=[EAST2]) as reader:
        readable = {d["id"] for d in reader.get_database_client("db").get_container_client("c").read_all_items()}
    assert readable == {"kept"}


def test_a_bad_fault_spec_raises_the_control_ports_error_and_changes_nothing(regionlab):
    emu = regionlab
    with pytest.raises(ControlError) as raised:
        emu.faults.region_outage("Mars")
    assert raised.value.status == 400 and "Unknown region 'Mars'" in raised.value.message
    with pytest.raises(ControlError) as raised:
        emu.faults.region_outage(WEST, mode="sideways")
    assert raised.value.status == 400 and "refuse, reset, unavailable, blackhole" in raised.value.message
    with pytest.raises(ControlError) as raised:
        emu.faults.inject({"type": "meteor", "region": WEST})
    assert raised.value.status == 400 and "region_outage" in raised.value.message
    with pytest.raises(ControlError) as raised:
        emu.faults.link_lag(EAST, WEST, lag_ms=-5)
    assert raised.value.status == 400 and "lag_ms" in raised.value.message
    with pytest.raises(AttributeError, match="not a fault type; the catalogue has: region_outage"):
        emu.faults.meteor_strike(WEST)
    assert emu.faults.active() == [] and all(r["state"] == "up" for r in emu.topology()["regions"])


def test_a_fault_that_ended_by_its_duration_exits_quietly_and_heal_is_explicit(regionlab):
    emu = regionlab
    with emu.faults.region_outage(WEST, duration_ms=0) as ended:    # duration 0: over at once
        pass
    assert ended.healed is None and not ended.active
    lag = emu.faults.link_lag(EAST, WEST, 400, jitter_ms=10)
    assert [f.id for f in emu.faults.active()] == [lag.id]
    assert lag.heal()["lag_ms"] == 400 and emu.faults.active() == []
    with lag:                                                        # healed already: exit is a no-op
        pass
    with pytest.raises(ControlError) as raised:
        lag.heal()
    assert raised.value.status == 404


def test_every_catalogue_type_is_a_method_and_new_ones_map_generically(regionlab):
    emu = regionlab
    assert set(FAULT_TYPES) <= set(dir(emu.faults))
    for name in FAULT_TYPES:
        method = getattr(emu.faults, name)
        assert callable(method) and method.__doc__, name
    typed = {n for n, fn in inspect.getmembers(Faults, inspect.isfunction)
             if not n.startswith("_") and n not in ("inject", "active", "heal_all", "control")}
    assert typed <= set(FAULT_TYPES), typed - set(FAULT_TYPES)       # no typed method of a type that left
    # the generic path (what a type added to the catalogue gets): positional regions, keyword fields
    generic = Faults.__getattr__(emu.faults, "link_cut")
    with generic(EAST, WEST, one_way=True) as cut:
        assert {k: cut.spec[k] for k in ("type", "from", "to", "one_way")} == \
            {"type": "link_cut", "from": EAST, "to": WEST, "one_way": True}
        links = {(link["from"], link["to"]): link["state"] for link in emu.topology()["links"]}
        assert links[(EAST, WEST)] == "cut" and links[(WEST, EAST)] == "active"
    assert all(link["state"] == "active" for link in emu.topology()["links"])
    with Faults.__getattr__(emu.faults, "region_outage")(WEST, mode="refuse") as outage:
        assert outage.spec["region"] == WEST and outage.spec["mode"] == "refuse"


@pytest.mark.regionlab_config(control_token="fixture-secret")
def test_the_handle_sends_the_control_token(regionlab):
    emu = regionlab
    with emu.faults.link_lag(EAST, WEST, 50) as lag:
        assert emu.faults.active()[0].spec == lag.spec
    unauthenticated = Faults(emu.control_endpoint)
    with pytest.raises(ControlError) as raised:
        unauthenticated.active()
    assert raised.value.status == 401
