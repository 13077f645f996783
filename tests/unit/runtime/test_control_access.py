"""The control port's access rules as a pure function of method, path and headers: which Host
names it serves, which Origins are its own, the token (with its open routes) and the JSON
content type on mutating methods, in that order of precedence."""
import pytest

from regionlab.emulator.runtime.control_access import ControlAccess, is_loopback, split_host

PORT = "8090"
JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize("value,expected", [
    ("localhost:8090", ("localhost", "8090")), ("[::1]:8090", ("::1", "8090")), ("[::1]", ("::1", "")),
    ("Example.COM", ("example.com", "")), ("a:b", ("a:b", "")), ("", ("", "")), ("[", ("", "")),
])
def test_split_host(value, expected):
    assert split_host(value) == expected


def test_loopback_addresses():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.9.9.9", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "", "10.0.0.1", "example.com"))


def _status(access, method="POST", path="/faults", **headers):
    refusal = access.refusal(method, path, {k.replace("_", "-"): v for k, v in headers.items()})
    return None if refusal is None else refusal[0]


def test_host_names_the_server_or_is_an_ip_literal():
    access = ControlAccess("0.0.0.0", "regionlab.internal", None)
    for host in ("localhost:8090", "127.0.0.1:8090", "[::1]:8090", "192.168.1.20:8090", "regionlab.internal:8090",
                 "REGIONLAB.internal"):
        assert _status(access, Host=host, **{"Content_Type": "application/json"}) is None, host
    for host in ("evil.example:8090", "localhost.evil.example", "", "127.0.0.1.nip.io"):
        assert _status(access, Host=host, **{"Content_Type": "application/json"}) == 403, host
    assert _status(access, "GET", "/topology") is None        # no Host at all: not a browser


def test_origin_must_be_the_port_itself():
    access = ControlAccess("127.0.0.1", None, None)
    ok = {"Host": f"127.0.0.1:{PORT}", "Content_Type": "application/json"}
    assert _status(access, Origin=f"http://127.0.0.1:{PORT}", **ok) is None
    for origin in ("http://evil.example", "null", f"https://127.0.0.1:{PORT}", "http://127.0.0.1:1", ""):
        assert _status(access, Origin=origin, **ok) == 403, origin
    assert _status(access, "GET", "/topology", Origin="http://evil.example") == 403   # reads too


def test_the_token_and_its_open_routes():
    access = ControlAccess("127.0.0.1", None, "t0k")
    assert _status(access, "GET", "/topology") == 401
    assert _status(access, "GET", "/topology", Authorization="Bearer t0k") is None
    assert _status(access, "GET", "/topology", Authorization="bearer  t0k ") is None
    for bad in ("Bearer t0", "Bearer t0kk", "Basic t0k", "t0k", "Bearer"):
        assert _status(access, "GET", "/topology", Authorization=bad) == 401, bad
    assert _status(access, "GET", "/health") is None and _status(access, "GET", "/") is None
    assert _status(access, "POST", "/health", **{"Content_Type": "application/json"}) == 401


def test_post_needs_json_and_checks_come_in_order():
    access = ControlAccess("127.0.0.1", None, "t0k")
    auth = {"Authorization": "Bearer t0k"}
    assert _status(access, "POST", **auth) == 415
    assert _status(access, "POST", **auth, **{"Content_Type": "text/plain"}) == 415
    assert _status(access, "POST", **auth, **{"Content_Type": "Application/JSON; charset=utf-8"}) is None
    for method in ("PUT", "DELETE", "PATCH"):       # never sent cross-site without a preflight
        assert _status(access, method, **auth) is None
        assert _status(access, method, **auth, **{"Content_Type": "text/plain"}) is None
        assert _status(access, method, Origin="http://evil.example") == 403
    assert _status(access, "GET", "/faults", **auth) is None
    assert _status(access, "POST", Host="evil.example", Origin="http://evil.example") == 403   # Host first
    assert _status(access, "POST", Origin="http://evil.example") == 403                       # then Origin
    assert _status(access, "POST") == 401                                                      # then the token
