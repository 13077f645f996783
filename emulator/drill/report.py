"""From a drill's operations and the emulator's counters to its report: phases (the spans between
schedule steps), fault windows, per-fault RTO and RPO, a per-second timeline, and the assertions.

Pure functions of recorded data (no I/O), so the arithmetic is unit-tested on hand-made ops.
Availability counts operations *started outside* every fault window; a read of an absent key
(404/0) is a served read. p99 for the assertion is over the same operations.
"""
from dataclasses import dataclass, field

from .scenario import FAILOVER_WINDOW_MS
from .workload import Op

TIMELINE_BUCKETS = 60           # points of the timeline plots, whatever the drill's length
TIMELINE_BUCKET_MS_MIN = 100
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
        return "client: " + ", ".join(f"{k} {v}" for k, v in step["client"].items())
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
            key = f"{op.status}/{op.sub_status}" if op.status else "transport"
            errors[key] = errors.get(key, 0) + 1
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


def recovery(ops: list[Op], window: dict) -> float | None:
    """RTO: ms from the window's start until the first success after the last failure that
    started in the window; 0 when nothing failed; None when nothing succeeded afterwards."""
    failed = [op for op in ops if not op.ok and window["start_ms"] <= op.start_ms < window["end_ms"]]
    if not failed:
        return 0.0
    last_fail_ms = max(op.start_ms + op.latency_ms for op in failed)
    after = [op.start_ms + op.latency_ms for op in ops if op.ok and op.start_ms + op.latency_ms >= last_fail_ms]
    return round(min(after) - window["start_ms"], 1) if after else None


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


def check_assertions(assertions: dict, outside: dict, lost: dict, consistency: dict | None = None) -> list[dict]:
    out = []
    if "availability_min" in assertions:
        out.append(_verdict("availability outside fault windows", outside["availability"], ">=",
                            assertions["availability_min"]))
    if "p99_ms_max" in assertions:
        out.append(_verdict("p99 latency outside fault windows (ms)", outside["p99_ms"], "<=", assertions["p99_ms_max"]))
    if "lost_writes_max" in assertions:
        out.append(_verdict("lost writes (listed)", lost["listed"], "<=", assertions["lost_writes_max"]))
    if assertions.get("lost_writes_match"):
        out.append({"name": "every acknowledged unreadable write is listed", "value": lost["match"],
                    "op": "==", "limit": True, "held": bool(lost["match"])})
    if assertions.get("consistency_valid") and consistency is not None:
        out.append({"name": f"history checker ({consistency['level']}): no violation",
                    "value": consistency["violation_count"], "op": "==", "limit": 0,
                    "held": consistency["valid"]})
    return out


def _verdict(name: str, value, op: str, limit) -> dict:
    held = value >= limit if op == ">=" else value <= limit
    return {"name": name, "value": value, "op": op, "limit": limit, "held": bool(held)}


def build(drill, ops: list[Op], lost: LostWrites, failovers: list, started_epoch_ms: float,
          consistency: dict | None = None) -> dict:
    windows = fault_windows(drill.schedule, drill.duration_ms)
    per_phase = []
    for p in phases(drill.schedule, drill.duration_ms):
        mine = [op for op in ops if p["start_ms"] <= op.start_ms < p["end_ms"]]
        per_phase.append({**p, **summarize(mine, p["end_ms"] - p["start_ms"])})
    outside_ops = [op for op in ops if not in_window(op.start_ms, windows)]
    outside_span = drill.duration_ms - sum(w["end_ms"] - w["start_ms"] for w in windows)
    outside = summarize(outside_ops, max(outside_span, 1))
    inside = summarize([op for op in ops if in_window(op.start_ms, windows)], max(drill.duration_ms - outside_span, 1))
    lost_d = lost.to_dict()
    for w in windows:
        w["rto_ms"] = recovery(ops, w)
        w["rpo_writes"] = 0
    _attribute_rpo(windows, failovers, started_epoch_ms)
    results = check_assertions(drill.assertions, outside, lost_d, consistency)
    return {"drill": drill.name, "description": drill.description, "duration_ms": drill.duration_ms,
            "account": {"regions": list(drill.regions), "consistency": drill.consistency,
                        "multi_write": drill.multi_write},
            "workload": {"client": drill.client, "mix": drill.mix, "concurrency": drill.concurrency,
                         "rate_per_s": drill.rate_per_s, "keys": drill.keys, "client_options": drill.client_options},
            "total": summarize(ops, drill.duration_ms), "outside_fault_windows": outside,
            "in_fault_windows": inside, "phases": per_phase, "faults": windows,
            "client_changes": client_changes(drill.schedule, per_phase), "lost_writes": lost_d, "failovers": failovers,
            "history_check": consistency,
            "timeline": timeline(ops, drill.duration_ms),
            "assertions": results, "passed": all(r["held"] for r in results)}


def _attribute_rpo(windows: list, failovers: list, started_epoch_ms: float) -> None:
    """Each failover's discarded writes (GET /failovers) go to the latest window that began at
    or before it: the step that caused it (a failover step, or a write region's outage)."""
    for f in failovers:
        at_ms = (f.get("started_ms") or 0) - started_epoch_ms
        before = [w for w in windows if w["start_ms"] <= at_ms + CLOCK_SLACK_MS]
        if before:
            max(before, key=lambda w: w["start_ms"])["rpo_writes"] += f.get("lost_writes", 0)
