"""CPU cost per write of keeping secondary indexes, measured on the core alone (no server).

    python bench/index_write_cost.py

A VersionStore holds 10,000 documents; then 100,000 replaces go through `VersionStore.add`
(each supersedes a version and prunes it, as a committed write does), with 0, 1, 3 and 8
materialised path indexes. Prints µs per write and the overhead per indexed path. The best of
REPEATS runs is taken, so other load on the machine inflates the numbers less.
"""
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from regionlab.emulator.core.index import materialise  # noqa: E402
from regionlab.emulator.core.store import Version, VersionStore  # noqa: E402

DOCS = 10_000
WRITES = 100_000
REPEATS = 5
PATHS = [("cat",), ("n",), ("addr", "city"), ("tags", 0), ("score",), ("name",), ("kind",), ("flag",)]


def document(i: int, generation: int) -> dict:
    return {"id": str(i), "pk": f"p{i % 100}", "cat": f"c{(i + generation) % 1000}", "n": i + generation,
            "addr": {"city": f"city{i % 50}", "zip": 10000 + i}, "tags": [f"t{i % 7}", "x"],
            "score": (i * 7.5) % 100, "name": f"name {i}", "kind": "k", "flag": i % 2 == 0}


def run(paths: list) -> float:
    store = VersionStore()
    keys = [(f'["p{i % 100}"]', str(i)) for i in range(DOCS)]
    lsn = 0
    for i, key in enumerate(keys):
        lsn += 1
        store.add(Version(lsn, key, document(i, 0), b"{}", "e", 0, "r"), lsn - 1)
    for path in paths:
        materialise(store, path)
    versions = []
    for w in range(WRITES):
        i = w % DOCS
        versions.append(Version(lsn + w + 1, keys[i], document(i, w // DOCS + 1), b"{}", "e", 0, "r"))
    add = store.add
    t0 = time.perf_counter()
    for v in versions:
        add(v, v.lsn - 1)
    return (time.perf_counter() - t0) / WRITES * 1e6


def main() -> None:
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    base = None
    for count in (0, 1, 3, 8):
        us = min(run(PATHS[:count]) for _ in range(REPEATS))
        base = us if base is None else base
        extra = f"  +{(us - base) / count:.2f} µs per indexed path" if count else ""
        print(f"{count} indexed paths: {us:.2f} µs per write{extra}", flush=True)


if __name__ == "__main__":
    main()
