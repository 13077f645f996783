"""Proves the bundled client's gateway transport speaks TLS to an --https emulator: with
`connection_verify` naming the emulator's certificate it discovers the account and does CRUD and
a query over verified TLS, reusing one connection per endpoint; with the default (the system
CAs, which do not hold the emulator's self-made CA) the connection is refused for the
certificate, as a `connect` error that names it; `connection_verify=False` skips the check.
Real emulator process, real sockets."""
import pytest

from regionlab.client import CosmosClient, CosmosHttpResponseError, PartitionKey
from regionlab.emulator.testing import running_emulator

HOST = "127.0.0.2"


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    with running_emulator(https=True, cert_dir=str(tmp_path_factory.mktemp("certs")), host=HOST) as e:
        yield e


def test_verified_tls_with_the_emulators_certificate(emu):
    assert emu.endpoint.startswith("https://")
    with CosmosClient(emu.endpoint, credential=emu.key, connection_verify=emu.certificate) as client:
        c = client.create_database("tls").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "1", "pk": "p", "n": 1})
        c.upsert_item({"id": "1", "pk": "p", "n": 2})
        item = c.read_item("1", partition_key="p")
        found = list(c.query_items("SELECT * FROM c WHERE c.n = 2", partition_key="p"))
        sizes = {e: p.size for e, p in client._inner._pipeline.transport.pools.items()}
    assert item["n"] == 2 and [f["id"] for f in found] == ["1"]
    regional = [n for e, n in sizes.items() if e.rstrip("/") != emu.endpoint.rstrip("/")]
    assert regional and all(n == 1 for n in regional)      # sequential requests: one kept-alive connection


def test_the_system_cas_refuse_the_emulators_certificate(emu):
    with pytest.raises(CosmosHttpResponseError) as e:
        CosmosClient(emu.endpoint, credential=emu.key)
    assert e.value.status_code == 503 and "account discovery" in e.value.message
    assert "certificate verify failed" in e.value.message


def test_verification_can_be_switched_off(emu):
    with CosmosClient(emu.endpoint, credential=emu.key, connection_verify=False) as client:
        assert "tls" in [r["id"] for r in client.list_databases()]


def test_a_missing_ca_file_is_a_clear_error(emu, tmp_path):
    with pytest.raises(ValueError) as e:
        CosmosClient(emu.endpoint, credential=emu.key, connection_verify=str(tmp_path / "nope.pem"))
    assert "no CA file or directory" in str(e.value)
