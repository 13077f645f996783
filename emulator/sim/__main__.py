"""`python -m emulator.sim --seed N [--steps K] [--scenario FILE]`: one simulated run, a summary
line (JSON) and its violations; exit status 1 when the checker found any. `--seeds A-B` runs a
range and prints one line per seed."""
import argparse
import json
import sys

from . import SimConfig, run
from ..config import ConfigError

VIOLATIONS_SHOWN = 20


def build_parser(prog: str = "python -m emulator.sim") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Run the deterministic simulator and check its history.")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", help="a range of seeds, e.g. 0-99 (overrides --seed)")
    p.add_argument("--steps", type=int, default=None, help="client operations per run (default 300)")
    p.add_argument("--consistency", default=None, help="account consistency (default: drawn from the seed)")
    p.add_argument("--partitions", type=int, default=None, help="partitions per container (default: 1-4)")
    p.add_argument("--containers", type=int, default=None, help="containers (default: 1-2)")
    p.add_argument("--keys", type=int, default=None, help="keys per container (default: 2-8)")
    p.add_argument("--intra-region-delay-ms", type=int, default=None, help="replica apply delay (default: drawn)")
    p.add_argument("--log-retained-commits", type=int, default=None,
                   help="commits each replica set's log retains (default: drawn from the seed)")
    p.add_argument("--nodes-per-region", type=int, default=None,
                   help="direct mode's backend nodes per region (default 4; a replica_move needs 5 or more)")
    p.add_argument("--no-faults", action="store_true", help="clients only, no fault workload")
    p.add_argument("--scenario", help="a scenario JSON file (timed faults, heals, failovers)")
    p.add_argument("--history", help="write the full history (JSON) to this file")
    return p


def config_from(args) -> SimConfig:
    overrides = {"steps": args.steps, "consistency": args.consistency, "partitions": args.partitions,
                 "containers": args.containers, "keys": args.keys,
                 "intra_region_delay_ms": args.intra_region_delay_ms,
                 "log_retained_commits": args.log_retained_commits, "nodes_per_region": args.nodes_per_region}
    if args.scenario:
        with open(args.scenario) as f:
            return SimConfig.from_scenario(f.read(), **overrides)
    return SimConfig(faults=not args.no_faults, **{k: v for k, v in overrides.items() if v is not None})


def seeds_of(args) -> list:
    if not args.seeds:
        return [args.seed]
    lo, _, hi = args.seeds.partition("-")
    try:
        return list(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise ConfigError(f"--seeds {args.seeds!r}: must be a seed or a range of seeds, e.g. 0-99") from None


def main(argv=None, out=None, prog: str = "python -m emulator.sim") -> int:
    out = out or sys.stdout
    args = build_parser(prog).parse_args(argv)
    try:
        config = config_from(args)
        seeds = seeds_of(args)
    except (OSError, ConfigError) as e:            # a ScenarioError is a ConfigError
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    failed = 0
    for seed in seeds:
        result = run(seed, config)
        print(json.dumps(result.summary()), file=out)
        for v in result.violations[:VIOLATIONS_SHOWN]:
            print(f"  {v['check']}: {v['message']}", file=out)
        if args.history:
            with open(args.history, "w") as f:
                f.write(result.history_json())
        failed += not result.ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
