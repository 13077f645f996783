"""The live dashboard that `GET /` on the control port serves to a browser.

One self-contained page (dashboard.html, package data: inline CSS and JS, nothing from the
internet) that polls `GET /topology` once a second with same-origin fetch calls and drives the
port's own JSON routes (POST /faults, DELETE /faults/{id}, POST /failover), so it passes
control_access.py's checks like any client: its Origin is the port's own, every mutating call
is sent as application/json, and with --control-token the user pastes the token, which the page
keeps in sessionStorage and sends as a Bearer header. The page itself carries no state and no
secret, so it stays open like the JSON index.

What the server fills in (the boot block): the catalogue's fault types and outage modes (so a
type added to core/faults.py shows in the form at once) and the route list. The reply's
Content-Security-Policy allows only this page's own inline script and style (by hash) and fetches
to its own origin, and forbids framing: a page on another origin cannot embed the dashboard and
trick a click into a fault.
"""
import base64
import functools
import hashlib
import json
import re
from importlib import resources

from aiohttp import web

from ..core.faults import FAULT_TYPES, OUTAGE_MODE_DEFAULT, OUTAGE_MODES

PAGE_FILE = "dashboard.html"
EXPLORER_FILE = "explorer.html"        # the data explorer (runtime/explorer_api.py), built the same way
BOOT_MARK = "__REGIONLAB_BOOT__"
_INLINE = re.compile(r"<(script|style)>(.*?)</\1>", re.S)     # the executable blocks (not the JSON one)


@functools.lru_cache(maxsize=2)
def _template(name: str = PAGE_FILE) -> tuple[str, str]:
    """(page text, its Content-Security-Policy), read once from the package."""
    page = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    hashes = {"script": [], "style": []}
    for kind, body in _INLINE.findall(page):
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        hashes[kind].append(f"'sha256-{digest}'")
    csp = ("default-src 'none'; connect-src 'self'; img-src data:; "
           f"script-src {' '.join(hashes['script'])}; style-src {' '.join(hashes['style'])}; "
           "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
    return page, csp


def boot_json(routes: list, docs: str) -> str:
    """The page's boot data, safe inside a <script> element (no '<' can close it)."""
    boot = {"fault_types": list(FAULT_TYPES), "outage_modes": list(OUTAGE_MODES),
            "outage_mode_default": OUTAGE_MODE_DEFAULT, "routes": routes, "docs": docs}
    return json.dumps(boot).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def dashboard_response(routes: list, docs: str) -> web.Response:
    return _page(PAGE_FILE, boot_json(routes, docs))


def explorer_response() -> web.Response:
    return _page(EXPLORER_FILE, "{}")


def _page(name: str, boot: str) -> web.Response:
    page, csp = _template(name)
    return web.Response(text=page.replace(BOOT_MARK, boot, 1), content_type="text/html",
                        headers={"Content-Security-Policy": csp, "X-Frame-Options": "DENY",
                                 "Cache-Control": "no-store", "Referrer-Policy": "no-referrer"})
