"""Fuzzes the control port. The single invariant: whatever the request — method, path, headers,
content type, token, body — the answer is not a 5xx (but for GET /health's documented 503 once
every region is down), an error answer is JSON `{"error": ...}`, nothing is logged at ERROR (no
traceback), and the emulator keeps serving (GET /health, GET /topology and the gateway's account
document answer after every input).

One real emulator (running_emulator, with a control token) takes every input in turn, so the
state the inputs build up (added and removed regions, faults, failovers, storms, throughput) is
fuzzed too. Inputs mix well-formed requests with one field mutated and plain garbage. The suite
runs FUZZ_EXAMPLES_DEFAULT inputs under the `ci` hypothesis profile and a share of them under
`dev` (tests/tiers.py); REGIONLAB_FUZZ_EXAMPLES=2000 raises it for a longer run.
"""
import itertools
import json
import logging
import os
import urllib.parse
import urllib.request

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from control_harness import FAULTS, PK_DEF, request
from fuzz_json import production_recursion_limit
from regionlab.emulator.runtime.control import ROUTES
from regionlab.emulator.testing import running_emulator
from tiers import examples

FUZZ_EXAMPLES_DEFAULT = 300
FUZZ_EXAMPLES = int(os.environ.get("REGIONLAB_FUZZ_EXAMPLES", examples(FUZZ_EXAMPLES_DEFAULT)))
TOKEN = "fuzz-token"
REGIONS = ["East US", "East US 2", "West US", "North Europe", "Brazil South", "east us", ""]
HTTP_OK_S = 30.0
FRESH = itertools.count()
FIELDS = ["duration_ms", "replica", "lag_ms", "jitter_ms", "delay_ms", "one_way", "share", "op", "retry_after_ms",
          "seed", "port", "name", "region", "kind", "wait", "database", "container", "partition", "ru_per_s",
          "autoscale_max", "type", "from", "to"]


class ErrorLog(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.records = []

    def emit(self, record):
        self.records.append(self.format(record))


@pytest.fixture(scope="module")
def fuzzed():
    log = ErrorLog()
    logging.getLogger().addHandler(log)
    try:
        with running_emulator(partitions=2, auth=False, control_token=TOKEN) as emu:
            emu.call(lambda a: a.create_container(a.create_database({"id": "db"}), {"id": "c", "partitionKey": PK_DEF}))
            emu.error_log = log
            yield emu
    finally:
        logging.getLogger().removeHandler(log)


SPECS = [("/faults", list(FAULTS.values()) + [dict(FAULTS["region_outage"], duration_ms=50)]
          + [dict(FAULTS["region_outage"], mode=m) for m in ("refuse", "reset", "unavailable", "blackhole")]),
         ("/regions", [{"name": "North Europe", "port": 0}, {"name": "Brazil South"},
                       {"name": "$new", "port": "$port"}]),   # a fresh name, a port the emulator already uses
         ("/failover", [{"region": "East US 2", "kind": "forced"}, {"region": "West US", "kind": "graceful"}]),
         ("/throttle/containers", [{"ru_per_s": 400}, {"autoscale_max": 4000}, {"ru_per_s": None}]),
         ("/throttle/databases", [{"ru_per_s": 1000}, {"ru_per_s": None}]),
         ("/throttle/storms", [{"share": 0.5, "op": "read"}, {"share": 1, "retry_after_ms": 5}]),
         ("/throttle", [{"burst": True}, {"credits_per_s": 1000}, {"serverless": False}, {"ru": False}])]

# ---- inputs -----------------------------------------------------------------------------------
ascii_text = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7e), max_size=40)
json_scalar = st.none() | st.booleans() | st.integers() | st.integers(min_value=-2 ** 70, max_value=2 ** 70) \
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20) | st.sampled_from(REGIONS)
json_value = st.recursive(json_scalar, lambda inner: st.lists(inner, max_size=4)
                          | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=12)
region = st.sampled_from(REGIONS) | st.text(max_size=12)


def _quote(text: str) -> str:
    return urllib.parse.quote(text, safe="")


METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]
# Mutating routes three times as often as reads: they are where state goes wrong.
TEMPLATES = [(m, p.replace("{name}", "{region}")) for m, p, _ in ROUTES for _ in range(1 if m == "GET" else 3)] \
    + [("GET", "/{junk}"), ("POST", "/{junk}/{junk}")]


@st.composite
def requests_to(draw) -> tuple:
    """(method, path): mostly a route of the index with its own method, the parameters filled
    with known names or junk; sometimes another method."""
    method, template = draw(st.sampled_from(TEMPLATES))
    if draw(st.integers(0, 9)) == 0:
        method = draw(st.sampled_from(METHODS))
    fill = {"id": draw(st.integers(-3, 40).map(str) | ascii_text.map(_quote)),
            "region": _quote(draw(region)), "db": _quote(draw(st.sampled_from(["db", "nope"]) | ascii_text)),
            "coll": _quote(draw(st.sampled_from(["c", "nope"]) | ascii_text)), "junk": _quote(draw(ascii_text)),
            "endpoint": _quote(draw(st.just("global") | region)),
            "path": draw(st.sampled_from(["dbs", "dbs/db/colls", "dbs/db/colls/c/docs", "dbs/db/colls/c/docs/1"])
                         | ascii_text.map(_quote))}
    path = template.format(**fill)
    if draw(st.integers(0, 9)) == 0:
        path += "?" + _quote(draw(ascii_text))
    return method, path


def _a_region_failed_the_explorers_request(path: str, status: int, reply) -> bool:
    """The data explorer's API answers what the region's service answered (runtime/explorer_api.py):
    503 while a fault this fuzz injected has the region out, 502 when a request fault dropped it."""
    return path.startswith("/explorer/api/") and isinstance(reply, dict) and (
        status == 503 and "unavailable" in reply.get("error", "") or status == 502 and "fault" in reply.get("error", ""))


@st.composite
def bodies(draw, path: str) -> bytes | None:
    kind = draw(st.sampled_from(["spec", "spec", "spec", "json", "raw", "deep", "deep", "none"]))
    if kind == "none":
        return None
    if kind == "raw":
        return draw(st.binary(max_size=200))
    if kind == "deep":
        n = draw(st.sampled_from([2, 32, 33, 1100, 5000, 100_000]))
        return draw(st.sampled_from([b"[" * n + b"]" * n, b'{"a":' * n + b"1" + b"}" * n, b"[" * n]))
    if kind == "json":
        return _dump(draw(json_value))
    spec = dict(draw(st.sampled_from(_specs_for(path))))
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2, 3]))):      # mutate: change, add or drop a field
        key = draw(st.sampled_from(sorted(spec) + FIELDS))
        if draw(st.booleans()) or key not in spec:
            spec[key] = draw(json_value)
        else:
            spec.pop(key)
    if path.startswith("/failover"):
        spec["wait"] = False        # a graceful drain to a region a fuzzed fault cut off takes 60 s
    return _dump(spec)


def _specs_for(path: str) -> list:
    """The valid bodies of the route path names (any of them for a path that names none)."""
    for prefix, specs in SPECS:
        if path.startswith(prefix):
            return specs
    return [spec for _, specs in SPECS for spec in specs]


def _dump(value) -> bytes:
    return json.dumps(value).encode()


GOOD_HEADERS = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
HEADER_VALUES = {
    "Content-Type": ["application/json; charset=utf-8", "application/json; charset=nope", "text/plain",
                     "application/x-www-form-urlencoded", "", "APPLICATION/JSON"],
    "Authorization": ["Bearer nope", f"Basic {TOKEN}", "", f"bearer {TOKEN}", "Bearer"],
    "Origin": ["same", "http://evil.example", "null", "", "http://localhost"],
    "Host": ["localhost", "evil.example", "[::1]", "[", ":", "127.0.0.1:1", ""],
    "Accept": ["text/html", "*/*", "text/html;q=abc", "application/json;q=0"],
}


@st.composite
def headers(draw) -> dict:
    """Mostly the headers a well-behaved client sends, so that inputs reach the routes; else one
    to three of them changed, dropped or replaced by garbage."""
    h = dict(GOOD_HEADERS)
    for _ in range(draw(st.sampled_from([0] * 6 + [1, 1, 2, 3]))):
        name = draw(st.sampled_from(sorted(HEADER_VALUES)))
        value = draw(st.sampled_from(HEADER_VALUES[name] + [None]) | ascii_text)
        if value is None:
            h.pop(name, None)
        else:
            h[name] = value
    return h


def _all_down(status: int, health) -> bool:
    """GET /health's documented 503: every region is down (the fuzz can fail them all)."""
    return status == 503 and (health == "" or health.get("status") == "down")


# ---- the invariant ---------------------------------------------------------------------------
def _serving(emu) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    status, health, _ = request(emu, "GET", "/health")
    assert status == 200 or _all_down(status, health), (status, health)
    status, topo, _ = request(emu, "GET", "/topology", headers=auth)
    assert status == 200, topo
    with urllib.request.urlopen(emu.endpoint, timeout=HTTP_OK_S) as reply:
        assert reply.status == 200


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_no_input_answers_5xx_or_logs_an_error(fuzzed, data):
    method, path = data.draw(requests_to())
    body = data.draw(bodies(path))
    h = data.draw(headers())
    if body is not None and b'"$port"' in body:
        t = fuzzed.emulator.topology
        port = data.draw(st.sampled_from([t.global_port, t.control_port, *t.region_ports.values()]))
        body = body.replace(b'"$port"', str(port).encode()).replace(b'"$new"', f'"Region {next(FRESH)}"'.encode())
    if h.get("Origin") == "same":
        h["Origin"] = "http://" + (h.get("Host") or fuzzed.control_endpoint.split("//")[1].rstrip("/"))
    with production_recursion_limit():
        status, reply, _ = request(fuzzed, method, path, headers=h, raw=body)
    event(f"{method} {status}")       # --hypothesis-show-statistics shows what the inputs reached
    assert status < 500 or (path.split("?")[0] == "/health" and _all_down(status, reply)) \
        or _a_region_failed_the_explorers_request(path, status, reply), (method, path, h, body, status, reply)
    if status >= 400 and method != "HEAD" and not _all_down(status, reply):
        assert isinstance(reply, dict) and reply.get("error"), (method, path, status, reply)
    _serving(fuzzed)
    assert not fuzzed.error_log.records, fuzzed.error_log.records[0]
