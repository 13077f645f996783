"""The history checker: what a run's clients saw, held against what the consistency levels
and the failover rules promise. Pure: it reads the JSON-able history (history.py) and returns
violations; it never touches the core.

Theory of operation: each partition's log is rebuilt from the history. A write is in the log
when its commit reached a quorum (its `fate`); LSNs are unique within an epoch, and a forced
failover starts a new epoch at the LSN it kept (an "epoch" event), so the log a reader at
position (epoch E, LSN L) sees is every committed write (e, l) with l <= L that survived every
cut between e and E (l <= start of each later epoch up to E). That is the *lineage* of (E, L).

Checks, one function each:
* convergence: after everything healed, every region holds the same state per partition;
* final state: that state is exactly the lineage of the final position, folded;
* acknowledged writes: none is discarded or cut unless a forced failover listed it as lost,
  every committed write that vanished is listed (under the region that accepted it), nothing
  listed is still there, under Strong no acknowledged write is lost at all (RPO 0), and a
  write reported failed never happened;
* prefix: every read, at every level, saw exactly the lineage of the position it was served
  at, folded (never an out-of-order prefix);
* session: a session read's position contains the client's session (everything the client
  wrote or read before): read-your-writes and monotonic reads; a client whose session names
  writes a forced failover discarded must get an error, never older data;
* liveness: every write's commit resolved, and a graceful failover aborts only while a fault
  is active (nothing else can keep its drain from finishing);
* strong: a write is acknowledged only once a majority of regions hold it (committed, in the
  same lineage); a strong read reflects every write acknowledged before it started, and a read that
  starts after another finished never returns an older value of the key (linearizable
  register, given the log order of writes).
"""
WRITE_FS = ("create", "upsert", "replace", "delete")


class Lineage:
    """One partition's committed writes and epoch starts, and states at positions."""

    def __init__(self):
        self.writes: list = []            # committed write ops
        self.starts: dict = {}            # epoch -> LSN it started at
        self._states: dict = {}
        self.duplicates: list = []

    def survives(self, e: int, lsn: int, epoch: int) -> bool:
        if e > epoch:
            return False
        for x in range(e + 1, epoch + 1):
            if lsn > self.starts.get(x, lsn):
                return False
        return True

    def contains(self, pos, at) -> bool:
        return pos[1] <= at[1] and self.survives(pos[0], pos[1], at[0])

    def log(self, at) -> list:
        out = sorted((w for w in self.writes if self.contains((w["epoch"], w["lsn"]), at)),
                     key=lambda w: w["lsn"])
        for a, b in zip(out, out[1:]):
            if a["lsn"] == b["lsn"] and (a["id"], b["id"]) not in self.duplicates:
                self.duplicates.append((a["id"], b["id"]))
        return out

    def state(self, at) -> dict:
        """{key: (value, source write op or None)} of the lineage of `at`, folded."""
        at = tuple(at)
        cached = self._states.get(at)
        if cached is None:
            cached = {}
            for w in self.log(at):
                cached[w["key"]] = (w["value"], w)
            self._states[at] = cached
        return cached


class Violations:
    def __init__(self):
        self.items: list = []

    def add(self, check: str, message: str, op=None) -> None:
        self.items.append({"check": check, "message": message, "op": None if op is None else op["id"]})


def lineages(history: dict) -> dict:
    out: dict = {}
    for op in history["ops"]:
        if op["f"] in WRITE_FS and op.get("fate") == "committed":
            out.setdefault((op["container"], op["partition"]), Lineage()).writes.append(op)
    for e in history["events"]:
        if e["kind"] == "epoch":
            lin = out.setdefault((e["container"], e["partition"]), Lineage())
            lin.starts[e["epoch"]] = max(lin.starts.get(e["epoch"], 0), e["start_lsn"])
    return out


def final_positions(final: dict) -> dict:
    """(container, partition) -> the most advanced (epoch, committed LSN) of any region."""
    return {(c, pid): max((r["epoch"], r["committed_lsn"]) for r in regions.values())
            for c, parts in final.items() for pid, regions in parts.items()}


def check(history: dict) -> list:
    v = Violations()
    lins = lineages(history)
    for c, parts in history["final"].items():
        for pid in parts:
            lins.setdefault((c, pid), Lineage())
    finals = final_positions(history["final"])
    check_convergence(history["final"], v)
    check_final_state(history["final"], lins, v)
    check_acknowledged(history, lins, finals, v)
    check_prefix(history["ops"], lins, v)
    check_sessions(history["ops"], lins, v)
    check_strong(history["ops"], lins, finals, v)
    if history["config"]["consistency"] == "Strong":
        check_strong_durability(history["ops"], lins, v)
    check_failovers(history, v)
    for e in history["events"]:
        if e["kind"] == "invariant":
            v.add("replica-set", f"{e['container']}/{e['partition']} in {e['region']}: {e['message']}")
    for (c, pid), lin in lins.items():
        for a, b in lin.duplicates:
            v.add("log", f"{c}/{pid}: writes {a} and {b} both committed at one LSN of one lineage")
    return v.items


def check_convergence(final: dict, v: Violations) -> None:
    for c, parts in final.items():
        for pid, regions in parts.items():
            names = list(regions)
            first = regions[names[0]]
            for name in names[1:]:
                r = regions[name]
                for field in ("lsn", "committed_lsn", "epoch", "items"):
                    if r[field] != first[field]:
                        v.add("convergence", f"{c}/{pid}: {name} has {field} {_short(r[field])}, "
                                             f"{names[0]} has {_short(first[field])} after every fault healed")
                        break
            for name, r in regions.items():
                if len(set(r["applied"])) != 1 or r["applied"][0] != r["lsn"]:
                    v.add("convergence", f"{c}/{pid}: replicas of {name} applied {r['applied']}, log at {r['lsn']}")


def check_final_state(final: dict, lins: dict, v: Violations) -> None:
    for c, parts in final.items():
        for pid, regions in parts.items():
            lin = lins[(c, pid)]
            for name, r in regions.items():
                want = {k: val for k, (val, _) in lin.state((r["epoch"], r["committed_lsn"])).items()
                        if val is not None}
                if r["items"] != want:
                    diff = sorted(set(r["items"].items()) ^ set(want.items()))
                    v.add("final-state", f"{c}/{pid} in {name} at {r['epoch']}#{r['committed_lsn']}: "
                                         f"store and committed history differ on (key, write) {diff[:6]}")


def check_acknowledged(history: dict, lins: dict, finals: dict, v: Violations) -> None:
    by_id = {op["id"]: op for op in history["ops"]}
    for e in history["events"]:
        if e["kind"] == "lost" and e["op"] is None:
            v.add("lost-writes", f"the lost-writes entry {e['container']}/{e['partition']} LSN {e['lsn']} "
                                 f"id {e['key']} names no write the clients issued")
        elif e["kind"] == "lost" and e.get("region") != by_id[e["op"]]["region"]:
            v.add("lost-writes", f"the lost-writes entry for write {e['op']} names {e.get('region')}, but "
                                 f"{by_id[e['op']]['region']} accepted it", by_id[e["op"]])
    strong = history["config"]["consistency"] == "Strong"
    for op in history["ops"]:
        if op["f"] not in WRITE_FS or "lsn" not in op:
            continue
        where = (op["container"], op["partition"])
        in_final = op.get("fate") == "committed" and lins[where].contains((op["epoch"], op["lsn"]), finals[where])
        lost = op.get("lost")
        if op.get("fate") is None:
            v.add("liveness", f"write {op['id']} ({op['f']} {op['key']}) at {op['epoch']}#{op['lsn']} was "
                              "neither committed nor discarded after every fault healed", op)
        if op["outcome"] == "ok" and op.get("fate") != "committed" and not lost:
            v.add("acknowledged", f"write {op['id']} ({op['f']} {op['key']}) was acknowledged but its "
                                  f"commit at LSN {op['lsn']} was discarded, and no lost-writes entry says so", op)
        elif op.get("fate") == "committed" and not in_final and not lost:
            what = "acknowledged" if op["outcome"] == "ok" else "committed"
            v.add("acknowledged" if what == "acknowledged" else "lost-writes",
                  f"{what} write {op['id']} ({op['f']} {op['key']}, {op['epoch']}#{op['lsn']}) is not in the "
                  f"final history and no lost-writes entry lists it", op)
        if lost and in_final:
            v.add("lost-writes", f"write {op['id']} is listed as lost but is still in the history", op)
        if lost and strong and op["outcome"] == "ok":
            v.add("strong", f"acknowledged Strong write {op['id']} ({op['f']} {op['key']}, "
                            f"{op['epoch']}#{op['lsn']}) was lost by a forced failover: RPO is 0 under Strong", op)
        if op["outcome"] == "fail" and in_final:
            v.add("definite", f"write {op['id']} was reported as definitely not applied "
                              f"({op.get('status')}) but is in the history", op)


def check_failovers(history: dict, v: Violations) -> None:
    active: set = set()
    timeline = []                          # (seq, at_ms, active fault ids after the event)
    for e in history["events"]:
        if e["kind"] == "fault" and "id" in e:
            active.add(e["id"])
        elif e["kind"] == "fault-ended":
            active.discard(e["id"])
        timeline.append((e["at_ms"], frozenset(active)))
    for f in history["failovers"]:
        if f["state"] != "aborted":
            continue
        faults = frozenset()
        for at_ms, ids in timeline:
            if at_ms > f["finished_ms"]:
                break
            faults = ids
        if not faults:
            v.add("liveness", f"graceful failover #{f['id']} to {f['to']} aborted at {f['finished_ms']} "
                              "although no fault was active: its drain should have finished")


def check_prefix(ops: list, lins: dict, v: Violations) -> None:
    for op in ops:
        if op["f"] not in ("read", "snapshot") or op["outcome"] != "ok":
            continue
        lin = lins[(op["container"], op["partition"])]
        state = lin.state((op["epoch"], op["lsn"]))
        if op["f"] == "read":
            want = state.get(op["key"], (None, None))[0]
            if op["value"] != want:
                v.add("prefix", f"read {op['id']} of {op['key']} at {op['epoch']}#{op['lsn']} in "
                                f"{op['region']} saw write {op['value']}, the log there has {want}", op)
        else:
            want = {k: val for k, (val, _) in state.items() if val is not None}
            if op["items"] != want:
                v.add("prefix", f"snapshot {op['id']} of {op['container']}/{op['partition']} at "
                                f"{op['epoch']}#{op['lsn']} in {op['region']} is no prefix of the log: "
                                f"saw {_short(op['items'])}, the log has {_short(want)}", op)


def check_sessions(ops: list, lins: dict, v: Violations) -> None:
    sessions: dict = {}                      # (client, container, partition) -> (epoch, lsn)
    for op in sorted(ops, key=lambda o: o["invoke_seq"]):
        where = (op["client"], op["container"], op["partition"])
        if op["outcome"] != "ok":
            continue
        pos = (op["epoch"], op["lsn"])
        if op["f"] in ("read", "snapshot") and op["consistency"] == "Session" and where in sessions:
            have = sessions[where]
            lin = lins[(op["container"], op["partition"])]
            if not lin.contains(have, pos):
                v.add("session", f"client {op['client']} read {op['container']}/{op['partition']} at "
                                 f"{pos[0]}#{pos[1]} in {op['region']}, older than its session "
                                 f"{have[0]}#{have[1]}" + (" (which a forced failover cut: that must be an "
                                                            "error, not older data)" if pos[0] > have[0] else ""), op)
        # A client's session covers every op it completed; session_token.merge keeps the
        # higher version's LSN, i.e. the lexicographic max.
        sessions[where] = max(sessions.get(where, pos), pos)


def check_strong_durability(ops: list, lins: dict, v: Violations) -> None:
    for w in ops:
        held_at = w.get("regions_at_ack")
        if w["f"] not in WRITE_FS or w["outcome"] != "ok" or not held_at:
            continue
        lin = lins[(w["container"], w["partition"])]
        holding = [r for r, pos in held_at.items() if lin.contains((w["epoch"], w["lsn"]), tuple(pos))]
        if len(holding) < len(held_at) // 2 + 1:
            v.add("strong", f"strong write {w['id']} ({w['epoch']}#{w['lsn']}) was acknowledged while only "
                            f"{holding} of {sorted(held_at)} held it (positions {held_at})", w)


def check_strong(ops: list, lins: dict, finals: dict, v: Violations) -> None:
    reads = [op for op in ops if op["f"] in ("read", "snapshot") and op["consistency"] == "Strong"
             and op["outcome"] == "ok"]
    if not reads:
        return
    acked = [op for op in ops if op["f"] in WRITE_FS and op["outcome"] == "ok" and not op.get("lost")]
    for r in reads:
        lin = lins[(r["container"], r["partition"])]
        for w in acked:
            if (w["container"], w["partition"]) == (r["container"], r["partition"]) and \
                    w["complete_seq"] < r["invoke_seq"] and not lin.contains((w["epoch"], w["lsn"]), (r["epoch"], r["lsn"])):
                v.add("strong", f"strong read {r['id']} at {r['epoch']}#{r['lsn']} in {r['region']} misses write "
                                f"{w['id']} ({w['epoch']}#{w['lsn']}), acknowledged before the read started", r)
                break
    _check_strong_order([r for r in reads if r["f"] == "read"], lins, finals, v)


def _check_strong_order(reads: list, lins: dict, finals: dict, v: Violations) -> None:
    """A read that starts after another one finished never returns an older value of the key."""
    def source_lsn(r):
        """LSN of the write whose value r returned (0: none yet), or None when that write is not
        in the final history (lost by a forced failover: comparisons with it say nothing)."""
        where = (r["container"], r["partition"])
        src = lins[where].state((r["epoch"], r["lsn"])).get(r["key"], (None, None))[1]
        if src is None:
            return 0
        if src.get("lost") or not lins[where].contains((src["epoch"], src["lsn"]), finals[where]):
            return None
        return src["lsn"]

    by_key: dict = {}
    for r in reads:
        by_key.setdefault((r["container"], r["key"]), []).append(r)
    for rs in by_key.values():
        done = sorted(rs, key=lambda r: r["complete_seq"])
        for r2 in rs:
            s2 = source_lsn(r2)
            if s2 is None:
                continue
            for r1 in done:
                if r1["complete_seq"] >= r2["invoke_seq"]:
                    break
                s1 = source_lsn(r1)
                if s1 is not None and s1 > s2:
                    v.add("strong", f"strong read {r2['id']} of {r2['key']} in {r2['region']} returned the "
                                    f"value of LSN {s2} after read {r1['id']} in {r1['region']} had finished "
                                    f"returning LSN {s1}", r2)
                    break


def _short(x, limit: int = 160) -> str:
    s = repr(x)
    return s if len(s) <= limit else s[:limit] + "..."
