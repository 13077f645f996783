"""Who may drive the control port: the checks every request passes before any route runs.

The control port can fail regions and force failovers, so a web page the developer happens to
have open must not be able to drive it. Browsers let any page send "simple" cross-site requests
(a form POST with a text/plain body) and DNS rebinding lets a page reach 127.0.0.1 under its own
host name. So, in this order:

* Host: the Host header must name this server — `localhost`, an IP address literal (rebinding
  needs a DNS name), `--host` or `--advertise-host`. A missing Host (HTTP/1.0 tools) is no
  browser and passes.
* Origin: a request that carries an Origin must come from the control port's own pages, i.e.
  `http://` + its Host (the dashboard at `/` is same-origin). `Origin: null` is refused.
* Token: with `--control-token`, every route but `GET /health` and `GET /` (the index) needs
  `Authorization: Bearer <token>`.
* Content type: a POST needs `Content-Type: application/json`. A page may send a cross-site
  POST without a CORS preflight only as a "simple" request (a form's content types), and this
  port never grants a preflight, so the JSON content type keeps pages out. PUT and DELETE are
  never simple: a browser preflights them whatever their content type, so they need no header
  (`curl -X DELETE .../faults/3` works), and a body they carry must still parse as JSON.

A refused request gets a 4xx JSON error and reaches no route, so it changes nothing.
"""
import hmac
import ipaddress

JSON_ONLY_METHODS = frozenset({"POST"})      # the one mutating method a page can send unpreflighted
OPEN_PATHS = frozenset({"/health", "/", "/explorer"})    # answer GET without the token (pages hold no data)
LOCAL_NAMES = frozenset({"localhost", "localhost."})
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})
JSON_TYPE = "application/json"


def split_host(value: str) -> tuple:
    """("name", "port" or "") of a Host header value; IPv6 literals keep their brackets off."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        return name, rest[1:] if rest.startswith(":") else ""
    name, sep, port = value.rpartition(":")
    if sep and port.isdigit():
        return name, port
    return value, ""


def is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def is_loopback(host: str) -> bool:
    """Whether a listen address only accepts connections from this machine."""
    if host.lower() in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ControlAccess:
    def __init__(self, host: str, advertise_host: str | None, token: str | None):
        self.names = set(LOCAL_NAMES)
        for name in (host, advertise_host):
            if name and name not in WILDCARD_HOSTS:
                self.names.add(split_host(name)[0])
        self.token = token.encode() if token else None

    def _serves(self, name: str) -> bool:
        return name in self.names or is_ip_literal(name)

    def refusal(self, method: str, path: str, headers) -> tuple | None:
        """(status, message, extra headers) when the request must be refused, else None."""
        host = headers.get("Host")
        if host is not None and not self._serves(split_host(host)[0]):
            return 403, (f"The control port does not serve the host name {split_host(host)[0]!r} (Host header); "
                         f"use 127.0.0.1, localhost or the --advertise-host name. Other names are refused "
                         f"so that a web page cannot reach the port by DNS rebinding."), {}
        origin = headers.get("Origin")
        if origin is not None and (host is None or origin.strip().lower().rstrip("/") != "http://" + host.strip().lower()):
            return 403, (f"Requests from the web origin {origin!r} are refused: the control port takes requests "
                         f"only from its own pages and from clients that send no Origin (curl, the CLI, SDKs)."), {}
        if self.token is not None and not (method in ("GET", "HEAD") and path in OPEN_PATHS):
            if not self._token_ok(headers.get("Authorization", "")):
                return 401, ("This control port needs its token: send 'Authorization: Bearer <token>' "
                             "(the CLI takes --control-token or $REGIONLAB_CONTROL_TOKEN)."), \
                    {"WWW-Authenticate": 'Bearer realm="regionlab control"'}
        if method in JSON_ONLY_METHODS:
            ctype = headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
            if ctype != JSON_TYPE:
                return 415, (f"{method} {path} needs 'Content-Type: application/json' "
                             f"(got {ctype or 'none'!r}), even without a body."), {}
        return None

    def _token_ok(self, authorization: str) -> bool:
        scheme, _, value = authorization.strip().partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(value.strip().encode(errors="replace"), self.token)
