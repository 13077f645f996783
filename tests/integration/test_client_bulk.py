"""Proves the bundled client's bulk (execute_bulk_operations) against the real emulator, in both
connection modes: on a two-partition container provisioned so low that the partitions' budgets
run out mid-bulk, some operations get 429 in 207 replies and are resent until every one lands;
one result per input operation comes back in input order with status, charge, eTag, body and
diagnostics; and the items equal, field for field, what per-item creates (and the same upserts,
replaces, patches and deletes) give in a twin container. Real sockets; no sleeps."""
import pytest

from regionlab.client import CosmosClient, PartitionKey

OPS = 120
SYSTEM = ("_rid", "_self", "_etag", "_ts", "_attachments", "_lsn")


def user_fields(items) -> list:
    return sorted(({k: v for k, v in i.items() if k not in SYSTEM} for i in items), key=lambda d: d["id"])


def doc(k: int) -> dict:
    return {"id": f"i{k}", "pk": f"p{k % 9}", "n": k, "tags": ["a", str(k)], "nested": {"k": k * 2}}


@pytest.mark.slow
@pytest.mark.regionlab_config(partitions=2)
@pytest.mark.parametrize("mode", ["gateway", "direct"])
def test_bulk_retries_throttled_operations_and_matches_per_item_writes(regionlab, mode):
    emu = regionlab
    with CosmosClient(emu.endpoint, credential=emu.key, connection_mode=mode) as client:
        db = client.create_database("db")
        bulk_c = db.create_container("bulk", PartitionKey(path="/pk"), offer_throughput=400)
        twin = db.create_container("twin", PartitionKey(path="/pk"), offer_throughput=10_000)
        assert len(bulk_c.read_feed_ranges()) == 2
        ops = [{"operationType": "Create", "resourceBody": doc(k)} for k in range(OPS)]
        out = bulk_c.execute_bulk_operations(ops)
        for k in range(OPS):
            twin.create_item(doc(k))

        assert len(out) == OPS
        assert [r["statusCode"] for r in out] == [201] * OPS
        assert [r["resourceBody"]["id"] for r in out] == [f"i{k}" for k in range(OPS)]
        assert all(r["operationInput"] is ops[k] for k, r in enumerate(out))
        assert all(r["requestCharge"] > 0 and r["eTag"] == r["resourceBody"]["_etag"] for r in out)
        assert all(r.diagnostics is not None and r.diagnostics.status in (200, 207) for r in out)
        d = out.diagnostics
        throttled_replies = [a for a in d.attempts if a.status == 207]
        assert throttled_replies, "the budget never ran out: nothing was throttled"
        assert any(e.kind == "bulk" and "throttled (429)" in e.detail for e in d.events)
        assert d.request_charge == pytest.approx(sum(a.request_charge for a in d.attempts))
        assert user_fields(bulk_c.read_all_items()) == user_fields(twin.read_all_items())

        mixed = [{"operationType": "Upsert", "resourceBody": {**doc(0), "n": -1}},
                 {"operationType": "Replace", "id": "i1", "resourceBody": {**doc(1), "n": -2}},
                 {"operationType": "Patch", "id": "i2", "partitionKey": "p2",
                  "resourceBody": {"operations": [{"op": "set", "path": "/n", "value": -3}]}},
                 {"operationType": "Delete", "id": "i3", "partitionKey": "p3"},
                 {"operationType": "Read", "id": "i4", "partitionKey": "p4"},
                 {"operationType": "Create", "resourceBody": doc(5)}]       # exists: 409, the rest go on
        got = bulk_c.execute_bulk_operations(mixed)
        assert [r["statusCode"] for r in got] == [200, 200, 200, 204, 200, 409]
        assert got[4]["resourceBody"]["n"] == 4
        twin.upsert_item({**doc(0), "n": -1})
        twin.replace_item("i1", {**doc(1), "n": -2})
        twin.patch_item("i2", "p2", [{"op": "set", "path": "/n", "value": -3}])
        twin.delete_item("i3", "p3")
        assert user_fields(bulk_c.read_all_items()) == user_fields(twin.read_all_items())
