"""A drill with `setups`: one report per client setup, and the report that puts them side by side.

Each setup ran the same workload and schedule on the same account, one after another, so their
figures compare directly: availability and p99 latency (over the whole run and inside the fault
windows, where the setups differ), request charge and the hedged copies' share of it (the extra
RU hedging costs), and how often the circuit breaker opened — the three things the Java SDK's
performance guide weighs hedging and the breaker on. Pure arithmetic on the runs' reports and
operations, as report.py.

The combined report keeps report.json's top-level figures for the whole drill (`total`,
`outside_fault_windows`, `in_fault_windows` over every setup's operations; `phases` and `faults`
of every setup, named "[setup] ..."; `lost_writes` summed; `assertions` of every setup, named
the same way), adds `setups` (each setup's own report, its timeline included) and `comparison`
(one row per setup), and has no top-level `timeline`: each setup has its own.
"""
from . import judge
from .report import in_window, summarize

SETUP_FIGURES = ("total", "outside_fault_windows", "in_fault_windows", "steady_state", "phases", "faults",
                 "client_changes", "lost_writes", "failovers", "timeline", "history_check", "assertions", "passed",
                 "ended")


def row(name: str, report: dict) -> dict:
    total, inside = report["total"], report["in_fault_windows"]
    charge = total["request_charge"]
    return {"setup": name, "ops": total["ops"], "availability": total["availability"],
            "availability_in_fault_windows": inside["availability"],
            "p99_ms": total["p99_ms"], "p99_ms_in_fault_windows": inside["p99_ms"],
            "request_charge": charge, "hedged_extra_charge": total["hedged_extra_charge"],
            "extra_ru_share": round(total["hedged_extra_charge"] / charge, 4) if charge else 0.0,
            "breaker_opened": total["breaker_opened"]}


def _named(items: list, setup: str, key: str) -> list:
    return [dict(x, **{key: f"[{setup}] {x[key]}", "setup": setup}) for x in items]


def _lost(parts: list) -> dict:
    return {"listed": sum(p["listed"] for p in parts),
            "acknowledged_writes": sum(p["acknowledged_writes"] for p in parts),
            "acknowledged_unreadable": sum(p["acknowledged_unreadable"] for p in parts),
            "listed_acknowledged": sum(p["listed_acknowledged"] for p in parts),
            "unreadable_not_listed": [w for p in parts for w in p["unreadable_not_listed"]],
            "match": all(p["match"] for p in parts),
            "writes": [w for p in parts for w in p["writes"]]}


def combine(drill, runs: list) -> dict:
    """runs: [(setup, its report, its ops)], in the order they ran."""
    all_ops = [op for _, _, ops in runs for op in ops]
    outside, inside = [], []
    for _, report, ops in runs:
        for op in ops:
            (inside if in_window(op.start_ms, report["faults"]) else outside).append(op)
    span_in = sum(w["end_ms"] - w["start_ms"] for _, r, _ in runs for w in r["faults"])
    span_all = drill.duration_ms * len(runs)
    first = runs[0][1]
    assertions = [a for setup, r, _ in runs for a in _named(r["assertions"], setup["name"], "name")]
    ended = next(({**r["ended"], "reason": f"[{setup['name']}] {r['ended']['reason']}"} for setup, r, _ in runs
                  if r["ended"]["kind"] != "completed"), {"kind": "completed"})
    return {"drill": drill.name, "description": drill.description, "duration_ms": drill.duration_ms,
            "duration_scale": first["duration_scale"], "duration_scale_min": first["duration_scale_min"],
            "ended": ended,
            "account": first["account"], "workload": dict(first["workload"], client_options=drill.client_options),
            "total": summarize(all_ops, span_all),
            "outside_fault_windows": summarize(outside, max(span_all - span_in, 1)),
            "in_fault_windows": summarize(inside, max(span_in, 1)),
            "phases": [p for setup, r, _ in runs for p in _named(r["phases"], setup["name"], "name")],
            "faults": [w for setup, r, _ in runs for w in _named(r["faults"], setup["name"], "label")],
            "client_changes": [c for setup, r, _ in runs for c in _named(r["client_changes"], setup["name"], "label")],
            "lost_writes": _lost([r["lost_writes"] for _, r, _ in runs]),
            "failovers": [f for _, r, _ in runs for f in r["failovers"]],
            "setups": [{"name": setup["name"], "client_options": r["workload"]["client_options"],
                        **{k: r[k] for k in SETUP_FIGURES}} for setup, r, _ in runs],
            "comparison": [row(setup["name"], r) for setup, r, _ in runs],
            "assertions": assertions,
            "passed": judge.passed(assertions) and ended["kind"] == "completed" and len(runs) == len(drill.setups)}
