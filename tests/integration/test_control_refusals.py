"""Proves that a refused control request changes nothing, for every mutating route and every
fault type: against a real emulator's control port (running_emulator, raw http.client), each
valid request is sent with one thing wrong — content type, Origin, Host, token, body — and the
answer must be the documented 4xx while GET /topology, /faults, /failovers, /lost-writes,
/throttle and /health read exactly as before. The same requests sent right do change the state,
so the comparison can fail. Also: what is accepted (same origin, IP literals, the token), and
GET / as the index of routes."""
import pytest

from control_harness import INVALID_DELETES, JSON, MUTATIONS, ok, request, seed, snapshot
from regionlab.emulator.testing import running_emulator

TOKEN = "s3cret-token"
# refusal -> (headers to send instead of plain JSON, the status that refuses it)
REFUSALS = {
    "text/plain": ({"Content-Type": "text/plain"}, 415),
    "form": ({"Content-Type": "application/x-www-form-urlencoded"}, 415),
    "no content type": ({}, 415),
    "foreign origin": ({**JSON, "Origin": "http://evil.example"}, 403),
    "null origin": ({**JSON, "Origin": "null"}, 403),
    "other port origin": ({**JSON, "Origin": "http://127.0.0.1:1"}, 403),
    "rebound host": ({**JSON, "Host": "evil.example:8090"}, 403),
}
TOKEN_REFUSALS = {
    "no token": ({**JSON}, 401),
    "wrong token": ({**JSON, "Authorization": "Bearer nope"}, 401),
    "basic scheme": ({**JSON, "Authorization": f"Basic {TOKEN}"}, 401),
}


def _seeded(**kwargs):
    handle = running_emulator(partitions=2, auth=False, **kwargs)
    emu = handle.__enter__()
    seed(emu)
    return handle, emu


@pytest.fixture(scope="module")
def shared():
    handle, emu = _seeded()
    yield emu
    handle.__exit__(None, None, None)


@pytest.fixture(scope="module")
def shared_token():
    handle, emu = _seeded(control_token=TOKEN)
    yield emu
    handle.__exit__(None, None, None)


def _refused_changes_nothing(emu, name, headers, status, body_override=None):
    method, path, body, _ = MUTATIONS[name]
    before = snapshot(emu)
    got, reply, _ = request(emu, method, path, body if body_override is None else body_override, headers)
    assert got == status, (name, got, reply)
    assert isinstance(reply, dict) and reply["error"]
    assert snapshot(emu) == before


CONTENT_TYPE_REFUSALS = ("text/plain", "form", "no content type")
POSTS = [name for name, (method, *_) in MUTATIONS.items() if method == "POST"]


@pytest.mark.parametrize("name, refusal", [    # PUT and DELETE take any content type (below)
    (name, refusal) for refusal in REFUSALS for name in MUTATIONS
    if name in POSTS or refusal not in CONTENT_TYPE_REFUSALS])
def test_a_refused_request_changes_nothing(shared, name, refusal):
    headers, status = REFUSALS[refusal]
    _refused_changes_nothing(shared, name, headers, status)


@pytest.mark.parametrize("name", [name for name in MUTATIONS if name not in POSTS])
def test_put_and_delete_need_no_content_type(name):
    """A browser preflights every cross-site PUT and DELETE (the port grants none), so they need
    no JSON content type: `curl -X DELETE .../faults/1` works. A body must still be JSON."""
    handle, emu = _seeded()
    try:
        method, path, body, _ = MUTATIONS[name]
        before = snapshot(emu)
        if body is not None:
            got, reply, _ = request(emu, method, path, headers={"Content-Type": "text/plain"}, raw=b"not json")
            assert got == 400 and "not valid JSON" in reply["error"], (got, reply)
            assert snapshot(emu) == before
        got, reply, _ = request(emu, method, path, body, {})
        assert got == 200, (name, got, reply)
        assert snapshot(emu) != before
    finally:
        handle.__exit__(None, None, None)


@pytest.mark.parametrize("refusal", TOKEN_REFUSALS)
@pytest.mark.parametrize("name", MUTATIONS)
def test_without_the_token_nothing_changes(shared_token, name, refusal):
    headers, status = TOKEN_REFUSALS[refusal]
    _refused_changes_nothing(shared_token, name, headers, status)


@pytest.mark.parametrize("name", MUTATIONS)
def test_an_invalid_body_or_target_changes_nothing(shared, name):
    method, path, _, invalid = MUTATIONS[name]
    before = snapshot(shared)
    if method == "DELETE":
        got, reply, _ = request(shared, method, INVALID_DELETES[name], None, JSON)
    else:
        got, reply, _ = request(shared, method, path, invalid, JSON)
    assert 400 <= got < 500 and reply["error"], (name, got, reply)
    assert snapshot(shared) == before
    for raw in (b"", b"{", b"[1]", b"\xff\xfe", b"[" * 100_000):
        if method != "DELETE":
            got, reply, _ = request(shared, method, path, headers=JSON, raw=raw)
            assert got == 400 and reply["error"], (name, raw[:4], got)
    assert snapshot(shared) == before


@pytest.mark.parametrize("name", MUTATIONS)
def test_the_same_request_sent_right_changes_the_state(name):
    """The control for the tests above: without the refusal each request does change something."""
    handle, emu = _seeded(control_token=TOKEN)
    try:
        method, path, body, _ = MUTATIONS[name]
        before = snapshot(emu)
        ok(emu, method, path, body)
        assert snapshot(emu) != before
    finally:
        handle.__exit__(None, None, None)


def test_what_is_accepted(shared):
    port = shared.control_endpoint.rsplit(":", 1)[1].rstrip("/")
    for headers in ({"Host": f"localhost:{port}"}, {"Host": f"127.0.0.1:{port}"}, {"Host": "10.1.2.3"},
                    {"Host": f"[::1]:{port}"}, {"Host": f"127.0.0.1:{port}", "Origin": f"http://127.0.0.1:{port}"},
                    {"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"}):
        status, reply, _ = request(shared, "GET", "/faults", headers=headers)
        assert status == 200 and "faults" in reply, headers
    status, reply, _ = request(shared, "GET", "/faults", headers={"Host": "attacker.example"})
    assert status == 403 and "DNS rebinding" in reply["error"]
    status, reply, _ = request(shared, "GET", "/topology", headers={"Origin": "https://evil.example"})
    assert status == 403 and "evil.example" in reply["error"]


def test_the_token_guards_reads_but_not_health_or_the_index(shared_token):
    status, reply, headers = request(shared_token, "GET", "/topology")
    assert status == 401 and "Bearer" in reply["error"] and headers["WWW-Authenticate"].startswith("Bearer")
    assert request(shared_token, "GET", "/topology", headers={"Authorization": f"Bearer {TOKEN}"})[0] == 200
    assert request(shared_token, "GET", "/metrics")[0] == 401
    status, reply, _ = request(shared_token, "GET", "/health")
    assert status == 200 and reply["status"] == "ok"
    assert request(shared_token, "GET", "/")[0] == 200


def test_the_index_lists_the_routes_as_json_or_serves_the_dashboard(shared):
    status, reply, headers = request(shared, "GET", "/")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    listed = {(r["method"], r["path"]) for r in reply["routes"]}
    assert {("GET", "/topology"), ("POST", "/faults"), ("DELETE", "/regions/{name}"), ("GET", "/metrics")} <= listed
    for method, path in listed:            # every listed route exists: a GET of it is not a 404/405
        if method == "GET" and "{" not in path:
            assert request(shared, "GET", path)[0] == 200, path
    browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
    status, page, headers = request(shared, "GET", "/", headers={"Accept": browser})
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "regionlab" in page and 'id="fault-form"' in page and "/lost-writes" in page   # the dashboard
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]


def test_unknown_routes_and_methods_answer_json(shared):
    status, reply, _ = request(shared, "GET", "/nowhere")
    assert status == 404 and "GET / lists them" in reply["error"]
    status, reply, headers = request(shared, "PATCH", "/faults", {"x": 1}, JSON)
    assert status == 405 and "PATCH" in reply["error"] and "POST" in headers["Allow"]
    status, reply, _ = request(shared, "POST", "/faults", headers=JSON, raw=b"{" + b" " * (1024 * 1024 + 1) + b"}")
    assert status == 413 and "larger than" in reply["error"]
