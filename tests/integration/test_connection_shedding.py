"""A full listener sheds silent and idle connections instead of locking clients out (issue #25,
"Lockouts"): 150 official-SDK clients that are never closed all get in, none answered 503; 500 sockets that never
send a byte, on the global endpoint, a region endpoint and the control port, and 200 TLS
handshakes stalled after their first byte on each of two endpoints of an --https emulator, leave new SDK clients getting
in and /health answering 200. Throughout, a normal SDK client reading an item keeps a p99 under
50 ms, computed over every read made while the load arrives and SAMPLES_MIN more while it holds.

Real processes: the emulator is the CLI's (default cap of 128 connections per listener), the
load is tests/integration/flood.py in its own process at a lower CPU priority (creating 150 SDK
clients is seconds of Python; it must not be what the normal client's latency measures), and the
normal client reads from this process. Waits are on the load's one JSON line, on the reader's
event, and on replies.

The 50 ms bound is the issue's. It is about 20 times the p99 these reads have here on a quiet
machine and held in runs on the shared, loaded 2-core machine this suite runs on.
"""
import contextlib
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from azure.cosmos import CosmosClient, PartitionKey, SSLConfiguration

from test_cli import EXIT_TIMEOUT_S, _clean_env, spawn

FLOOD = Path(__file__).with_name("flood.py")
P99_MS_MAX = 50.0
SAMPLES_MIN = 400
ERRORS_MAX = 20             # the reader stops early after this many failed reads
LOAD_TIMEOUT_S = 300.0
HTTP_TIMEOUT_S = 10.0
TLS_HOST = "127.0.0.2"
CLIENT = {"retry_total": 1, "retry_backoff_max": 1, "retry_fixed_interval": 0.05, "connection_timeout": 5}


def _seed(endpoint: str, key: str, tls: dict) -> None:
    with CosmosClient(endpoint, key, **CLIENT, **tls) as client:
        c = client.create_database("db").create_container("items", PartitionKey(path="/pk"))
        c.upsert_item({"id": "a", "pk": "p", "text": "x" * 200})


def _host_port(url: str) -> list:
    parts = urlsplit(url)
    return [parts.hostname, parts.port]


class Reader:
    """The normal client: one SDK client reading item a in a loop on a thread, each read timed,
    from when the load starts until SAMPLES_MIN reads after the load is in place."""

    def __init__(self, endpoint: str, key: str, tls: dict):
        self.client = CosmosClient(endpoint, key, **CLIENT, **tls)
        self.items = self.client.get_database_client("db").get_container_client("items")
        self.items.read_item("a", "p")           # discovery and the first connections, before the clock
        self.latencies_ms: list = []
        self.errors: list = []
        self.load_in_place = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        after = 0
        while after < SAMPLES_MIN and len(self.errors) < ERRORS_MAX:
            t0 = time.perf_counter()
            try:
                assert self.items.read_item("a", "p")["id"] == "a"
            except Exception as e:
                self.errors.append(f"{type(e).__name__}: {str(e)[:200]}")
                continue
            self.latencies_ms.append((time.perf_counter() - t0) * 1000)
            after += self.load_in_place.is_set()
        self.done.set()

    def p99_ms(self) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


@contextlib.contextmanager
def _under_load(cli, spec: dict, tls: dict):
    """Run the load (flood.py) while the reader reads; yields the load's report and the reader
    once the load is in place and the reader has made its reads. The load still holds its
    sockets and clients meanwhile (the caller checks what else works), and lets go after."""
    info = cli.info
    reader = Reader(info["account_endpoint"], info["key"], tls)
    load = subprocess.Popen([sys.executable, str(FLOOD), json.dumps(spec)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=_clean_env())
    reader.thread.start()
    try:
        line = load.stdout.readline()         # the load is in place
        reader.load_in_place.set()
        assert line, f"the load ended without a report (exit {load.wait(EXIT_TIMEOUT_S)})"
        assert reader.done.wait(LOAD_TIMEOUT_S)
        yield json.loads(line), reader
        load.stdin.close()
        assert load.wait(EXIT_TIMEOUT_S) == 0
    finally:
        reader.load_in_place.set()
        if load.poll() is None:
            load.kill()
            load.wait(EXIT_TIMEOUT_S)
        reader.thread.join(LOAD_TIMEOUT_S)
        reader.client.close()


def _health(cli) -> int:
    url = cli.info["control_endpoint"] + "health"
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


def _new_client_reads(cli, tls: dict) -> str:
    """A new SDK client (account discovery on the global endpoint, then a read) while the load holds."""
    with CosmosClient(cli.info["account_endpoint"], cli.info["key"], **CLIENT, **tls) as client:
        return client.get_database_client("db").get_container_client("items").read_item("a", "p")["id"]


def _check(cli, report: dict, reader: Reader, tls: dict, done: int) -> None:
    """Everything the load did succeeded; while it holds, /health answers 200 and a new SDK client
    gets in; the reader never failed and kept its p99 under the bound."""
    assert (report["done"], report["failed"], report["errors"]) == (done, 0, [])
    assert "503" not in report["statuses"], report["statuses"]       # nobody was refused, not even once
    assert _health(cli) == 200
    assert _new_client_reads(cli, tls) == "a"
    assert reader.errors == []
    print(f"normal client: p99 {reader.p99_ms():.1f} ms over {len(reader.latencies_ms)} reads")
    assert reader.p99_ms() < P99_MS_MAX, f"p99 {reader.p99_ms():.1f} ms over {len(reader.latencies_ms)} reads"


@pytest.mark.slow
def test_150_sdk_clients_never_closed_all_get_in(tmp_path):
    with spawn(tmp_path, "--port", "0", "--control-port", "0") as cli:
        info = cli.info
        _seed(info["account_endpoint"], info["key"], {})
        spec = {"kind": "sdk_clients", "count": 150, "endpoint": info["account_endpoint"], "key": info["key"],
                "item": "a"}
        with _under_load(cli, spec, {}) as (report, reader):
            _check(cli, report, reader, {}, 150)
        assert report["statuses"].get("200", 0) >= 2 * 150       # each discovered the account and read


@pytest.mark.slow
def test_500_silent_sockets_leave_the_gateway_and_the_control_port_serving(tmp_path):
    with spawn(tmp_path, "--port", "0", "--control-port", "0") as cli:
        info = cli.info
        _seed(info["account_endpoint"], info["key"], {})
        east = next(r["endpoint"] for r in info["regions"] if r["name"] == "East US")    # where the reader reads
        targets = [[*_host_port(info["account_endpoint"]), 200], [*_host_port(east), 150],
                   [*_host_port(info["control_endpoint"]), 150]]
        with _under_load(cli, {"kind": "silent", "targets": targets}, {}) as (report, reader):
            _check(cli, report, reader, {}, 500)


@pytest.mark.slow
def test_200_stalled_tls_handshakes_leave_an_https_endpoint_serving(tmp_path):
    certs = tmp_path / "certs"
    # Not 127.0.0.1: the SDK skips certificate checks by itself for it (tests/integration/test_https.py).
    with spawn(tmp_path, "--host", TLS_HOST, "--port", "0", "--control-port", "0", "--https",
               "--cert-dir", str(certs)) as cli:
        info = cli.info
        # 4.17.1 applies a connection_verify path only together with an ssl_config (test_https.py).
        tls = {"connection_verify": info["certificate"], "ssl_config": SSLConfiguration()}
        _seed(info["account_endpoint"], info["key"], tls)
        east = next(r["endpoint"] for r in info["regions"] if r["name"] == "East US")
        targets = [[*_host_port(info["account_endpoint"]), 200], [*_host_port(east), 200]]
        with _under_load(cli, {"kind": "tls_hello", "targets": targets}, tls) as (report, reader):
            _check(cli, report, reader, tls, 400)
