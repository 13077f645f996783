"""`regionlab` / `python -m emulator`: serve an account until SIGINT or SIGTERM.
`regionlab <command>` (topology, fault, failover, ...) talks to a running one instead: ctl.py.

Prints one JSON line to stdout when every endpoint can serve (the ready line); logs go to
stderr. Flags override environment variables (REGIONLAB_*), which override defaults.
"""
import argparse
import asyncio
import json
import logging
import os
import signal
import sys

from . import defaults
from .core.account import AccountConfig
from .core.consistency import canonical
from .core.errors import CosmosError
from .core.throttle import CREDITS_PER_S_DEFAULT, SERVERLESS_RU_PER_S_DEFAULT, ThrottleConfig


def _env(name: str, default):
    return os.environ.get(f"REGIONLAB_{name}", default)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="regionlab", description="Local multi-region Cosmos DB-style emulator.",
                                epilog="Control commands (see docs/control-api.md): regionlab topology | health | "
                                       "faults | fault inject|heal|region-outage|... | failover | failovers | "
                                       "lost-writes | region add|remove | sim | throttle; each takes --help.")
    p.add_argument("--host", default=_env("HOST", defaults.HOST), help="address to listen on (default %(default)s)")
    p.add_argument("--advertise-host", default=_env("ADVERTISE_HOST", None),
                   help="host name clients use in the endpoints the server advertises (default: --host, "
                        "or 127.0.0.1 when --host is 0.0.0.0)")
    p.add_argument("--port", type=int, default=int(_env("PORT", defaults.GLOBAL_PORT)),
                   help="global (account) endpoint port; regions take the next ports (default %(default)s)")
    p.add_argument("--regions", default=_env("REGIONS", ",".join(defaults.REGIONS)),
                   help="comma-separated region names, write region first (default %(default)s)")
    p.add_argument("--control-port", type=int, default=int(_env("CONTROL_PORT", defaults.CONTROL_PORT)))
    p.add_argument("--consistency", default=_env("CONSISTENCY", defaults.CONSISTENCY))
    p.add_argument("--key", default=_env("KEY", defaults.EMULATOR_KEY), help="account master key (base64)")
    p.add_argument("--no-auth", action="store_true", default=_env("NO_AUTH", "") == "1",
                   help="accept requests without checking signatures")
    p.add_argument("--max-clock-skew-s", type=float, default=float(_env("MAX_CLOCK_SKEW_S", 900)),
                   help="refuse (401) a signed request whose x-ms-date is further than this from the "
                        "server's clock, as the service does; 0 turns the check off, for hosts with a "
                        "broken clock (default %(default)g)")
    p.add_argument("--multi-write", action="store_true", default=_env("MULTI_WRITE", "") == "1")
    p.add_argument("--partitions", type=int, default=int(_env("PARTITIONS", 0)) or None,
                   help="physical partitions per container (default: derived from throughput)")
    p.add_argument("--intra-region-delay-ms", type=int, default=int(_env("INTRA_REGION_DELAY_MS", defaults.INTRA_REGION_DELAY_MS)))
    p.add_argument("--seed", type=int, default=int(_env("SEED", 0)))
    t = p.add_argument_group("throughput (docs/throughput.md; change them later with `regionlab throttle`)")
    t.add_argument("--credits-per-s", type=int, nargs="?", const=CREDITS_PER_S_DEFAULT,
                   default=int(_env("CREDITS_PER_S", 0)) or None,
                   help=f"account-wide credits per second, Service Bus style (429/50009); alone: "
                        f"{CREDITS_PER_S_DEFAULT} (default: off)")
    t.add_argument("--burst", action="store_true", default=_env("BURST", "") == "1",
                   help="burst capacity: idle partitions bank up to 300 s of budget, spent at up to 3000 RU/s")
    t.add_argument("--serverless", action="store_true", default=_env("SERVERLESS", "") == "1",
                   help="a serverless account: no provisioned throughput, a per-partition ceiling")
    t.add_argument("--serverless-ru-per-s", type=int,
                   default=int(_env("SERVERLESS_RU_PER_S", SERVERLESS_RU_PER_S_DEFAULT)),
                   help="the serverless per-partition ceiling (default %(default)s)")
    t.add_argument("--no-ru-limits", action="store_true", default=_env("NO_RU_LIMITS", "") == "1",
                   help="do not enforce provisioned RU/s (charges are still reported)")
    p.add_argument("--log-level", default=_env("LOG_LEVEL", "WARNING"))
    return p


def _usage_error(message: str):
    print(f"regionlab: {message}", file=sys.stderr)
    raise SystemExit(2)


def config_from_args(args):
    from .runtime.server import ServerConfig
    regions = tuple(r.strip() for r in args.regions.split(",") if r.strip())
    try:
        consistency = canonical(args.consistency)
    except CosmosError as e:
        _usage_error(e.message)
    if args.multi_write and consistency == "Strong":
        _usage_error("Strong consistency cannot be combined with multi-write regions "
                     "(the service does not offer it either); pick another --consistency.")
    throttle = ThrottleConfig(ru=not args.no_ru_limits, credits_per_s=args.credits_per_s, burst=args.burst,
                              serverless=args.serverless, serverless_ru_per_s=args.serverless_ru_per_s)
    account = AccountConfig(regions=regions, multi_write=args.multi_write, consistency=consistency,
                            partition_count=args.partitions, intra_region_delay_ms=args.intra_region_delay_ms,
                            throttle=throttle)
    advertise = args.advertise_host or ("127.0.0.1" if args.host in ("0.0.0.0", "::", "") else args.host)
    return ServerConfig(account=account, host=args.host, advertise_host=advertise, global_port=args.port,
                        control_port=args.control_port, key=None if args.no_auth else args.key, seed=args.seed,
                        max_clock_skew_s=args.max_clock_skew_s)


async def serve(config) -> None:
    from .runtime.server import Emulator
    emu = Emulator(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await emu.start()
    if not stop.is_set():
        print(json.dumps(emu.ready_info()), flush=True)
    await stop.wait()
    logging.getLogger("regionlab").info("shutting down")
    await emu.stop()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    from . import ctl
    if argv and argv[0] in ctl.COMMANDS:
        return ctl.main(argv)             # a control-port command (emulator/ctl.py), not a server
    args = build_parser().parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(),
                        format='{"ts":"%(asctime)s","level":"%(levelname)s","logger":"%(name)s","msg":%(message)r}')
    config = config_from_args(args)
    try:
        import uvloop
        uvloop.run(serve(config))
    except OSError as e:
        print(f"regionlab: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
