"""The simulated world: one account driven in virtual time, and the gateway's part of a request.

Theory of operation: the core is the real one (emulator/core); what the asyncio gateway adds
around it is redone here in virtual time, following gateway/server.py: a request to a region
that is down is refused (503); a write is executed by a core Writer, committed, and then waits
until it is acknowledged (a quorum of its region, under Strong a majority of regions) or
discarded (503, definitely not applied) or WRITE_ACK_TIMEOUT_MS passes (indefinite); a read
whose region has not caught up with what its consistency level needs waits briefly, then is
served or refused. A region that goes down drops its open requests (indefinite). Request faults
act as in the gateway: an error fault answers before anything runs (definite); a latency fault
holds the reply, which stays in flight; timeout_after_apply and tcp_reset let the request run
and lose its reply (indefinite: outcome "info", reply "unknown").

The world also watches the core for the checker: each write's fate (committed or discarded,
whatever its client was told), which writes each forced failover listed as lost, and where
each partition's epochs began. Time jumps from timer to timer (`step`).
"""
import json
import random

from regionlab.client.protocol.session_token import VectorToken, merge

from ..core.account import Account, AccountConfig
from ..core.consistency import SESSION, STRONG
from ..core.container import canonical_pk_json
from ..core.documents import Writer, choose_replica, min_lsn_for, read_in
from ..core.errors import CosmosError
from ..core.request_faults import DROP_AFTER_APPLY
from ..core.scheduler import ManualClock, Scheduler
from ..runtime import memory
from .history import History

WRITE_ACK_TIMEOUT_MS = 30_000     # gateway/server.py WRITE_ACK_TIMEOUT_S
SESSION_WAIT_MS = 200             # gateway/server.py SESSION_WAIT_S
STRONG_WAIT_MS = 2_000            # gateway/server.py STRONG_WAIT_S
INVARIANT_CHECK_MS = 10
DATABASE = "simdb"
PK_DEF = {"paths": ["/pk"], "kind": "Hash", "version": 2}
WRITE_FS = ("create", "upsert", "replace", "delete")


class Pending:
    """One request the gateway has not answered yet."""
    __slots__ = ("op", "region", "done", "on_done", "rs", "effect")

    def __init__(self, op: dict, region: str, on_done, rs=None):
        self.op = op
        self.region = region
        self.done = False
        self.on_done = on_done
        self.rs = rs
        self.effect = None          # what the region's request faults do to it (core/request_faults.py)


class World:
    def __init__(self, seed: int, account_config: AccountConfig, containers: int, keys: int):
        memory.install()                 # the store's memory as a serving emulator keeps it
        self.seed = seed
        self.clock = ManualClock()
        self.scheduler = Scheduler()
        self.account = Account(account_config, self.clock, self.scheduler, random.Random(f"{seed}:account"))
        self.history = History()
        db = self.account.create_database({"id": DATABASE})
        self.containers = {}
        for i in range(containers):
            name = f"c{i}"
            self.containers[name] = self.account.create_container(db, {"id": name, "partitionKey": PK_DEF})
        self.keys = [f"k{i}" for i in range(keys)]
        self._pending: list[Pending] = []
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
        for p in list(self._pending):
            if p.region == name:
                self._finish(p, "info", status=503, error=f"connection to {name} dropped (region outage)")

    # ---- requests ---------------------------------------------------------------------------
    def _finish(self, p: Pending, outcome: str, **fields) -> None:
        if p.done:
            return
        effect, p.effect = p.effect, None
        if effect is not None and effect.drop is not None:
            # The request ran; its reply never reaches the client, who cannot know whether it
            # was applied: an indefinite outcome.
            how = "dropped without an answer" if effect.drop == DROP_AFTER_APPLY else "reset mid-reply"
            outcome, fields = "info", {"error": f"the connection was {how} after the request ran (request fault)",
                                       "reply": "unknown"}
        if effect is not None and effect.delay_ms:
            if p not in self._pending:
                self._pending.append(p)      # a held reply is still in flight (an outage drops it)
            self.scheduler.call_at(self.now_ms + effect.delay_ms, self._release_held, p, outcome, fields)
            return
        p.done = True
        if p in self._pending:
            self._pending.remove(p)
        self.history.complete(p.op, self.now_ms, outcome, **fields)
        p.on_done(p.op)

    def _release_held(self, p: Pending, outcome: str, fields: dict) -> None:
        self._finish(p, outcome, **fields)

    def _fail(self, p: Pending, e: CosmosError) -> None:
        self._finish(p, "fail" if e.definite else "info", status=e.status, substatus=e.substatus,
                     error=e.message[:200])

    def _request_faults(self, p: Pending, kind: str) -> bool:
        """Decide the request faults of p's region for it, as the gateway does; False when an
        error fault answers it instead (definitely not applied)."""
        table = self.account.faults.requests
        if not table.by_region:
            return True
        op = p.op
        effect = table.decide(p.region, kind, DATABASE, op["container"], op["partition"])
        if effect is not None and effect.error is not None:
            p.effect = effect if effect.delay_ms else None
            self._fail(p, effect.error)
            return False
        p.effect = effect
        return True

    def write(self, op: dict, on_done) -> None:
        """op: an invoked history op with f in WRITE_FS; on_done(op) runs when it completes."""
        p = Pending(op, op["region"], on_done)
        if self.account.region(op["region"]).state != "up":
            return self._finish(p, "fail", status=503, substatus=0, error=f"{op['region']} is down")
        if not self._request_faults(p, "write"):
            return
        c = self.containers[op["container"]]
        key = op["key"]
        try:
            now_ms = self.now_ms + self.account.faults.requests.skew_ms(op["region"])
            w = Writer(c, op["region"], canonical_pk_json([key]), [key], now_ms)
            doc = {"id": key, "pk": key, "w": op["id"]}
            f = op["f"]
            if f == "create":
                status, _ = w.create(doc)
            elif f == "upsert":
                status, _ = w.upsert(doc)
            elif f == "replace":
                status, _ = w.replace(key, doc)
            else:
                status, _ = w.delete(key)
            lsn = w.commit()
        except CosmosError as e:
            return self._fail(p, e)
        rs = p.rs = w.rs
        op.update(lsn=lsn, epoch=rs.epoch, value=None if op["f"] == "delete" else op["id"], fate=None)
        self._writes_at.setdefault((op["container"], rs.range_id, lsn, key), []).append(op)
        rs.when_committed(lsn, lambda ok: op.update(fate="committed" if ok else "discarded"))
        self._pending.append(p)
        self.scheduler.call_at(self.now_ms + WRITE_ACK_TIMEOUT_MS, self._ack_timeout, p)
        if self.account.consistency == STRONG:
            rs.partition.when_globally_committed(lsn, lambda ok: self._acked(p, ok, status))
        else:
            rs.when_committed(lsn, lambda ok: self._acked(p, ok, status))

    def _acked(self, p: Pending, ok: bool, status: int) -> None:
        if p.done:
            return
        if ok:
            # Where every region stood when the write was acknowledged: under Strong, a majority
            # of them must hold it (the checker verifies that against the history).
            held = {region: [rs.epoch, rs.committed_lsn] for region, rs in p.rs.partition.replica_sets.items()}
            self._finish(p, "ok", status=status, reply_token=[p.rs.epoch, p.op["lsn"]], regions_at_ack=held)
        else:
            self._fail(p, CosmosError(503, 0, f"the write (LSN {p.op['lsn']}) was discarded before a "
                                              "quorum acknowledged it"))

    def _ack_timeout(self, p: Pending) -> None:
        self._fail(p, CosmosError(408, 0, "the write was not acknowledged in time", definite=False))

    def read(self, op: dict, session: dict | None, on_done) -> None:
        """A point read (f "read") or a whole-partition snapshot (f "snapshot")."""
        p = Pending(op, op["region"], on_done)
        if self.account.region(op["region"]).state != "up":
            return self._finish(p, "fail", status=503, substatus=0, error=f"{op['region']} is down")
        if not self._request_faults(p, "read"):
            return
        c = self.containers[op["container"]]
        rs = c.partitions[int(op["partition"])].for_read(op["region"])
        p.rs = rs
        try:
            need = min_lsn_for(rs, op["consistency"], session)
        except CosmosError as e:
            return self._fail(p, e)
        if rs.committed_lsn >= need:
            return self._serve(p, session)
        self._pending.append(p)
        wait_ms = SESSION_WAIT_MS if op["consistency"] == SESSION else STRONG_WAIT_MS
        rs.when_committed(need, lambda ok: self._serve(p, session))
        self.scheduler.call_at(self.now_ms + wait_ms, self._serve, p, session, True)

    def _serve(self, p: Pending, session: dict | None, timed_out: bool = False) -> None:
        if p.done:
            return
        op, rs = p.op, p.rs
        try:
            if timed_out and op["consistency"] != SESSION and rs.committed_lsn < min_lsn_for(
                    rs, op["consistency"], session):
                raise CosmosError(503, 0, f"{rs.region} has not caught up for a {op['consistency']} read")
            if op["f"] == "snapshot":
                _, lsn = choose_replica(rs, op["consistency"], session)
                items = {v.key[1]: v.doc.get("w") for v in rs.store.scan(lsn)}
                fields = {"items": items}
            else:
                version, lsn = read_in(rs, canonical_pk_json([op["key"]]), op["key"], op["consistency"], session)
                fields = {"value": None if version is None else version.doc.get("w")}
        except CosmosError as e:
            return self._fail(p, e)
        self._finish(p, "ok", status=200, lsn=lsn, epoch=rs.epoch, reply_token=[rs.epoch, lsn], **fields)

    @property
    def in_flight(self) -> int:
        return len(self._pending)

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


def token_merge(tokens: dict, range_id: str, epoch: int, lsn: int) -> None:
    """Fold a reply's session token into a client's, as the SDK does."""
    new = VectorToken(epoch, lsn)
    old = tokens.get(range_id)
    tokens[range_id] = new if old is None else merge(old, new)


def dumps(data) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))
