"""Proves the control port's former 500s answer cleanly now, against a real emulator
(running_emulator, raw http.client): healing — by id or by its duration — a fault whose region
was removed ends it with a note and logs no traceback; adding a region on a port in use is a 409
naming the port, with nothing half-added (GET /topology and the gateway's GET / keep answering);
bools are not integers; deeply nested bodies are a 400."""
import logging
import socket
import threading
import urllib.request

import pytest

from control_harness import JSON, ok, request, snapshot
from regionlab.emulator.testing import running_emulator

WAIT_S = 30.0


@pytest.fixture
def emu():
    with running_emulator(auth=False) as handle:
        yield handle


def _assert_serving(emu):
    """GET /topology answers, and the global endpoint's account document names every region."""
    topo = ok(emu, "GET", "/topology")
    with urllib.request.urlopen(emu.endpoint, timeout=WAIT_S) as reply:
        assert reply.status == 200
    return topo


@pytest.mark.parametrize("spec", [
    {"type": "region_outage", "region": "West US"},
    {"type": "link_cut", "from": "East US", "to": "West US"},
    {"type": "link_lag", "from": "West US", "to": "East US 2", "lag_ms": 300, "one_way": True},
    {"type": "primary_crash", "region": "West US"},
    {"type": "replica_slow", "region": "West US", "replica": 1, "delay_ms": 50},
    {"type": "throttle_storm", "region": "West US", "share": 0.5},
], ids=lambda s: s["type"])
def test_healing_a_fault_of_a_removed_region_ends_it_with_a_note(emu, spec, caplog):
    emu.call(lambda a: a.create_container(a.create_database({"id": "db"}),
                                          {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash"}}))
    fault = ok(emu, "POST", "/faults", spec)
    ok(emu, "DELETE", "/regions/West%20US")
    status, reply, _ = request(emu, "DELETE", f"/faults/{fault['id']}", headers=JSON)
    assert status == 200, reply
    assert reply["healed"]["id"] == fault["id"] and "'West US' was removed" in reply["healed"]["note"]
    assert ok(emu, "GET", "/faults") == {"faults": []}
    assert "West US" not in {r["name"] for r in _assert_serving(emu)["regions"]}
    assert ok(emu, "GET", "/throttle")["storms"] == []
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_fault_healed_by_its_duration_after_its_region_left_logs_nothing(emu, caplog):
    caplog.set_level(logging.WARNING)
    fault = ok(emu, "POST", "/faults", {"type": "region_outage", "region": "West US", "duration_ms": 200})
    ok(emu, "DELETE", "/regions/West%20US")
    due = threading.Event()
    # The core scheduler runs timers in due order: this one fires after the fault's expiry.
    emu.call(lambda a: a.scheduler.call_at(fault["started_ms"] + 201, due.set))
    assert due.wait(WAIT_S), "the scheduler stopped running timers"
    assert ok(emu, "GET", "/faults") == {"faults": []}
    _assert_serving(emu)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


def test_a_re_added_region_of_the_same_name_is_not_healed_by_an_old_fault(emu):
    fault = ok(emu, "POST", "/faults", {"type": "throttle_storm", "region": "West US", "share": 1})
    ok(emu, "DELETE", "/regions/West%20US")
    ok(emu, "POST", "/regions", {"name": "West US"})
    ok(emu, "PUT", "/throttle/storms/West%20US", {"share": 0.5})
    healed = ok(emu, "DELETE", f"/faults/{fault['id']}")["healed"]
    assert "note" in healed
    assert [s["share"] for s in ok(emu, "GET", "/throttle")["storms"]] == [0.5]     # the new storm stays


def _ports(emu) -> dict:
    t = emu.emulator.topology
    return {"global": t.global_port, "control": t.control_port, "region": t.region_ports["East US 2"]}


@pytest.mark.parametrize("owner", ["global", "control", "region", "outside", "down region"])
def test_adding_a_region_on_a_port_in_use_is_a_409_and_adds_nothing(emu, owner):
    outside = socket.socket()
    try:
        if owner == "outside":
            outside.bind(("127.0.0.1", 0))
            outside.listen(1)
            port = outside.getsockname()[1]
        elif owner == "down region":
            ok(emu, "POST", "/faults", {"type": "region_outage", "region": "West US", "mode": "refuse"})
            port = emu.emulator.topology.region_ports["West US"]   # closed now, but West US comes back to it
        else:
            port = _ports(emu)[owner]
        before = snapshot(emu)
        status, reply, _ = request(emu, "POST", "/regions", {"name": "North Europe", "port": port}, JSON)
        assert status == 409, reply
        assert str(port) in reply["error"] and "0 for any free one" in reply["error"]
        assert snapshot(emu) == before
        _assert_serving(emu)
    finally:
        outside.close()
    added = ok(emu, "POST", "/regions", {"name": "North Europe", "port": 0})      # the name is still free
    assert added["name"] == "North Europe"
    assert "North Europe" in {r["name"] for r in _assert_serving(emu)["regions"]}


@pytest.mark.parametrize("path,body", [
    ("/regions", {"name": "North Europe", "port": True}),
    ("/faults", {"type": "region_outage", "region": "West US", "duration_ms": True}),
    ("/faults", {"type": "replica_crash", "region": "West US", "replica": True}),
    ("/faults", {"type": "link_cut", "from": "East US", "to": "West US", "one_way": "yes"}),
    ("/faults", {"type": "link_lag", "from": "East US", "to": "West US", "lag_ms": 10 ** 30}),
    ("/faults", {"type": "throttle_storm", "region": "West US", "seed": {"a": 1}}),
    ("/faults", {"type": "throttle_storm", "region": "West US", "op": ["read"]}),
    ("/faults", {"type": "throttle_storm", "region": "West US", "share": 10 ** 400}),
    ("/failover", {"region": "East US 2", "wait": 1}),
    ("/regions", {"name": "North\nEurope"}),
    ("/regions", {"name": "x" * 65}),
], ids=str)
def test_wrongly_typed_fields_are_400(emu, path, body):
    before = snapshot(emu)
    status, reply, _ = request(emu, "POST", path, body, JSON)
    assert status == 400 and reply["error"], reply
    assert snapshot(emu) == before


@pytest.mark.parametrize("raw", [b'{"a":' * 5000 + b"1" + b"}" * 5000, b"[" * 200_000 + b"]" * 200_000,
                                 b'{"type": "region_outage", "region": "West US", "x": ' + b"[" * 40 + b"]" * 40 + b"}",
                                 b'{"share": 1e400}', b'{"share": NaN}', b'{"port": 1' + b"0" * 5000 + b"}"],
                         ids=["deep object", "deep array", "41 levels", "overflow", "nan", "huge int"])
def test_bodies_that_used_to_answer_500_are_400(emu, raw):
    before = snapshot(emu)
    for path in ("/faults", "/regions", "/failover"):
        status, reply, _ = request(emu, "POST", path, headers=JSON, raw=raw)
        assert status == 400 and reply["error"], (path, reply)
    status, reply, _ = request(emu, "PUT", "/throttle/storms/West%20US", headers=JSON, raw=raw)
    assert status == 400, reply
    assert snapshot(emu) == before


def test_a_fault_of_zero_duration_is_answered(emu):
    status, reply, _ = request(emu, "POST", "/faults", {"type": "region_outage", "region": "West US",
                                                        "duration_ms": 0}, JSON)
    assert status == 201 and reply["duration_ms"] == 0
    _assert_serving(emu)


def test_http11_without_host_is_a_400_and_no_traceback(emu, caplog):
    """aiohttp answers it 400 itself and logged the client's mistake at ERROR with a traceback."""
    caplog.set_level(logging.DEBUG, logger="regionlab")
    port = int(emu.control_endpoint.rsplit(":", 1)[1].rstrip("/"))
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n")
            head = s.recv(4096)
        assert head.startswith(b"HTTP/1.") and b" 400 " in head.split(b"\r\n", 1)[0], head
    _assert_serving(emu)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info], caplog.text
    assert "refused a malformed request: Missing 'Host'" in caplog.text


REAL_KEYS = {"region", "kind", "name", "share", "port"}


@pytest.mark.parametrize("method, path, body", [
    ("POST", "/failover", {"region": "East US 2", "kind": "graceful", "wiat": False}),
    ("POST", "/regions", {"name": "North Europe", "prot": 0}),
    ("PUT", "/throttle/storms/West%20US", {"share": 0.5, "operation": "read"}),
    ("POST", "/regions/West%20US/read-only-endpoint", {"port": 0, "tls": True}),
], ids=["failover", "region", "storm", "read-only-endpoint"])
def test_a_body_with_an_unknown_key_is_refused_and_changes_nothing(emu, method, path, body):
    before = snapshot(emu)
    status, reply, _ = request(emu, method, path, body, JSON)
    unknown = sorted(set(body) - REAL_KEYS)
    assert status == 400 and f"Unknown key(s) {unknown}" in reply["error"], (status, reply)
    assert snapshot(emu) == before          # /topology lists read-only endpoints too
    status, reply, _ = request(emu, method, path, {k: v for k, v in body.items() if k in REAL_KEYS}, JSON)
    assert status in (200, 201, 202), (status, reply)        # the control: without it, it acts
    assert snapshot(emu) != before
