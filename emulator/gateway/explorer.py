"""`GET /_explorer/emulator.pem`: the certificate clients trust, as the official emulator
serves it (its setup guides download it with `curl -k`). Served without authentication, like
the emulator's, since it is public by nature; on a plain-HTTP server it is 404 with a hint."""
from ..core.errors import CosmosError, not_found
from .responses import base_headers, Reply

PATH = ("_explorer", "emulator.pem")
PEM_TYPE = "application/x-pem-file"


class PemReply(Reply):
    """A reply whose body is PEM text, not JSON (Reply always says application/json)."""
    __slots__ = ()

    def encode(self, connection: str, head_only: bool) -> bytes:
        out = super().encode(connection, head_only)
        return out.replace(b"Content-Type: application/json\r\n", f"Content-Type: {PEM_TYPE}\r\n".encode(), 1)


def handle(call) -> Reply:
    if call.method not in ("GET", "HEAD"):
        raise CosmosError(405, 0, f"{call.method} is not supported on /_explorer/emulator.pem; use GET.")
    pem = call.gw.trust_pem
    if pem is None:
        raise not_found("This regionlab serves plain HTTP and has no certificate; start it with --https "
                        "(or --cert FILE --cert-key FILE) to serve HTTPS.")
    hdrs = base_headers(call.activity_id, 0.0)
    hdrs["Content-Disposition"] = 'attachment; filename="emulator.pem"'
    return PemReply(200, hdrs, pem)
