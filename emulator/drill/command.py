"""`regionlab drill NAME | run FILE | list`: the command line of drills (docs/drills.md).

Exit status: 0 when every assertion held, 1 when one failed or the run was aborted (so a drill
can gate CI), 2 for a usage error or a scenario that cannot run (one line on stderr), 128 + the
signal's number (130 for Ctrl-C, 143 for SIGTERM) when a signal ended it: the report of what ran
is written all the same."""
import argparse
import logging
import signal
import sys

from . import SHORT_SCALE, builtin, builtin_names, resolve, run, table
from .runner import remote
from ..config import ConfigError
from ..control_client import ControlError, control_token, print_reply

REPORT_DIR_DEFAULT = "drill-report"


def build_parser(prog: str = "regionlab drill") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Run a drill (a built-in by NAME, or `run FILE`), "
                                "print a summary and write report.json and report.html; `list` shows the built-ins.")
    p.add_argument("what", metavar="NAME | run FILE | list", nargs="+")
    p.add_argument("--control", help="drive the running emulator at this control port URL (default: start "
                                     "one in-process on free ports, with the drill's account)")
    p.add_argument("--control-token", help="the control port's token (default $REGIONLAB_CONTROL_TOKEN)")
    p.add_argument("--endpoint", help="with --control: the account endpoint (default: GET /topology's)")
    p.add_argument("--key", help="with --control: the account key (default: the emulator's well-known key)")
    p.add_argument("--keep-database", action="store_true",
                   help="with --control: keep the database the drill created (default: removed when the run ends)")
    p.add_argument("--out", default=REPORT_DIR_DEFAULT, help=f"report directory (default {REPORT_DIR_DEFAULT})")
    p.add_argument("--short", action="store_true", help=f"every time of the drill x{SHORT_SCALE}")
    p.add_argument("--duration-scale", type=float, default=None, help="every time of the drill x this")
    p.add_argument("--seed", type=int, default=0, help="the workload's operation choices (default 0)")
    return p


# Each built-in's wall time end to end (the emulator's start, the prefill, the timeline, the
# read-back, the history check and the report with its plots), as `python bench/drill_wall.py`
# measured it on the shared 2-core machine at load 9-13; a quiet machine takes less.
WALL_S_MEASURED = {"credits": 21, "failover": 30, "hedging-vs-breaker": 48, "lag": 27, "outage-playbook": 24,
                   "primary-crash": 19, "region-outage": 33, "replica-move": 27, "throttle": 22}


def _list(out) -> int:
    for name in builtin_names():
        d = builtin(name)
        timeline = f"{d.duration_ms / 1000:.0f} s" + (f" x{len(d.setups)}" if d.setups else "")
        wall = f"~{WALL_S_MEASURED[name]} s in all" if name in WALL_S_MEASURED else "wall time not measured"
        print(f"{name:20} {timeline:>8} timeline, {wall:15}  {d.description}", file=out)
    return 0


def main(argv: list, out=None) -> int:
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    # The report counts slow operations; one log line each would bury the progress line.
    logging.getLogger("regionlab.client.diagnostics").setLevel(logging.ERROR)
    what = args.what
    if what == ["list"]:
        return _list(out)
    if what[0] == "run" and len(what) == 2:
        source = what[1]
    elif len(what) == 1 and what[0] != "run":
        source = what[0]
    else:
        print("regionlab drill: error: give a built-in NAME, `run FILE` or `list`", file=sys.stderr)
        return 2
    scale = args.duration_scale or (SHORT_SCALE if args.short else 1.0)
    try:
        drill = resolve(source) if what[0] == "run" else builtin(source)
        target = None
        if args.control:
            target = remote(args.control, control_token(args.control_token), args.endpoint, args.key,
                            drop_database=not args.keep_database)
        report = run(drill, target=target, scale=scale, seed=args.seed, out=out, report_dir=args.out,
                     handle_signals=True)
    except (ConfigError, ControlError) as e:
        print(f"regionlab drill: error: {getattr(e, 'message', None) or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:       # a second Ctrl-C, or one before the run began: no report
        print("regionlab drill: interrupted before a report could be written", file=sys.stderr)
        return 128 + signal.SIGINT
    print_reply(table.render(report) + f"\nreport: {args.out}/report.json, {args.out}/report.html", out)
    return exit_status(report)


def exit_status(report: dict) -> int:
    ended = report["ended"]
    if ended["kind"] == "interrupted":
        return 128 + ended["signal"]
    if ended.get("refused"):
        print(f"regionlab drill: error: {ended['reason']}", file=sys.stderr)
        return 2
    return 0 if report["passed"] else 1
