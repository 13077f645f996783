"""--regional-hostnames: every region on the account's port, told apart by the Host header and
advertised under the names the official SDK computes (`localhost-eastus2`), proven with the
official azure-cosmos SDK matched by URL.

The SDK runs in a child process with a private mount namespace (`unshare -rm`) in which
/etc/hosts carries the regional names, as a user's /etc/hosts or a compose network's aliases
would (docs/regional-hostnames.md); the emulator runs in this process. Each child prints one
JSON line of what it saw: the URLs its requests went to (raw_response_hook) and what came back.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

from regionlab.emulator.gateway.hosts import regional_host
from regionlab.emulator.testing import running_emulator
from sdk_harness import no_lag

REGIONS = ["East US", "East US 2", "West US"]
CHILD_TIMEOUT_S = 120

PRELUDE = """
import json, os, sys, time, urllib.error, urllib.request
from azure.cosmos import CosmosClient, PartitionKey
from azure.cosmos.exceptions import CosmosHttpResponseError
URL, KEY, CONTROL = os.environ["URL"], os.environ["KEY"], os.environ["CONTROL"]
urls = []
def hook(response):
    urls.append(response.http_request.url.split("/")[2])     # host:port of each request
def control(method, path, body=None):
    req = urllib.request.Request(CONTROL.rstrip("/") + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read() or b"null")
def host(u):
    return u.split("/")[2].split(":")[0]
"""


@pytest.fixture(scope="module")
def emu():
    # No replication lag: a read in any region right after a write finds it (no polling).
    with running_emulator(regions=REGIONS, regional_hostnames=True, lag_ms=no_lag(REGIONS)) as e:
        yield e


def port_of(emu) -> str:
    return emu.endpoint.rstrip("/").rsplit(":", 1)[1]


def _hosts_file(tmp_path) -> str:
    """/etc/hosts with the regional names of the default account host on loopback."""
    path = tmp_path / "hosts"
    names = " ".join(regional_host("localhost", r) for r in REGIONS)
    with open("/etc/hosts") as f:
        path.write_text(f"127.0.0.1 {names}\n" + f.read())
    return str(path)


def run_sdk(emu, tmp_path, body: str) -> dict:
    """body's last line must print one JSON object; run it as the SDK's process would, in a
    mount namespace whose /etc/hosts names the regions."""
    if shutil.which("unshare") is None:
        pytest.fail("these tests need util-linux's `unshare` (apt-get install util-linux) to give the "
                    "SDK an /etc/hosts with the regional names")
    script = tmp_path / "child.py"
    script.write_text(PRELUDE + body)
    hosts = _hosts_file(tmp_path)
    env = dict(os.environ, URL=emu.endpoint, KEY=emu.key, CONTROL=emu.control_endpoint)
    done = subprocess.run(["unshare", "-rm", "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$1" "$2"',
                           hosts, sys.executable, str(script)],
                          env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_account_advertises_the_names_the_sdk_computes_all_on_its_one_port(emu):
    port = port_of(emu)
    assert emu.endpoint == f"http://localhost:{port}/"
    assert emu.region_endpoints == {"East US": f"http://localhost-eastus:{port}/",
                                    "East US 2": f"http://localhost-eastus2:{port}/",
                                    "West US": f"http://localhost-westus:{port}/"}


def test_the_sdk_routes_to_each_preferred_region_by_its_name(emu, tmp_path):
    seen = run_sdk(emu, tmp_path, """
client = CosmosClient(URL, KEY, preferred_locations=["West US", "East US 2"])
c = client.create_database_if_not_exists("hn").create_container_if_not_exists("c", PartitionKey("/pk"))
c.upsert_item({"id": "a", "pk": "a"})
got = c.read_item("a", "a", raw_response_hook=hook)
where = c.client_connection.last_response_headers.get("Content-Location", "")
urls_read = list(urls); urls.clear()
c.read_item("a", "a", raw_response_hook=hook, excluded_locations=["West US"])
print(json.dumps({"read": urls_read, "where": host(where), "excluded": urls}))
""")
    port = port_of(emu)
    assert seen["read"] == [f"localhost-westus:{port}"]
    assert seen["where"] == "localhost-westus"                 # served by West US, as it says
    assert seen["excluded"] == [f"localhost-eastus2:{port}"]   # West US excluded: the next preferred


def test_in_a_global_endpoint_outage_the_sdk_starts_from_the_regional_names(emu, tmp_path):
    seen = run_sdk(emu, tmp_path, """
fault = control("POST", "/faults", {"type": "global_endpoint_outage", "mode": "reset"})
try:
    out = {}
    try:
        urllib.request.urlopen(URL, timeout=5)
    except urllib.error.HTTPError as e:
        out["global"] = e.code                  # answered: no outage
    except OSError as e:
        out["global"] = repr(e)
    client = CosmosClient(URL, KEY, preferred_locations=["East US 2"], retry_total=0)
    try:
        client.create_database_if_not_exists("hn2")
        out["created"] = True
    except Exception as e:
        out["created"] = repr(e)[:300]
    client2 = CosmosClient(URL, KEY, preferred_locations=["East US 2"])
    db = client2.create_database_if_not_exists("hn3")
    cont = db.create_container_if_not_exists("c", PartitionKey("/pk"))
    cont.upsert_item({"id": "x", "pk": "x"}, raw_response_hook=hook)
    out["write"] = urls
finally:
    control("DELETE", "/faults/%d" % fault["id"])
print(json.dumps(out))
""")
    port = port_of(emu)
    assert "reset" in str(seen["global"]).lower(), seen      # the account's own name is out
    assert seen["created"] is True, seen
    assert seen["write"] == [f"localhost-eastus:{port}"]      # the write region, by its name


def test_a_region_outage_moves_the_sdks_reads_to_the_next_name(emu, tmp_path):
    seen = run_sdk(emu, tmp_path, """
client = CosmosClient(URL, KEY, preferred_locations=["East US 2", "West US"])
c = client.create_database_if_not_exists("hn").create_container_if_not_exists("c", PartitionKey("/pk"))
c.upsert_item({"id": "b", "pk": "b"})
fault = control("POST", "/faults", {"type": "region_outage", "region": "East US 2", "mode": "reset"})
try:
    got = c.read_item("b", "b", raw_response_hook=hook)
finally:
    control("DELETE", "/faults/%d" % fault["id"])
print(json.dumps({"urls": urls, "id": got["id"]}))
""")
    port = port_of(emu)
    assert seen["id"] == "b"
    assert seen["urls"][-1] == f"localhost-westus:{port}"


def test_hedged_reads_go_to_the_next_name_after_the_threshold(emu, tmp_path):
    seen = run_sdk(emu, tmp_path, """
client = CosmosClient(URL, KEY, preferred_locations=["East US 2", "West US"],
                      availability_strategy={"threshold_ms": 300, "threshold_steps_ms": 100})
c = client.create_database_if_not_exists("hn").create_container_if_not_exists("c", PartitionKey("/pk"))
c.upsert_item({"id": "h", "pk": "h"})
fault = control("POST", "/faults", {"type": "latency", "region": "East US 2", "delay_ms": 3000, "op": "read"})
try:
    t = time.monotonic()
    got = c.read_item("h", "h", raw_response_hook=hook)
    took = time.monotonic() - t
finally:
    control("DELETE", "/faults/%d" % fault["id"])
where = c.client_connection.last_response_headers.get("Content-Location", "")
print(json.dumps({"urls": urls, "took": took, "where": host(where)}))
""")
    port = port_of(emu)
    assert f"localhost-westus:{port}" in seen["urls"], seen
    # Answered by the hedge, long before East US 2's 3 s (a loaded 2-core machine's bound).
    assert seen["took"] < 2.5, seen


def test_a_global_endpoint_outage_on_its_own_port_leaves_the_region_ports_serving():
    with running_emulator(regions=REGIONS) as e:
        fault = e.control("POST", "/faults", {"type": "global_endpoint_outage", "mode": "unavailable"})
        try:
            assert _status(e.endpoint) == 503
            assert _status(e.region_endpoints["East US 2"]) == 401     # answered (unsigned)
        finally:
            e.control("DELETE", f"/faults/{fault['id']}")
        assert _status(e.endpoint) == 401
        fault = e.control("POST", "/faults", {"type": "global_endpoint_outage", "mode": "refuse"})
        try:
            with pytest.raises(ConnectionRefusedError):
                _status(e.endpoint)
            assert _status(e.region_endpoints["West US"]) == 401
        finally:
            e.control("DELETE", f"/faults/{fault['id']}")
        assert _status(e.endpoint) == 401


def _status(url: str) -> int:
    import http.client
    from urllib.parse import urlsplit
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    try:
        conn.request("GET", "/")
        return conn.getresponse().status
    finally:
        conn.close()
