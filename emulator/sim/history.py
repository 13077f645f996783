"""The record of one simulated run: every client operation from invoke to completion, and
what the fault workload and the core did meanwhile.

Theory of operation: a run appends to a History only; the checker (checker.py) reads it as
plain JSON-able data and never sees the core. An operation is a dict:

    {"id": 7, "client": 2, "f": "upsert", "container": "c0", "key": "k3", "partition": "1",
     "region": "East US", "consistency": "Session", "sent_token": [0, 41],
     "invoke_ms": ..., "invoke_seq": ..., "complete_ms": ..., "complete_seq": ...,
     "outcome": "ok" | "fail" | "info", "status": 201, "substatus": 0, "error": "...",
     "lsn": 42, "epoch": 0, "reply_token": [0, 42], "value": 7, "fate": "committed" | "discarded" | None, "lost": False,
     "regions_at_ack": {"East US": [0, 42], ...}}

`outcome` follows Maelstrom/Jepsen: "ok" acknowledged, "fail" definitely did not happen,
"info" may or may not have happened (timeout, dropped connection). A write's value is its own
op id (documents carry it as "w"), so every value names exactly one write; a delete's value is
None. A write's `lsn`/`epoch` are where the core put it; its `fate` is what its commit came to
(a quorum had it, or it was discarded before one did), observed separately from what the client
was told; `regions_at_ack` is each region's (epoch, committed LSN) when it was acknowledged.
Reads record the position they were served at (`epoch`, `lsn`) and what they saw
(`value`, or `items` for a snapshot of a whole partition); a point read of a missing item is
"ok" with status 404 and value None, as a client reads it.

`seq` numbers order everything that happens in one virtual millisecond, so "completed before
invoked" is exact.
"""


class History:
    __slots__ = ("ops", "events", "_seq")

    def __init__(self):
        self.ops: list[dict] = []
        self.events: list[dict] = []      # fault workload and core events, in order
        self._seq = 0

    def _tick(self) -> int:
        self._seq += 1
        return self._seq

    def invoke(self, now_ms: int, **fields) -> dict:
        op = {"id": len(self.ops), **fields, "invoke_ms": now_ms, "invoke_seq": self._tick(),
              "outcome": None}
        self.ops.append(op)
        return op

    def complete(self, op: dict, now_ms: int, outcome: str, **fields) -> None:
        if op["outcome"] is not None:
            raise AssertionError(f"op {op['id']} completed twice")
        op.update(fields)
        op["outcome"] = outcome
        op["complete_ms"] = now_ms
        op["complete_seq"] = self._tick()

    def event(self, now_ms: int, kind: str, **fields) -> dict:
        e = {"kind": kind, "at_ms": now_ms, "seq": self._tick(), **fields}
        self.events.append(e)
        return e
