"""The terminal summary of a drill's report: one row per phase, the faults' RTO/RPO, the lost
writes and the assertions with their verdicts; a drill with setups adds their comparison, and a
drill with client steps the availability before and after each."""

PHASE_COLUMNS = (("phase", 34), ("ops", 7), ("ops/s", 8), ("errors", 7), ("p50 ms", 8), ("p99 ms", 9),
                 ("retries", 8), ("RU", 9), ("served by", 0))


def _row(values) -> str:
    return "  ".join(str(v)[:w].ljust(w) if w else str(v) for v, (_, w) in zip(values, PHASE_COLUMNS)).rstrip()


COMPARISON_COLUMNS = (("setup", 18), ("ops", 7), ("avail", 8), ("avail (faults)", 15), ("p99 ms", 9),
                      ("p99 ms (faults)", 16), ("RU", 10), ("hedged RU", 16), ("breaker opened", 0))


def _cols(values, columns) -> str:
    return "  ".join(str(v)[:w].ljust(w) if w else str(v) for v, (_, w) in zip(values, columns)).rstrip()


def comparison(report: dict) -> list[str]:
    if "comparison" not in report:
        return []
    lines = ["", "setups compared (the same workload and faults, one after another):",
             _cols((name for name, _ in COMPARISON_COLUMNS), COMPARISON_COLUMNS)]
    for r in report["comparison"]:
        lines.append(_cols((r["setup"], r["ops"], f"{r['availability']:.4f}", f"{r['availability_in_fault_windows']:.4f}",
                            r["p99_ms"], r["p99_ms_in_fault_windows"], r["request_charge"],
                            f"{r['hedged_extra_charge']} ({r['extra_ru_share']:.1%})", r["breaker_opened"]),
                           COMPARISON_COLUMNS))
    return lines


def client_changes(report: dict) -> list[str]:
    return [f"{c['label']} at {c['at_ms']} ms: availability {c['availability_before']} before, "
            f"{c['availability_after']} after" for c in report.get("client_changes", [])]


def history_check(report: dict) -> list[str]:
    h = report.get("history_check")
    if not h:
        return []
    writes = ", ".join(f"{n} {k}" for k, n in sorted(h["writes"].items()))
    line = (f"history checker ({h['level']}): {'no violation' if h['valid'] else str(h['violation_count']) + ' VIOLATIONS'}"
            f"; writes {writes or 'none'}; {h['unknown_writes']} unknown ({h['unknown_applied']} applied)")
    return [line] + [f"  {x['check']}: {x['message']}" for x in h["violations"][:5]]


def render(report: dict) -> str:
    lines = [f"drill {report['drill']}: {report['description']}".rstrip(": "), "",
             _row(name for name, _ in PHASE_COLUMNS)]
    for p in report["phases"] + [dict(report["total"], name="total")]:
        served = ", ".join(f"{r} {n}" for r, n in sorted(p["served_by"].items(), key=lambda kv: -kv[1]))
        lines.append(_row((p["name"], p["ops"], p["ops_per_s"], p["errors"], p["p50_ms"], p["p99_ms"],
                           sum(p["retries_by_reason"].values()), p["request_charge"], served)))
    if report["faults"]:
        lines += ["", "fault / failover                    window (ms)       RTO (ms)  lost writes (RPO)"]
        for w in report["faults"]:
            rto = "not recovered" if w["rto_ms"] is None else w["rto_ms"]
            lines.append(f"{w['label'][:34]:34}  {w['start_ms']:>6}-{w['end_ms']:<9} {rto!s:>9}  {w['rpo_writes']}")
    lines += comparison(report)
    changes = client_changes(report)
    lines += [""] + changes if changes else []
    lost = report["lost_writes"]
    lines += ["", f"lost writes: {lost['listed']} listed by GET /lost-writes; {lost['acknowledged_unreadable']} of "
              f"{lost['acknowledged_writes']} acknowledged writes no longer readable"
              f"{'' if lost['match'] else ' — NOT ALL LISTED: ' + ', '.join(lost['unreadable_not_listed'][:5])}"]
    lines += history_check(report)
    outside = report["outside_fault_windows"]
    lines.append(f"outside fault windows: availability {outside['availability']:.4f}, p99 {outside['p99_ms']} ms")
    for a in report["assertions"]:
        lines.append(f"{'PASS' if a['held'] else 'FAIL'}  {a['name']}: {a['value']} {a['op']} {a['limit']}")
    lines.append(f"result: {'passed' if report['passed'] else 'FAILED'}"
                 + ("" if report["assertions"] else " (no assertions)"))
    return "\n".join(lines)
