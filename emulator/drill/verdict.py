"""The drill's consistency verdict: the black-box history checker (emulator/drill/observed.py)
run on what the workload's clients saw.

Every write of a drill creates a new item (its id is its value), and after the run the workload
reads back every one it issued, answered or not. So each write is judged exactly: an
acknowledged one is there or listed lost; one whose every attempt was refused is absent; one
with an unknown attempt (no reply, 408) is reported with what the read-back found. Reads of the
prefilled keys are not judged here: their values never change during a drill.
"""
from . import observed


def check(drill, ops: list, present: set, lost_ids: set) -> dict:
    history = []
    for op in ops:
        if op.kind != "write" or op.item_id is None:
            continue
        history.append({"id": op.item_id, "client": 0, "f": "create", "key": op.item_id, "value": op.item_id,
                        "invoke_seq": op.start_ms, "complete_seq": op.start_ms + op.latency_ms,
                        "attempts": [{"outcome": o} for o in op.outcomes]})
    final = {h["key"]: h["value"] if h["key"] in present else observed.ABSENT for h in history}
    v = observed.check(history, final, lost_keys=lost_ids)
    unknown = v.unknown_writes
    return {"level": drill.consistency, "checker": "emulator/drill/observed.py", "valid": v.valid,
            "writes": v.ops, "unknown_writes": len(unknown),
            "unknown_applied": sum(1 for u in unknown if u["applied"]),
            "unknown_ids": [u["op"] for u in unknown][:UNKNOWN_LISTED_MAX],
            "violations": v.violations[:VIOLATIONS_LISTED_MAX], "violation_count": len(v.violations)}


UNKNOWN_LISTED_MAX = 100
VIOLATIONS_LISTED_MAX = 50


def attempt_outcomes(attempts) -> tuple:
    """The bundled client's attempts (client.diagnostics.Attempt) of one write, as outcomes."""
    out = []
    for a in attempts:
        if a.status is not None:
            out.append(observed.attempt_outcome("create", a.status, a.sub_status))
        else:            # no reply: unknown once sent (broken, timed out, a cancelled copy)
            out.append(observed.UNKNOWN if a.outcome_unknown or a.error == "cancelled" else observed.FAIL)
    return tuple(out)
