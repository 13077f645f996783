"""The terminal summary of a drill's report: one row per phase, the faults' RTO/RPO, the lost
writes and the assertions with their verdicts; a drill with setups adds their comparison, and a
drill with client steps the availability before and after each."""

PHASE_COLUMNS = (("phase", 34), ("ops", 7), ("ops/s", 8), ("errors", 7), ("avail", 8), ("p50 ms", 8), ("p99 ms", 9),
                 ("retries", 8), ("RU", 9), ("served by", 0))
PLURALS = {"query": "queries"}
LIST_MAX = 5                  # ids listed in a line before "and N more"


def pct(ratio: float) -> str:
    """Availability as people read it: 99.95 %, never rounded up to 100 % while anything failed."""
    text = f"{ratio:.2%}"
    return "99.99%" if text == "100.00%" and ratio < 1 else text


def workload_text(w: dict) -> str:
    """The workload section as a sentence: who sends what, how fast, with which client options."""
    if w.get("served"):
        return w["client"]
    mix = ", ".join(f"{share:.0%} {PLURALS.get(kind, kind + 's')}" for kind, share in w["mix"].items() if share)
    rate = f"at most {w['rate_per_s']} operations/s" if w.get("rate_per_s") else "as fast as they are answered"
    options = "; ".join(f"{k.replace('_', ' ')}: {', '.join(v) if isinstance(v, list) else v}"
                        for k, v in w.get("client_options", {}).items())
    return (f"{w['concurrency']} workers of the {'official azure-cosmos SDK' if w['client'] == 'azure-cosmos' else 'bundled regionlab client'}, "
            f"{rate}: {mix} over {w['keys']} keys" + (f"; client options: {options}" if options else "") + ".")


def listed(ids: list) -> str:
    more = len(ids) - LIST_MAX
    return ", ".join(ids[:LIST_MAX]) + (f" and {more} more (report.json has them all)" if more > 0 else "")


def _phase_columns(report: dict) -> tuple:
    """The phase column as wide as the longest name: labels are never cut."""
    width = max([PHASE_COLUMNS[0][1]] + [len(p["name"]) for p in report["phases"]])
    return (("phase", width),) + PHASE_COLUMNS[1:]


COMPARISON_COLUMNS = (("setup", 18), ("ops", 7), ("avail", 8), ("avail (faults)", 15), ("p99 ms", 9),
                      ("p99 ms (faults)", 16), ("RU", 10), ("hedged RU", 16), ("breaker opened", 0))


def _cols(values, columns) -> str:
    """A row padded to the columns' widths; a longer value pushes the rest right, never cut."""
    return "  ".join(str(v).ljust(w) for v, (_, w) in zip(values, columns)).rstrip()


def comparison(report: dict) -> list[str]:
    if "comparison" not in report:
        return []
    width = max([COMPARISON_COLUMNS[0][1]] + [len(r["setup"]) for r in report["comparison"]])
    columns = (("setup", width),) + COMPARISON_COLUMNS[1:]
    lines = ["", "setups compared (the same workload and faults, one after another):",
             _cols((name for name, _ in columns), columns)]
    for r in report["comparison"]:
        lines.append(_cols((r["setup"], r["ops"], pct(r["availability"]), pct(r["availability_in_fault_windows"]),
                            r["p99_ms"], r["p99_ms_in_fault_windows"], r["request_charge"],
                            f"{r['hedged_extra_charge']} ({r['extra_ru_share']:.1%})", r["breaker_opened"]),
                           columns))
    return lines


def client_changes(report: dict) -> list[str]:
    return [f"{c['label']} at {c['at_ms']:.0f} ms: availability {pct(c['availability_before'])} before, "
            f"{pct(c['availability_after'])} after" for c in report.get("client_changes", [])]


def history_check(report: dict) -> list[str]:
    h = report.get("history_check")
    if not h:
        return []
    writes = ", ".join(f"{n} {k}" for k, n in sorted(h["writes"].items()))
    line = (f"history checker ({h['level']}): {'no violation' if h['valid'] else str(h['violation_count']) + ' VIOLATIONS'}"
            f"; writes {writes or 'none'}; {h['unknown_writes']} unknown ({h['unknown_applied']} applied)")
    return [line] + [f"  {x['check']}: {x['message']}" for x in h["violations"][:5]]


def faults(report: dict) -> list[str]:
    if not report["faults"]:
        return []
    width = max(len(w["label"]) for w in report["faults"])
    lines = ["", f"{'fault / failover':{width}}  window (ms)      ops    avail     p99 ms    RTO (ms)       lost writes"]
    for w in report["faults"]:
        rto = "not recovered" if w["rto_ms"] is None else f"{w['rto_ms']:.0f} ±{w['rto_bin_ms']}"
        avail = pct(w["availability"]) if w["ops"] else "-"
        lines.append(f"{w['label']:{width}}  {w['start_ms']:>6.0f}-{w['end_ms']:<9.0f} {w['ops']:>6}  {avail:>7}  "
                     f"{w['p99_ms']:>9}  {rto:>13}  {w['rpo_writes']}")
    return lines


VERDICT_WORDS = {True: "PASS", False: "FAIL", None: "n/a "}


def verdict_text(a: dict) -> str:
    """'99.95% >= 99.00%' for availability limits, the value and limit as they are otherwise."""
    if a["name"].startswith("availability") and isinstance(a["value"], (int, float)):
        return f"{pct(a['value'])} {a['op']} {pct(a['limit'])}"
    return f"{a['value']} {a['op']} {a['limit']}"


def verdicts(report: dict) -> list[str]:
    lines = []
    for a in report["assertions"]:
        what = "not judged: nothing to judge" if a["held"] is None else verdict_text(a)
        detail = f" ({a['detail']})" if a.get("detail") else ""
        lines.append(f"{VERDICT_WORDS[a['held']]}  {a['name']}: {what}{detail}")
    ended = report.get("ended", {"kind": "completed"})
    unjudged = sum(1 for a in report["assertions"] if a["held"] is None)
    notes = []
    if not report["assertions"]:
        notes.append("no assertions")
    elif unjudged:
        notes.append(f"{unjudged} not judged")
    if ended["kind"] != "completed":
        lines.append(f"{ended['kind'].upper()} at {ended['at_ms'] / 1000:.1f} s: {ended['reason']}")
        word = ended["kind"].upper()
    else:
        word = "passed" if report["passed"] else "FAILED"
    lines.append(f"result: {word}" + (f" ({'; '.join(notes)})" if notes else ""))
    return lines


def lost_line(lost: dict) -> str:
    line = f"lost writes: {lost['listed']} listed by GET /lost-writes; "
    if not lost["acknowledged_writes"]:
        return line + "no acknowledged write to read back (not judged)"
    line += (f"{lost['acknowledged_unreadable']} of {lost['acknowledged_writes']} acknowledged writes no longer "
             "readable")
    return line + ("" if lost["match"] else " — NOT ALL LISTED: " + listed(lost["unreadable_not_listed"]))


def render(report: dict) -> str:
    scale, floor = report.get("duration_scale", 1.0), report.get("duration_scale_min", 0.0)
    scaled = f" [every time of the timeline x{scale:g}" + (
        f", at least the drill's duration_scale_min x{floor:g}]" if scale == floor else "]")
    columns = _phase_columns(report)
    lines = [f"drill {report['drill']}: {report['description']}".rstrip(": ") + (scaled if scale != 1.0 else ""),
             f"workload: {workload_text(report['workload'])}", "",
             _cols((name for name, _ in columns), columns)]
    for p in report["phases"] + [dict(report["total"], name="total")]:
        served = ", ".join(f"{r} {n}" for r, n in sorted(p["served_by"].items(), key=lambda kv: -kv[1]))
        lines.append(_cols((p["name"], p["ops"], p["ops_per_s"], p["errors"], pct(p["availability"]) if p["ops"] else "-",
                            p["p50_ms"], p["p99_ms"],
                            sum(p["retries_by_reason"].values()), p["request_charge"], served), columns))
    lines += faults(report)
    lines += comparison(report)
    changes = client_changes(report)
    lines += [""] + changes if changes else []
    lines += ["", lost_line(report["lost_writes"])]
    lines += history_check(report)
    outside = report["outside_fault_windows"]
    lines.append(f"outside fault windows: availability {pct(outside['availability'])}, p99 {outside['p99_ms']} ms"
                 if outside["ops"] else "outside fault windows: no operation")
    lines += verdicts(report)
    return "\n".join(lines)
