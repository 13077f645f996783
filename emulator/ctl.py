"""`regionlab <command>`: the control port from the command line (docs/control-api.md).

    regionlab topology | health | faults [list] | failovers | lost-writes
    regionlab fault inject '{"type": "region_outage", "region": "East US", "duration_ms": 30000}'
    regionlab fault region-outage "East US" --mode blackhole --duration-ms 30000
    regionlab fault global-endpoint-outage --mode reset --duration-ms 30000
    regionlab fault latency "East US" --delay-ms 1000 [--jitter-ms 50] [--op read]   (and error,
        timeout-after-apply, tcp-reset, clock-skew: docs/control-api.md)
    regionlab fault heal 3
    regionlab failover "East US 2" [--forced]
    regionlab region add "North Europe" [--port N] | regionlab region remove "West US"
    regionlab sim --seed 7            (the deterministic simulator; no server needed)
    regionlab drill failover | run FILE | list   (drills and their reports: emulator/drill/)
    regionlab throttle [show] | set | container | database | storm   (ctl_throttle.py)
    regionlab routing [show] | set | weights                          (ctl_routing.py)

Each command is one HTTP request to a running emulator's control port: --control URL, else
$REGIONLAB_CONTROL, else http://127.0.0.1:8090; with --control-token (or $REGIONLAB_CONTROL_TOKEN)
it sends "Authorization: Bearer TOKEN", and every mutating request is sent as application/json
(the control port refuses anything else). It prints the reply's JSON to stdout and exits
0; a refused request prints the server's message to stderr and exits 1 (2 for a usage error).
Standard library only (urllib), so it works wherever the server is installed.
"""
import argparse
import json
import sys
import urllib.parse

from . import ctl_routing, ctl_throttle
from .control_client import DEFAULT_CONTROL, ControlError, call, control_token, control_url, print_reply
from .core.faults import OUTAGE_MODE_DEFAULT, OUTAGE_MODES

COMMANDS = ("topology", "health", "faults", "fault", "failover", "failovers", "lost-writes", "region", "sim",
            "throttle", "routing", "drill")
# CLI fault name -> (fault type, its positional region arguments)
FAULT_FLAGS = {"region-outage": ("region_outage", ("region",)), "global-endpoint-outage": ("global_endpoint_outage", ()),
               "link-cut": ("link_cut", ("from", "to")),
               "link-lag": ("link_lag", ("from", "to")), "primary-crash": ("primary_crash", ("region",)),
               "replica-crash": ("replica_crash", ("region",)), "replica-slow": ("replica_slow", ("region",))}
# The request faults (core/request_faults.py): what a region going bad does to each request.
REQUEST_FAULT_FLAGS = {"latency": ("latency", ("region",)), "error": ("error", ("region",)),
                       "timeout-after-apply": ("timeout_after_apply", ("region",)),
                       "tcp-reset": ("tcp_reset", ("region",)), "clock-skew": ("clock_skew", ("region",))}
FAULT_FLAGS.update(REQUEST_FAULT_FLAGS)
# Direct mode's faults (core/direct_faults.py, docs/direct.md): nodes and their ports.
DIRECT_FAULT_FLAGS = {"replica-move": ("replica_move", ("region",)), "node-crash": ("node_crash", ("region",)),
                      "direct-ports-blocked": ("direct_ports_blocked", ())}
FAULT_FLAGS.update(DIRECT_FAULT_FLAGS)
REQUEST_FAULT_OPS = ("read", "write", "query", "metadata", "all")


# ---- arguments -------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--control", help=f"control port URL (default $REGIONLAB_CONTROL or {DEFAULT_CONTROL})")
    common.add_argument("--control-token", help="the control port's token, if it has one (default "
                                                "$REGIONLAB_CONTROL_TOKEN); sent as 'Authorization: Bearer'")
    p = argparse.ArgumentParser(prog="regionlab", description="Talk to a running regionlab's control port.")
    sub = p.add_subparsers(dest="command", required=True)
    for name, text in (("topology", "regions, links, partitions and replicas"), ("health", "liveness"),
                       ("failovers", "every failover so far"), ("lost-writes", "writes forced failovers discarded")):
        sub.add_parser(name, parents=[common], help=text)
    faults = sub.add_parser("faults", parents=[common], help="list active faults")
    faults.add_argument("action", nargs="?", choices=["list"], default="list")
    fault = sub.add_parser("fault", help="inject or heal a fault").add_subparsers(dest="action", required=True)
    inject = fault.add_parser("inject", parents=[common], help="a fault as JSON, as POST /faults takes")
    inject.add_argument("spec")
    heal = fault.add_parser("heal", parents=[common], help="heal a fault by id ('all': every active one)")
    heal.add_argument("id")
    for name, (_, positionals) in FAULT_FLAGS.items():
        _fault_flags(fault.add_parser(name, parents=[common], help=f"inject a {name} fault"), name, positionals)
    fo = sub.add_parser("failover", parents=[common], help="move the write region")
    fo.add_argument("region")
    fo.add_argument("--forced", action="store_true", help="forced (may lose writes) instead of graceful")
    fo.add_argument("--no-wait", action="store_true", help="answer at once (202) while a graceful drain runs")
    region = sub.add_parser("region", help="add or remove a region at runtime").add_subparsers(dest="action", required=True)
    add = region.add_parser("add", parents=[common], help="a new region joins (snapshot, then log shipping)")
    add.add_argument("name")
    add.add_argument("--port", type=int, default=0, help="its gateway port (default: any free one)")
    region.add_parser("remove", parents=[common], help="a region leaves the account").add_argument("name")
    ro = region.add_parser("read-only-endpoint", parents=[common], help="open a region's read-only endpoint")
    ro.add_argument("name")
    ro.add_argument("--port", type=int, default=0, help="its port (default: any free one)")
    sub.add_parser("sim", add_help=False, help="run the deterministic simulator (see `regionlab sim --help`)")
    sub.add_parser("drill", add_help=False, help="run a drill and write its report (see `regionlab drill --help`)")
    ctl_throttle.add_parser(sub, common)
    ctl_routing.add_parser(sub, common)
    return p


def _fault_flags(p, name: str, positionals: tuple) -> None:
    for field in positionals:
        p.add_argument(field.replace("from", "source").replace("to", "target"), metavar=field.upper())
    if name in ("link-cut", "link-lag"):
        p.add_argument("--one-way", action="store_true", help="only FROM -> TO (default: both ways)")
    if name == "link-lag":
        p.add_argument("--lag-ms", type=int, required=True)
        p.add_argument("--jitter-ms", type=int, default=0)
    if name in ("primary-crash", "replica-crash", "replica-slow"):
        for sel in ("database", "container", "partition"):
            p.add_argument(f"--{sel}", help=f"only this {sel} (default: all)")
    if name in ("replica-crash", "replica-slow"):
        p.add_argument("--replica", type=int, required=True, help="replica index 0-3 (see topology)")
    if name == "replica-slow":
        p.add_argument("--delay-ms", type=int, required=True)
    if name == "replica-move":
        for sel in ("database", "container", "partition"):
            p.add_argument(f"--{sel}", help=f"only this {sel} (default: all)")
        p.add_argument("--replica", type=int, required=True, help="replica index 0-3 (see topology)")
        p.add_argument("--to", type=int, help="the node it moves to (default: the next free one)")
    if name == "node-crash":
        p.add_argument("--node", type=int, required=True, help="the node's index in its region (see topology)")
    if name == "direct-ports-blocked":
        p.add_argument("--region", help="only this region's ports (default: every region's)")
    if name in ("region-outage", "global-endpoint-outage"):
        p.add_argument("--mode", choices=OUTAGE_MODES,
                       help=f"how the endpoint fails (default {OUTAGE_MODE_DEFAULT}; see docs/control-api.md)")
    if name in REQUEST_FAULT_FLAGS:
        _request_fault_flags(p, name)
    p.add_argument("--duration-ms", type=int, help="heal by itself after this long")


def _request_fault_flags(p, name: str) -> None:
    if name in ("latency", "error", "timeout-after-apply"):
        p.add_argument("--op", choices=REQUEST_FAULT_OPS, help="only this class of request (default: all)")
        for sel in ("database", "container", "partition"):
            p.add_argument(f"--{sel}", help=f"only this {sel} (default: all)")
    if name in ("error", "timeout-after-apply", "tcp-reset"):
        p.add_argument("--share", type=float, help="share of matching requests, 0-1 (default 1)")
    if name == "latency":
        p.add_argument("--delay-ms", type=int, required=True)
        p.add_argument("--jitter-ms", type=int, help="plus a seeded 0..jitter_ms (default 0)")
    if name == "error":
        p.add_argument("--status", type=int, required=True, help="e.g. 503, 500, 408, 410, 429, 449")
        p.add_argument("--substatus", type=int, help="default 0")
        p.add_argument("--count", type=int, help="stop (heal) after this many errors")
    if name == "clock-skew":
        p.add_argument("--offset-ms", type=int, required=True, help="how far the region's clock runs ahead (<0: behind)")
    p.add_argument("--seed", type=int, help="seed of its share and jitter draws (default: drawn, and shown)")


def fault_spec(args) -> dict:
    """The POST /faults body the flags of `regionlab fault <name>` describe."""
    kind, positionals = FAULT_FLAGS[args.action]
    spec = {"type": kind}
    for field in positionals:
        spec[field] = getattr(args, field.replace("from", "source").replace("to", "target"))
    for flag in ("one_way", "lag_ms", "jitter_ms", "database", "container", "partition", "replica",
                 "delay_ms", "mode", "duration_ms", "op", "share", "status", "substatus", "count", "offset_ms", "seed",
                 "to", "node", "region"):
        value = getattr(args, flag, None)
        if value is not None and value is not False:
            spec[flag] = value
    return spec


# ---- commands --------------------------------------------------------------------------------
def request_for(args) -> tuple:
    """(method, path, body) of the control request a parsed command makes."""
    c = args.command
    if c == "throttle":
        return ctl_throttle.request_for(args)
    if c == "routing":
        return ctl_routing.request_for(args)
    if c in ("topology", "health", "failovers", "lost-writes", "faults"):
        return "GET", "/" + c, None
    if c == "failover":
        return "POST", "/failover", {"region": args.region, "kind": "forced" if args.forced else "graceful",
                                     "wait": not args.no_wait}
    if c == "region":
        if args.action == "add":
            return "POST", "/regions", {"name": args.name, "port": args.port}
        if args.action == "read-only-endpoint":
            return "POST", f"/regions/{urllib.parse.quote(args.name)}/read-only-endpoint", {"port": args.port}
        return "DELETE", "/regions/" + urllib.parse.quote(args.name), None
    if args.action == "inject":
        try:
            return "POST", "/faults", json.loads(args.spec)
        except ValueError as e:
            raise ControlError(-2, f"the fault is not JSON: {e}") from None
    if args.action == "heal":
        return "DELETE", f"/faults/{args.id}", None
    return "POST", "/faults", fault_spec(args)


def main(argv: list, out=None) -> int:
    out = out or sys.stdout
    if argv and argv[0] == "sim":
        from .sim.__main__ import main as sim_main
        return sim_main(argv[1:], out=out, prog="regionlab sim")
    if argv and argv[0] == "drill":
        from .drill.command import main as drill_main
        return drill_main(argv[1:], out=out)
    args = build_parser().parse_args(argv)
    base, token = control_url(args.control), control_token(getattr(args, "control_token", None))
    try:
        if getattr(args, "action", None) == "heal" and args.id == "all":
            active = call(base, "GET", "/faults", token=token)["faults"]
            reply = {"healed": [call(base, "DELETE", f"/faults/{f['id']}", token=token)["healed"] for f in active]}
        else:
            reply = call(base, *request_for(args), token=token)
    except ControlError as e:
        print(f"regionlab: {e.message}", file=sys.stderr)
        return 2 if e.status == -2 else 1
    return print_reply(json.dumps(reply, indent=2), out)
