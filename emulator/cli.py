"""`regionlab` / `python -m emulator`: serve an account until SIGINT or SIGTERM.
`regionlab <command>` (topology, fault, failover, ...) talks to a running one instead: ctl.py.

Prints one JSON line to stdout when every endpoint can serve (the ready line); logs go to
stderr as JSON lines (logs.py). The flags, their REGIONLAB_* variables, defaults and checks are
config.OPTIONS: a flag is added there, not here. A bad value ends the process with one line,
`regionlab: error: ...`, and exit status 2, before anything listens.
"""
import argparse
import asyncio
import difflib
import errno
import json
import logging
import os
import signal
import sys
import textwrap
from importlib import metadata

from regionlab.client import event_loop

from . import config, logs

DESCRIPTION = ("Serve a local multi-region Cosmos DB-style account: a global endpoint, one gateway per "
               "region and a control port, until SIGINT or SIGTERM. Data lives in memory only, gone when the "
               "process exits, unless --data-dir keeps it on disk across restarts.")

HELP_WIDTH = 90


def version() -> str:
    try:
        return metadata.version("regionlab")
    except metadata.PackageNotFoundError:      # run from a source tree that was never installed
        return "unknown (not installed)"


def _epilog() -> str:
    from . import ctl
    return (textwrap.fill("A flag wins over its environment variable, which wins over the default; "
                          "booleans take true/false, 1/0, yes/no, on/off.", HELP_WIDTH) +
            "\n\nenvironment variables:\n" + config.environment_help() +
            "\n\ncommands (talk to a running regionlab's control port; each takes --help; "
            "see docs/control-api.md):\n  regionlab " + " | ".join(ctl.COMMANDS) +
            "\n\nThe ready line (JSON, stdout) names every endpoint, the control port and the key.")


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        _usage_error(f"{message} (see regionlab --help)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="regionlab", description=textwrap.fill(DESCRIPTION, HELP_WIDTH), epilog=_epilog(),
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"regionlab {version()}")
    groups = {}
    for o in config.OPTIONS:
        if o.flag is None:
            continue
        if o.group not in groups:
            groups[o.group] = p if o.group == "server" else p.add_argument_group(o.group)
        target = groups[o.group]
        text = (o.help + _default_note(o) + f" [{o.variable}]").replace("%", "%%")
        if o.switch:
            target.add_argument(o.flag, dest=o.name, action="store_const", const=True, default=None, help=text)
        elif o.alone is not None:
            target.add_argument(o.flag, dest=o.name, nargs="?", const=o.alone, default=None,
                                metavar=o.metavar, help=text)
        else:
            target.add_argument(o.flag, dest=o.name, default=None, help=text,
                                metavar=o.metavar or o.flag.lstrip("-").upper().replace("-", "_"))
    return p


def _default_note(o) -> str:
    if o.switch or o.default is None or o.name == "key":
        return ""
    shown = ",".join(o.default) if isinstance(o.default, tuple) else o.default
    return f" (default: {shown})"


def _usage_error(message: str):
    print(f"regionlab: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def config_from_args(args, environ=None):
    """The ServerConfig of parsed flags and the environment (os.environ unless given)."""
    try:
        server_config, _ = config.from_command_line(vars(args), os.environ if environ is None else environ)
    except config.ConfigError as e:
        _usage_error(str(e))
    return server_config


async def serve(server_config) -> None:
    from .server import Emulator
    emu = Emulator(server_config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await emu.start()
    from .runtime import collector
    emu.collector = collector.install(emu.account)     # this process serves: tune and watch its GC
    if not stop.is_set():
        print(json.dumps(emu.ready_info()), flush=True)
    await stop.wait()
    logging.getLogger("regionlab").info("shutting down")
    emu.collector.stop()
    await emu.stop()


def _unknown_command(word: str):
    from . import ctl
    close = difflib.get_close_matches(word, ctl.COMMANDS, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    _usage_error(f"unknown command '{word}'; {hint}the commands are: {', '.join(ctl.COMMANDS)} "
                 "(with flags only, regionlab serves; see regionlab --help)")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    from . import ctl
    if argv and argv[0] in ctl.COMMANDS:
        return ctl.main(argv)             # a control-port command (emulator/ctl.py), not a server
    if argv and not argv[0].startswith("-"):
        _unknown_command(argv[0])
    args = build_parser().parse_args(argv)
    try:
        server_config, level = config.from_command_line(vars(args), os.environ)
    except config.ConfigError as e:
        _usage_error(str(e))
    logs.configure(level)
    from .runtime.certificate import CertificateError
    from .runtime.persistence import PersistenceError
    from .runtime.seed_data import SeedError
    try:
        event_loop.run(serve(server_config))
    except (CertificateError, PersistenceError) as e:
        print(f"regionlab: error: {e}", file=sys.stderr)
        return 1
    except SeedError as e:
        print(f"regionlab: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        hint = ""
        if e.errno == errno.EADDRINUSE and "--direct-ports" not in str(e.strerror):
            hint = ("; is another regionlab running? Choose other ports with --port and --control-port, "
                    "or --port 0 --control-port 0 for free ones")
        print(f"regionlab: error: {e.strerror or e}{hint}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
