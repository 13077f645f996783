"""Helpers of the control-port tests: one raw HTTP request with exactly the headers given
(http.client adds nothing but Host and Content-Length), the `regionlab` CLI run against an
emulator, a snapshot of every piece of state the control port can change, and the mutating
requests, one per route and fault type, each valid."""
import http.client
import json
import urllib.parse

from regionlab.emulator import cli


PK_DEF = {"paths": ["/pk"], "kind": "Hash", "version": 2}
HTTP_TIMEOUT_S = 60.0
JSON = {"Content-Type": "application/json"}


def request(emu, method: str, path: str, body=None, headers=None, raw: bytes | None = None):
    """(status, parsed JSON reply or the text, reply headers) of one request to the control port.
    body is sent as JSON; raw as given; headers exactly as given (a 'Host' key replaces the real one)."""
    port = urllib.parse.urlsplit(emu.control_endpoint).port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=HTTP_TIMEOUT_S)
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    try:
        conn.request(method, path, body=data, headers=dict(headers or {}))
        reply = conn.getresponse()
        text = reply.read()
    finally:
        conn.close()
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = text.decode(errors="replace")
    return reply.status, parsed, reply.headers


def regionlab(capsys, emu, *argv):
    """(exit code, parsed stdout or None, stderr) of `regionlab *argv --control <emu>`, run
    in-process through the CLI's entry point."""
    rc = cli.main([*argv, "--control", emu.control_endpoint])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if out.strip() else None), err


def ok(emu, method: str, path: str, body=None, headers=None):
    """The JSON reply of a request that must succeed (2xx), sent as JSON with the token if any."""
    h = dict(JSON)
    if getattr(emu, "control_token", None):
        h["Authorization"] = f"Bearer {emu.control_token}"
    h.update(headers or {})
    status, reply, _ = request(emu, method, path, body, h)
    assert 200 <= status < 300, (method, path, status, reply)
    return reply


def snapshot(emu) -> dict:
    """Everything a mutating control request can change, read through the control port itself
    (GET /topology has regions, links, faults, failovers, partitions and throttling)."""
    return {path: ok(emu, "GET", path) for path in ("/topology", "/faults", "/failovers", "/lost-writes",
                                                    "/throttle", "/health")}


def seed(emu) -> None:
    """A database and container, a throttle storm in East US 2 and an active fault (id 1), so that
    every DELETE route has something to delete. No items: replication in flight would change the
    snapshot by itself."""
    emu.call(lambda a: a.create_container(a.create_database({"id": "db"}), {"id": "c", "partitionKey": PK_DEF}))
    ok(emu, "PUT", "/throttle/storms/East%20US%202", {"share": 0.25})
    ok(emu, "POST", "/faults", {"type": "link_lag", "from": "East US", "to": "West US", "lag_ms": 900})


FAULTS = {
    "region_outage": {"type": "region_outage", "region": "West US"},
    "link_cut": {"type": "link_cut", "from": "East US", "to": "East US 2"},
    "link_lag": {"type": "link_lag", "from": "East US", "to": "East US 2", "lag_ms": 500},
    "primary_crash": {"type": "primary_crash", "region": "East US 2"},
    "replica_crash": {"type": "replica_crash", "region": "West US", "replica": 2},
    "replica_slow": {"type": "replica_slow", "region": "West US", "replica": 1, "delay_ms": 200},
    "throttle_storm": {"type": "throttle_storm", "region": "West US", "share": 0.5},
}
# name -> (method, path, a valid body, an invalid body): each valid one changes the snapshot.
MUTATIONS = {
    "region add": ("POST", "/regions", {"name": "North Europe", "port": 0}, {"name": "North Europe", "port": True}),
    "region remove": ("DELETE", "/regions/West%20US", None, None),
    "failover graceful": ("POST", "/failover", {"region": "East US 2", "kind": "graceful"},
                          {"region": "East US 2", "kind": "sideways"}),
    "failover forced": ("POST", "/failover", {"region": "West US", "kind": "forced"},
                        {"region": "Nowhere", "kind": "forced"}),
    **{f"fault {kind}": ("POST", "/faults", spec, dict(spec, duration_ms=True)) for kind, spec in FAULTS.items()},
    "fault heal": ("DELETE", "/faults/1", None, None),
    "throttle knobs": ("PUT", "/throttle", {"burst": True}, {"burst": 1}),
    "throttle container": ("PUT", "/throttle/containers/db/c", {"ru_per_s": 1000}, {"ru_per_s": 10}),
    "throttle database": ("PUT", "/throttle/databases/db", {"ru_per_s": 1000}, {"ru_per_s": True}),
    "storm start": ("PUT", "/throttle/storms/West%20US", {"share": 0.5}, {"share": 2}),
    "storm end": ("DELETE", "/throttle/storms/East%20US%202", None, None),
}
# An invalid variant of each DELETE route (it has no body to get wrong): the target is refused.
INVALID_DELETES = {"region remove": "/regions/East%20US", "fault heal": "/faults/999",
                   "storm end": "/throttle/storms/West%20US"}
