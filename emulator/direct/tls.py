"""Optional TLS on the direct ports (docs/direct-protocol.md, "TLS").

Theory of operation: a node's port takes plain and TLS connections alike. The first byte a
client sends tells them apart: a TLS ClientHello begins with a handshake record (0x16), while a
plain connection begins with a frame's 4-byte length prefix, whose first byte is 0 for any
frame of at most FRAME_MAX_BYTES (8 MiB = 0x00800000), so no legal plain frame starts with
0x16. A node with a certificate (`--direct-tls-cert`/`--direct-tls-key`) then runs TLS in
memory (`TlsSession`: ssl.SSLObject over two MemoryBIOs): the ClientHello that was already read
is fed in like every later byte, which asyncio's `loop.start_tls` cannot do (it only wraps a
transport whose first bytes were not read yet). A node without one answers a TLS
handshake_failure alert and closes, so the client's TLS library reports the refusal.

The context is built from a certificate/key file pair (`server_context`), so whoever makes the
certificate (a file on disk, the gateway's generated self-signed one) hands the runtime files.
"""
import ssl

from ..core.limits import DIRECT_TLS_READ_CHUNK_BYTES

TLS_HANDSHAKE_RECORD = 0x16
# A fatal handshake_failure alert (TLS 1.0 record layer, as servers send before a version is agreed).
HANDSHAKE_FAILURE_ALERT = bytes((0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x28))


def server_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """A TLS server context for the direct ports, or ValueError saying what is wrong."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as e:
        raise ValueError(f"cannot load the direct TLS certificate {cert_file!r} with key {key_file!r}: "
                         f"{getattr(e, 'strerror', None) or e}; both must be PEM files of one key pair") from None
    return ctx


class TlsSession:
    """One server-side TLS session in memory: ciphertext in, plaintext out, and back."""
    __slots__ = ("_in", "_out", "_obj", "handshaken")

    def __init__(self, ctx: ssl.SSLContext):
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._obj = ctx.wrap_bio(self._in, self._out, server_side=True)
        self.handshaken = False

    def receive(self, data: bytes) -> bytes:
        """The plaintext that `data` (ciphertext from the peer) completes; raises ssl.SSLError
        on a broken handshake or record. What TLS itself must send back waits in `outgoing`."""
        self._in.write(data)
        if not self.handshaken:
            try:
                self._obj.do_handshake()
            except ssl.SSLWantReadError:
                return b""
            self.handshaken = True
        chunks = []
        while True:
            try:
                chunk = self._obj.read(DIRECT_TLS_READ_CHUNK_BYTES)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:       # the peer's close_notify: nothing more comes
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)

    def send(self, plaintext: bytes) -> bytes:
        """The ciphertext of `plaintext` (with anything TLS had waiting)."""
        self._obj.write(plaintext)
        return self._out.read()

    def outgoing(self) -> bytes:
        """Handshake or alert bytes TLS wants sent."""
        return self._out.read()

    def close(self) -> bytes:
        """A close_notify to send before the connection closes (b"" if TLS cannot send one)."""
        try:
            self._obj.unwrap()
        except (ssl.SSLError, ValueError):
            pass
        return self._out.read()
