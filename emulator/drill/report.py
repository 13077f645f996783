"""From a drill's operations and the emulator's counters to its report: phases (the spans between
schedule steps), fault windows with their own availability, p99, RTO and RPO, the steady state
before the first fault and after the last, a per-second timeline, and the assertions' verdicts
(judge.py).

Pure functions of recorded data (no I/O), so the arithmetic is unit-tested on hand-made ops.
`outside_fault_windows` counts operations *started outside* every fault window; a fault window's
own figures count every operation in flight during it. A read of an absent key (404/0) is a
served read.
"""
from dataclasses import dataclass, field

from . import judge
from .scenario import FAILOVER_WINDOW_MS
from .workload import Op

TIMELINE_BUCKETS = 60           # points of the timeline plots, whatever the drill's length
TIMELINE_BUCKET_MS_MIN = 100
RTO_BIN_MS = 100           # RTO's resolution
CLOCK_SLACK_MS = 50       # the control port stamps failovers on the wall clock, the drill on its own


def percentile(values: list, q: float) -> float:
    """Nearest-rank percentile (q in 0..100); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))          # ceil(n * q / 100), at least 1
    return float(ordered[int(rank) - 1])


def describe(step: dict) -> str:
    if step.get("label"):
        return step["label"]
    if "fault" in step:
        f = step["fault"]
        where = f.get("region") or "->".join(x for x in (f.get("from"), f.get("to")) if x)
        mode = f" ({f['mode']})" if f.get("mode") else ""
        return f"{f.get('type')} {where}{mode}".strip()
    if "failover" in step:
        return f"{step['failover'].get('kind', 'graceful')} failover -> {step['failover']['region']}"
    if "client" in step:
        changes = [f"{k} {v}" for k, v in step["client"].items() if k != "restart"]
        return ", ".join((["client restart"] if step["client"].get("restart") else []) + (
            ["client: " + ", ".join(changes)] if changes else []))
    if "throttle" in step:
        return "throttle " + ", ".join(f"{k}={v}" for k, v in step["throttle"].items())
    return f"heal {step['heal']}"


def fault_windows(schedule: list, duration_ms: int) -> list[dict]:
    """[{"step", "label", "start_ms", "end_ms"}] for every fault, throttle and failover step: a
    fault or throttle step lasts until its heal step, its duration_ms or the end; a failover
    FAILOVER_WINDOW_MS (or window_ms). Client steps change the client, not the account: no window."""
    windows, open_by_name = [], {}
    for i, s in enumerate(schedule):
        if "fault" in s or "throttle" in s:
            body = s.get("fault") or {}
            end = s["at_ms"] + body["duration_ms"] if "duration_ms" in body else duration_ms
            w = {"step": i, "label": describe(s), "start_ms": s["at_ms"], "end_ms": min(end, duration_ms)}
            windows.append(w)
            open_by_name[s.get("as", len(windows))] = w
        elif "failover" in s:
            # A failover's window also ends where the next step begins, so each step's RTO and RPO
            # are its own.
            later = [t["at_ms"] for t in schedule[i + 1:] if t["at_ms"] > s["at_ms"]]
            end = min([s["at_ms"] + s.get("window_ms", FAILOVER_WINDOW_MS)] + later[:1])
            windows.append({"step": i, "label": describe(s), "start_ms": s["at_ms"], "end_ms": min(end, duration_ms)})
        elif "heal" in s:
            healed = list(open_by_name.values()) if s["heal"] == "all" else [open_by_name.get(s["heal"])]
            for w in healed:
                if w is not None and w["end_ms"] > s["at_ms"]:
                    w["end_ms"] = s["at_ms"]
    for w in windows:
        if "window_ms" in schedule[w["step"]] and "failover" not in schedule[w["step"]]:
            w["end_ms"] = min(duration_ms, max(w["end_ms"], w["start_ms"] + schedule[w["step"]]["window_ms"]))
    return windows


def in_window(t_ms: float, windows: list) -> bool:
    return any(w["start_ms"] <= t_ms < w["end_ms"] for w in windows)


def phases(schedule: list, duration_ms: int) -> list[dict]:
    cuts = sorted({0, *(s["at_ms"] for s in schedule)})
    labels = {0: "steady state"}
    for s in schedule:
        labels[s["at_ms"]] = (labels[s["at_ms"]] + " + " if s["at_ms"] in labels and s["at_ms"] else "") + describe(s)
    bounds = cuts + [duration_ms]
    return [{"name": labels[a], "start_ms": a, "end_ms": b} for a, b in zip(bounds, bounds[1:]) if b > a]


def summarize(ops: list[Op], span_ms: float) -> dict:
    errors, retries, regions, kinds = {}, {}, {}, {}
    opened = 0
    for op in ops:
        opened += op.breaker_opened
        kinds[op.kind] = kinds.get(op.kind, 0) + 1
        if not op.ok:
            errors[op.error_key] = errors.get(op.error_key, 0) + 1
        for r in op.retries:
            retries[r] = retries.get(r, 0) + 1
        if op.region:
            regions[op.region] = regions.get(op.region, 0) + 1
    latencies = [op.latency_ms for op in ops]
    ok = sum(1 for op in ops if op.ok)
    return {"ops": len(ops), "ops_by_kind": kinds, "ok": ok, "errors": len(ops) - ok, "errors_by_status": errors,
            "availability": round(ok / len(ops), 6) if ops else 1.0,
            "ops_per_s": round(len(ops) / (span_ms / 1000.0), 2) if span_ms > 0 else 0.0,
            "p50_ms": round(percentile(latencies, 50), 3), "p99_ms": round(percentile(latencies, 99), 3),
            "retries_by_reason": retries, "request_charge": round(sum(op.charge for op in ops), 2),
            "hedged_extra_charge": round(sum(op.hedged_charge for op in ops), 2), "served_by": regions,
            "breaker_opened": opened}


def stalled_bins(ops: list[Op], start_ms: float, n: int, bin_ms: int, stall_ms: float) -> list[bool]:
    """Which of the n bins after start_ms lie in a stall: longer than stall_ms in which an
    operation waited for its answer and none completed. An idle span (a rate-limited workload
    between operations) is no stall: a gap counts from the start of the operation that ends it,
    if that is later than the completion before."""
    until = start_ms + n * bin_ms
    stalled = [False] * n

    def mark(a: float, b: float) -> None:
        for k in range(max(0, int((a - start_ms) // bin_ms)), min(n, int(-(-(b - start_ms) // bin_ms)))):
            stalled[k] = True
    prev, waiting_at_end = float("-inf"), []
    for end, began in sorted((op.start_ms + op.latency_ms, op.start_ms) for op in ops):
        if end >= until:
            waiting_at_end.append(began)
            continue
        if end - max(prev, began) > stall_ms:
            mark(max(prev, began), end)
        prev = end
    if waiting_at_end and until - max(prev, min(waiting_at_end)) > stall_ms:
        mark(max(prev, min(waiting_at_end)), until)
    return stalled


def recovery(ops: list[Op], start_ms: float, until_ms: float, rule: dict, bin_ms: int = RTO_BIN_MS,
             expected_per_bin: float = 0.0) -> float | None:
    """RTO: ms from start_ms until the workload is back, by completion time: the first run of
    bins, rule["hold_ms"] long, with no stall in it (operations waiting longer than
    rule["stall_ms"] with none completing counts as down, failed or not), with completions, and a success rate of
    rule["availability_min"] or better over the run and in its first bin with completions. 0
    when that holds from the start; None when it never does before until_ms (the drill's end).
    expected_per_bin > 0 (a server-side report: served.py): requests are expected in every bin,
    so a bin with none is down too."""
    n = int((until_ms - start_ms) // bin_ms)
    ok, total = [0] * n, [0] * n
    for op in ops:
        k = int((op.start_ms + op.latency_ms - start_ms) // bin_ms)
        if 0 <= k < n:
            total[k] += 1
            ok[k] += op.ok
    stalled = stalled_bins(ops, start_ms, n, bin_ms, rule["stall_ms"])
    need, level = max(1, -(-rule["hold_ms"] // bin_ms)), rule["availability_min"]
    for k in range(n - need + 1):
        run = range(k, k + need)
        first = next((i for i in run if total[i]), None)
        if first is None or any(stalled[i] for i in run) or ok[first] < level * total[first]:
            continue
        if expected_per_bin and not all(total[i] for i in run):
            continue
        if sum(ok[i] for i in run) >= level * sum(total[i] for i in run):
            return float(k * bin_ms)
    return None


def window_ops(ops: list[Op], w: dict) -> list[Op]:
    """The operations in flight at some moment of the window: started before its end, ended
    after its start (so a request stalled across the whole window counts in it)."""
    return [op for op in ops if op.start_ms < w["end_ms"] and op.start_ms + op.latency_ms >= w["start_ms"]]


def timeline(ops: list[Op], duration_ms: int) -> list[dict]:
    """Operations by start time in equal buckets: counts, and the rates per second the plots draw."""
    bucket_ms = max(TIMELINE_BUCKET_MS_MIN, duration_ms // TIMELINE_BUCKETS)
    buckets = [{"t_s": i * bucket_ms / 1000, "ops": 0, "errors": 0, "served_by": {}}
               for i in range(max(1, -(-duration_ms // bucket_ms)))]
    for op in ops:
        b = buckets[min(len(buckets) - 1, int(op.start_ms // bucket_ms))]
        b["ops"] += 1
        b["errors"] += 0 if op.ok else 1
        if op.region:
            b["served_by"][op.region] = b["served_by"].get(op.region, 0) + 1
    for b in buckets:
        b["ops_per_s"] = round(b["ops"] * 1000 / bucket_ms, 2)
        b["errors_per_s"] = round(b["errors"] * 1000 / bucket_ms, 2)
    return buckets


@dataclass
class LostWrites:
    listed: list                  # GET /lost-writes entries of the drill's container
    acked: int                    # writes the workload was told succeeded
    acked_unreadable: list        # ids of those a read no longer finds
    listed_acked: list = field(default_factory=list)   # listed ids the workload had acknowledged

    def to_dict(self) -> dict:
        unlisted = sorted(set(self.acked_unreadable) - {w["id"] for w in self.listed})
        return {"listed": len(self.listed), "acknowledged_writes": self.acked,
                "acknowledged_unreadable": len(self.acked_unreadable),
                "listed_acknowledged": len(self.listed_acked),
                "unreadable_not_listed": unlisted,
                "match": not unlisted,
                "writes": self.listed}


def client_changes(schedule: list, per_phase: list) -> list[dict]:
    """For each client step, the availability of the phase that ended at it and of the one it
    began: what changing the client's options did."""
    out = []
    for s in schedule:
        if "client" not in s:
            continue
        before = next((p for p in per_phase if p["end_ms"] == s["at_ms"]), None)
        after = next((p for p in per_phase if p["start_ms"] == s["at_ms"]), None)
        out.append({"label": describe(s), "at_ms": s["at_ms"], "options": s["client"],
                    "availability_before": before["availability"] if before else None,
                    "availability_after": after["availability"] if after else None,
                    "p99_ms_before": before["p99_ms"] if before else None,
                    "p99_ms_after": after["p99_ms"] if after else None})
    return out


WINDOW_FIGURES = ("ops", "errors", "availability", "p50_ms", "p99_ms", "errors_by_status")


def _steady_spans(schedule: list, windows: list, duration_ms: int) -> tuple[tuple, tuple]:
    """(start, end) before the first step, and after the last fault window (or step) ended."""
    first = schedule[0]["at_ms"] if schedule else duration_ms
    last = max([w["end_ms"] for w in windows] + [s["at_ms"] for s in schedule] + [0])
    return (0, first), (last, duration_ms)


def _judge_windows(drill, ops: list[Op], windows: list, expected_per_bin: float) -> None:
    for w in windows:
        figures = summarize(window_ops(ops, w), w["end_ms"] - w["start_ms"])
        w.update({k: figures[k] for k in WINDOW_FIGURES})
        w["rto_ms"] = recovery(ops, w["start_ms"], drill.duration_ms, drill.recovery,
                               expected_per_bin=expected_per_bin)
        if expected_per_bin:
            _count_missing(w, ops, expected_per_bin)
        w["rto_bin_ms"] = RTO_BIN_MS
        w["rpo_writes"] = 0


def _count_missing(w: dict, ops: list[Op], expected_per_bin: float, bin_ms: int = RTO_BIN_MS) -> None:
    """A server-side window (served.py): each whole bin of it in which nothing completed while
    requests were expected adds expected_per_bin requests that were not served, so an outage
    the application stops sending into reads as one. availability = served / (requests + missing)."""
    n = int((w["end_ms"] - w["start_ms"]) // bin_ms)
    busy = {int((op.start_ms + op.latency_ms - w["start_ms"]) // bin_ms) for op in ops}
    missing = round(sum(1 for k in range(n) if k not in busy) * expected_per_bin)
    w["missing_requests"] = missing
    if w["ops"] + missing:
        w["availability"] = round((w["ops"] - w["errors"]) / (w["ops"] + missing), 6)


def build(drill, ops: list[Op], lost: LostWrites, failovers: list, started_epoch_ms: float,
          consistency: dict | None = None, ended: dict | None = None, expected_per_bin: float | None = None) -> dict:
    """The report of one run. ended: {"kind": "aborted"|"interrupted", "reason", "at_ms"} when
    the run stopped early (drill is then as far as it ran: its duration ends there).
    expected_per_bin: not None for a drill without a workload (served.py): ops are the requests
    the emulator served, and RTO counts an empty bin as down when it is above 0."""
    windows = fault_windows(drill.schedule, drill.duration_ms)
    per_phase = []
    for p in phases(drill.schedule, drill.duration_ms):
        mine = [op for op in ops if p["start_ms"] <= op.start_ms < p["end_ms"]]
        per_phase.append({**p, **summarize(mine, p["end_ms"] - p["start_ms"])})
    outside_ops = [op for op in ops if not in_window(op.start_ms, windows)]
    outside_span = drill.duration_ms - sum(w["end_ms"] - w["start_ms"] for w in windows)
    outside = summarize(outside_ops, max(outside_span, 1))
    inside = summarize([op for op in ops if in_window(op.start_ms, windows)], max(drill.duration_ms - outside_span, 1))
    total = summarize(ops, drill.duration_ms)
    lost_d = lost.to_dict()
    _judge_windows(drill, ops, windows, expected_per_bin or 0.0)
    _attribute_rpo(windows, failovers, started_epoch_ms)
    before, after = _steady_spans(drill.schedule, windows, drill.duration_ms)
    steady = {"before_first_fault": summarize([op for op in ops if before[0] <= op.start_ms < before[1]],
                                              before[1] - before[0]),
              "after_last_fault": summarize([op for op in ops if after[0] <= op.start_ms < after[1]],
                                            after[1] - after[0])}
    results = judge.check(drill.assertions, drill.schedule, {
        "outside": outside, "total": total, "steady_before": steady["before_first_fault"],
        "steady_after": steady["after_last_fault"], "windows": windows, "lost": lost_d, "consistency": consistency})
    return {"drill": drill.name, "description": drill.description, "duration_ms": drill.duration_ms,
            "duration_scale": drill.scale, "duration_scale_min": drill.scale_min,
            "ended": ended or {"kind": "completed"},
            "account": {"regions": list(drill.regions), "consistency": drill.consistency,
                        "multi_write": drill.multi_write},
            "workload": _workload(drill),
            "total": total, "outside_fault_windows": outside,
            "in_fault_windows": inside, "steady_state": steady, "phases": per_phase, "faults": windows,
            "recovery": drill.recovery if expected_per_bin is None else {**drill.recovery,
                                                                         "expected_per_bin": expected_per_bin},
            "stop": drill.stop,
            "client_changes": client_changes(drill.schedule, per_phase), "lost_writes": lost_d, "failovers": failovers,
            "history_check": consistency,
            "timeline": timeline(ops, drill.duration_ms),
            "assertions": results, "passed": judge.passed(results) and ended is None}


def _workload(drill) -> dict:
    if drill.served:
        return {"client": "your application (the requests the emulator served: GET /requests)", "served": True}
    return {"client": drill.client, "mix": drill.mix, "concurrency": drill.concurrency,
            "rate_per_s": drill.rate_per_s, "keys": drill.keys, "client_options": drill.client_options}


def _attribute_rpo(windows: list, failovers: list, started_epoch_ms: float) -> None:
    """Each failover's discarded writes (GET /failovers) go to the latest window that began at
    or before it: the step that caused it (a failover step, or a write region's outage)."""
    for f in failovers:
        at_ms = (f.get("started_ms") or 0) - started_epoch_ms
        before = [w for w in windows if w["start_ms"] <= at_ms + CLOCK_SLACK_MS]
        if before:
            max(before, key=lambda w: w["start_ms"])["rpo_writes"] += f.get("lost_writes", 0)
