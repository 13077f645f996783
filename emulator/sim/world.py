"""The simulated world: one account and the service of each of its regions, in virtual time.

Theory of operation: the clients' operations are requests to the product itself. Each region
has a Service (emulator/service: the request layer the gateway and direct mode serve from, auth
off), driven in virtual time by sim/driver.py: an operation becomes the Call its REST request
would be (a create is `POST .../docs`, an upsert the same with x-ms-documentdb-is-upsert, a
replace `PUT .../docs/{id}`, a delete `DELETE .../docs/{id}`, a point read `GET .../docs/{id}`,
a whole-partition snapshot a read feed scoped to the partition key range, in one page), and the
Reply becomes the operation's history entry: status and substatus, the position (epoch and LSN)
from the session token and `lsn` headers, what a read saw from the body, and the outcome by the
error's `definite` flag (fail: certainly not applied; info: may have been). A reply that a
request fault drops (timeout_after_apply, tcp_reset: `Reply.fault`) is recorded as an answer
its client never got (outcome "info", reply "unknown"). Everything between — refusing a region
that is down, request faults, running the core Writer, waiting for the acknowledgement or for a
region to catch up, and the constants those waits use — is the service's.

What only the simulator knows stays here. It watches the core for the checker: each write's
fate (committed or discarded, whatever its client was told), from the moment the service
commits it (Service.on_commit); where every region stood when the write's acknowledgement wait
ended (`regions_at_ack`); which writes each forced failover listed as lost; and where each
partition's epochs began. A region that goes down drops the requests still open there (outcome
"info": their clients lose the connection); the service runs them to the end all the same, and
their replies go nowhere. Time jumps from timer to timer (`step`).
"""
import json
import random

from regionlab.client.protocol import headers as H
from regionlab.client.protocol.session_token import format_session_header, merge, parse_session_header

from ..core.account import Account, AccountConfig
from ..core.container import canonical_pk_json
from ..core.request_faults import DROP_AFTER_APPLY
from ..core.scheduler import ManualClock, Scheduler
from .. import interpreter
from ..service.call import Call
from ..service.service import Service
from .driver import Driver
from .history import History
from ..core.limits import PAGE_MAX_ITEMS

INVARIANT_CHECK_MS = 10
DATABASE = "simdb"
PK_DEF = {"paths": ["/pk"], "kind": "Hash", "version": 2}
WRITE_FS = ("create", "upsert", "replace", "delete")
READ_FS = ("read", "snapshot")
ERROR_TEXT_MAX = 200


class Request:
    """One operation sent to a region's service, until its reply comes back."""
    __slots__ = ("op", "region", "on_done", "done", "rs", "regions_at_ack")

    def __init__(self, op: dict, on_done):
        self.op = op
        self.region = op["region"]
        self.on_done = on_done
        self.done = False               # its client has its answer (the reply, or a dropped connection)
        self.rs = None                  # a write's replica set, once committed
        self.regions_at_ack = None      # {region: [epoch, committed LSN]} when it was acknowledged


class World:
    def __init__(self, seed: int, account_config: AccountConfig, containers: int, keys: int):
        interpreter.install()                 # the store's memory as a serving emulator keeps it
        self.seed = seed
        self.clock = ManualClock()
        self.scheduler = Scheduler()
        self.account = Account(account_config, self.clock, self.scheduler, random.Random(f"{seed}:account"))
        self.history = History()
        self.driver = Driver(self.clock, self.scheduler)
        self.services = {}
        for region in self.account.regions:
            svc = self.services[region.name] = Service(self.account, None, region.name, None, self.driver)
            svc.on_commit = self._committed
        db = self.account.create_database({"id": DATABASE})
        self.containers = {}
        for i in range(containers):
            name = f"c{i}"
            self.containers[name] = self.account.create_container(db, {"id": name, "partitionKey": PK_DEF})
        self.keys = [f"k{i}" for i in range(keys)]
        self._open: dict = {}              # Call -> Request, until the service replies
        self._unanswered = 0               # requests whose client has no answer yet
        self._lost_seen = 0
        self._epochs: dict = {}            # (container, range_id) -> {epoch: start_lsn}
        self._writes_at: dict = {}         # (container, range_id, lsn, key) -> [op, ...]
        self._broken_seen: list = []       # (container, range_id, region) already reported
        self._active: tuple = ()           # fault ids active at the last look
        self._signature = None
        self._checked_ms = 0
        self._region_events = 0
        self.account.region_listeners.append(self._on_region_state)

    @property
    def now_ms(self) -> int:
        return self.clock.now_ms()

    def partition_of(self, container: str, key: str):
        c = self.containers[container]
        return c.partition_for_epk(c.epk_of(canonical_pk_json([key]), [key]))

    # ---- time ----------------------------------------------------------------------------
    def step(self) -> bool:
        """Jump to the next timer and run everything due then; False when none is left."""
        due = self.scheduler.next_due_ms()
        if due is None:
            return False
        self.clock.advance_to(max(due, self.now_ms))
        self.scheduler.run_due(self.now_ms)
        self.observe()
        return True

    def run_idle(self, limit_ms: int | None = None) -> None:
        while True:
            due = self.scheduler.next_due_ms()
            if due is None or (limit_ms is not None and due > limit_ms):
                break
            self.step()
        if limit_ms is not None and limit_ms > self.now_ms:
            self.clock.advance_to(limit_ms)

    # ---- watching the core ------------------------------------------------------------------
    def observe(self) -> None:
        """Note faults that ended, new epochs and new lost-writes entries (after a forced
        failover, which may run inside any timer: a service-managed one does), and check the
        replica sets' own invariants. The full look runs when something it watches changed, and
        at least every INVARIANT_CHECK_MS (a failover draining polls every millisecond)."""
        acct = self.account
        active = tuple(acct.faults.active)
        signature = (len(acct.failovers), len(acct.lost_writes), self._region_events, active)
        if signature == self._signature and self.now_ms - self._checked_ms < INVARIANT_CHECK_MS:
            return
        self._signature, self._checked_ms = signature, self.now_ms
        for fid in self._active:
            if fid not in acct.faults.active:
                self.history.event(self.now_ms, "fault-ended", id=fid)
        self._active = active
        for name, c in self.containers.items():
            for p in c.partitions:
                starts = self._epochs.setdefault((name, p.range_id), {})
                for region, rs in p.replica_sets.items():
                    if rs.committed_lsn > rs.lsn or any(r.applied_lsn > rs.lsn for r in rs.replicas):
                        self._broken(name, p.range_id, region, rs)
                    if rs.epoch and self.account.region(region).state == "up":
                        self._note_epochs(name, p.range_id, starts, rs)
        lost = self.account.lost_writes
        while self._lost_seen < len(lost):
            self._map_lost(lost[self._lost_seen])
            self._lost_seen += 1

    def _note_epochs(self, container: str, range_id: str, starts: dict, rs) -> None:
        """Where each epoch began (the LSN history was cut back to; NO_CUT_LSN for an epoch that
        cut nothing), the highest any region reports: a region that lagged the cut starts lower."""
        for epoch, start in enumerate(rs.epoch_starts[1:], 1):
            if starts.get(epoch, -1) < start:
                starts[epoch] = start
                self.history.event(self.now_ms, "epoch", container=container, partition=range_id,
                                   epoch=epoch, start_lsn=start)

    def _broken(self, container: str, range_id: str, region: str, rs) -> None:
        where = (container, range_id, region)
        if where not in self._broken_seen:
            self._broken_seen.append(where)
            self.history.event(self.now_ms, "invariant", container=container, partition=range_id,
                               region=region, message=f"log at {rs.lsn}, committed {rs.committed_lsn}, "
                                                      f"replicas applied {[r.applied_lsn for r in rs.replicas]}")

    def _map_lost(self, entry: dict) -> None:
        c = self.containers.get(entry["container"])
        key = entry["id"]
        candidates = self._writes_at.get((entry["container"], entry["partition"], entry["lsn"], key), [])
        epoch_now = c.partitions[int(entry["partition"])].replica_sets[self.account.hub_region].epoch
        op = next((o for o in reversed(candidates) if o["epoch"] < epoch_now and not o["lost"]), None)
        self.history.event(self.now_ms, "lost", container=entry["container"], partition=entry["partition"],
                           lsn=entry["lsn"], key=key, op=None if op is None else op["id"],
                           region=entry["region"], reason=entry["reason"])
        if op is not None:
            op["lost"] = True

    def _on_region_state(self, name: str, state: str) -> None:
        self.history.event(self.now_ms, "region", region=name, state=state)
        self._region_events += 1
        if state != "down":
            return
        for req in list(self._open.values()):
            if req.region == name and not req.done:
                self._finish(req, "info", status=503, error=f"connection to {name} dropped (region outage)")

    # ---- requests ---------------------------------------------------------------------------
    def write(self, op: dict, on_done) -> None:
        """op: an invoked history op with f in WRITE_FS; on_done(op, tokens) runs when it completes
        (tokens: the reply's session tokens, {range_id: VectorToken}, or None)."""
        f, key = op["f"], op["key"]
        docs = f"dbs/{DATABASE}/colls/{op['container']}/docs"
        headers = self._headers(op)
        headers[H.PARTITION_KEY] = canonical_pk_json([key])
        if f in ("create", "upsert"):
            method, path = "POST", docs
            if f == "upsert":
                headers[H.IS_UPSERT] = "true"
        else:
            method, path = ("PUT" if f == "replace" else "DELETE"), f"{docs}/{key}"
        body = b"" if f == "delete" else json.dumps({"id": key, "pk": key, "w": op["id"]}).encode()
        self._send(op, method, path, headers, body, on_done)

    def read(self, op: dict, session: dict | None, on_done) -> None:
        """A point read (f "read"), or a whole-partition snapshot (f "snapshot"): a read feed
        scoped to the partition key range, in one page (every partition holds at most KEYS_MAX
        items, run.py). session: the client's tokens for the container, {range_id: VectorToken}."""
        docs = f"dbs/{DATABASE}/colls/{op['container']}/docs"
        headers = self._headers(op)
        headers[H.CONSISTENCY_LEVEL] = op["consistency"]
        if session:
            headers[H.SESSION_TOKEN] = format_session_header(session)
        if op["f"] == "snapshot":
            headers[H.PK_RANGE_ID] = op["partition"]
            headers[H.MAX_ITEM_COUNT] = str(PAGE_MAX_ITEMS)
            path = docs
        else:
            headers[H.PARTITION_KEY] = canonical_pk_json([op["key"]])
            path = f"{docs}/{op['key']}"
        self._send(op, "GET", path, headers, b"", on_done)

    @staticmethod
    def _headers(op: dict) -> dict:
        # A client's own activity id (as the SDK sends one): the reply's, and error messages, stay
        # the same from run to run.
        return {H.ACTIVITY_ID: f"00000000-0000-0000-0000-{op['id']:012x}"}

    def _send(self, op: dict, method: str, path: str, headers: dict, body: bytes, on_done) -> None:
        svc = self.services[op["region"]]
        call = Call(svc, method, path, headers, body)
        req = Request(op, on_done)
        self._open[call] = req
        self._unanswered += 1
        on_wake = None if op["f"] in READ_FS else (lambda value: self._woken(req, value))
        self.driver.start(svc.handle(call), lambda reply: self._replied(call, req, reply), on_wake)

    def _committed(self, call, rs, lsn: int) -> None:
        """Service.on_commit: the write of call committed at lsn in rs (not yet acknowledged).
        Its fate is watched from here, whatever its client is told."""
        req = self._open[call]
        op = req.op
        op.update(lsn=lsn, epoch=rs.epoch, value=None if op["f"] == "delete" else op["id"], fate=None)
        self._writes_at.setdefault((op["container"], rs.range_id, lsn, op["key"]), []).append(op)
        rs.when_committed(lsn, lambda ok: op.update(fate="committed" if ok else "discarded"))
        req.rs = rs
        req.regions_at_ack = _positions(rs)      # the acknowledgement, if it needs no wait, is now

    def _woken(self, req: "Request", value) -> None:
        """A wait of req's write ended, inside the core callback that ended it: when its
        acknowledgement came, note where every region stood (Strong: a majority must hold it)."""
        if value and req.rs is not None:
            req.regions_at_ack = _positions(req.rs)

    def _replied(self, call, req: "Request", reply) -> None:
        del self._open[call]
        if req.done:                    # a region outage dropped its connection meanwhile
            return
        outcome, fields, tokens = answer(req, reply)
        self._finish(req, outcome, tokens, **fields)

    def _finish(self, req: "Request", outcome: str, tokens=None, **fields) -> None:
        req.done = True
        self._unanswered -= 1
        self.history.complete(req.op, self.now_ms, outcome, **fields)
        req.on_done(req.op, tokens)

    @property
    def in_flight(self) -> int:
        """Requests whose client has no answer yet."""
        return self._unanswered

    # ---- the end of a run ---------------------------------------------------------------------
    def heal_everything(self) -> None:
        for fid in list(self.account.faults.active):
            self.account.faults.heal(fid)
            self.history.event(self.now_ms, "heal", fault=fid, by="end of run")
        self.observe()

    def final_state(self) -> dict:
        """{container: {range_id: {region: {lsn, committed_lsn, epoch, applied, items}}}}."""
        out = {}
        for name, c in self.containers.items():
            parts = out[name] = {}
            for p in c.partitions:
                parts[p.range_id] = {
                    region: {"lsn": rs.lsn, "committed_lsn": rs.committed_lsn, "epoch": rs.epoch,
                             "applied": [r.applied_lsn for r in rs.replicas],
                             "items": {v.key[1]: v.doc.get("w") for v in rs.store.scan(rs.committed_lsn)}}
                    for region, rs in p.replica_sets.items()}
        return out


def answer(req: Request, reply) -> tuple:
    """(outcome, history fields, session tokens or None) of the service's reply to req."""
    op = req.op
    if reply.fault is not None:
        # The request ran; its reply never reaches the client, who cannot know whether it was
        # applied: an indefinite outcome.
        how = "dropped without an answer" if reply.fault == DROP_AFTER_APPLY else "reset mid-reply"
        return "info", {"error": f"the connection was {how} after the request ran (request fault)",
                        "reply": "unknown"}, None
    status, hdrs = reply.status, reply.headers
    read = op["f"] in READ_FS
    # A point read of a missing item is an answer, with the position it was read at; an error
    # fault's 404 is not (it carries no session token: nothing was read).
    found_nothing = op["f"] == "read" and status == 404 and reply.substatus == 0 and H.SESSION_TOKEN in hdrs
    if status >= 300 and not found_nothing:
        return ("fail" if reply.definite else "info"), {"status": status, "substatus": reply.substatus,
                                                       "error": _message(reply)}, None
    tokens = parse_session_header(hdrs[H.SESSION_TOKEN])
    epoch, lsn = tokens[op["partition"]].version, int(hdrs[H.LSN])
    fields = {"status": status, "reply_token": [epoch, lsn]}
    if not read:
        fields["regions_at_ack"] = req.regions_at_ack
    elif op["f"] == "read":
        fields.update(lsn=lsn, epoch=epoch, value=json.loads(reply.body)["w"] if status == 200 else None)
    else:
        if H.CONTINUATION in hdrs:
            raise RuntimeError(f"snapshot {op['id']} took more than one page: a partition holds more items "
                               f"than a page ({PAGE_MAX_ITEMS})")
        docs = json.loads(reply.body)["Documents"]
        fields.update(lsn=lsn, epoch=epoch, items={d["id"]: d.get("w") for d in docs})
    return "ok", fields, tokens


def _message(reply) -> str:
    """An error reply's message, without the activity id the service appends."""
    text = json.loads(reply.body)["message"]
    return text.removeprefix("Message: ").split("\r\nActivityId: ", 1)[0][:ERROR_TEXT_MAX]


def _positions(rs) -> dict:
    """{region: [epoch, committed LSN]} of every region of rs's partition."""
    return {region: [r.epoch, r.committed_lsn] for region, r in rs.partition.replica_sets.items()}


def token_merge(tokens: dict, new: dict) -> None:
    """Fold a reply's session tokens ({range_id: VectorToken}) into a client's, as the SDK does."""
    for range_id, token in new.items():
        old = tokens.get(range_id)
        tokens[range_id] = token if old is None else merge(old, token)


def dumps(data) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))
