"""The verdicts of a drill's assertions (docs/drills.md, "Assertions"); their syntax, with each
step's `expect` and the `stop` condition, is scenario.py's:

    "assertions": {"availability_min": 0.99, "p99_ms_max": 250,        outside fault windows
                   "lost_writes_max": 0, "lost_writes_match": true, "consistency_valid": true,
                   "error_rate_max": 0.05,                              the whole run
                   "steady_state": {"availability_min": 0.99, "p99_ms_max": 250},
                   "faults": {"availability_min": 0.5, "p99_ms_max": 3000, "rto_ms_max": 8000,
                              "lost_writes_max": 0, "recovered_in_window": true},   every fault window
                   "recovery": {"availability_min": 0.95, "hold_ms": 1000, "stall_ms": 500}}   what RTO waits for
    "stop": {"error_rate_above": 0.5, "over_ms": 2000}
    a step: {"at_ms": ..., "fault": {...}, "expect": {"rto_ms_max": 3000}}    its own window

The steady state is judged on the operations that ran before the first step and on those that
started after the last fault window ended; a miss before the first step aborts the drill before
anything is injected (runner.py). Limits are promises to users, not times of the scenario:
`--duration-scale` leaves them as they are and scales `recovery.hold_ms` and the stop
condition's `over_ms` with the rest of the scenario.

A verdict is {"name", "value", "op", "limit", "held"}; `held` is None ("not judged") when there
was nothing to judge (no operation in the span, no acknowledged write, no write at all), which
neither passes nor fails a drill. Pure functions of the report's figures (report.py).
"""


# ---- the verdicts --------------------------------------------------------------------------
def verdict(name: str, value, op: str, limit) -> dict:
    """value None: nothing to judge (held None)."""
    if value is None:
        held = None
    elif op == ">=":
        held = value >= limit
    elif op == "<=":
        held = value <= limit
    else:
        held = value == limit
    return {"name": name, "value": value, "op": op, "limit": limit, "held": None if held is None else bool(held)}


def span_verdicts(name: str, figures: dict, limits: dict) -> list[dict]:
    """availability_min and p99_ms_max over one span's summary (not judged when it has no ops)."""
    ops = figures["ops"]
    out = []
    if "availability_min" in limits:
        out.append(verdict(f"availability {name}", figures["availability"] if ops else None, ">=",
                           limits["availability_min"]))
    if "p99_ms_max" in limits:
        out.append(verdict(f"p99 latency {name} (ms)", figures["p99_ms"] if ops else None, "<=",
                           limits["p99_ms_max"]))
    return out


def window_limits(assertions: dict, step: dict) -> dict:
    return {**assertions.get("faults", {}), **step.get("expect", {})}


def _window(w: dict, limits: dict) -> list[dict]:
    out = span_verdicts(f"in [{w['label']}]", w, limits)
    if "rto_ms_max" in limits:
        rto = w["rto_ms"]
        v = verdict(f"RTO of [{w['label']}] (ms)", rto, "<=", limits["rto_ms_max"])
        if rto is None:            # never back to the recovery level within the drill: that fails
            v.update(value="not recovered", held=False)
        out.append(v)
    if limits.get("recovered_in_window"):
        # Recovered while the fault was still on, not merely because it ended: survived, not outlasted.
        back = w["rto_ms"] is not None and w["start_ms"] + w["rto_ms"] < w["end_ms"]
        v = verdict(f"[{w['label']}] recovered before its window ended", back, "==", True)
        v["detail"] = "not recovered" if w["rto_ms"] is None else f"back at {w['start_ms'] + w['rto_ms']:.0f} ms"
        out.append(v)
    if "lost_writes_max" in limits:
        out.append(verdict(f"writes lost by [{w['label']}]", w["rpo_writes"], "<=", limits["lost_writes_max"]))
    return out


def check(assertions: dict, schedule: list, figures: dict) -> list[dict]:
    """Every verdict of a run. figures: outside, total, steady_before, steady_after (summaries),
    windows (fault windows with their own figures), lost (LostWrites.to_dict()), consistency."""
    outside, lost, consistency = figures["outside"], figures["lost"], figures.get("consistency")
    out = span_verdicts("outside fault windows", outside, assertions)
    writes = figures["total"]["ops_by_kind"].get("write", 0)
    if "lost_writes_max" in assertions:
        out.append(verdict("lost writes (listed)", lost["listed"] if writes or lost["listed"] else None, "<=",
                           assertions["lost_writes_max"]))
    if assertions.get("lost_writes_match"):
        judged = lost["acknowledged_writes"] or lost["listed"]
        v = verdict("every acknowledged unreadable write is listed", lost["match"] if judged else None, "==", True)
        v["detail"] = (f"{lost['acknowledged_unreadable']} of {lost['acknowledged_writes']} acknowledged writes "
                       "no longer readable")
        out.append(v)
    if assertions.get("consistency_valid") and consistency is not None:
        judged = sum(consistency["writes"].values())
        out.append(verdict(f"history checker ({consistency['level']}): no violation",
                           consistency["violation_count"] if judged else None, "==", 0))
    if "error_rate_max" in assertions:
        total = figures["total"]
        out.append(verdict("error rate of the whole run", round(1 - total["availability"], 6) if total["ops"] else None,
                           "<=", assertions["error_rate_max"]))
    steady = assertions.get("steady_state")
    if steady:
        out += span_verdicts("before the first fault", figures["steady_before"], steady)
        out += span_verdicts("after the last fault window", figures["steady_after"], steady)
    for w in figures["windows"]:
        out += _window(w, window_limits(assertions, schedule[w["step"]]))
    return out


def passed(verdicts: list[dict]) -> bool:
    return not any(v["held"] is False for v in verdicts)
