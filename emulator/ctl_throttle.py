"""`regionlab throttle ...`: the throughput knobs of a running emulator (docs/throughput.md),
one control-port request each (see ctl.py for --control, output and exit codes).

    regionlab throttle [show]
    regionlab throttle set --credits-per-s 1000|default|off --burst on|off --serverless on|off
                           --serverless-ru-per-s 5000 --ru-limits on|off
    regionlab throttle container DB COLL --ru-per-s 400 | --autoscale-max 4000 | --unprovisioned
    regionlab throttle database DB --ru-per-s 1000 | --autoscale-max 4000 | --unprovisioned
    regionlab throttle storm REGION [--share 0.5] [--op write] [--retry-after-ms 100] [--seed 7]
    regionlab throttle storm REGION --off
"""
import urllib.parse

from .core.throttle import OP_CLASSES, OP_KINDS, STORM_RETRY_AFTER_MS_DEFAULT

ON_OFF = {"on": True, "off": False}
UNCHANGED = object()            # --credits-per-s not given (None means "off")


def _credits(value: str):
    if value in ("off", "none"):
        return None
    if value == "default":
        return True
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"--credits-per-s takes a positive integer, 'default' (1000) or 'off', not {value!r}") from None
    if n <= 0:
        raise ValueError("--credits-per-s must be positive (or 'off')")
    return n


def add_parser(sub, common) -> None:
    p = sub.add_parser("throttle", help="throughput knobs: RU/s, credits, burst, serverless, storms")
    p.set_defaults(control=None)        # `regionlab throttle` alone shows the state
    t = p.add_subparsers(dest="action")
    t.add_parser("show", parents=[common], help="budgets, credits, storms and throttled counters")
    s = t.add_parser("set", parents=[common], help="account-wide knobs (only the flags given change)")
    s.add_argument("--credits-per-s", type=_credits, default=UNCHANGED,
                   help="credits per second: a number, 'default' (1000) or 'off'")
    for flag in ("burst", "serverless", "ru-limits"):
        s.add_argument(f"--{flag}", choices=ON_OFF, help=f"{flag} on or off")
    s.add_argument("--serverless-ru-per-s", type=int, help="per-partition ceiling of a serverless account")
    for name, positionals in (("container", ("db", "coll")), ("database", ("db",))):
        r = t.add_parser(name, parents=[common], help=f"provision a {name}'s throughput")
        for pos in positionals:
            r.add_argument(pos)
        which = r.add_mutually_exclusive_group(required=True)
        which.add_argument("--ru-per-s", type=int, help="manual throughput")
        which.add_argument("--autoscale-max", type=int, help="autoscale maximum (the budget)")
        which.add_argument("--unprovisioned", action="store_true", help="remove its own offer")
    st = t.add_parser("storm", parents=[common], help="force 429s for a share of a region's requests")
    st.add_argument("region")
    st.add_argument("--share", type=float, default=1.0, help="share of requests refused, 0..1 (default 1)")
    st.add_argument("--op", choices=OP_KINDS + tuple(OP_CLASSES), help="only this operation kind or class")
    st.add_argument("--retry-after-ms", type=int, default=STORM_RETRY_AFTER_MS_DEFAULT)
    st.add_argument("--seed", type=int, default=0)
    st.add_argument("--off", action="store_true", help="end the storm in REGION")


def request_for(args) -> tuple:
    """(method, path, body) of a parsed `regionlab throttle ...` command."""
    a = args.action
    if a in (None, "show"):
        return "GET", "/throttle", None
    if a == "set":
        body = {}
        if args.credits_per_s is not UNCHANGED:
            body["credits_per_s"] = args.credits_per_s
        for flag, key in (("burst", "burst"), ("serverless", "serverless"), ("ru_limits", "ru")):
            if getattr(args, flag) is not None:
                body[key] = ON_OFF[getattr(args, flag)]
        if args.serverless_ru_per_s is not None:
            body["serverless_ru_per_s"] = args.serverless_ru_per_s
        return "PUT", "/throttle", body
    if a in ("container", "database"):
        body = ({"ru_per_s": None} if args.unprovisioned else {"autoscale_max": args.autoscale_max}
                if args.autoscale_max is not None else {"ru_per_s": args.ru_per_s})
        q = urllib.parse.quote
        path = f"/throttle/containers/{q(args.db)}/{q(args.coll)}" if a == "container" else f"/throttle/databases/{q(args.db)}"
        return "PUT", path, body
    path = "/throttle/storms/" + urllib.parse.quote(args.region)
    if args.off:
        return "DELETE", path, None
    body = {"share": args.share, "retry_after_ms": args.retry_after_ms, "seed": args.seed}
    if args.op:
        body["op"] = args.op
    return "PUT", path, body
