"""`GET /_explorer/emulator.pem`: the certificate clients trust, as the official emulator
serves it (its setup guides download it with `curl -k`). Served without authentication, like
the emulator's, since it is public by nature; on a plain-HTTP server it is 404 with a hint.

`GET /_explorer/index.html`, the official emulator's data explorer address, redirects to
regionlab's data explorer on the control port (runtime/explorer_api.py)."""
from ..core.errors import CosmosError, not_found
from ..service.responses import Reply, base_headers

PATH = "_explorer/emulator.pem"
INDEX = "_explorer/index.html"
PATHS = (PATH, INDEX)
PEM_TYPE = "application/x-pem-file"


def handle(method: str, path: str, activity_id: str, trust_pem: bytes | None, control_url: str) -> Reply:
    if method not in ("GET", "HEAD"):
        raise CosmosError(405, 0, f"{method} is not supported on /{path}; use GET.")
    if path == INDEX:
        hdrs = base_headers(activity_id, 0.0)
        hdrs["Location"] = control_url + "explorer"
        return Reply(302, hdrs, b"")
    if trust_pem is None:
        raise not_found("This regionlab serves plain HTTP and has no certificate; start it with --https "
                        "(or --cert FILE --cert-key FILE) to serve HTTPS.")
    hdrs = base_headers(activity_id, 0.0)
    hdrs["Content-Disposition"] = 'attachment; filename="emulator.pem"'
    return Reply(200, hdrs, trust_pem, PEM_TYPE)
