"""Proves a region's read-only endpoint (--read-only-endpoints, or opened on the control port)
never reads from the primary: on a real emulator, reads through it are served by secondaries even
when routing prefers the primary, a session read no secondary can serve gets 404/1002 (the
regional endpoint serves it from the primary), an eventual read with every secondary down gets
503, writes get 403/3; the endpoints are listed in the ready line and the topology."""
import json

import pytest

from regionlab.emulator import cli
from regionlab.emulator.ctl import ControlError
from sdk_harness import control_json, raw_request

EAST = "East US"
DOC = "/dbs/db/colls/c/docs/x"
PK = {"x-ms-documentdb-partitionkey": '["p"]'}


def _setup(emu):
    assert raw_request(emu, "POST", "/dbs", {"id": "db"}).status == 201
    assert raw_request(emu, "POST", "/dbs/db/colls",
                       {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}}).status == 201
    created = raw_request(emu, "POST", "/dbs/db/colls/c/docs", {"id": "x", "pk": "p"}, headers=PK)
    assert created.status == 201
    return created.headers["x-ms-session-token"]


def _served(emu):
    def count(account):
        rs = account.databases["db"].containers["c"].partitions[0].replica_sets[EAST]
        return [r.reads_served for r in rs.replicas]
    return emu.call(count)


@pytest.mark.regionlab_config(read_only_endpoints=True, read_weights=[50, 1, 1, 1])
def test_reads_come_from_secondaries_and_writes_are_refused(regionlab):
    emu = regionlab
    ro = emu.read_only_endpoints
    assert set(ro) == set(emu.regions) and len(set(ro.values())) == 3
    assert emu.emulator.ready_info()["read_only_endpoints"] == ro
    assert control_json(emu, "GET", "/topology")["read_only_endpoints"] == ro
    _setup(emu)
    assert raw_request(emu, "GET", DOC, headers=PK, url=emu.region_endpoints[EAST]).status == 200
    assert _served(emu) == [1, 0, 0, 0]                       # weight 50: the primary, normally
    assert raw_request(emu, "GET", DOC, headers=PK, url=ro[EAST]).status == 200
    assert _served(emu)[0] == 1 and sum(_served(emu)[1:]) == 1  # ... never through the read-only endpoint
    query = raw_request(emu, "POST", "/dbs/db/colls/c/docs", {"query": "SELECT * FROM c", "parameters": []},
                        url=ro[EAST], headers={**PK, "x-ms-documentdb-isquery": "True",
                                               "content-type": "application/query+json"})
    assert query.status == 200 and query.json()["_count"] == 1
    write = raw_request(emu, "POST", "/dbs/db/colls/c/docs", {"id": "y", "pk": "p"}, headers=PK, url=ro[EAST])
    assert (write.status, write.headers["x-ms-substatus"]) == (403, "3")


@pytest.mark.regionlab_config(read_only_endpoints=True)
def test_what_no_secondary_can_serve_is_refused_not_sent_to_the_primary(regionlab):
    emu = regionlab
    ro = emu.read_only_endpoints[EAST]
    assert raw_request(emu, "POST", "/dbs", {"id": "db"}).status == 201
    assert raw_request(emu, "POST", "/dbs/db/colls",
                       {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}}).status == 201
    control_json(emu, "POST", "/faults", {"type": "replica_slow", "region": EAST, "replica": 3, "delay_ms": 60_000})
    created = raw_request(emu, "POST", "/dbs/db/colls/c/docs", {"id": "x", "pk": "p"}, headers=PK)
    assert created.status == 201                              # primary + replicas 1 and 2: a quorum
    token = {**PK, "x-ms-session-token": created.headers["x-ms-session-token"], "x-ms-consistency-level": "Session"}
    for replica in (1, 2):
        control_json(emu, "POST", "/faults", {"type": "replica_crash", "region": EAST, "replica": replica})
    refused = raw_request(emu, "GET", DOC, headers=token, url=ro)
    assert (refused.status, refused.headers["x-ms-substatus"]) == (404, "1002")
    assert raw_request(emu, "GET", DOC, headers=token, url=emu.region_endpoints[EAST]).status == 200
    control_json(emu, "POST", "/faults", {"type": "replica_crash", "region": EAST, "replica": 3})
    eventual = raw_request(emu, "GET", DOC, headers={**PK, "x-ms-consistency-level": "Eventual"}, url=ro)
    assert eventual.status == 503 and "never reads from the primary" in eventual.message


def test_opened_at_runtime_from_the_control_port_and_cli(regionlab, capsys):
    emu = regionlab
    assert emu.read_only_endpoints == {}
    out = control_json(emu, "POST", "/regions/West%20US/read-only-endpoint", {"port": 0})
    assert out["region"] == "West US" and emu.read_only_endpoints == {"West US": out["read_only_endpoint"]}
    assert raw_request(emu, "GET", "/", url=out["read_only_endpoint"]).status == 200
    assert cli.main(["region", "read-only-endpoint", EAST, "--control", emu.control_endpoint]) == 0
    assert json.loads(capsys.readouterr().out)["read_only_endpoint"] == emu.read_only_endpoints[EAST]
    with pytest.raises(ControlError) as e:
        control_json(emu, "POST", "/regions/Mars/read-only-endpoint", {})
    assert e.value.status == 404
