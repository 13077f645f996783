"""Measure request charges through the real gateway with the official SDK, for items of 1, 10 and
100 KB, and print them as the Markdown table docs/throughput.md shows.

    python bench/charges.py

Every number is the `x-ms-request-charge` the SDK received. Items have 7 indexed scalars (id,
pk, name, n, two tags, payload) plus `_ts`; sizes are the item as sent (the stored body also
carries ~170 bytes of system properties). Containers are unprovisioned so nothing is throttled.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from azure.cosmos import CosmosClient, PartitionKey  # noqa: E402

from regionlab.emulator.testing import running_emulator  # noqa: E402

SIZES_KB = (1, 10, 100)
ONLY_PK = {"indexingMode": "consistent", "includedPaths": [{"path": "/pk/?"}], "excludedPaths": [{"path": "/*"}]}
NONE = {"indexingMode": "none", "automatic": False, "includedPaths": [], "excludedPaths": []}


def item(id: str, kb: int) -> dict:
    doc = {"id": id, "pk": "p", "name": "widget", "n": 1, "tags": ["red", "blue"], "payload": ""}
    base = len(str(doc).replace("'", '"').replace(", ", ",").replace(": ", ":"))
    doc["payload"] = "x" * (kb * 1024 - base)
    return doc


def measure(c, id: str, kb: int) -> dict:
    charge = lambda: float(c.client_connection.last_response_headers["x-ms-request-charge"])  # noqa: E731
    out = {}
    c.create_item(item(id, kb))
    out["create"] = charge()
    c.read_item(id, partition_key="p")
    out["point read"] = charge()
    c.replace_item(id, item(id, kb))
    out["replace"] = charge()
    c.upsert_item(item(id, kb))
    out["upsert (existing)"] = charge()
    c.patch_item(id, partition_key="p", patch_operations=[{"op": "set", "path": "/n", "value": 2}])
    out["patch (set /n)"] = charge()
    list(c.query_items("SELECT * FROM c WHERE c.id = @id", parameters=[{"name": "@id", "value": id}],
                       partition_key="p"))
    out["query by id (1 result)"] = charge()
    c.delete_item(id, partition_key="p")
    out["delete"] = charge()
    return out


def main() -> None:
    with running_emulator(regions=("East US",)) as emu:
        client = CosmosClient(emu.endpoint, emu.key)
        db = client.create_database("bench")
        full = db.create_container("full", PartitionKey(path="/pk"))
        only_pk = db.create_container("only_pk", PartitionKey(path="/pk"), indexing_policy=ONLY_PK)
        none = db.create_container("none", PartitionKey(path="/pk"), indexing_policy=NONE)
        rows = {kb: measure(full, f"i{kb}", kb) for kb in SIZES_KB}
        for kb in SIZES_KB:
            only_pk.create_item(item(f"i{kb}", kb))
            rows[kb]["create, only /pk indexed"] = float(only_pk.client_connection.last_response_headers["x-ms-request-charge"])
            none.create_item(item(f"i{kb}", kb))
            rows[kb]["create, indexingMode none"] = float(none.client_connection.last_response_headers["x-ms-request-charge"])
        ops = list(rows[SIZES_KB[0]])
        print("| operation | " + " | ".join(f"{kb} KB" for kb in SIZES_KB) + " |")
        print("|---|" + "---:|" * len(SIZES_KB))
        for op in ops:
            print(f"| {op} | " + " | ".join(f"{rows[kb][op]:.2f}" for kb in SIZES_KB) + " |")


if __name__ == "__main__":
    main()
