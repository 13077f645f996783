"""The gateway's TLS certificate (--https): generated once per certificate directory and reused
across starts, or brought by the user (--cert FILE --cert-key FILE).

Theory of operation. A generated directory holds a small local certificate authority and one
server certificate it issued:

    emulator.pem     the CA certificate: what clients trust, once (served at
                     GET /_explorer/emulator.pem, named in the ready line)
    emulator-ca.key  its private key (mode 0600)
    server.pem       the server certificate, then the CA: the chain the gateway presents
    server.key       the server certificate's private key (mode 0600)

Why a CA and not one self-signed leaf: a client that trusts emulator.pem keeps trusting the
server when its names change (another --advertise-host, a new machine name), because only the
server certificate is reissued, by the same CA; and validators that refuse a CA certificate as
a server certificate, or a leaf as a trust anchor, accept the pair. The CA is self-signed and
kept until it nears its end; the server certificate is reissued when it does not name every
host this start needs, expires within RENEW_BEFORE, or was not issued by the CA on disk.
Unreadable or half-written files of ours are regenerated (with a warning): they were only ever
generated. Generation holds an exclusive lock on the directory, and every file is written to a
temporary name and renamed into place, so two servers starting at once on one directory end
up with one consistent set.

Keys are RSA 2048 with SHA-256 signatures, as the service's certificates are: every SDK's TLS
stack (.NET, Java, Node, Python, Go) accepts them. Server certificates last SERVER_VALIDITY,
within the 825 days Apple's platforms allow any TLS server certificate.
"""
import datetime
import fcntl
import ipaddress
import logging
import os
import socket
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("regionlab")

TRUST_FILE = "emulator.pem"
CA_KEY_FILE = "emulator-ca.key"
SERVER_CERT_FILE = "server.pem"
SERVER_KEY_FILE = "server.key"
LOCK_FILE = ".lock"
RSA_KEY_BITS = 2048
CA_VALIDITY = datetime.timedelta(days=3650)
SERVER_VALIDITY = datetime.timedelta(days=397)
RENEW_BEFORE = datetime.timedelta(days=30)
BACKDATE = datetime.timedelta(hours=1)         # tolerate a client clock slightly behind ours
CA_NAME = "regionlab local CA"
SERVER_NAME = "localhost"
ALWAYS_NAMED = ("localhost", "127.0.0.1", "::1")
# TLS handshakes the gateway's listeners allow (TLS 1.2 is the oldest the service accepts).
MINIMUM_TLS = ssl.TLSVersion.TLSv1_2


class CertificateError(Exception):
    """A certificate regionlab cannot serve with; str() is one line an operator can act on."""


@dataclass(frozen=True)
class Certificate:
    cert_file: str          # the chain the gateway presents
    key_file: str           # its private key
    trust_file: str         # what clients trust (the CA, or the user's own certificate)

    def trust_pem(self) -> bytes:
        return Path(self.trust_file).read_bytes()

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = MINIMUM_TLS
        ctx.set_alpn_protocols(["http/1.1"])
        try:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        except (ssl.SSLError, OSError) as e:
            raise CertificateError(f"cannot use certificate {self.cert_file} with key {self.key_file}: "
                                   f"{getattr(e, 'reason', None) or e}") from None
        return ctx


def default_dir(environ=None) -> str:
    """Where certificates are kept without --cert-dir: the per-user cache, so one trusted CA
    serves every start on this machine."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "regionlab", "certs")


def host_names(host: str, advertise_host: str | None) -> list[str]:
    """The names a server certificate must carry: loopback, this machine's name, the listen
    host and the advertised host (a wildcard listen address names no host)."""
    names = list(ALWAYS_NAMED)
    for name in (socket.gethostname(), host, advertise_host):
        if name and name not in ("0.0.0.0", "::") and name.lower() not in names:
            names.append(name.lower())
    return names


def bring_your_own(cert_file: str, key_file: str) -> Certificate:
    """The user's certificate, checked now: both files load and the key matches."""
    for path in (cert_file, key_file):
        if not os.path.isfile(path):
            raise CertificateError(f"{path}: no such file")
    cert = Certificate(os.path.abspath(cert_file), os.path.abspath(key_file), os.path.abspath(cert_file))
    cert.server_context()
    return cert


def ensure(directory: str, names: list[str]) -> Certificate:
    """The generated certificate of `directory` for `names`: reused when it serves them, the
    server certificate reissued when not, everything generated when there is no usable CA."""
    d = Path(directory)
    try:
        d.mkdir(parents=True, exist_ok=True)
        with open(d / LOCK_FILE, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            _ensure_locked(d, names)
    except OSError as e:
        raise CertificateError(f"cannot keep certificates in {directory}: {e.strerror or e}; pick a "
                               "writable directory with --cert-dir (or $REGIONLAB_CERT_DIR)") from None
    return Certificate(str(d / SERVER_CERT_FILE), str(d / SERVER_KEY_FILE), str(d / TRUST_FILE))


def _ensure_locked(d: Path, names: list[str]) -> None:
    from cryptography import x509
    now = datetime.datetime.now(datetime.timezone.utc)
    ca = _load_pair(d / TRUST_FILE, d / CA_KEY_FILE)
    if ca is not None and ca[0].not_valid_after_utc - now < RENEW_BEFORE:
        log.warning("the regionlab CA in %s expires soon; generating a new one: clients must trust the "
                    "new %s again", d, TRUST_FILE)
        ca = None
    if ca is None:
        if (d / TRUST_FILE).exists():
            log.warning("regenerating the regionlab CA in %s (its files were unusable); clients must trust "
                        "the new %s again", d, TRUST_FILE)
        ca = _new_ca(now)
        _write(d / CA_KEY_FILE, _key_pem(ca[1]), private=True)
        _write(d / TRUST_FILE, _cert_pem(ca[0]))
    server = _load_pair(d / SERVER_CERT_FILE, d / SERVER_KEY_FILE)
    if server is not None and _serves(server[0], ca[0], names, now, x509):
        return
    cert, key = _new_server(ca, names, now)
    _write(d / SERVER_KEY_FILE, _key_pem(key), private=True)
    _write(d / SERVER_CERT_FILE, _cert_pem(cert) + _cert_pem(ca[0]))
    log.info("issued a server certificate for %s in %s", ", ".join(names), d)


def _serves(cert, ca_cert, names: list[str], now, x509) -> bool:
    if cert.issuer != ca_cert.subject or cert.not_valid_after_utc - now < RENEW_BEFORE:
        return False
    try:
        ca_cert.public_key().verify(cert.signature, cert.tbs_certificate_bytes, _padding(),
                                    cert.signature_hash_algorithm)
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except Exception:           # a wrong signature or no SAN extension: reissue
        return False
    have = {n.lower() for n in san.get_values_for_type(x509.DNSName)}
    have |= {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
    return all(_canonical(n) in have for n in names)


def _canonical(name: str) -> str:
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name.lower()


def _padding():
    from cryptography.hazmat.primitives.asymmetric import padding
    return padding.PKCS1v15()


def _load_pair(cert_path: Path, key_path: Path):
    """(certificate, key) from two PEM files whose key matches, or None if either is missing or
    unusable."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return None
    if cert.public_key().public_numbers() != key.public_key().public_numbers():
        return None
    return cert, key


def _new_key():
    from cryptography.hazmat.primitives.asymmetric import rsa
    return rsa.generate_private_key(public_exponent=65537, key_size=RSA_KEY_BITS)


def _new_ca(now):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "regionlab")])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE).not_valid_after(now + CA_VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(ski, critical=False)
            .sign(key, hashes.SHA256()))
    return cert, key


def _new_server(ca, names: list[str], now):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    ca_cert, ca_key = ca
    key = _new_key()
    alt = []
    for n in names:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            alt.append(x509.DNSName(n))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SERVER_NAME)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE).not_valid_after(now + SERVER_VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True, key_cert_sign=False,
                                         crl_sign=False, content_commitment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert, key


def _cert_pem(cert) -> bytes:
    from cryptography.hazmat.primitives import serialization
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key) -> bytes:
    from cryptography.hazmat.primitives import serialization
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def _write(path: Path, data: bytes, private: bool = False) -> None:
    """Write whole or not at all: a temporary file in the same directory, then a rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o600 if private else 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
