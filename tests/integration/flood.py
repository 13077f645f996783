"""A load for the shedding tests (test_connection_shedding.py), run as its own process at a lower
CPU priority, so that the latency the test measures is the emulator's, not the load's own Python.

    python flood.py SPEC_JSON

SPEC_JSON is {"kind": "sdk_clients" | "silent" | "tls_hello", ...}:
* sdk_clients: `count` official-SDK clients of `endpoint`/`key`, each created (account
  discovery) and reading item `item` of db/items once, never closed; every status they were
  answered is counted (a 503 the SDK retried in another region is still a refusal);
* silent: for each [host, port, count] of `targets`, that many sockets that never send a byte;
* tls_hello: likewise, each sending one byte, the first of a TLS ClientHello (0x16), and no more.

Prints one JSON line when the load is in place ({"done": n, "failed": n, "errors": [first few],
"statuses": {"200": n, ...}}),
then holds every socket and client open until its stdin closes.
"""
import collections
import json
import os
import resource
import socket
import sys

NICE_INCREMENT = 10            # the load yields the CPU to the emulator and the measuring client
ERRORS_KEPT = 5
SOCKET_TIMEOUT_S = 10.0


def _sdk_clients(spec: dict, held: list, statuses: collections.Counter) -> tuple[int, list]:
    from azure.cosmos import CosmosClient

    def hook(response):
        statuses[str(response.http_response.status_code)] += 1
    done, errors = 0, []
    for _ in range(spec["count"]):
        try:
            client = CosmosClient(spec["endpoint"], spec["key"], retry_total=1, retry_backoff_max=1,
                                  retry_fixed_interval=0.05, connection_timeout=5, raw_response_hook=hook)
            held.append(client)           # never closed, as a test suite that forgets to
            item = client.get_database_client("db").get_container_client("items").read_item(spec["item"], "p")
            assert item["id"] == spec["item"]
            done += 1
        except Exception as e:            # counted and reported: the test asserts there are none
            errors.append(f"{type(e).__name__}: {str(e)[:300]}")
    return done, errors


def _sockets(spec: dict, held: list, first: bytes) -> tuple[int, list]:
    done, errors = 0, []
    for host, port, count in spec["targets"]:
        for _ in range(count):
            try:
                sock = socket.create_connection((host, port), timeout=SOCKET_TIMEOUT_S)
                if first:
                    sock.sendall(first)
                held.append(sock)
                done += 1
            except OSError as e:
                errors.append(f"{host}:{port}: {e}")
    return done, errors


def main() -> None:
    spec = json.loads(sys.argv[1])
    os.nice(NICE_INCREMENT)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    held: list = []
    statuses: collections.Counter = collections.Counter()
    kind = spec["kind"]
    if kind == "sdk_clients":
        done, errors = _sdk_clients(spec, held, statuses)
    else:
        done, errors = _sockets(spec, held, b"\x16" if kind == "tls_hello" else b"")
    print(json.dumps({"done": done, "failed": len(errors), "errors": errors[:ERRORS_KEPT],
                      "statuses": dict(sorted(statuses.items()))}), flush=True)
    sys.stdin.read()                      # hold everything until the test is done


if __name__ == "__main__":
    main()
