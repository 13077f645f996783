"""The four region_outage modes on the wire: what a client's socket meets in each (refused, reset,
503 with the service's body, or silence), that the global endpoint keeps answering discovery,
and that healing serves again on the same port and closes whatever a blackhole held. Driven with
raw sockets against a real emulator; the control port answers a fault only once it is in place,
so no test waits on timing."""
import socket
import time

import pytest

from sdk_harness import control, heal_fault, host_port, inject_fault, raw_request, raw_socket, read_until_eof, signed_headers

MODES = ("refuse", "reset", "unavailable", "blackhole")
REGION = "West US"


def _get_root(emu) -> bytes:
    """A signed `GET /` with keep-alive, as bytes."""
    head = "".join(f"{k}: {v}\r\n" for k, v in signed_headers(emu.key, "GET", "/").items())
    return f"GET / HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n{head}\r\n".encode()


def _status(sock) -> int:
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a reply head: {head!r}"
        head += chunk
    return int(head.split(b" ", 2)[1])


POLL_DEADLINE_S = 10.0


def _connections(emu, region: str) -> int:
    """Open connections of a region's endpoint, counted on the emulator's loop."""
    return emu.call(lambda account: len(emu.emulator._listeners[region][0].connections))


def _wait_connections(emu, region: str, n: int) -> None:
    """Until the endpoint holds n connections (the loop accepts a connection after the kernel
    completed it; a bounded poll, each poll a blocking call on the emulator's loop)."""
    deadline = time.monotonic() + POLL_DEADLINE_S
    while _connections(emu, region) != n:
        assert time.monotonic() < deadline, f"{region} holds {_connections(emu, region)} connections, not {n}"


def test_the_default_mode_is_unavailable_and_listed_with_the_fault(regionlab):
    fault = inject_fault(regionlab, type="region_outage", region=REGION)
    assert fault["mode"] == "unavailable"
    assert control(regionlab, "GET", "/faults")[1]["faults"][0]["mode"] == "unavailable"


@pytest.mark.parametrize("bad", ["off", 3, None, ["reset"]])
def test_an_unknown_mode_is_400_and_changes_nothing(regionlab, bad):
    status, reply = control(regionlab, "POST", "/faults", {"type": "region_outage", "region": REGION, "mode": bad})
    assert status == 400 and "refuse, reset, unavailable, blackhole" in reply["error"]
    assert control(regionlab, "GET", "/health")[1]["regions"][REGION] == "up"
    assert control(regionlab, "GET", "/faults")[1]["faults"] == []


def test_refuse_closes_the_port_and_heal_listens_again_on_it(regionlab):
    url = regionlab.region_endpoints[REGION]
    fault = inject_fault(regionlab, type="region_outage", region=REGION, mode="refuse")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(host_port(url), timeout=5).close()
    heal_fault(regionlab, fault["id"])
    assert raw_request(regionlab, "GET", "/", url=url).status == 200


def _bind_fails(port: int) -> bool:
    """Whether another program's bind of the port (as an outgoing connection's or a bind(0)'s
    port would take it) is refused."""
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return False
    except OSError:
        return True
    finally:
        s.close()


def test_refuse_keeps_the_gateway_and_direct_ports_from_anyone_else_until_heal(regionlab):
    """A closed port is free for the taking; on a busy machine something takes it and the heal
    cannot listen again. The outage holds each port (bound, never listening: still refused)."""
    url = regionlab.region_endpoints[REGION]
    port = host_port(url)[1]
    nodes = [n["port"] for n in regionlab.direct_nodes if n["region"] == REGION]
    fault = inject_fault(regionlab, type="region_outage", region=REGION, mode="refuse")
    for p in [port, *nodes]:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", p), timeout=5).close()
        assert _bind_fails(p), f"port {p} of an out region could be taken by anyone"
    heal_fault(regionlab, fault["id"])
    assert raw_request(regionlab, "GET", "/", url=url).status == 200
    for p in nodes:
        socket.create_connection(("127.0.0.1", p), timeout=5).close()
    assert _bind_fails(port)


def test_reset_accepts_then_resets_open_and_new_connections(regionlab):
    url = regionlab.region_endpoints[REGION]
    with raw_socket(regionlab, url) as old:
        old.sendall(_get_root(regionlab))
        assert _status(old) == 200
        fault = inject_fault(regionlab, type="region_outage", region=REGION, mode="reset")
        with pytest.raises(ConnectionResetError):
            old.recv(65536)                 # the open connection was reset, not closed cleanly
    with raw_socket(regionlab, url) as new:             # the port still accepts ...
        new.sendall(_get_root(regionlab))
        with pytest.raises(ConnectionResetError):       # ... and resets what it accepted
            read_until_eof(new)
    heal_fault(regionlab, fault["id"])
    assert raw_request(regionlab, "GET", "/", url=url).status == 200


def test_unavailable_answers_503_with_the_service_body_on_an_open_connection(regionlab):
    url = regionlab.region_endpoints[REGION]
    with raw_socket(regionlab, url) as sock:
        sock.sendall(_get_root(regionlab))
        assert _status(sock) == 200
        fault = inject_fault(regionlab, type="region_outage", region=REGION, mode="unavailable")
        reply = raw_request(regionlab, "GET", "/dbs", url=url)
        assert reply.status == 503 and reply.json()["code"] == "ServiceUnavailable"
        assert reply.headers["x-ms-substatus"] == "0" and REGION in reply.message
        sock.sendall(_get_root(regionlab))
        assert _status(sock) == 503         # the same connection, still open
        heal_fault(regionlab, fault["id"])
        sock.sendall(_get_root(regionlab))
        assert _status(sock) == 200         # and served again after the heal


def test_blackhole_reads_and_never_answers_and_heal_closes_what_it_held(regionlab):
    url = regionlab.region_endpoints[REGION]
    before = control(regionlab, "GET", "/topology")[1]["requests"].get(REGION, {})
    with raw_socket(regionlab, url) as old, raw_socket(regionlab, url) as busy:
        old.sendall(_get_root(regionlab))
        assert _status(old) == 200
        fault = inject_fault(regionlab, type="region_outage", region=REGION, mode="blackhole")
        with raw_socket(regionlab, url) as new:         # accepted during the outage
            old.sendall(_get_root(regionlab))
            new.sendall(_get_root(regionlab))
            busy.sendall(_get_root(regionlab)[:20])     # half a request
            _wait_connections(regionlab, REGION, 3)
            heal_fault(regionlab, fault["id"])
            # every held connection is closed without a byte of reply: whatever had been sent
            # before the close would be read first
            for sock in (old, new, busy):
                try:
                    assert read_until_eof(sock) == b""
                except ConnectionResetError:
                    pass
    after = control(regionlab, "GET", "/topology")[1]["requests"].get(REGION, {})
    assert {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)} == \
        {"GET account 200": 1}              # only the request answered before the outage
    _wait_connections(regionlab, REGION, 0)
    assert raw_request(regionlab, "GET", "/", url=url).status == 200      # served again, same port


def test_a_client_closing_a_blackholed_connection_frees_it(regionlab):
    url = regionlab.region_endpoints[REGION]
    inject_fault(regionlab, type="region_outage", region=REGION, mode="blackhole")
    with raw_socket(regionlab, url) as sock:
        sock.sendall(_get_root(regionlab))
        sock.shutdown(socket.SHUT_WR)
        assert read_until_eof(sock) == b""  # our half-close is answered by the server's close
    _wait_connections(regionlab, REGION, 0)


@pytest.mark.parametrize("mode", MODES)
def test_the_global_endpoint_keeps_answering_discovery_while_the_write_region_is_out(regionlab, mode):
    """The global URL is not a region (cosmos-wire §0.9): in every mode it answers `GET /`, so SDKs
    can re-read the account, and answers data requests 503 while the region it serves from is out."""
    inject_fault(regionlab, type="region_outage", region="East US", mode=mode)
    account = raw_request(regionlab, "GET", "/")
    assert account.status == 200 and account.json()["writableLocations"][0]["name"] == "East US"
    data = raw_request(regionlab, "GET", "/dbs")
    assert data.status == 503 and data.json()["code"] == "ServiceUnavailable"


def test_stopping_the_emulator_during_a_blackhole_closes_what_it_held():
    from regionlab.emulator.testing import running_emulator
    with running_emulator() as emu:
        url = emu.region_endpoints[REGION]
        inject_fault(emu, type="region_outage", region=REGION, mode="blackhole")
        sock = socket.create_connection(host_port(url), timeout=10)
        try:
            sock.sendall(_get_root(emu))
            _wait_connections(emu, REGION, 1)
            emu.stop()                      # returns once every endpoint is shut (bounded)
            try:
                assert read_until_eof(sock) == b""
            except ConnectionResetError:
                pass
        finally:
            sock.close()
