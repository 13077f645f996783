"""GET /requests on the control port: the log of what the endpoints served starts with the first
look (an emulator nobody observes does not pay for it per request), and from then on counts
every reply by region, operation and status (service/request_log.py, docs/control-api.md)."""
from azure.cosmos import PartitionKey

from regionlab.emulator.testing import running_emulator
from sdk_harness import make_client


def counts(reply: dict) -> dict:
    out = {}
    for window in reply["windows"]:
        for r in window["requests"]:
            key = (r["region"], r["op"], r["status"])
            out[key] = out.get(key, 0) + r["count"]
    return out


def test_the_log_starts_at_the_first_look_and_counts_every_reply_after_it():
    with running_emulator() as emu, make_client(emu, preferred_locations=["East US"]) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "a", "pk": "a"})
        first = emu.control("GET", "/requests")
        assert counts(first) == {} and first["recording_since_ms"] <= first["now_ms"]
        for _ in range(3):
            c.read_item("a", partition_key="a")
        c.create_item({"id": "b", "pk": "b"})
        got = counts(emu.control("GET", "/requests"))
        assert got[("East US", "read", 200)] == 3 and got[("East US", "write", 201)] == 1
        assert emu.control("GET", "/requests")["recording_since_ms"] == first["recording_since_ms"]
