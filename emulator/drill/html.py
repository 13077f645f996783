"""report.html: one self-contained page (no CDN, no scripts; plots are PNGs as data: URIs).

A drill with setups gets the comparison plots instead of one run's (availability and p99 in the
fault windows per setup, request charge with the hedged extra RU, throughput over time per setup,
retries by reason and regions served per setup) and the comparison table. The plots need matplotlib, the optional extra `regionlab[report]`. Without it (or with
REGIONLAB_REPORT_NO_PLOTS=1, which makes the page behave as if it were absent) the page still
has every table and says how to get the plots.
"""
import base64
import html
import io
import json
import os
import textwrap

from .table import lost_line, pct, workload_text

NO_PLOTS_VARIABLE = "REGIONLAB_REPORT_NO_PLOTS"
PLOT_DPI = 90
PLOT_SIZE_IN = (13.0, 3.6)         # drawn as wide as the page (CSS), so labels need not be cut
LOST_ROWS_OPEN_MAX = 20            # a longer list of lost writes is folded (<details>)
LABEL_WRAP = 22
INSTALL_HINT = "pip install 'regionlab[report]'"


def load_pyplot():
    """matplotlib.pyplot with the Agg backend, or None if it is absent (or disabled)."""
    if os.environ.get(NO_PLOTS_VARIABLE, "").lower() in ("1", "true", "yes", "on"):
        return None
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _png(plt, fig) -> str:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=PLOT_DPI)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _shade(ax, report) -> None:
    for w in report["faults"]:
        ax.axvspan(w["start_ms"] / 1000, w["end_ms"] / 1000, color="tab:red", alpha=0.12)


def _log_axis(ax) -> None:
    """A log-scale y axis labelled 1, 2, 5, 10, 20, 50 ... ms (not 2x10^1)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def plots(report: dict, plt) -> list[tuple[str, str]]:
    t = [b["t_s"] for b in report["timeline"]]
    out = []
    fig, ax = plt.subplots(figsize=PLOT_SIZE_IN)
    ax.plot(t, [b["ops_per_s"] for b in report["timeline"]], label="ops/s", drawstyle="steps-post")
    ax.plot(t, [b["errors_per_s"] for b in report["timeline"]], label="errors/s", color="tab:red", drawstyle="steps-post")
    _shade(ax, report)
    ax.set_xlabel("s"), ax.legend(loc="upper right"), ax.set_title("throughput and errors (fault windows shaded)")
    out.append(("Throughput and errors over time", _png(plt, fig)))

    fig, ax = plt.subplots(figsize=PLOT_SIZE_IN)
    names = [textwrap.fill(p["name"], LABEL_WRAP) for p in report["phases"]]
    x = range(len(names))
    # Log scale: a 1 s stall and a 10 ms p50 are both readable on one axis.
    ax.bar([i - 0.2 for i in x], [max(p["p50_ms"], 0.1) for p in report["phases"]], width=0.4, label="p50")
    ax.bar([i + 0.2 for i in x], [max(p["p99_ms"], 0.1) for p in report["phases"]], width=0.4, label="p99")
    _log_axis(ax)
    ax.set_xticks(list(x), names, fontsize=7), ax.set_ylabel("ms (log scale)"), ax.legend()
    ax.set_title("latency per phase")
    out.append(("Latency p50/p99 per phase", _png(plt, fig)))

    reasons = report["total"]["retries_by_reason"]
    fig, ax = plt.subplots(figsize=PLOT_SIZE_IN)
    if reasons:
        ax.barh(list(reasons), list(reasons.values()), color="tab:orange")
        ax.tick_params(axis="y", labelsize=7)
    else:
        ax.text(0.5, 0.5, "no retries", ha="center", va="center", transform=ax.transAxes)
    ax.set_title("retries by reason")
    out.append(("Retries by reason", _png(plt, fig)))

    regions = sorted({r for b in report["timeline"] for r in b["served_by"]})
    fig, ax = plt.subplots(figsize=PLOT_SIZE_IN)
    if regions:
        ax.stackplot(t, *[[b["served_by"].get(r, 0) for b in report["timeline"]] for r in regions],
                     labels=regions, step="post")
        ax.legend(loc="upper right", fontsize=7)
    _shade(ax, report)
    ax.set_xlabel("s"), ax.set_title("which region served (successful ops per bucket)")
    out.append(("Which region served over time", _png(plt, fig)))
    return out


def _bars(ax, names, values, title, fmt="{:g}", color=None):
    bars = ax.bar(range(len(names)), values, color=color)
    ax.set_xticks(range(len(names)), names, fontsize=8)
    ax.set_title(title, fontsize=10)
    for b, v in zip(bars, values):
        ax.annotate(fmt.format(v), (b.get_x() + b.get_width() / 2, b.get_height()), ha="center",
                    va="bottom", fontsize=7)


def comparison_plots(report: dict, plt) -> list[tuple[str, str]]:
    rows, setups = report["comparison"], report["setups"]
    names = [r["setup"] for r in rows]
    out = []
    fig, (a1, a2) = plt.subplots(1, 2, figsize=PLOT_SIZE_IN)
    _bars(a1, names, [r["availability_in_fault_windows"] for r in rows], "availability in fault windows", "{:.3f}")
    a1.set_ylim(0, 1.1)
    _bars(a2, names, [max(r["p99_ms_in_fault_windows"], 0.1) for r in rows], "p99 ms in fault windows (log scale)",
          "{:.0f}", "tab:purple")
    _log_axis(a2)
    out.append(("Availability and p99 latency in the fault windows, per setup", _png(plt, fig)))

    fig, ax = plt.subplots(figsize=PLOT_SIZE_IN)
    x = range(len(names))
    base = [r["request_charge"] - r["hedged_extra_charge"] for r in rows]
    ax.bar(x, base, label="RU of the requests")
    ax.bar(x, [r["hedged_extra_charge"] for r in rows], bottom=base, label="hedged extra RU", color="tab:red")
    ax.set_xticks(list(x), names, fontsize=8), ax.set_ylabel("RU"), ax.legend(fontsize=7)
    ax.set_title("request charge per setup (hedged copies on top)", fontsize=10)
    out.append(("Request charge including hedged extra RU, per setup", _png(plt, fig)))

    fig, ax = plt.subplots(figsize=PLOT_SIZE_IN)
    for s in setups:
        ax.plot([b["t_s"] for b in s["timeline"]], [b["ops_per_s"] for b in s["timeline"]], label=s["name"],
                drawstyle="steps-post")
    _shade(ax, setups[0])
    ax.set_xlabel("s"), ax.set_ylabel("ops/s"), ax.legend(loc="upper right", fontsize=7)
    ax.set_title("throughput over time per setup (fault windows shaded)", fontsize=10)
    out.append(("Throughput over time, per setup", _png(plt, fig)))

    fig, (a1, a2) = plt.subplots(1, 2, figsize=PLOT_SIZE_IN)
    _stacked(a1, names, [s["total"]["retries_by_reason"] for s in setups], "retries by reason")
    _stacked(a2, names, [s["total"]["served_by"] for s in setups], "which region served")
    out.append(("Retries by reason and regions served, per setup", _png(plt, fig)))
    return out


def _stacked(ax, names, counts: list, title: str) -> None:
    keys = sorted({k for c in counts for k in c})
    bottom = [0] * len(names)
    for k in keys:
        values = [c.get(k, 0) for c in counts]
        ax.bar(range(len(names)), values, bottom=bottom, label=k)
        bottom = [b + v for b, v in zip(bottom, values)]
    if not keys:
        ax.text(0.5, 0.5, "none", ha="center", va="center", transform=ax.transAxes)
    else:
        ax.legend(fontsize=6)
    ax.set_xticks(range(len(names)), names, fontsize=7)
    ax.set_title(title, fontsize=10)


def _table(headers, rows) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _fmt(d: dict) -> str:
    return ", ".join(f"{k}: {v}" for k, v in d.items()) or "-"


def _history_check(h: dict | None) -> str:
    if not h:
        return ""
    writes = ", ".join(f"{n} {html.escape(k)}" for k, n in sorted(h["writes"].items())) or "none"
    rows = [(x["check"], x["message"]) for x in h["violations"]]
    return (f"<h2>History checker ({html.escape(h['level'])})</h2><p>"
            f"{'No violation' if h['valid'] else str(h['violation_count']) + ' violations'} in what the clients saw: "
            f"writes {writes}; {h['unknown_writes']} with an unknown outcome (no reply or 408), "
            f"{h['unknown_applied']} of them applied.</p>" + (_table(("check", "what"), rows) if rows else ""))


def _value(a: dict, key: str = "value"):
    """An availability verdict's value or limit as a percentage; others as they are."""
    v = a[key]
    return pct(v) if a["name"].startswith("availability") and isinstance(v, (int, float)) else v


def _lost_table(rows: list) -> str:
    if not rows:
        return ""
    table = _table(("id", "partition", "lsn", "operation", "region", "reason"), rows)
    if len(rows) <= LOST_ROWS_OPEN_MAX:
        return table
    return f"<details><summary>the {len(rows)} lost writes</summary>{table}</details>"


def render(report: dict) -> str:
    plt = load_pyplot()
    phase_rows = [(p["name"], p["ops"], p["ops_per_s"], _fmt(p["errors_by_status"]),
                   pct(p["availability"]) if p["ops"] else "-", p["p50_ms"], p["p99_ms"],
                   _fmt(p["retries_by_reason"]), p["request_charge"], p["hedged_extra_charge"], _fmt(p["served_by"]))
                  for p in report["phases"] + [dict(report["total"], name="total")]]
    fault_rows = [(w["label"], f"{w['start_ms']:.0f}", f"{w['end_ms']:.0f}", w["ops"], pct(w["availability"]) if w["ops"] else "-",
                   w["p99_ms"], _fmt(w["errors_by_status"]),
                   "not recovered" if w["rto_ms"] is None else f"{w['rto_ms']:.0f} ±{w['rto_bin_ms']}",
                   w["rpo_writes"]) for w in report["faults"]]
    lost = report["lost_writes"]
    lost_rows = [(w["id"], w["partition"], w["lsn"], w["operation"], w["region"], w["reason"]) for w in lost["writes"]]
    verdicts = [({True: "PASS", False: "FAIL", None: "not judged"}[a["held"]],
                 a["name"] + (f" ({a['detail']})" if a.get("detail") else ""),
                 "nothing to judge" if a["held"] is None else _value(a), f"{a['op']} {_value(a, 'limit')}")
                for a in report["assertions"]]
    if plt is None:
        figures = (f"<p class=note>Plots need matplotlib: <code>{INSTALL_HINT}</code>, then run the drill "
                   "again. Every figure is in the tables below and in report.json.</p>")
    else:
        drawn = comparison_plots(report, plt) if "setups" in report else plots(report, plt)
        figures = "".join(f"<figure><img alt='{html.escape(t)}' src='{src}'><figcaption>{html.escape(t)}"
                          f"</figcaption></figure>" for t, src in drawn)
    ended = report.get("ended", {"kind": "completed"})
    result = ended["kind"].upper() if ended["kind"] != "completed" else "passed" if report["passed"] else "FAILED"
    stopped = "" if ended["kind"] == "completed" else (
        f"<p class=note>The run was {ended['kind']} at {ended['at_ms'] / 1000:.1f} s: {html.escape(ended['reason'])}. "
        "Every fault it injected was healed; this is the report of what ran.</p>")
    scale = report.get("duration_scale", 1.0)
    scaled = "" if scale == 1.0 else f"<p>Every time of the timeline x{scale:g} (--duration-scale).</p>"
    compared = ""
    if "comparison" in report:
        rows = [(r["setup"], json.dumps(s["client_options"]), r["ops"], pct(r["availability"]),
                 pct(r["availability_in_fault_windows"]), r["p99_ms"], r["p99_ms_in_fault_windows"], r["request_charge"],
                 r["hedged_extra_charge"], f"{r['extra_ru_share']:.1%}", r["breaker_opened"])
                for r, s in zip(report["comparison"], report["setups"])]
        compared = "<h2>Setups compared</h2>" + _table(
            ("setup", "client options", "ops", "availability", "availability in fault windows", "p99 ms",
             "p99 ms in fault windows", "RU", "hedged extra RU", "extra RU share", "breaker opened"), rows)
    changes = ""
    if report.get("client_changes"):
        changes = "<h2>Client option changes</h2>" + _table(
            ("step", "at ms", "availability before", "availability after", "p99 ms before", "p99 ms after"),
            [(c["label"], f"{c['at_ms']:.0f}", pct(c["availability_before"]), pct(c["availability_after"]), c["p99_ms_before"],
              c["p99_ms_after"]) for c in report["client_changes"]])
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>regionlab drill {html.escape(report['drill'])}</title>
<style>body{{font:14px system-ui,sans-serif;margin:2em;color:#222}}table{{border-collapse:collapse;margin:.5em 0 1.5em}}
td,th{{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left}}th{{background:#f0f0f0}}
.passed{{color:#070}}.FAILED,.ABORTED,.INTERRUPTED{{color:#b00}}.note{{background:#fff8dc;padding:.6em}}figure{{margin:0 0 1em}}figure img{{width:100%;height:auto}}summary{{cursor:pointer}}</style></head><body>
<h1>regionlab drill <code>{html.escape(report['drill'])}</code>: <span class="{result}">{result}</span></h1>
{stopped}<p>{html.escape(report['description'])}</p>{scaled}
<p>Account: {html.escape(', '.join(report['account']['regions']))}; {report['account']['consistency']};
multi-write {report['account']['multi_write']}.</p><p>Workload: {html.escape(workload_text(report['workload']))}</p>
<h2>Assertions</h2>{_table(('', 'assertion', 'value', 'limit'), verdicts) if verdicts else '<p>none</p>'}
{compared}{changes}<h2>Plots</h2>{figures}
<h2>Phases</h2>{_table(('phase', 'ops', 'ops/s', 'errors', 'availability', 'p50 ms', 'p99 ms', 'retries', 'RU', 'hedged extra RU', 'served by'), phase_rows)}
<h2>Faults: availability, recovery (RTO) and lost writes (RPO) of each window</h2>{_table(('fault / failover', 'from ms', 'to ms', 'ops', 'availability', 'p99 ms', 'errors', 'RTO ms', 'lost writes'), fault_rows)}
<h2>Lost writes</h2><p>{html.escape(lost_line(lost))}.</p>
{_lost_table(lost_rows)}
{_history_check(report.get("history_check"))}
</body></html>
"""
