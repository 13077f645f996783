"""`regionlab routing ...`: read routing inside regions of a running emulator
(docs/control-api.md#read-routing), one control-port request each (see ctl.py).

    regionlab routing [show]
    regionlab routing set [--region R] [--primary-accepts-reads on|off] [--strategy active_requests|connections]
    regionlab routing weights W0 W1 W2 W3 [--region R]      (0-100 each, by replica index)
    regionlab routing weights --clear --region R             (the region follows the account's again)
"""
from .core.read_routing import STRATEGIES

ON_OFF = {"on": True, "off": False}


def add_parser(sub, common) -> None:
    p = sub.add_parser("routing", help="read routing in regions: primary reads, strategy, replica weights")
    p.set_defaults(control=None)
    r = p.add_subparsers(dest="action")
    r.add_parser("show", parents=[common], help="the routing knobs")
    s = r.add_parser("set", parents=[common], help="the account's knobs, or one region's (--region)")
    s.add_argument("--region", help="only this region (overrides the account's)")
    s.add_argument("--primary-accepts-reads", choices=ON_OFF, help="whether primaries serve reads")
    s.add_argument("--strategy", choices=STRATEGIES,
                   help="active_requests: each read to the least loaded replica; connections: each client "
                        "connection pinned to one replica (eventual and consistent-prefix reads only)")
    w = r.add_parser("weights", parents=[common], help="replica weights by index 0-3 (0-100; 0: last resort)")
    w.add_argument("weights", nargs="*", type=int, metavar="W")
    w.add_argument("--region", help="only this region (overrides the account's)")
    w.add_argument("--clear", action="store_true", help="drop --region's own weights")


def request_for(args) -> tuple:
    a = args.action
    if a in (None, "show"):
        return "GET", "/routing", None
    body = {"region": args.region} if args.region else {}
    if a == "set":
        if args.primary_accepts_reads is not None:
            body["primary_accepts_reads"] = ON_OFF[args.primary_accepts_reads]
        if args.strategy is not None:
            body["strategy"] = args.strategy
        return "PUT", "/routing", body
    body["weights"] = None if args.clear else args.weights
    return "PUT", "/routing/weights", body
