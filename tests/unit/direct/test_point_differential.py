"""Proves direct mode's fast path (emulator/direct/point.py: point reads, creates and upserts
without the service's envelope) answers exactly as the plain path (the same request through
Service.handle and its path dispatch): each case runs on two accounts in virtual time that are
twins (same seed, same history), the fast path on one and the plain path on the other, and the
reply arrays, the refusals, the reply counts, the replicas' counters, the throttle's charges and
the stored items must be equal, case after case (generated activity ids aside). A write that
waits (under Strong, for a majority of regions) is finished as the connection's task would
finish it, with the account run in virtual time until what it waits for is done."""
import asyncio
import json
import sys
from pathlib import Path

import pytest

from regionlab.client.protocol import direct as D
from regionlab.emulator.core.throttle import ThrottleConfig
from regionlab.emulator.direct import adapter, replies
from regionlab.emulator.direct.targets import Targets
from regionlab.emulator.runtime.waits import LoopWaits
from regionlab.emulator.service.service import Service

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from core_world import World  # noqa: E402

PK = '["p"]'
CREDITS_PER_S = 40                   # the throttle cases spend them


class Twin:
    """One of the two accounts: a container with one item, its write region's Service (as a
    direct plane makes it: no key) and the targets of one node for each of two replicas."""

    def __init__(self, **config):
        self.world = World(seed=7, **config)
        self.container = self.world.container(coll_id="items")
        account = self.world.account
        self.region = account.write_regions[0]
        self.svc = Service(account, None, self.region, None, LoopWaits(asyncio.new_event_loop()))
        rs = self.container.partitions[0].replica_sets[self.region]
        primary = next(i for i, r in enumerate(rs.replicas) if r.role == "primary")
        secondary = next(i for i, r in enumerate(rs.replicas) if r.role != "primary")
        nodes = account.placement.replica_nodes(self.region, self.container.rid, "0")
        self.keys = {"primary": D.replica_key(self.container.rid, "0", primary),
                     "secondary": D.replica_key(self.container.rid, "0", secondary)}
        self.nodes = {role: Node(self.svc, Targets(self.svc, self.region, nodes[int(key.rsplit("/", 1)[1])]))
                      for role, key in self.keys.items()}
        self.rs = rs

    def serve(self, req: list, role: str, fast: bool):
        """The reply array, or ("refused", status, substatus) for a request refused up front."""
        req = list(req)
        req[3] = self.keys[role]
        got = adapter.serve(self.nodes[role], req, fast, [None, None])
        if type(got) is replies.Refusal:
            return ("refused", got.error.status, got.error.substatus)
        if type(got) is replies.Waiting:
            got = self.finish(got)
        assert type(got) is list, f"{req}: {got!r} (a lost reply)"
        return got

    def finish(self, w: replies.Waiting) -> list:
        """What the connection's task does for a request that waits (a write under Strong waits
        for a majority of regions), in virtual time: run the account until what it waits for is
        done, then the rest of the request."""
        waiting = w.waiting
        while True:
            self.world.settle()
            assert waiting.done(), "a request still waits once the account is idle"
            try:
                waiting = w.coro.send(None)
            except StopIteration as done:
                w.target.replica.in_flight -= 1     # as the connection's task, once it is done
                return adapter.finish(w, done.value)

    def state(self) -> tuple:
        replicas = [(r.reads_served, r.in_flight, r.in_flight_peak) for r in self.rs.replicas]
        buckets = {k: (b.accepted, b.charged_ru) for k, b in self.world.account.throttle.buckets.items()}
        items = [(key, [(v.lsn, v.body) for v in versions]) for key, versions in self.rs.store.keys_with_versions()]
        return dict(self.svc.requests_served), replicas, buckets, items


class Node:
    """What adapter.serve takes of a direct node (emulator/direct/node.py): its region's Service,
    its targets, and whether a region outage has it answer 503 (never, here)."""
    unavailable = False

    def __init__(self, svc, targets):
        self.svc = svc
        self.targets = targets


def _doc(id: str, **extra) -> bytes:
    return json.dumps({"id": id, "pk": "p", **extra}, separators=(",", ":")).encode()


def request(rid: int, op: str, item=None, pk=PK, body=None, **options) -> list:
    return [D.REQUEST_CODE, rid, op, None, item, pk, body, options or None]


def normalized(got):
    """Generated activity ids aside (each account draws its own), everything must be equal."""
    if type(got) is not list:
        return got
    got = list(got)
    if got[13] and not got[13].startswith("act-"):
        body = got[4]
        if body:
            got[4] = body.replace(got[13].encode(), b"*")
        got[13] = "*"
    return got


READS = [
    ("secondary", request(1, D.READ, "a")),
    ("primary", request(2, D.READ, "a")),
    ("secondary", request(3, D.READ, "missing")),
    ("secondary", request(4, D.READ, "a", if_none_match="*")),
    ("secondary", request(5, D.READ, "a", if_none_match='"stale"')),
    ("secondary", request(6, D.READ, "a", consistency="Eventual")),
    ("secondary", request(7, D.READ, "a", consistency="Strong")),
    ("secondary", request(8, D.READ, "a", consistency="Sometimes")),
    ("secondary", request(9, D.READ, "a", session="0:0#999")),
    ("secondary", request(10, D.READ, "a", session="0:0#1")),
    ("secondary", request(11, D.READ, "a", session="garbage")),
    ("secondary", request(12, D.READ, "a", activity_id="act-12")),
    ("secondary", request(13, D.READ, "a", pk=None)),
    ("secondary", request(14, D.READ, "a", pk=None, pk_option=PK)),
    ("secondary", request(15, D.READ, "a", pk='["p", 1]')),
    ("secondary", request(16, D.READ, "a", pk="not json")),
    ("secondary", request(17, D.READ, "a", pk=5)),
    ("secondary", request(18, D.READ, None)),
    ("secondary", request(19, D.READ, "a", body="text")),
    ("secondary", request(20, D.READ, "a", session=5)),
    ("secondary", request(21, D.READ, "a", unknown_option=1)),
]
WRITES = [
    request(31, D.CREATE, body=_doc("n1", n=1)),
    request(32, D.CREATE, body=_doc("n1", n=2)),
    request(33, D.UPSERT, body=_doc("n1", n=3)),
    request(34, D.UPSERT, body=_doc("n2")),
    request(35, D.UPSERT, body=_doc("n1"), if_match='"stale"'),
    request(36, D.CREATE, body=_doc("n3"), prefer="return=minimal"),
    request(37, D.CREATE, body=_doc("n4"), activity_id="act-37"),
    request(38, D.CREATE, pk=None, body=_doc("n5")),
    request(39, D.CREATE, pk="5", body=_doc("n6")),
    request(40, D.CREATE, pk='["q"]', body=_doc("n7")),
    request(41, D.CREATE, pk='["p", 1]', body=_doc("n8")),
    request(42, D.CREATE),
    request(43, D.CREATE, body=b"[1, 2]"),
    request(44, D.CREATE, body=b'{"id": "x'),
    request(45, D.CREATE, body=_doc("a/b")),
    request(46, D.CREATE, body="text, not bytes"),
    request(47, D.CREATE, pk=7, body=_doc("n9")),
    request(48, D.UPSERT, pk=None, body=_doc("n10"), pk_option=PK),
    request(49, D.CREATE, body=_doc("n11"), prefer="return=representation"),
    request(50, D.UPSERT, body=_doc("n11"), prefer="RETURN=MINIMAL"),
]


def _with_pk_options(req: list) -> list:
    options = req[7]
    if options and "pk_option" in options:
        options = dict(options)
        options["pk"] = options.pop("pk_option")
        req = [*req[:7], options]
    return req


def twins(**config) -> tuple:
    fast, plain = Twin(**config), Twin(**config)
    for twin in (fast, plain):
        assert twin.serve(request(0, D.CREATE, body=_doc("a", n=0)), "primary", False)[2] == 201
    return fast, plain


def alike(fast: Twin, plain: Twin, cases) -> list:
    statuses = []
    for role, req in cases:
        req = _with_pk_options(req)
        a, b = normalized(fast.serve(req, role, True)), normalized(plain.serve(req, role, False))
        assert a == b, f"{req}: fast {a} != plain {b}"
        assert fast.state() == plain.state(), f"after {req}"
        statuses.append(a[0] if a[0] == "refused" else a[2])
    return statuses


def test_point_reads_answer_alike_on_both_paths():
    fast, plain = twins()
    statuses = alike(fast, plain, READS)
    # The cases reach what they are about (so that equal is not equal for nothing): Strong is
    # stronger than the account's Session (400), a token ahead of the replica is 404/1002.
    assert statuses == [200, 200, 404, 304, 200, 200, 400, 400, 404, 200, 200, 200, 400, 200, 400,
                        "refused", "refused", "refused", "refused", "refused", 200]


def test_creates_and_upserts_answer_alike_on_both_paths():
    fast, plain = twins()
    statuses = alike(fast, plain, [("primary", r) for r in WRITES])
    assert statuses == [201, 409, 200, 201, 412, 201, 201, 400, "refused", 400, 400, 400, 400, 400, 400,
                        "refused", "refused", 201, 201, 200]


def test_reads_and_writes_past_the_credit_window_are_refused_alike():
    fast, plain = twins(throttle=ThrottleConfig(ru=False, credits_per_s=CREDITS_PER_S))
    cases = [("secondary", request(i, D.READ, "a")) if i % 2 else ("primary", request(i, D.CREATE,
                                                                                       body=_doc(f"t{i}")))
             for i in range(100, 100 + CREDITS_PER_S + 6)]
    statuses = alike(fast, plain, cases)
    assert statuses.count(429) >= 5


@pytest.mark.parametrize("consistency", ["Strong", "BoundedStaleness", "ConsistentPrefix", "Eventual"])
def test_reads_and_creates_answer_alike_at_every_consistency_level(consistency):
    fast, plain = twins(consistency=consistency)
    alike(fast, plain, [("secondary", request(1, D.READ, "a")), ("primary", request(2, D.CREATE, body=_doc("c"))),
                        ("secondary", request(3, D.READ, "c")), ("primary", request(4, D.READ, "c"))])
