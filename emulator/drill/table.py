"""The terminal summary of a drill's report: one row per phase, the faults' RTO/RPO, the lost
writes and the assertions with their verdicts."""

PHASE_COLUMNS = (("phase", 34), ("ops", 7), ("ops/s", 8), ("errors", 7), ("p50 ms", 8), ("p99 ms", 9),
                 ("retries", 8), ("RU", 9), ("served by", 0))


def _row(values) -> str:
    return "  ".join(str(v)[:w].ljust(w) if w else str(v) for v, (_, w) in zip(values, PHASE_COLUMNS)).rstrip()


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
    lost = report["lost_writes"]
    lines += ["", f"lost writes: {lost['listed']} listed by GET /lost-writes; {lost['acknowledged_unreadable']} of "
              f"{lost['acknowledged_writes']} acknowledged writes no longer readable"
              f"{'' if lost['match'] else ' — NOT ALL LISTED: ' + ', '.join(lost['unreadable_not_listed'][:5])}"]
    outside = report["outside_fault_windows"]
    lines.append(f"outside fault windows: availability {outside['availability']:.4f}, p99 {outside['p99_ms']} ms")
    for a in report["assertions"]:
        lines.append(f"{'PASS' if a['held'] else 'FAIL'}  {a['name']}: {a['value']} {a['op']} {a['limit']}")
    lines.append(f"result: {'passed' if report['passed'] else 'FAILED'}"
                 + ("" if report["assertions"] else " (no assertions)"))
    return "\n".join(lines)
