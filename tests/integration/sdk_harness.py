"""The integration suite's harness: official-SDK clients (sync and aio) pointed at the
`regionlab` fixture, a recorder of what the SDK put on the wire, signed raw HTTP for the
requests no SDK would send, the control port (faults, and the reply counts each region served),
and the bundled client in direct mode with its attempts as tuples.

Clients get short retry settings so a test that expects an error does not sit in the SDK's
back-off, and they are always closed, so the emulator stops without waiting on keep-alives.
"""
import collections
import contextlib
import email.utils
import http.client
import json
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request

from azure.core.exceptions import ServiceRequestError, ServiceResponseError
from azure.core.pipeline.transport import RequestsTransport
from azure.cosmos import CosmosClient, PartitionKey
from azure.cosmos.aio import CosmosClient as AioCosmosClient

from regionlab.client import CosmosClient as BundledClient
from regionlab.client.protocol import auth
from regionlab.emulator import ctl

SOCKET_TIMEOUT_S = 5.0
CLIENT_DEFAULTS = {"retry_total": 1, "retry_backoff_max": 1, "retry_fixed_interval": 0.05,
                   "connection_timeout": 5}


Exchange = collections.namedtuple("Exchange", "endpoint method path status request_headers response_headers")


class WireLog:
    """A `raw_response_hook`: records every request the SDK sent and the status it got back."""

    def __init__(self):
        self.entries: list[Exchange] = []

    def __call__(self, pipeline_response) -> None:
        req, resp = pipeline_response.http_request, pipeline_response.http_response
        url = urllib.parse.urlsplit(req.url)
        self.entries.append(Exchange(f"{url.scheme}://{url.netloc}/", req.method, url.path,
                                     resp.status_code, {k.lower(): v for k, v in req.headers.items()},
                                     {k.lower(): v for k, v in resp.headers.items()}))

    def matching(self, method: str, path_suffix: str) -> list[Exchange]:
        return [e for e in self.entries
                if e.method == method and e.path.rstrip("/").endswith(path_suffix.rstrip("/"))]

    def statuses(self, method: str, path_suffix: str) -> list[int]:
        return [e.status for e in self.matching(method, path_suffix)]

    @property
    def last(self) -> Exchange:
        return self.entries[-1]


class AttemptLog(RequestsTransport):
    """The sync SDK's transport, recording every document attempt it makes (status, or no reply)
    into the logical operation open in `op()`, for the black-box history checker
    (emulator/drill/observed.py). Pass as `make_client(emu, transport=log)`."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.ops: list[dict] = []
        self._open = None
        self._seq = 0

    def _tick(self) -> int:
        self._seq += 1
        return self._seq

    @contextlib.contextmanager
    def op(self, f: str, key: str, value=None, client: int = 0, consistency: str = "Session"):
        """Record the SDK call inside as one logical operation; a read sets `o["value"]`."""
        o = {"id": len(self.ops) + 1, "client": client, "f": f, "key": key, "value": value,
             "consistency": consistency, "invoke_seq": self._tick(), "attempts": []}
        self.ops.append(o)
        self._open = o
        try:
            yield o
        finally:
            self._open = None
            o["complete_seq"] = self._tick()

    def send(self, request, **kwargs):
        o = self._open
        if o is None or "/docs" not in urllib.parse.urlsplit(request.url).path:
            return super().send(request, **kwargs)
        try:
            response = super().send(request, **kwargs)
        except ServiceRequestError:             # never left the client
            o["attempts"].append({"status": None, "sent": False})
            raise
        except ServiceResponseError:            # sent; the reply never came
            o["attempts"].append({"status": None})
            raise
        o["attempts"].append({"status": response.status_code,
                              "substatus": int(response.headers.get("x-ms-substatus") or 0)})
        return response


def client_kwargs(**kwargs) -> dict:
    out = dict(CLIENT_DEFAULTS)
    out.update(kwargs)
    return out


def no_lag(regions) -> dict:
    """A lag_ms matrix with no replication lag between any two of regions."""
    return {(a, b): 0 for a in regions for b in regions if a != b}


def make_client(emu, key=None, **kwargs) -> CosmosClient:
    return CosmosClient(emu.endpoint, key or emu.key, **client_kwargs(**kwargs))


def make_aio_client(emu, key=None, **kwargs) -> AioCosmosClient:
    """Use as `async with make_aio_client(emu) as client:` (the aio client discovers regions on enter)."""
    return AioCosmosClient(emu.endpoint, key or emu.key, **client_kwargs(**kwargs))


def item_count(emu, db: str, coll: str, region: str = "East US") -> list:
    """Live items per physical partition of a container in one region, read on the server loop."""
    def count(account):
        c = account.databases[db].containers[coll]
        return [p.replica_sets[region].store.count_live for p in c.partitions]
    return emu.call(count)


def assert_serves(client, probe: str = "probe") -> None:
    """The server still answers a normal SDK round trip: create (or reuse) a container, upsert
    an item and read it back."""
    db = client.create_database_if_not_exists("servesdb")
    c = db.create_container_if_not_exists("serves", PartitionKey(path="/pk"))
    c.upsert_item({"id": probe, "pk": "s", "ok": True})
    assert c.read_item(probe, partition_key="s")["ok"] is True


# ---- raw HTTP -------------------------------------------------------------------------------
def host_port(url: str) -> tuple:
    parts = urllib.parse.urlsplit(url)
    return parts.hostname, parts.port


def signed_headers(key: str, verb: str, path: str, extra: dict | None = None) -> dict:
    """Headers of a request to `path` signed with master key `key`, as the SDK would sign it."""
    date = email.utils.formatdate(usegmt=True)
    rtype, link = auth.resource_type_and_link(path)
    headers = {"x-ms-date": date, "x-ms-version": "2020-07-15",
               "authorization": auth.authorization_header(key, verb, rtype, link, date)}
    if extra:
        headers.update(extra)
    return headers


class RawReply:
    def __init__(self, status: int, headers: dict, body: bytes):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body)

    @property
    def message(self) -> str:
        return self.json().get("message", "")

    def __repr__(self):
        return f"RawReply({self.status}, {self.body[:300]!r})"


def raw_request(emu, method: str, path: str, body=None, headers: dict | None = None,
                sign: bool = True, url: str | None = None) -> RawReply:
    """One HTTP request on a fresh connection; `body` may be bytes or a JSON-able object."""
    if body is not None and not isinstance(body, (bytes, bytearray)):
        body = json.dumps(body).encode()
    hdrs = {"content-type": "application/json"} if body is not None else {}
    if sign:
        hdrs.update(signed_headers(emu.key, method, path))
    hdrs.update(headers or {})
    host, port = host_port(url or emu.endpoint)
    conn = http.client.HTTPConnection(host, port, timeout=SOCKET_TIMEOUT_S)
    try:
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        return RawReply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


@contextlib.contextmanager
def raw_socket(emu, url: str | None = None):
    host, port = host_port(url or emu.endpoint)
    sock = socket.create_connection((host, port), timeout=SOCKET_TIMEOUT_S)
    try:
        yield sock
    finally:
        sock.close()


def read_until_eof(sock) -> bytes:
    """Everything the server sends until it closes the connection (socket timeout as a net)."""
    chunks = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def wait_replicated(emu, db: str, coll: str, region: str, timeout_s: float = 5.0) -> None:
    """Block until every partition of the container in `region` has committed everything the
    write region has committed now (an event set by the server, not a poll)."""
    events = []

    def arm(account):
        src = account.write_regions[0]
        for p in account.databases[db].containers[coll].partitions:
            done = threading.Event()
            # done=done: each partition's callback sets its own event. A plain closure reads the
            # loop variable when it runs, so a partition still behind here would set the last one's.
            p.replica_sets[region].when_committed(p.replica_sets[src].committed_lsn,
                                                  lambda *_, done=done: done.set())
            events.append(done)
    emu.call(arm)
    for done in events:
        assert done.wait(timeout_s), f"{region} did not catch up within {timeout_s} s"


# ---- the control port -----------------------------------------------------------------------
def control(emu, method: str, path: str, body=None):
    """(status, JSON reply) of one control-port request."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(emu.control_endpoint.rstrip("/") + _quoted(path), data=data, method=method,
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as reply:
            return reply.status, json.loads(reply.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def control_json(emu, method: str, path: str, body=None):
    """The JSON reply of a control-port request through the CLI's own client (ctl.call):
    ControlError for an error reply."""
    return ctl.call(emu.control_endpoint.rstrip("/"), method, _quoted(path), body)


def _quoted(path: str) -> str:
    """A control path with a region's name in it, %-encoded (a path already encoded stays so)."""
    return urllib.parse.quote(path, safe="/%?=&")


def inject_fault(emu, **spec) -> dict:
    status, fault = control(emu, "POST", "/faults", spec)
    assert status == 201, fault
    return fault


def inject(emu, **spec) -> int:
    """The id of a new fault."""
    return inject_fault(emu, **spec)["id"]


def heal_fault(emu, fault_id: int) -> None:
    status, reply = control(emu, "DELETE", f"/faults/{fault_id}")
    assert status == 200, reply


def served(emu) -> dict:
    """Every gateway's reply counts so far: {region or "global": {"GET docs 200": n, ...}}."""
    return control(emu, "GET", "/topology")[1]["requests"]


def doc_hits(emu, before: dict) -> dict:
    """Item requests each region served since `before` (a `served`), per method and status:
    {region: {"GET 404/1002": n, ...}}. Only item traffic counts: a client's account and pkranges
    reads come and go on their own."""
    out = {}
    for region, counts in served(emu).items():
        for key, n in counts.items():
            method, kind, status = key.split(" ")
            n -= before.get(region, {}).get(key, 0)
            if kind == "docs" and n:
                out.setdefault(region, {})[f"{method} {status}"] = n
    return out


def doc_totals(emu, before: dict) -> dict:
    """Item requests each region served since `before`, in all: {region: n}."""
    return {region: sum(hits.values()) for region, hits in doc_hits(emu, before).items()}


# ---- the bundled client ---------------------------------------------------------------------------
def direct_client(emu, **kwargs) -> BundledClient:
    return BundledClient(emu.endpoint, credential=emu.key, connection_mode="direct", **kwargs)


def attempts(diagnostics) -> list:
    """(region, status, substatus) of each attempt an operation made."""
    return [(a.region, a.status, a.sub_status) for a in diagnostics.attempts]
