"""`GET /_explorer/emulator.pem`: the certificate clients trust, as the official emulator
serves it (its setup guides download it with `curl -k`). Served without authentication, like
the emulator's, since it is public by nature; on a plain-HTTP server it is 404 with a hint."""
from ..core.errors import CosmosError, not_found
from ..service.responses import Reply, base_headers

PATH = "_explorer/emulator.pem"
PEM_TYPE = "application/x-pem-file"


def handle(method: str, activity_id: str, trust_pem: bytes | None) -> Reply:
    if method not in ("GET", "HEAD"):
        raise CosmosError(405, 0, f"{method} is not supported on /_explorer/emulator.pem; use GET.")
    if trust_pem is None:
        raise not_found("This regionlab serves plain HTTP and has no certificate; start it with --https "
                        "(or --cert FILE --cert-key FILE) to serve HTTPS.")
    hdrs = base_headers(activity_id, 0.0)
    hdrs["Content-Disposition"] = 'attachment; filename="emulator.pem"'
    return Reply(200, hdrs, trust_pem, PEM_TYPE)
