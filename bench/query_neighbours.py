"""Issue #25's heavy query and its neighbours: a 5-JOIN COUNT over ITEMS items (24.7 M JOIN rows
at the default 900) through the official SDK, while another client's point reads are timed.

    python bench/query_neighbours.py [ITEMS]

The emulator runs as its own process (`python -m regionlab.emulator`, one region, no RU
limits). The neighbour is a keep-alive raw HTTP client reading one item (signed as the SDK
signs), so its latency is the server's, not the SDK's Python work. Printed: the neighbour's
p50/p99 without the query and while it runs, the query's time to its first reply (a page,
possibly empty, with a continuation) and to its result, its pages, and the server's CPU
seconds meanwhile (from /proc, so other load inflates it less than wall time). Wall times on
a shared machine move with its load, which is printed first.
"""
import email.utils
import http.client
import json
import os
import platform
import sys
import threading
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from azure.cosmos import CosmosClient, PartitionKey  # noqa: E402

from regionlab.client.protocol import auth  # noqa: E402
from server_proc import ServerProcess  # noqa: E402

HEAVY = ("SELECT VALUE COUNT(1) FROM c JOIN a IN c.arr JOIN b IN c.arr JOIN d IN c.arr "
         "JOIN e IN c.arr JOIN f IN c.arr")
ITEMS = 900
QUIET_READS = 1000
PROBE = "/dbs/db/colls/items/docs/probe"


def arr_len(i: int) -> int:
    return 8 if i % 3 else 7


class Neighbour:
    def __init__(self, endpoint: str, key: str):
        url = urllib.parse.urlsplit(endpoint)
        self.conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        self.key = key

    def read_ms(self) -> float:
        date = email.utils.formatdate(usegmt=True)
        rtype, link = auth.resource_type_and_link(PROBE)
        headers = {"x-ms-date": date, "x-ms-version": "2020-07-15", "x-ms-documentdb-partitionkey": '["probe"]',
                   "authorization": auth.authorization_header(self.key, "GET", rtype, link, date)}
        t0 = time.perf_counter()
        self.conn.request("GET", PROBE, headers=headers)
        reply = self.conn.getresponse()
        reply.read()
        if reply.status != 200:
            raise RuntimeError(f"point read answered {reply.status}")
        return (time.perf_counter() - t0) * 1000


def pct(values: list, p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def main() -> None:
    items = int(sys.argv[1]) if len(sys.argv) > 1 else ITEMS
    expected = sum(arr_len(i) ** 5 for i in range(items))
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; "
          f"{items} items, {expected:,} five-JOIN rows")
    with ServerProcess("--regions", "East US", "--no-ru-limits") as srv:
        ready = srv.ready
        replies = []

        def hook(response):
            if response.http_request.method == "POST" and "x-ms-documentdb-isquery" in response.http_request.headers:
                replies.append(time.perf_counter())
        client = CosmosClient(ready["account_endpoint"], ready["key"], raw_response_hook=hook)
        container = client.create_database("db").create_container("items", PartitionKey(path="/pk"))
        for i in range(items):
            container.create_item({"id": f"d{i:04d}", "pk": f"p{i % 30}", "arr": list(range(arr_len(i)))})
        container.create_item({"id": "probe", "pk": "probe"})
        neighbour = Neighbour(ready["regions"][0]["endpoint"], ready["key"])
        quiet = [neighbour.read_ms() for _ in range(QUIET_READS)]
        result, done = {}, threading.Event()

        def run():
            try:
                result["value"] = list(container.query_items(HEAVY, enable_cross_partition_query=True))
            except Exception as e:          # noqa: BLE001 - reported below (main timed out at 65 s)
                result["error"] = f"{type(e).__name__}: {str(e)[:200]}"
            finally:
                result["end"] = time.perf_counter()
                done.set()
        cpu0, t0 = srv.cpu_s(), time.perf_counter()
        threading.Thread(target=run, daemon=True).start()
        during = []
        while not done.is_set():
            during.append(neighbour.read_ms())
        cpu = srv.cpu_s() - cpu0
        client.close()
    if "error" in result:
        print(f"query failed after {result['end'] - t0:.1f} s: {result['error']}")
    else:
        assert result["value"] == [expected], result["value"]
    print(f"neighbour point reads: quiet p50 {pct(quiet, .5):.2f} ms p99 {pct(quiet, .99):.2f} ms; "
          f"during the query ({len(during)} reads) p50 {pct(during, .5):.2f} ms p99 {pct(during, .99):.2f} ms")
    first = f"{replies[0] - t0:.2f} s" if replies else "none"
    print(f"query: first reply {first}, result {result['end'] - t0:.2f} s, {len(replies)} pages, "
          f"server CPU {cpu:.1f} s (the neighbour's reads included)")
    print(json.dumps({"items": items, "quiet_p50_ms": round(pct(quiet, .5), 3),
                      "during_p50_ms": round(pct(during, .5), 3), "during_p99_ms": round(pct(during, .99), 3),
                      "first_reply_s": round(replies[0] - t0, 2) if replies else None, "total_s": round(result["end"] - t0, 2),
                      "pages": len(replies), "server_cpu_s": cpu}))


if __name__ == "__main__":
    main()
