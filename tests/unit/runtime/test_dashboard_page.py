"""Proves the dashboard page is self-contained and served safely, without a browser: it is read
from the installed package, references nothing outside its own origin, every executable inline
block is allowed by the reply's CSP hash (and nothing else is), the boot data lists the fault
catalogue as core/faults.py has it, and no value in the boot data can close its <script> element."""
import base64
import hashlib
import json
import re

from regionlab.emulator.core.faults import FAULT_TYPES, OUTAGE_MODES
from regionlab.emulator.runtime import dashboard_page
from regionlab.emulator.runtime.dashboard_page import BOOT_MARK, boot_json, dashboard_response

ROUTES = [{"method": "GET", "path": "/x</script><script>alert(1)</script>", "what": "a & b"}]


def test_the_page_loads_nothing_from_elsewhere():
    page, _ = dashboard_page._template()
    assert BOOT_MARK in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page, re.I)
    assert not re.search(r"@import|url\(\s*['\"]?(https?:)?//", page, re.I)
    assert "http://www.w3.org/2000/svg" in page           # an XML namespace name, never fetched
    assert page.count("http") == 1


def test_the_csp_allows_exactly_the_pages_own_inline_script_and_style():
    page, csp = dashboard_page._template()
    blocks = re.findall(r"<(script|style)>(.*?)</\1>", page, re.S)
    assert sorted(kind for kind, _ in blocks) == ["script", "style"]
    for kind, body in blocks:
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"{kind}-src 'sha256-{digest}'" in csp
    assert "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp and "connect-src 'self'" in csp
    assert not re.search(r"\sstyle=|\son[a-z]+=", page)   # no inline attributes the CSP would refuse


def test_the_boot_data_is_the_catalogue_and_cannot_break_out_of_its_script():
    text = boot_json(ROUTES, "docs/control-api.md")
    assert "<" not in text and ">" not in text and "&" not in text
    boot = json.loads(text)
    assert boot["fault_types"] == list(FAULT_TYPES) and boot["outage_modes"] == list(OUTAGE_MODES)
    assert boot["routes"] == ROUTES
    reply = dashboard_response(ROUTES, "docs/control-api.md")
    assert reply.content_type == "text/html" and reply.headers["X-Frame-Options"] == "DENY"
    assert reply.text.count("</script>") == 2
