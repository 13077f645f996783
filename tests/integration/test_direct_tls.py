"""Optional TLS on the direct ports: a node given a certificate (a throwaway self-signed one,
made here with the openssl command line) serves TLS and plain connections on the same port, the
handshake and requests work over TLS with a context that trusts only that certificate; a TLS
connection to a node without a certificate is refused with a TLS alert while plain connections
go on; a half pair or a bad PEM is refused at start-up. Real emulator, real sockets, real TLS."""
import asyncio
import ssl
import subprocess
import urllib.request

import pytest

from regionlab.client.protocol import direct as D
from direct_client import Connection, feed, item_body, target
from regionlab.emulator.config import ConfigError
from regionlab.emulator.testing import make_config, running_emulator
from test_direct import setup

OPENSSL_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def cert_pair(tmp_path_factory) -> tuple[str, str]:
    d = tmp_path_factory.mktemp("tls")
    cert, key = str(d / "cert.pem"), str(d / "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=OPENSSL_TIMEOUT_S)
    return cert, key


def trusting(cert: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=cert)       # trusts this certificate only; checks the host
    return ctx


def test_a_node_with_a_certificate_serves_tls_and_plain_on_the_same_port(cert_pair):
    cert, key = cert_pair
    with running_emulator(direct_tls_cert=cert, direct_tls_key=key) as emu:
        setup(emu)
        entry = feed(emu)["0"]["primary"]
        host, port, replica = target(entry)

        async def main():
            tls = await Connection.open(host, port, emu.key, tls=trusting(cert))
            assert tls.writer.get_extra_info("ssl_object").version() in ("TLSv1.2", "TLSv1.3")
            assert tls.challenge["version"] == 2
            w = await tls.request("upsert", replica, pk='["p"]', body=b'{"id":"t","pk":"p","v":1}')
            assert w["status"] == 201
            r = await tls.request("read", replica, item="t", pk='["p"]')
            assert r["status"] == 200 and item_body(r)["v"] == 1
            plain = await Connection.open(host, port, emu.key)        # the same port, no TLS
            r2 = await plain.request("read", replica, item="t", pk='["p"]')
            assert r2["status"] == 200 and item_body(r2) == item_body(r)
            many = await asyncio.gather(*(tls.request("read", replica, item="a", pk='["p"]') for _ in range(50)))
            assert {m["status"] for m in many} == {200}              # multiplexed over TLS
            await tls.close()
            assert tls.closed_with == {"t": "bye"}
            await plain.close()
            # a client that does not trust the certificate fails its own check; the node serves on
            with pytest.raises(ssl.SSLCertVerificationError):
                await Connection.open(host, port, emu.key, tls=ssl.create_default_context())
            again = await Connection.open(host, port, emu.key, tls=trusting(cert))
            assert (await again.request("read", replica, item="t", pk='["p"]'))["status"] == 200
            await again.close()
        asyncio.run(main())


def test_tls_to_a_node_without_a_certificate_is_refused_with_an_alert(regionlab, cert_pair):
    setup(regionlab)
    host, port, replica = target(feed(regionlab)["0"]["primary"])

    async def main():
        with pytest.raises(ssl.SSLError, match="HANDSHAKE_FAILURE|handshake failure"):
            await Connection.open(host, port, regionlab.key, tls=trusting(cert_pair[0]))
        plain = await Connection.open(host, port, regionlab.key)
        assert (await plain.request("read", replica, item="a", pk='["p"]'))["status"] == 200
        await plain.close()
    asyncio.run(main())


def test_a_half_certificate_pair_or_a_bad_pem_is_refused_at_start(cert_pair, tmp_path):
    cert, key = cert_pair
    with pytest.raises(ConfigError, match="come together"):
        make_config(direct_tls_cert=cert)
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate")
    with pytest.raises(ConfigError, match="cannot load the direct TLS certificate"):
        make_config(direct_tls_cert=str(bad), direct_tls_key=key)
    with pytest.raises(ConfigError, match="readable PEM file"):
        make_config(direct_tls_cert=str(tmp_path / "missing.pem"), direct_tls_key=key)


def test_with_https_the_nodes_serve_tls_with_the_gateways_generated_certificate(tmp_path):
    """--https alone: the direct ports offer TLS with the certificate the gateway generated, so a
    client trusting the downloadable emulator.pem reaches replicas over TLS too."""
    with running_emulator(https=True, cert_dir=str(tmp_path)) as emu:
        trust = emu.emulator.certificate.trust_file
        setup(emu)
        # The address feed is read over the gateway's HTTPS, trusting the same emulator.pem.
        urllib.request.install_opener(urllib.request.build_opener(urllib.request.HTTPSHandler(context=trusting(trust))))
        try:
            host, port, replica = target(feed(emu)["0"]["primary"])
        finally:
            urllib.request.install_opener(urllib.request.build_opener())

        async def main():
            tls = await Connection.open(host, port, emu.key, tls=trusting(trust))
            assert tls.writer.get_extra_info("ssl_object").version() in ("TLSv1.2", "TLSv1.3")
            w = await tls.request("upsert", replica, pk='["p"]', body=b'{"id":"h","pk":"p"}')
            assert w["status"] == 201
            await tls.close()
        asyncio.run(main())
