"""What a query costs the gateway before it reads a document, when every request carries another
parameter value: in process, no sockets, the gateway's own compiled-query lookup
(`gateway/queries._query_of`, the path every query request takes) and one execution over a
page's worth of documents.

    python bench/query_params.py                 # 5,000 distinct @pk values, 3 passes each

Cases: the same body every time (the body cache hits); one query text with DISTINCT values
cycling over 5,000 (more than the COMPILED_QUERIES_CACHE_MAX_ENTRIES entries of the caches); the same with
two parameters. Prints µs per request (best of the passes after the first) and the machine's
load average; not an assert anywhere.
"""
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from regionlab.emulator.gateway import queries  # noqa: E402

DISTINCT_VALUES = 5_000
PASSES = 3
DOCS = [{"id": f"i{i}", "pk": f"p{i % 50}", "n": i, "name": "x" * 40} for i in range(11)]


class _Call:
    """What _query_of reads of a request: its raw body."""
    __slots__ = ("raw",)

    def __init__(self, raw: bytes):
        self.raw = raw


def _bodies(text: str, params_of, n: int) -> list:
    return [_Call(json.dumps({"query": text, "parameters": params_of(i)}).encode()) for i in range(n)]


def _per_request_us(calls: list) -> float:
    """Best pass (after a first one) of looking up, and running over DOCS, each call's query."""
    queries._compiled.clear()
    best = float("inf")
    for p in range(PASSES + 1):
        t0 = time.perf_counter()
        for call in calls:
            queries._query_of(call).execute(DOCS, 0, 10)
        us = (time.perf_counter() - t0) / len(calls) * 1e6
        if p:
            best = min(best, us)
    return best


def main() -> None:
    text = "SELECT * FROM c WHERE c.pk = @pk"
    two = "SELECT * FROM c WHERE c.pk = @pk AND c.n >= @lo ORDER BY c.n"
    cases = [
        ("one body repeated", [_bodies(text, lambda i: [{"name": "@pk", "value": "p1"}], 1)[0]] * DISTINCT_VALUES),
        (f"{DISTINCT_VALUES:,} distinct @pk", _bodies(text, lambda i: [{"name": "@pk", "value": f"p{i}"}],
                                                    DISTINCT_VALUES)),
        (f"{DISTINCT_VALUES:,} distinct (@pk, @lo), ORDER BY",
         _bodies(two, lambda i: [{"name": "@pk", "value": f"p{i % 50}"}, {"name": "@lo", "value": i}],
                 DISTINCT_VALUES)),
    ]
    print(f"load average {os.getloadavg()[0]:.2f}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    for name, calls in cases:
        print(f"{name:48s} {_per_request_us(calls):8.1f} µs/request")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
