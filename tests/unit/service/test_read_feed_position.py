"""Proves a read feed page scoped to one partition says where it read, as a point read does: under
Strong, with the write region's newest commit not yet held by a majority of regions, the page's
session token and `lsn` header name the global committed LSN it was served at (not the region's
newer committed LSN), its items are the ones at that LSN, and a point read of the same partition
names the same position. The simulator's checker found the difference: a snapshot read whose
token named a position whose log did not match what it returned."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "core"))

from core_world import World  # noqa: E402
from regionlab.client.protocol import headers as H  # noqa: E402
from regionlab.client.protocol.session_token import parse_session_header  # noqa: E402
from regionlab.emulator.service.call import Call  # noqa: E402
from regionlab.emulator.service.service import Service  # noqa: E402

EAST = "East US"
LAG_MS = 10_000


def answered(svc, method: str, path: str, headers: dict):
    """The reply of a request that needs no waiting: its coroutine ends in its first step."""
    try:
        svc.handle(Call(svc, method, path, headers, b"")).send(None)
    except StopIteration as done:
        return done.value
    raise AssertionError(f"{method} {path} waited")


def test_a_strong_read_feed_names_the_global_lsn_it_read_at():
    w = World(consistency="Strong", lag_ms={(EAST, "East US 2"): LAG_MS, (EAST, "West US"): LAG_MS})
    c = w.container()
    w.write(c, "a", "create", {"id": "a", "pk": "a", "n": 1})
    w.advance(2 * LAG_MS)                              # every region has the first write
    _, _, lsn, rs = w.write(c, "b", "create", {"id": "b", "pk": "b", "n": 2})
    w.advance(10)                                      # a quorum of East US has it; no other region yet
    held = rs.partition.global_lsn
    assert rs.committed_lsn == lsn > held

    svc = Service(w.account, None, EAST, None, waits=None)
    common = {H.CONSISTENCY_LEVEL: "Strong", H.PK_RANGE_ID: rs.range_id}
    page = answered(svc, "GET", "dbs/db/colls/c/docs", common)
    assert page.status == 200
    token = parse_session_header(page.headers[H.SESSION_TOKEN])[rs.range_id]
    assert (token.version, token.global_lsn, int(page.headers[H.LSN])) == (rs.epoch, held, held)
    assert [d["id"] for d in json.loads(page.body)["Documents"]] == ["a"]

    point = answered(svc, "GET", "dbs/db/colls/c/docs/a", {**common, H.PARTITION_KEY: '["a"]'})
    assert point.status == 200 and int(point.headers[H.LSN]) == held
    assert point.headers[H.SESSION_TOKEN] == page.headers[H.SESSION_TOKEN]
