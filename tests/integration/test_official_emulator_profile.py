"""Proves `--profile official-emulator` looks like the official Azure Cosmos DB emulator to the
real azure-cosmos SDK: built from the emulator's connection string it discovers one region,
"South Central US", whose endpoint is the account's own https:// URL; the account document has
the official shape (id "localhost"); a 30,000 RU/s container gets 5 ranges at
i × floor(2^128 / 5); RU/s are not enforced unless --enable-rate-limiting; a fault injected
through the control port reaches the SDK, and the dashboard serves. One test runs the CLI in a
fresh network namespace (`unshare -n`) on the fixed ports: the SDK on
https://localhost:8081/ with the well-known key, the certificate downloaded from
/_explorer/emulator.pem and verified against, the control port on 7081, nothing on 8082-8090.
Real processes, sockets and SDK; no sleeps."""
import json
import ssl
import subprocess
import sys
import textwrap
import urllib.request

import pytest
from azure.cosmos import CosmosClient, PartitionKey, documents
from azure.cosmos.exceptions import CosmosHttpResponseError

from regionlab.emulator import defaults
from regionlab.emulator.testing import running_emulator
from sdk_harness import signed_headers
from test_cli import READY_TIMEOUT_S, _clean_env

REGION = "South Central US"
KEY = defaults.EMULATOR_KEY
BIG = "x" * (100 * 1024)                 # a ~100 KB item costs ~50 RU to write
WRITES = 60                              # 3,000 RU: past a 400 RU/s budget unless they take 7.5 s
NAMESPACE_TIMEOUT_S = READY_TIMEOUT_S + 60


@pytest.fixture
def official(tmp_path):
    with running_emulator(profile="official-emulator", cert_dir=str(tmp_path / "certs")) as emu:
        yield emu


def sdk(emu, **kwargs) -> CosmosClient:
    """The SDK as a team's CI builds it for the official emulator: a connection string with the
    well-known key, on localhost (the SDK skips certificate checks for it by itself)."""
    endpoint = emu.endpoint.replace("127.0.0.1", "localhost")
    return CosmosClient.from_connection_string(f"AccountEndpoint={endpoint};AccountKey={KEY};", **kwargs)


def no_retry_sdk(emu) -> CosmosClient:
    policy = documents.ConnectionPolicy()
    policy.RetryOptions = documents.RetryOptions(max_retry_attempt_count=0)
    return sdk(emu, connection_policy=policy)


def control(emu, path: str, accept: str = "application/json"):
    req = urllib.request.Request(emu.control_endpoint.rstrip("/") + path, headers={"Accept": accept})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return resp.status, resp.headers.get("Content-Type", ""), resp.read()


def test_the_sdk_discovers_one_region_on_the_accounts_own_url(official):
    assert official.endpoint.startswith("https://127.0.0.1:")
    with sdk(official) as client:
        account = client.get_database_account()
        assert [loc["name"] for loc in account.WritableLocations] == [REGION]
        assert account.WritableLocations == account.ReadableLocations
        assert account.WritableLocations[0]["databaseAccountEndpoint"] == official.endpoint
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "1", "pk": "a"})
        assert c.read_item("1", partition_key="a")["pk"] == "a"
        routing = client.client_connection._global_endpoint_manager.location_cache
        assert routing.get_write_regional_routing_context() == official.endpoint
        assert routing.get_read_regional_routing_context() == official.endpoint
    assert insecure_get(official.endpoint + "_explorer/emulator.pem").startswith(b"-----BEGIN CERTIFICATE-----")


def insecure_get(url: str, headers: dict | None = None) -> bytes:
    """GET over TLS without checking the certificate, as `curl -k` fetches the official one."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), context=ctx, timeout=5) as r:
        return r.read()


def test_the_account_document_has_the_official_shape(official):
    raw = json.loads(insecure_get(official.endpoint, signed_headers(KEY, "GET", "/")))
    assert raw["id"] == "localhost"
    assert raw["enableMultipleWriteLocations"] is False
    assert raw["userConsistencyPolicy"]["defaultConsistencyLevel"] == "Session"
    for name in ("_self", "_rid", "_dbs", "media", "addresses", "userReplicationPolicy",
                 "systemReplicationPolicy", "readPolicy", "queryEngineConfiguration"):
        assert name in raw
    assert raw["writableLocations"] == raw["readableLocations"] == \
        [{"name": REGION, "databaseAccountEndpoint": official.endpoint}]


def test_a_30000_rus_container_has_five_ranges_where_the_official_emulator_cuts_them(official):
    with sdk(official) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"), offer_throughput=30000)
        ranges = list(client.client_connection._ReadPartitionKeyRanges(c.container_link))
    bounds = [(r["minInclusive"], r["maxExclusive"]) for r in ranges]
    cuts = ["", "3" * 32, "6" * 32, "9" * 32, "C" * 32, "FF"]
    assert bounds == list(zip(cuts[:-1], cuts[1:]))


def _write_until_throttled(client) -> int | None:
    """How many 100 KB writes to a 400 RU/s container went through before the first 429, or
    None if all WRITES did."""
    c = client.create_database("db").create_container("c", PartitionKey(path="/pk"), offer_throughput=400)
    c.create_item({"id": "warm", "pk": "p"})
    for i in range(WRITES):
        try:
            c.create_item({"id": str(i), "pk": "p", "big": BIG})
        except CosmosHttpResponseError as e:
            assert e.status_code == 429
            return i
    return None


def test_ru_limits_are_off_unless_rate_limiting_is_enabled(official, tmp_path):
    with no_retry_sdk(official) as client:
        assert _write_until_throttled(client) is None
    with running_emulator(profile="official-emulator", cert_dir=str(tmp_path / "certs"),
                          enable_rate_limiting=True) as limited, no_retry_sdk(limited) as client:
        assert _write_until_throttled(client) is not None


def test_faults_and_the_dashboard_work_in_the_profile(official):
    with no_retry_sdk(official) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "1", "pk": "a"})
        with official.faults.throttle_storm(REGION):
            with pytest.raises(CosmosHttpResponseError) as e:
                c.read_item("1", partition_key="a")
            assert (e.value.status_code, e.value.sub_status) == (429, 3200)
        assert c.read_item("1", partition_key="a")["id"] == "1"
    status, kind, page = control(official, "/", accept="text/html")
    assert status == 200 and kind.startswith("text/html") and b"<html" in page.lower()


# Runs inside `unshare -n`: a network namespace of its own, so the fixed ports are free.
NAMESPACE_DRIVER = textwrap.dedent('''
    import json, os, socket, ssl, subprocess, sys, urllib.request
    from azure.cosmos import CosmosClient, PartitionKey
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    server = subprocess.Popen([sys.executable, "-m", "regionlab.emulator"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
    out = {}
    try:
        out["ready"] = json.loads(server.stdout.readline())
        insecure = ssl.create_default_context()
        insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
        url = "https://localhost:8081/_explorer/emulator.pem"
        pem = urllib.request.urlopen(url, context=insecure, timeout=10).read()
        with open("served.pem", "wb") as f:
            f.write(pem)
        trusted = ssl.create_default_context(cafile="served.pem")    # verifies chain and host name
        out["verified"] = urllib.request.urlopen(url, context=trusted, timeout=10).read() == pem
        client = CosmosClient.from_connection_string("AccountEndpoint=https://localhost:8081/;AccountKey=%s;" % KEY)
        account = client.get_database_account()
        out["writable"] = account.WritableLocations
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "1", "pk": "a"})
        out["read"] = c.read_item("1", partition_key="a")["id"]
        out["health"] = urllib.request.urlopen("http://127.0.0.1:7081/health", timeout=10).status
        listening = []
        for port in range(8082, 8091):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    listening.append(port)
        out["listening_8082_8090"] = listening
    finally:
        server.terminate()
        server.wait(30)
    print(json.dumps(out))
''')


def test_the_cli_serves_the_official_emulators_fixed_ports(tmp_path):
    env = _clean_env(REGIONLAB_PROFILE="official-emulator", REGIONLAB_CERT_DIR=str(tmp_path / "certs"))
    code = f"KEY = {KEY!r}\n" + NAMESPACE_DRIVER
    run = subprocess.run(["unshare", "-n", sys.executable, "-c", code], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=NAMESPACE_TIMEOUT_S)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["ready"]["account_endpoint"] == "https://127.0.0.1:8081/"
    assert out["ready"]["control_endpoint"] == "http://127.0.0.1:7081/"
    assert out["ready"]["regions"] == [{"name": REGION, "endpoint": "https://127.0.0.1:8081/", "write": True}]
    assert out["verified"] is True
    assert out["writable"] == [{"name": REGION, "databaseAccountEndpoint": "https://127.0.0.1:8081/"}]
    assert out["read"] == "1" and out["health"] == 200
    assert out["listening_8082_8090"] == []
