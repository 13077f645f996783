"""--https serves the official SDKs over TLS with a certificate they verify: the Python SDK (sync
and aio) does CRUD, queries and a read in another region with `connection_verify` pointing at
the generated certificate, and fails to connect when it trusts something else; a plain-HTTP
request on an HTTPS port gets a 400 naming the https:// URL; the certificate is downloadable,
reused across starts, reissued (same CA) when the host names change, regenerated when its
files are garbage; `--cert/--cert-key` serve the user's own; the CLI's ready line names the
certificate. Real sockets and the real SDK throughout; the emulator listens on 127.0.0.2
because the SDK skips certificate checks by itself for `localhost` and `127.0.0.1`.
"""
import asyncio
import datetime
import http.client
import ipaddress
import json
import socket
import ssl
import subprocess
import sys

import aiohttp
import pytest
from azure.core.exceptions import ServiceRequestError
from azure.cosmos import CosmosClient, PartitionKey, SSLConfiguration
from azure.core.pipeline.transport import AioHttpTransport
from azure.cosmos.aio import CosmosClient as AioCosmosClient
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from regionlab.emulator.config import ConfigError
from regionlab.emulator.runtime import certificate
from regionlab.emulator.testing import running_emulator
from sdk_harness import CLIENT_DEFAULTS, heal_fault, host_port, inject_fault, no_lag, read_until_eof
from test_cli import _clean_env, spawn

HOST = "127.0.0.2"          # not one of the names the SDK exempts from certificate checks
EAST, EAST2, WEST = "East US", "East US 2", "West US"
NO_LAG = no_lag((EAST, EAST2, WEST))


@pytest.fixture(scope="module")
def cert_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def emu(cert_dir):
    with running_emulator(https=True, cert_dir=cert_dir, host=HOST, partitions=2, lag_ms=NO_LAG) as e:
        yield e


def verified_client(emu, cafile, **kwargs) -> CosmosClient:
    # 4.17.1 applies a connection_verify path only together with an ssl_config; alone, the
    # path only switches verification on, against the system CAs (docs/https.md).
    return CosmosClient(emu.endpoint, emu.key, connection_verify=cafile, ssl_config=SSLConfiguration(),
                        **dict(CLIENT_DEFAULTS, **kwargs))


def _served(emu, region: str, method: str, kind: str, status: int) -> int:
    return emu.emulator.services[region].requests_served[(method, kind, status, 0)]


def test_endpoints_are_https_and_the_control_port_stays_plain(emu):
    assert emu.endpoint.startswith(f"https://{HOST}:")
    assert all(url.startswith("https://") for url in emu.region_endpoints.values())
    assert emu.control_endpoint.startswith("http://")
    info = emu.emulator.ready_info()
    assert info["https"] is True and info["certificate"] == emu.certificate
    assert emu.certificate.endswith("/emulator.pem")
    host, port = host_port(emu.control_endpoint)
    conn = http.client.HTTPConnection(host, port, timeout=5)
    conn.request("GET", "/health")
    assert conn.getresponse().status == 200


def test_sync_sdk_crud_query_and_a_read_in_another_region_over_verified_tls(emu):
    with verified_client(emu, emu.certificate) as client:
        db = client.create_database("tlsdb")
        c = db.create_container("items", PartitionKey(path="/pk"))
        for i in range(6):
            c.create_item({"id": f"i{i}", "pk": f"p{i % 3}", "n": i})
        c.replace_item("i0", {"id": "i0", "pk": "p0", "n": 10})
        c.delete_item("i5", partition_key="p2")
        assert c.read_item("i0", partition_key="p0")["n"] == 10
        rows = list(c.query_items("SELECT VALUE c.n FROM c ORDER BY c.n", enable_cross_partition_query=True))
        assert rows == [1, 2, 3, 4, 10]
    before = _served(emu, WEST, "GET", "docs", 200)
    with verified_client(emu, emu.certificate, preferred_locations=[WEST]) as reader:
        got = reader.get_database_client("tlsdb").get_container_client("items").read_item("i1", partition_key="p1")
    assert got["n"] == 1
    assert _served(emu, WEST, "GET", "docs", 200) == before + 1


def test_aio_sdk_over_verified_tls(emu):
    # The aio client of 4.17.1 cannot take a CA file through its keywords (with ssl_config it
    # loads an empty client certificate and fails), so it gets a transport that trusts the file.
    async def run():
        ctx = ssl.create_default_context(cafile=emu.certificate)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session:
            transport = AioHttpTransport(session=session, session_owner=False)
            async with AioCosmosClient(emu.endpoint, emu.key, transport=transport, **CLIENT_DEFAULTS) as client:
                db = await client.create_database_if_not_exists("tlsaio")
                c = await db.create_container_if_not_exists("items", PartitionKey(path="/pk"))
                await c.upsert_item({"id": "a", "pk": "x", "v": 1})
                read = await c.read_item("a", partition_key="x")
                rows = [r async for r in c.query_items("SELECT VALUE COUNT(1) FROM c")]
                return read["v"], rows
    assert asyncio.run(run()) == (1, [1])


def test_a_client_trusting_another_ca_cannot_connect(emu, tmp_path):
    other = tmp_path / "other"
    foreign = certificate.ensure(str(other), ["localhost"])
    with pytest.raises(ServiceRequestError, match="CERTIFICATE_VERIFY_FAILED"):
        verified_client(emu, foreign.trust_file, retry_total=0)


def test_plain_http_on_an_https_port_gets_a_400_naming_the_https_url(emu):
    host, port = host_port(emu.endpoint)
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(b"GET /dbs HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        reply = read_until_eof(sock)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    message = json.loads(body)["message"]
    assert f"This port speaks HTTPS: use https://{HOST}:{port}/" in message
    # ... and the port keeps serving TLS clients
    ctx = ssl.create_default_context(cafile=emu.certificate)
    conn = http.client.HTTPSConnection(host, port, context=ctx, timeout=5)
    conn.request("GET", "/_explorer/emulator.pem")
    assert conn.getresponse().status == 200


def test_the_certificate_is_downloadable_and_names_every_host(emu):
    host, port = host_port(emu.region_endpoints[EAST2])
    conn = http.client.HTTPSConnection(host, port, context=ssl.create_default_context(cafile=emu.certificate),
                                       timeout=5)
    conn.request("GET", "/_explorer/emulator.pem")
    resp = conn.getresponse()
    pem = resp.read()
    assert resp.status == 200 and resp.getheader("content-type") == "application/x-pem-file"
    assert pem == open(emu.certificate, "rb").read()
    served = x509.load_pem_x509_certificate(open(emu.emulator.config.tls_cert_file, "rb").read())
    san = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"localhost", socket.gethostname().lower()} <= set(san.get_values_for_type(x509.DNSName))
    assert {ipaddress.ip_address(a) for a in ("127.0.0.1", "::1", HOST)} <= set(
        san.get_values_for_type(x509.IPAddress))


def test_plain_http_server_has_no_certificate_to_download():
    with running_emulator() as plain:
        host, port = host_port(plain.endpoint)
        conn = http.client.HTTPConnection(host, port, timeout=5)
        conn.request("GET", "/_explorer/emulator.pem")
        resp = conn.getresponse()
        assert resp.status == 404 and "--https" in json.loads(resp.read())["message"]
        assert plain.certificate is None


# ---- the certificate directory across starts ------------------------------------------------
def _files(d) -> dict:
    return {name: (d / name).read_bytes() for name in (certificate.TRUST_FILE, certificate.SERVER_CERT_FILE,
                                                       certificate.SERVER_KEY_FILE, certificate.CA_KEY_FILE)}


def test_a_restart_reuses_the_certificate_and_new_host_names_reissue_only_the_server_one(tmp_path):
    with running_emulator(https=True, cert_dir=str(tmp_path)):
        pass
    first = _files(tmp_path)
    with running_emulator(https=True, cert_dir=str(tmp_path)):
        pass
    assert _files(tmp_path) == first, "a second start with the same names must reuse every file"
    with running_emulator(https=True, cert_dir=str(tmp_path), host=HOST) as e:
        again = _files(tmp_path)
        assert again[certificate.TRUST_FILE] == first[certificate.TRUST_FILE]     # clients keep trusting
        assert again[certificate.SERVER_CERT_FILE] != first[certificate.SERVER_CERT_FILE]
        served = x509.load_pem_x509_certificate(again[certificate.SERVER_CERT_FILE])
        names = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert ipaddress.ip_address(HOST) in names.get_values_for_type(x509.IPAddress)
        with verified_client(e, e.certificate) as client:     # the old CA verifies the new server cert
            client.create_database("reissued")
    assert (tmp_path / certificate.CA_KEY_FILE).stat().st_mode & 0o077 == 0
    assert (tmp_path / certificate.SERVER_KEY_FILE).stat().st_mode & 0o077 == 0


def test_garbage_certificate_files_are_regenerated(tmp_path):
    (tmp_path / certificate.TRUST_FILE).write_bytes(b"not a certificate")
    (tmp_path / certificate.CA_KEY_FILE).write_bytes(b"\x00garbage")
    (tmp_path / certificate.SERVER_CERT_FILE).write_bytes(b"")
    with running_emulator(https=True, cert_dir=str(tmp_path), host=HOST) as e:
        with verified_client(e, e.certificate) as client:
            client.create_database("regenerated")


def test_an_unwritable_cert_dir_fails_start_with_one_clear_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(certificate.CertificateError, match="cannot keep certificates in .*--cert-dir"):
        running_emulator(https=True, cert_dir=str(blocker / "certs")).__enter__()


# ---- bring your own ------------------------------------------------------------------------
def _own_certificate(tmp_path, name: str = HOST):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "my own")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(name))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "mine.pem", tmp_path / "mine.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_file), str(key_file)


def test_bring_your_own_certificate(tmp_path):
    cert_file, key_file = _own_certificate(tmp_path)
    with running_emulator(cert=cert_file, cert_key=key_file, host=HOST) as e:
        assert e.endpoint.startswith("https://") and e.certificate == cert_file
        with verified_client(e, cert_file) as client:
            client.create_database("mine")
        assert not (tmp_path / certificate.TRUST_FILE).exists()


def test_bring_your_own_mistakes_are_config_errors(tmp_path):
    cert_file, key_file = _own_certificate(tmp_path)
    other_cert, _ = _own_certificate(tmp_path / "..")
    with pytest.raises(ConfigError, match="--cert and --cert-key go together"):
        running_emulator(cert=cert_file).__enter__()
    with pytest.raises(ConfigError, match="no such file"):
        running_emulator(cert=str(tmp_path / "missing.pem"), cert_key=key_file).__enter__()
    with pytest.raises(ConfigError, match="cannot use certificate"):
        running_emulator(cert=other_cert, cert_key=key_file).__enter__()


# ---- the CLI ---------------------------------------------------------------------------------
def test_cli_https_ready_line_names_the_certificate(tmp_path, cert_dir):
    with spawn(tmp_path, "--https", "--cert-dir", cert_dir, "--port", "0", "--control-port", "0") as cli:
        info = cli.info
        assert info["https"] is True and info["certificate"] == f"{cert_dir}/emulator.pem"
        assert info["account_endpoint"].startswith("https://")
        assert info["control_endpoint"].startswith("http://")
        host, port = host_port(info["account_endpoint"])
        conn = http.client.HTTPSConnection(host, port, timeout=5,
                                           context=ssl.create_default_context(cafile=info["certificate"]))
        conn.request("GET", "/_explorer/emulator.pem")
        assert conn.getresponse().read() == open(info["certificate"], "rb").read()
        rc, _ = cli.terminate()
        assert rc == 0


def test_cli_unwritable_cert_dir_is_one_line_and_exit_1(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    done = subprocess.run([sys.executable, "-m", "regionlab.emulator", "--https", "--cert-dir", str(blocker / "certs"),
                           "--port", "0", "--control-port", "0"], capture_output=True, text=True,
                          env=_clean_env(), cwd=tmp_path, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    lines = [line for line in done.stderr.splitlines() if line.startswith("regionlab: error:")]
    assert len(lines) == 1 and "cannot keep certificates in" in lines[0] and "Traceback" not in done.stderr


# ---- region outages on HTTPS ports -------------------------------------------------------------
def _tls_get(emu, url: str) -> int:
    host, port = host_port(url)
    conn = http.client.HTTPSConnection(host, port, timeout=5,
                                       context=ssl.create_default_context(cafile=emu.certificate))
    try:
        conn.request("GET", "/_explorer/emulator.pem")
        return conn.getresponse().status
    finally:
        conn.close()


def test_refuse_outage_closes_the_https_port_and_heal_serves_tls_again(emu):
    url = emu.region_endpoints[WEST]
    fault = inject_fault(emu, type="region_outage", region=WEST, mode="refuse")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(host_port(url), timeout=5).close()
    heal_fault(emu, fault["id"])
    assert _tls_get(emu, url) == 200


def test_reset_outage_resets_tls_connections(emu):
    # asyncio's TLS stream reports the reset; a blocking ssl socket reads it as a plain EOF.
    url = emu.region_endpoints[EAST2]
    host, port = host_port(url)
    ctx = ssl.create_default_context(cafile=emu.certificate)
    request = b"GET /_explorer/emulator.pem HTTP/1.1\r\nHost: x\r\n\r\n"

    async def run():
        reader, writer = await asyncio.open_connection(host, port, ssl=ctx, server_hostname=host)
        writer.write(request)
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        fault = await asyncio.to_thread(inject_fault, emu, type="region_outage", region=EAST2, mode="reset")
        with pytest.raises(ConnectionResetError):
            while await reader.read(65536):
                pass
        writer.close()
        return fault
    fault = asyncio.run(run())
    heal_fault(emu, fault["id"])
    assert _tls_get(emu, url) == 200
