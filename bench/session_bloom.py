"""Memory of the region-scoped session capture's Bloom filter (rbloom) at FPP 0.001, next to the
seed's table, and the measured false-positive rate at each size.

    python bench/session_bloom.py

Each filter is sized for n expected insertions, filled with n (collection, partition key, region)
keys as the session container records them, then probed with n keys never inserted.
"""
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rbloom import Bloom  # noqa: E402

from regionlab.client.policies.session import BLOOM_FALSE_POSITIVE_RATE  # noqa: E402

SEED_TABLE_KB = {10_000: 21, 100_000: 183, 1_000_000: 1_800, 10_000_000: 17_900}
PROBES_MAX = 1_000_000


def measure(n: int) -> dict:
    bloom = Bloom(n, BLOOM_FALSE_POSITIVE_RATE)
    t0 = time.perf_counter()
    for i in range(n):
        bloom.add(("dbs/db/colls/c", f'["key-{i}"]', "East US"))
    add_ns = (time.perf_counter() - t0) / n * 1e9
    probes = min(n, PROBES_MAX)
    hits = sum(("dbs/db/colls/c", f'["other-{i}"]', "East US") in bloom for i in range(probes))
    return {"expected_insertions": n, "kb": round(bloom.size_in_bits / 8 / 1024, 1),
            "seed_kb": SEED_TABLE_KB[n], "false_positive_rate": round(hits / probes, 5),
            "add_ns": round(add_ns)}


if __name__ == "__main__":
    for n in SEED_TABLE_KB:
        print(json.dumps(measure(n)), flush=True)
