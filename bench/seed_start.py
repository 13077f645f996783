"""What --seed-data adds to a start: an in-process emulator (running_emulator, the pytest
fixture's) started without a seed and with seeds of N items, alternately, medians of ROUNDS.

    python bench/seed_start.py [N ...]         # default: 0 1000 10000

Prints the machine, the plain start's median (the reference, measured in the same run), and per
N the seeded start's median, its ratio to the plain start, and microseconds per item. Each item
goes through the request layer's staging and a commit to 12 replicas (runtime/seed_data.py)."""
import json
import os
import statistics
import sys
import tempfile
import time

from regionlab.emulator.testing import running_emulator

ROUNDS = 5


def seed_dir(n: int) -> str:
    d = tempfile.mkdtemp(prefix="regionlab-seed-")
    items = [{"id": str(i), "pk": f"p{i % 10}", "v": i, "s": "x" * 100} for i in range(n)]
    with open(os.path.join(d, "seed.json"), "w") as f:
        json.dump({"databases": [{"id": "d", "containers": [{"id": "c", "partitionKey": "/pk", "items": items}]}]}, f)
    return d


def start_s(**options) -> float:
    t0 = time.perf_counter()
    with running_emulator(**options):
        return time.perf_counter() - t0


def main(sizes: list[int]) -> None:
    print(f"# seed_start on {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
          f"load average {os.getloadavg()[0]:.1f}")
    start_s()                                   # imports and the first start out of the way
    seeds = {n: seed_dir(n) for n in sizes}
    plain, seeded = [], {n: [] for n in sizes}
    for _ in range(ROUNDS):
        plain.append(start_s())
        for n in sizes:
            seeded[n].append(start_s(seed_data=seeds[n]))
    ref = statistics.median(plain)
    print(f"plain start            {ref * 1000:8.1f} ms")
    for n in sizes:
        med = statistics.median(seeded[n])
        per_item = f"{(med - ref) / n * 1e6:6.1f} us/item" if n else ""
        print(f"seeded, {n:>7} items {med * 1000:8.1f} ms  {med / ref:6.1f}x plain  {per_item}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [0, 1000, 10000])
