"""The black-box history checker: what clients observed in a live run, held against the data
left at the end and the lost-writes list, with no view into the core.

Theory of operation: the simulator's checker (sim/checker.py) knows every write's fate because the
world watches the core. A live run — a drill, or a test driving the official SDK — knows only
what each client saw. Every HTTP attempt of an operation gets an outcome in Maelstrom's terms:

* "ok": acknowledged (2xx, and a read's plain 404: the item is not there);
* "fail": definitely did not happen — the service answered with an error that means nothing
  was applied (400, 403, 409, 412, 429, 449, 503, ... and the `error` fault's answers);
* "unknown": may or may not have happened — no answer (a dropped or reset connection after
  the request was sent, a client timeout), or 408, which the service sends when it cannot say.

A logical operation (what the application called) is "ok" if any attempt was, else "unknown"
if any attempt was, else "fail": a create whose first attempt was dropped after it applied and
whose retry got 409 is "unknown", not "fail" — the application was told "conflict", but its
own first attempt is what put the item there.

Values: every write carries a value no other write carries (the drills write new ids; tests
write a counter), so the final value of a key names exactly one write. Checks:

* acknowledged: an "ok" write whose value is gone is listed as lost, or a later write to the
  key (invoked after it completed, ok or unknown) may have replaced it;
* definite: no key ends with, and no read returns, the value of a write that definitely failed;
* phantom: no key ends with, and no read returns, a value nobody wrote;
* lost list: nothing listed lost is still there;
* stale reads (Session and Strong): a Session read never returns a value its own client had
  already seen replaced; a Strong read never returns a value replaced before the read began.
  "Replaced" is judged by real-time order only (w completed before v was invoked), which every
  level's single-region write order respects.

The report lists every unknown write with what the final state says of it: applied, not
applied, or overwritten (cannot tell).
"""
from dataclasses import dataclass, field

OK, FAIL, UNKNOWN = "ok", "fail", "unknown"
WRITE_FS = ("create", "upsert", "replace", "delete", "patch")
READ_FS = ("read",)
# Statuses that may hide an applied write: the service timed out waiting for its quorum.
INDEFINITE_STATUSES = frozenset({408})
ABSENT = None                       # a key's value when no item is there


def attempt_outcome(f: str, status: int | None, substatus: int = 0, sent: bool = True) -> str:
    """One HTTP attempt's outcome; `status` None means no reply arrived, `sent` False that the
    request never left the client (connection refused: definitely not applied)."""
    if not sent:
        return FAIL
    if status is None or status in INDEFINITE_STATUSES:
        return UNKNOWN
    if 200 <= status < 300 or (f in READ_FS and status == 404 and substatus == 0):
        return OK
    return FAIL


def op_outcome(attempts: list) -> str:
    outcomes = {a["outcome"] for a in attempts}
    return OK if OK in outcomes else UNKNOWN if UNKNOWN in outcomes else FAIL


@dataclass
class Verdict:
    ops: dict = field(default_factory=dict)          # outcome -> count of logical operations
    unknown_writes: list = field(default_factory=list)
    violations: list = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict:
        return {"valid": self.valid, "ops": self.ops, "unknown_writes": self.unknown_writes,
                "violations": self.violations}


def check(ops: list, final: dict, lost_keys=(), initial: dict | None = None) -> Verdict:
    """`ops`: logical operations, each {"id", "client", "f", "key", "value", "consistency",
    "invoke_seq", "complete_seq", "attempts": [{"status", "substatus", "sent"}, ...]} (reads: "value"
    is what the read returned, ABSENT for a 404); `final`: key -> value read after every fault
    healed (ABSENT if gone); `lost_keys`: keys GET /lost-writes names; `initial`: key -> value
    before the run."""
    v = Verdict()
    for op in ops:
        for a in op["attempts"]:
            a.setdefault("outcome", attempt_outcome(op["f"], a.get("status"), a.get("substatus", 0),
                                                   a.get("sent", True)))
        op["outcome"] = op_outcome(op["attempts"]) if op["attempts"] else UNKNOWN
        v.ops[op["outcome"]] = v.ops.get(op["outcome"], 0) + 1
    writes = [op for op in ops if op["f"] in WRITE_FS]
    by_value = {_value(w): w for w in writes}
    known = set(by_value) | {_hashable(x) for x in (initial or {}).values()}
    lost = set(lost_keys)
    _check_writes(writes, final, lost, v)
    _check_values(ops, final, by_value, known, v)
    for key in lost:
        mine = [w for w in writes if w["key"] == key]
        still = _hashable(final.get(key, ABSENT))
        if len(mine) == 1 and still is not ABSENT and still == _value(mine[0]):
            v.violations.append({"check": "lost-writes", "op": mine[0]["id"], "message":
                                 f"{key} is listed as lost but still holds its only write, {mine[0]['id']}"})
    _check_stale_reads(ops, writes, v)
    return v


def _value(w: dict):
    return ABSENT if w["f"] == "delete" else _hashable(w["value"])


def _hashable(x):
    return repr(x) if isinstance(x, (dict, list)) else x


def _replaced_later(w: dict, writes: list) -> bool:
    return any(o is not w and o["key"] == w["key"] and o["outcome"] != FAIL and
               o["invoke_seq"] > w.get("complete_seq", w["invoke_seq"]) for o in writes) or \
        any(o is not w and o["key"] == w["key"] and o["outcome"] != FAIL and
            o["invoke_seq"] < w.get("complete_seq", w["invoke_seq"]) and
            o.get("complete_seq", o["invoke_seq"]) > w["invoke_seq"] for o in writes)


def _check_writes(writes: list, final: dict, lost: set, v: Verdict) -> None:
    for w in writes:
        here = _hashable(final.get(w["key"], ABSENT)) == _value(w)
        if w["outcome"] == OK and not here and w["key"] not in lost and not _replaced_later(w, writes):
            v.violations.append({"check": "acknowledged", "op": w["id"], "message":
                                 f"acknowledged {w['f']} {w['id']} of {w['key']} is gone, nothing later "
                                 "replaced it and the lost-writes list does not name it"})
        if w["outcome"] == UNKNOWN:
            applied = True if here else None if _replaced_later(w, writes) or w["key"] in lost else False
            v.unknown_writes.append({"op": w["id"], "f": w["f"], "key": w["key"], "applied": applied,
                                     "attempts": [a["outcome"] for a in w["attempts"]]})


def _check_values(ops: list, final: dict, by_value: dict, known: set, v: Verdict) -> None:
    seen = [(key, _hashable(val), None) for key, val in final.items()]
    seen += [(op["key"], _hashable(op["value"]), op) for op in ops if op["f"] in READ_FS and op["outcome"] == OK]
    for key, val, reader in seen:
        if val is ABSENT:
            continue
        where = f"read {reader['id']}" if reader else "the final state"
        w = by_value.get(val)
        if w is None and val not in known:
            v.violations.append({"check": "phantom", "op": reader and reader["id"], "message":
                                 f"{where} of {key} holds {val!r}, which no client wrote"})
        elif w is not None and w["outcome"] == FAIL:
            v.violations.append({"check": "definite", "op": w["id"], "message":
                                 f"{where} of {key} holds the value of {w['f']} {w['id']}, which was "
                                 "definitely refused (every attempt failed with an error that applies nothing)"})


def _check_stale_reads(ops: list, writes: list, v: Verdict) -> None:
    by_value = {_value(w): w for w in writes}
    order = sorted((op for op in ops if op["outcome"] == OK), key=lambda o: o["invoke_seq"])
    seen: dict = {}                       # (client, key) -> the write the client last saw
    for op in order:
        mine = (op["client"], op["key"])
        w = by_value.get(_value(op)) if op["f"] in WRITE_FS else by_value.get(_hashable(op["value"]))
        if op["f"] in READ_FS and op.get("consistency") in ("Session", "Strong"):
            had = seen.get(mine)
            if had is not None and w is not had and _precedes(w, had):
                v.violations.append({"check": "session", "op": op["id"], "message":
                                     f"read {op['id']} of {op['key']} by client {op['client']} returned "
                                     f"{_name(w)}, older than {had['id']} it had already seen"})
            if op.get("consistency") == "Strong":
                newer = [x for x in writes if x["key"] == op["key"] and x["outcome"] == OK and
                         x["complete_seq"] < op["invoke_seq"] and _precedes(w, x)]
                if newer:
                    v.violations.append({"check": "strong", "op": op["id"], "message":
                                         f"strong read {op['id']} of {op['key']} returned {_name(w)}, but "
                                         f"{newer[-1]['id']} replaced it before the read began"})
        if w is not None:
            seen[mine] = w


def _precedes(w: dict | None, x: dict) -> bool:
    """w (None: the initial value) surely came before x in every write order of the key."""
    return w is None or w.get("complete_seq", float("inf")) < x["invoke_seq"]


def _name(w: dict | None) -> str:
    return "the initial value" if w is None else f"write {w['id']}"
