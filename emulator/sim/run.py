"""One simulated run from a seed: build the world, compose the workloads, heal, check.

Theory of operation (after FoundationDB's simulation and TigerBeetle's VOPR): the seed picks
the account (consistency level, partitions) unless the config fixes it, and seeds separate
random streams for the account (link jitter), the clients and the fault workload, so changing
one workload does not reshuffle the others. The clients' operations are requests to each
region's Service (world.py), the request layer the emulator itself serves from, so a run checks
the product. Virtual time jumps from timer to timer. When the clients have invoked their
operations, the fault workload stops and the run waits for every open request to be answered;
then every fault is healed, replication drains, and the final state of every region is
recorded. The checker (checker.py) judges the history.

A run is a pure function of (seed, config): the same inputs give the same history, byte for
byte (`Result.history_json`), so a failing seed is its own reproduction:

    python -m emulator.sim --seed 1234
"""
import json
import random
from dataclasses import asdict, dataclass, field, fields

from .. import config as checks
from ..config import ConfigError
from ..core.account import AccountConfig
from ..core.consistency import BOUNDED, EVENTUAL, PREFIX, SESSION, STRONG, canonical
from ..core.replica_set import LOG_RETAINED_COMMITS_MAX
from . import checker
from .nemesis import Nemesis
from .scenario import ScenarioError, parse
from .world import World, dumps
from .workload import Workload
from ..core.limits import PAGE_MAX_ITEMS

REGIONS = ("East US", "East US 2", "West US")
SETTLE_MS = 1_000                 # clients keep going this long after a scenario's last step
RUN_MS_MAX = 600_000              # virtual time a run may take before it is called stuck
INTRA_REGION_DELAYS_MS = (0, 1, 2, 2, 5, 20)
KEY_COUNTS = (2, 3, 6, 8)
LEVEL_WEIGHTS = ((SESSION, 5), (STRONG, 3), (BOUNDED, 1), (PREFIX, 1), (EVENTUAL, 1))
STEPS_MAX = 1_000_000
CLIENTS_MAX = 100
CONTAINERS_MAX = 8
KEYS_MAX = PAGE_MAX_ITEMS         # per container: a snapshot read is one read-feed page of a partition
_ACCOUNT = AccountConfig()
# Short retained logs make regions lag past them within a run, so failovers backfill by snapshot.
LOG_RETAINED_CHOICES = (4, 16, 64, LOG_RETAINED_COMMITS_MAX)


@dataclass
class SimConfig:
    steps: int = 300                       # client operations to invoke
    clients: int = 5
    consistency: str | None = None         # None: drawn from the seed
    partitions: int | None = None          # None: 1-4, drawn from the seed
    containers: int | None = None          # None: 1 or 2, drawn from the seed
    keys: int | None = None                # per container (few: many conflicts); None: drawn
    faults: bool = True                    # the random fault workload (off: clients only)
    scenario: list | None = None           # timed steps (scenario.py); replaces random faults
    intra_region_delay_ms: int | None = None   # None: drawn from the seed
    jitter_ms: int = 5
    detection_delay_ms: int = 1_500
    election_ms: int = 300
    auto_failover: bool = True
    lag_ms: dict = field(default_factory=dict)  # {(src, dst): ms}, or [[src, dst, ms], ...] as in JSON
    max_staleness_prefix: int = _ACCOUNT.staleness_ops    # bounded staleness K (writes)
    max_interval_s: int = _ACCOUNT.staleness_s            # bounded staleness T (seconds)
    log_retained_commits: int | None = None    # per replica set; None: drawn from the seed
    nodes_per_region: int = 4              # direct mode's backend nodes (replica_move needs 5+)

    def __post_init__(self):
        """Every setting passes the server's checks (emulator/config.py), from whichever entry."""
        for name, check in SETTING_CHECKS.items():
            value = getattr(self, name)
            setattr(self, name, checks.check_value(check, value, f"{name}={value!r}"[:120]))

    @classmethod
    def from_scenario(cls, data, **overrides) -> "SimConfig":
        if isinstance(data, (str, bytes)):
            try:
                data = json.loads(data)
            except ValueError as e:
                raise ScenarioError(f"a scenario is JSON: {e}") from None
        from ..drill.scenario import is_drill, sim_scenario
        if is_drill(data):                   # a drill's file (docs/drills.md) runs here too
            data = sim_scenario(data, REGIONS, CLIENTS_MAX, KEYS_MAX)
        steps, settings = parse(data)
        known = [f.name for f in fields(cls) if f.name != "scenario"]
        unknown = sorted(set(settings) - set(known))
        if unknown:
            raise ScenarioError(f"unknown scenario setting {unknown[0]!r}; the settings are: {', '.join(known)}")
        settings.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls(scenario=steps, **settings)
        except ConfigError as e:
            raise ScenarioError(f"scenario setting {e}") from None


def _lag_pairs(value) -> dict:
    """A lag matrix as Python writes it ({(src, dst): ms}) or as JSON can ([[src, dst, ms], ...])."""
    if isinstance(value, list):
        if not all(isinstance(t, list) and len(t) == 3 for t in value):
            raise ValueError("must be [[source region, target region, one-way lag in ms], ...]")
        value = {(a, b): ms for a, b, ms in value}
    return checks.lag_matrix(value)


SETTING_CHECKS = {
    "steps": checks.integer(1, STEPS_MAX), "clients": checks.integer(1, CLIENTS_MAX),
    "consistency": checks.optional(checks.consistency),
    "partitions": checks.optional(checks.integer(1, checks.PARTITIONS_MAX)),
    "containers": checks.optional(checks.integer(1, CONTAINERS_MAX)),
    "keys": checks.optional(checks.integer(1, KEYS_MAX)), "faults": checks.boolean,
    "intra_region_delay_ms": checks.optional(checks.integer(0, checks.INTRA_REGION_DELAY_MS_MAX)),
    "jitter_ms": checks.integer(0, checks.DELAY_MS_MAX),
    "detection_delay_ms": checks.integer(0, checks.DELAY_MS_MAX),
    "election_ms": checks.integer(0, checks.DELAY_MS_MAX), "auto_failover": checks.boolean,
    "lag_ms": _lag_pairs,
    "max_staleness_prefix": checks.integer(1, checks.STALENESS_PREFIX_MAX),
    "max_interval_s": checks.integer(1, checks.STALENESS_INTERVAL_S_MAX),
    "log_retained_commits": checks.optional(checks.integer(1, LOG_RETAINED_COMMITS_MAX)),
    "nodes_per_region": checks.integer(4, 64),
}


@dataclass
class Result:
    seed: int
    config: dict
    history: dict
    violations: list

    @property
    def ok(self) -> bool:
        return not self.violations

    def history_json(self) -> str:
        return dumps(self.history)

    def summary(self) -> dict:
        ops = self.history["ops"]
        writes = [o for o in ops if o["f"] in checker.WRITE_FS]
        events = self.history["events"]
        count = lambda kind: sum(1 for e in events if e["kind"] == kind and "refused" not in e)
        c = self.config
        return {"seed": self.seed, "consistency": c["consistency"], "partitions": c["partitions"],
                "containers": c["containers"], "keys": c["keys"],
                "intra_region_delay_ms": c["intra_region_delay_ms"],
                "log_retained_commits": c["log_retained_commits"], "ops": len(ops),
                "ok": sum(1 for o in ops if o["outcome"] == "ok"),
                "failed": sum(1 for o in ops if o["outcome"] == "fail"),
                "indefinite": sum(1 for o in ops if o["outcome"] == "info"),
                "acknowledged_writes": sum(1 for o in writes if o["outcome"] == "ok"),
                "faults": count("fault"), "failovers": len(self.history["failovers"]),
                "lost_writes": len(self.history["lost_writes"]),
                "virtual_ms": self.history["virtual_ms"],
                "violations": len(self.violations)}


def resolve(seed: int, config: SimConfig) -> SimConfig:
    """Fill what the config leaves to the seed."""
    rng = random.Random(f"{seed}:config")
    level = config.consistency
    level = canonical(level) if level else rng.choices([l for l, _ in LEVEL_WEIGHTS],
                                                       weights=[w for _, w in LEVEL_WEIGHTS])[0]
    partitions = config.partitions or rng.randint(1, 4)
    delay = config.intra_region_delay_ms
    delay = rng.choice(INTRA_REGION_DELAYS_MS) if delay is None else delay
    containers = config.containers or rng.choice((1, 2))
    keys = config.keys or rng.choice(KEY_COUNTS)
    retained = config.log_retained_commits or rng.choice(LOG_RETAINED_CHOICES)   # drawn last: the rest stay
    out = SimConfig(**{**asdict(config), "consistency": level, "partitions": partitions,
                       "intra_region_delay_ms": delay, "containers": containers, "keys": keys,
                       "log_retained_commits": retained})
    out.scenario = config.scenario
    return out


def build(seed: int, config: SimConfig) -> tuple[World, Workload, Nemesis]:
    acct = AccountConfig(regions=REGIONS, consistency=config.consistency, partition_count=config.partitions,
                         intra_region_delay_ms=config.intra_region_delay_ms, jitter_ms=config.jitter_ms,
                         lag_ms=dict(config.lag_ms), auto_failover=config.auto_failover,
                         detection_delay_ms=config.detection_delay_ms, election_ms=config.election_ms,
                         staleness_ops=config.max_staleness_prefix, staleness_s=config.max_interval_s,
                         log_retained_commits=config.log_retained_commits,
                         nodes_per_region=config.nodes_per_region, placement_seed=seed)
    world = World(seed, acct, config.containers, config.keys)
    workload = Workload(world, random.Random(f"{seed}:clients"), config.clients, config.steps)
    schedule = config.scenario if config.scenario is not None else (None if config.faults else [])
    nemesis = Nemesis(world, random.Random(f"{seed}:faults"), schedule)
    if config.scenario is not None:
        workload.not_before_ms = world.now_ms + nemesis.last_step_ms + SETTLE_MS
    return world, workload, nemesis


def run(seed: int, config: SimConfig | None = None) -> Result:
    config = resolve(seed, config or SimConfig())
    world, workload, nemesis = build(seed, config)
    start = world.now_ms
    workload.start()
    nemesis.start()
    while not (workload.done and world.in_flight == 0):
        if world.now_ms - start > RUN_MS_MAX or not world.step():
            break
    nemesis.stop()
    world.heal_everything()
    world.run_idle()
    history = {"seed": seed, "config": _config_json(config), "ops": world.history.ops,
               "events": world.history.events, "lost_writes": list(world.account.lost_writes),
               "failovers": [f.describe() for f in world.account.failovers],
               "final": world.final_state(), "start_ms": start, "virtual_ms": world.now_ms - start}
    stuck = [op["id"] for op in world.history.ops if op["outcome"] is None]
    violations = checker.check(history)
    if stuck:
        violations.append({"check": "liveness", "message": f"ops never answered: {stuck[:10]}", "op": stuck[0]})
    return Result(seed, history["config"], history, violations)


def _config_json(config: SimConfig) -> dict:
    d = asdict(config)
    d["lag_ms"] = [[a, b, ms] for (a, b), ms in config.lag_ms.items()]
    return d
