"""A drill's scenario file: the account, the workload, the timed steps and the assertions.

    {"name": "failover", "description": "...", "duration_ms": 12000,
     "account": {"regions": ["East US", "East US 2"], "consistency": "Session", "multi_write": false,
                 "lag_ms": 300, "options": {"detection_delay_ms": 5000}},
     "workload": {"client": "regionlab", "mix": {"read": 0.3, "write": 0.7, "query": 0},
                  "concurrency": 8, "rate_per_s": null, "keys": 200,
                  "client_options": {"preferred_locations": ["East US"], "connection_mode": "gateway"}},
     "schedule": [{"at_ms": 3000, "failover": {"region": "East US 2", "kind": "graceful"}},
                  {"at_ms": 4000, "fault": {"type": "region_outage", "region": "East US"}, "as": "o"},
                  {"at_ms": 7000, "heal": "o"}],
     "assertions": {"availability_min": 0.99, "lost_writes_max": 50, "p99_ms_max": 2000}}

The schedule is the simulator's (scenario_steps.py): "fault" is the body of POST /faults,
"failover" that of POST /failover, "heal" names a fault by "as", id or "all". A step may carry a
"window_ms": how long after it the run counts as "in a fault window" (a failover's default
FAILOVER_WINDOW_MS; a fault's window lasts until it is healed or its duration_ms ends).
Two step kinds are the drill's own (the simulator has no live client and does not meter):
"client" changes the running client's options (CLIENT_STEP_FIELDS: what the client can change
while it runs, or "restart": a new client), and "throttle" is the body of PUT /throttle
(credits, RU limits), undone by a "heal" naming its "as". A fault, failover or throttle step may
carry "expect": what must hold in its own window (judge.py gives the verdicts).

Everything that can be judged before a run is checked here, so a bad file never starts an
emulator: unknown fields (a fault's too, core/faults.py FAULT_FIELDS), fault types, heals naming
nothing named earlier, regions, and the account's options (as the emulator would take them).

"setups" runs the same workload and schedule once per client setup, one after another against
the same account (every fault healed and every knob restored between them), and the report
compares them: each setup is {"name", "client_options"}, its options laid over the workload's.
Every error is a DrillError (a ConfigError): one line naming the field and what is allowed.
"""
import json
from dataclasses import dataclass, field

from ..config import ConfigError, from_keywords
from ..core.account import AccountConfig
from ..core.consistency import LEVELS, canonical
from ..core.faults import FAULT_REGION_FIELDS
from ..defaults import CROSS_REGION_LAG_MS_DEFAULT
from ..scenario_steps import check_heals, check_step

CLIENTS = ("regionlab", "azure-cosmos")
OPERATIONS = ("read", "write", "query")
CONNECTION_MODES = ("gateway", "direct")
TOP_FIELDS = ("name", "description", "duration_ms", "account", "workload", "setups", "schedule", "assertions",
              "stop", "duration_scale_min")
ACCOUNT_FIELDS = ("regions", "consistency", "multi_write", "lag_ms", "options")
WORKLOAD_FIELDS = ("client", "mix", "concurrency", "rate_per_s", "keys", "client_options")
CLIENT_OPTION_FIELDS = ("preferred_locations", "excluded_locations", "connection_mode",
                        "availability_strategy", "circuit_breaker", "timeout_s", "multiple_write_locations")
# What only the bundled client has, with why the official SDK cannot take it from a scenario.
REGIONLAB_ONLY_OPTIONS = {
    "circuit_breaker": "the SDK's partition-level circuit breaker is the process-wide environment variable "
                       "AZURE_COSMOS_ENABLE_CIRCUIT_BREAKER, not a client option",
    "connection_mode": "the Python SDK speaks only gateway mode"}
CLIENT_STEP_FIELDS = ("excluded_locations", "restart")   # what a running client can change (docs/client.md)
THROTTLE_KNOBS = ("credits_per_s", "ru", "burst", "serverless", "serverless_ru_per_s")   # PUT /throttle
STEP_FIELDS = ("at_ms", "fault", "heal", "failover", "client", "throttle", "as", "window_ms", "label", "expect")
SETUP_FIELDS = ("name", "client_options")
SETUPS_MAX = 8
ASSERTION_FIELDS = ("availability_min", "lost_writes_max", "p99_ms_max", "lost_writes_match", "consistency_valid",
                    "error_rate_max", "steady_state", "faults", "recovery")
WINDOW_FIELDS = ("availability_min", "p99_ms_max", "rto_ms_max", "lost_writes_max",   # "faults", "expect"
                 "recovered_in_window")
STEADY_FIELDS = ("availability_min", "p99_ms_max")
RECOVERY_FIELDS = ("availability_min", "hold_ms", "stall_ms")
STOP_FIELDS = ("error_rate_above", "over_ms")
RECOVERY_DEFAULT = {"availability_min": 0.95, "hold_ms": 1000, "stall_ms": 500}   # what RTO waits for (report.py)
STOP_OVER_MS_DEFAULT = 2000
COUNT_MAX = 10**9
DURATION_MS_MAX = 3_600_000               # an hour: a drill, not a soak
CONCURRENCY_MAX = 256
KEYS_MAX = 1_000_000
RATE_PER_S_MAX = 100_000
MIX_WEIGHT_MAX = 1_000_000
FAILOVER_WINDOW_MS = 5_000                 # a failover step counts as a fault window this long
REGIONS_DEFAULT = ("East US", "East US 2", "West US")


class DrillError(ConfigError):
    """A scenario file that cannot run; str() is one line naming the field and the rule."""


@dataclass
class Drill:
    name: str
    description: str
    duration_ms: int
    regions: tuple
    consistency: str
    multi_write: bool
    lag_ms: int | None
    account_options: dict
    client: str
    mix: dict
    concurrency: int
    rate_per_s: float | None
    keys: int
    client_options: dict
    schedule: list
    assertions: dict = field(default_factory=dict)
    setups: list = field(default_factory=list)      # [{"name", "client_options"}]; [] for one run
    stop: dict | None = None                        # {"error_rate_above", "over_ms"}: abort the run
    scale: float = 1.0                              # the --duration-scale it was scaled by
    scale_min: float = 0.0                          # "duration_scale_min": the smallest that keeps its conclusions
    served: bool = False                            # no workload section: your application drives it (served.py)

    @property
    def recovery(self) -> dict:
        """When a fault counts as recovered (report.py's RTO): success rate and how long it holds."""
        return {**RECOVERY_DEFAULT, **self.assertions.get("recovery", {})}

    def for_setup(self, setup: dict) -> "Drill":
        """The one-run drill of a setup: its client options laid over the workload's."""
        return Drill(**{**self.__dict__, "setups": [],
                        "client_options": {**self.client_options, **setup["client_options"]}})

    def scaled(self, scale: float) -> "Drill":
        """The same drill with every time of the scenario times scale (scaled() below): the
        short form tests and `--short` run."""
        return scaled(self, scale)


def account_options(drill: Drill) -> dict:
    """The running_emulator() keyword options of the drill's account (an own emulator's)."""
    opts = {"regions": drill.regions, "consistency": drill.consistency, "multi_write": drill.multi_write}
    if drill.lag_ms is not None:
        opts["lag_ms"] = {(a, b): drill.lag_ms for a in drill.regions for b in drill.regions if a != b}
    return {**opts, **drill.account_options}


def _check_account(drill: Drill) -> Drill:
    """The account an own emulator would start with, checked now (an unknown option, a bad value)."""
    try:
        from_keywords(account_options(drill))
    except ConfigError as e:
        raise DrillError(f"account.options: {e}") from None
    return drill


def load(path: str) -> Drill:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise DrillError(f"cannot read the scenario file {path}: {e.strerror or e}") from None
    return parse(text, default_name=path.rsplit("/", 1)[-1].removesuffix(".json"))


def parse(data, default_name: str = "drill") -> Drill:
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except ValueError as e:
            raise DrillError(f"a scenario file is JSON: {e}") from None
    if not isinstance(data, dict):
        raise DrillError("a scenario file is a JSON object with " + ", ".join(TOP_FIELDS))
    _known(data, TOP_FIELDS, "the scenario")
    duration = _int(data.get("duration_ms", 10_000), "duration_ms", 1, DURATION_MS_MAX)
    account = _object(data.get("account", {}), "account", ACCOUNT_FIELDS)
    workload = _object(data.get("workload", {}), "workload", WORKLOAD_FIELDS)
    regions = _regions(account.get("regions", list(REGIONS_DEFAULT)))
    consistency = _consistency(account.get("consistency", "Session"))
    schedule = _schedule(data.get("schedule", []), duration, regions)
    client = _client(workload.get("client", "regionlab"))
    client_options = _client_options(workload.get("client_options", {}), regions, client, "workload.client_options")
    setups = _setups(data.get("setups", []), regions, client)
    return _check_account(Drill(name=_text(data.get("name", default_name), "name"),
                 description=_text(data.get("description", ""), "description"),
                 duration_ms=duration, regions=regions, consistency=consistency,
                 multi_write=_bool(account.get("multi_write", False), "account.multi_write"),
                 lag_ms=None if account.get("lag_ms") is None else
                 _int(account["lag_ms"], "account.lag_ms", 0, DURATION_MS_MAX),
                 account_options=_object(account.get("options", {}), "account.options", None),
                 client=client,
                 mix=_mix(workload.get("mix", {"read": 0.5, "write": 0.5})),
                 concurrency=_int(workload.get("concurrency", 4), "workload.concurrency", 1, CONCURRENCY_MAX),
                 rate_per_s=_rate(workload.get("rate_per_s")),
                 keys=_int(workload.get("keys", 100), "workload.keys", 1, KEYS_MAX),
                 client_options=client_options,
                 schedule=schedule, assertions=_assertions(data.get("assertions", {})), setups=setups,
                 stop=_stop(data.get("stop")),
                 scale_min=_number(data.get("duration_scale_min", 0.0), "duration_scale_min", 0, 1),
                 served=_served(data)))


def _served(data: dict) -> bool:
    """Whether your application drives the emulator: no workload section, and nothing that only
    a workload of the drill's own has (setups, client steps: those run the default workload)."""
    steps = data.get("schedule", [])
    return "workload" not in data and "setups" not in data and not any(
        isinstance(s, dict) and "client" in s for s in (steps if isinstance(steps, list) else []))


# ---- checks ----------------------------------------------------------------------------------
def _known(obj: dict, allowed: tuple, where: str) -> None:
    unknown = [k for k in obj if k not in allowed]
    if unknown:
        raise DrillError(f"{where}: unknown field {unknown[0]!r}; the fields are: {', '.join(allowed)}")


def _object(value, where: str, allowed: tuple | None) -> dict:
    if not isinstance(value, dict):
        raise DrillError(f"{where} must be a JSON object")
    if allowed is not None:
        _known(value, allowed, where)
    return value


def _int(value, where: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise DrillError(f"{where} must be an integer from {lo} to {hi}, not {value!r}")
    return value


def _number(value, where: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise DrillError(f"{where} must be a number from {lo} to {hi}, not {value!r}")
    return float(value)


def _bool(value, where: str) -> bool:
    if not isinstance(value, bool):
        raise DrillError(f"{where} must be true or false, not {value!r}")
    return value


def _text(value, where: str) -> str:
    if not isinstance(value, str):
        raise DrillError(f"{where} must be a string")
    return value


def _regions(value) -> tuple:
    if not isinstance(value, list) or not value or not all(isinstance(r, str) and r for r in value) \
            or len(set(value)) != len(value):
        raise DrillError("account.regions must be a non-empty list of distinct region names")
    return tuple(value)


def _consistency(value) -> str:
    try:
        return canonical(value)
    except Exception:
        raise DrillError(f"account.consistency {value!r} is not one of {', '.join(LEVELS)}") from None


def _client(value) -> str:
    if value not in CLIENTS:
        raise DrillError(f"workload.client {value!r} is not one of {', '.join(CLIENTS)}")
    return value


def _mix(value) -> dict:
    mix = _object(value, "workload.mix", OPERATIONS)
    for op, share in mix.items():
        _number(share, f"workload.mix.{op}", 0, MIX_WEIGHT_MAX)   # relative weights, normalized
    total = sum(mix.values())
    if total <= 0:
        raise DrillError("workload.mix needs a positive share of read, write or query")
    return {op: float(mix.get(op, 0)) / total for op in OPERATIONS}


def _rate(value):
    return None if value is None else _number(value, "workload.rate_per_s", 0.1, RATE_PER_S_MAX)


def _locations(opts: dict, name: str, regions: tuple, where: str) -> None:
    if name in opts:
        listed = opts[name]
        if not isinstance(listed, list) or any(r not in regions for r in listed):
            raise DrillError(f"{where}.{name} must list regions of the account "
                             f"({', '.join(regions)}), not {listed!r}")


def _client_options(value, regions: tuple, client: str, where: str) -> dict:
    opts = dict(_object(value, where, CLIENT_OPTION_FIELDS))
    for name in ("preferred_locations", "excluded_locations"):
        _locations(opts, name, regions, where)
    mode = opts.get("connection_mode", "gateway")
    if mode not in CONNECTION_MODES:
        raise DrillError(f"{where}.connection_mode {mode!r} is not one of {', '.join(CONNECTION_MODES)}")
    if "timeout_s" in opts:
        _number(opts["timeout_s"], f"{where}.timeout_s", 0.01, 600)
    for name in ("circuit_breaker", "multiple_write_locations"):
        if name in opts:
            _bool(opts[name], f"{where}.{name}")
    strategy = opts.get("availability_strategy", False)
    if not isinstance(strategy, (bool, dict)) or isinstance(strategy, dict) and (
            set(strategy) - {"threshold_ms", "threshold_steps_ms"}
            or any(isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in strategy.values())):
        raise DrillError(f"{where}.availability_strategy must be true/false or "
                         '{"threshold_ms": N, "threshold_steps_ms": N} (positive integers)')
    if client == "azure-cosmos":
        for name, why in REGIONLAB_ONLY_OPTIONS.items():
            if name in opts and not (name == "connection_mode" and opts[name] == "gateway"):
                raise DrillError(f"{where}.{name} is an option of the bundled client only "
                                 f"(\"client\": \"regionlab\"): {why}")
    return opts


def _setups(value, regions: tuple, client: str) -> list:
    if not isinstance(value, list) or len(value) == 1 or len(value) > SETUPS_MAX:
        raise DrillError(f"setups must be a list of 2 to {SETUPS_MAX} client setups "
                         '({"name": ..., "client_options": {...}}), or absent for one run')
    out = []
    for i, setup in enumerate(value):
        setup = _object(setup, f"setups[{i}]", SETUP_FIELDS)
        name = setup.get("name")
        if not isinstance(name, str) or not name or name in (s["name"] for s in out):
            raise DrillError(f"setups[{i}].name must be a non-empty string, distinct from the other setups'")
        opts = _client_options(setup.get("client_options", {}), regions, client, f"setups[{i}].client_options")
        out.append({"name": name, "client_options": opts})
    return out


def _schedule(steps, duration_ms: int, regions: tuple) -> list:
    if not isinstance(steps, list):
        raise DrillError("schedule must be a list of steps")
    parsed = [_step(i, s, regions) for i, s in enumerate(steps)]
    parsed.sort(key=lambda s: s["at_ms"])    # stable: steps at one time keep their order
    try:
        check_heals(parsed)
    except ConfigError as e:
        raise DrillError(f"schedule: {e}") from None
    for i, s in enumerate(parsed):
        _known(s, STEP_FIELDS, f"step {i}")
        if s["at_ms"] >= duration_ms:
            raise DrillError(f"step {i}: at_ms {s['at_ms']} is not before the end of the drill (duration_ms {duration_ms})")
        if "window_ms" in s:
            _int(s["window_ms"], f"step {i}: window_ms", 0, DURATION_MS_MAX)
        if "expect" in s:
            if not any(k in s for k in ("fault", "failover", "throttle")):
                raise DrillError(f"step {i}: expect judges a fault, failover or throttle step's window; "
                                 "this step has none")
            s["expect"] = _limits(s["expect"], f"step {i}: expect", WINDOW_FIELDS)
        for region in _regions_named(s):
            if region not in regions:
                raise DrillError(f"step {i} names region {region!r}; the account's regions are {', '.join(regions)}")
    return parsed


def check_regions(drill: Drill, regions: tuple) -> None:
    """Before a run against a running emulator: every region the drill names is one it has."""
    for i, s in enumerate(drill.schedule):
        for region in _regions_named(s) + list((s.get("client") or {}).get("excluded_locations", [])):
            if region not in regions:
                raise DrillError(f"step {i} names region {region!r}; the running emulator's regions are "
                                 f"{', '.join(regions)}")
    for where, opts in [("workload.client_options", drill.client_options)] + [
            (f"setups[{k}].client_options", s["client_options"]) for k, s in enumerate(drill.setups)]:
        for name in ("preferred_locations", "excluded_locations"):
            _locations(opts, name, regions, where)


def _regions_named(step: dict) -> list:
    if "failover" in step:
        return [step["failover"]["region"]]
    fault = step.get("fault") or {}
    return [fault[k] for k in FAULT_REGION_FIELDS.get(fault.get("type"), ()) if k in fault]


def _step(i: int, step, regions: tuple) -> dict:
    """A step of the drill's own kinds ("client", "throttle"), or one the simulator's checks pass."""
    own = [k for k in ("client", "throttle") if isinstance(step, dict) and k in step]
    if not own:
        try:
            return check_step(i, step)        # the simulator's steps: one schedule format
        except ConfigError as e:
            raise DrillError(f"schedule: {e}") from None
    if len(own) + sum(k in step for k in ("fault", "heal", "failover")) != 1:
        raise DrillError(f"step {i} needs exactly one of fault, heal, failover, client, throttle")
    at = step.get("at_ms", 0)
    if isinstance(at, bool) or not isinstance(at, int) or at < 0:
        raise DrillError(f"step {i}: at_ms must be a non-negative integer")
    if own[0] == "client":
        body = _object(step["client"], f"step {i}: client", CLIENT_STEP_FIELDS)
        if not body:
            raise DrillError(f"step {i}: a client step changes one of {', '.join(CLIENT_STEP_FIELDS)}")
        _locations(body, "excluded_locations", regions, f"step {i}: client")
        if "restart" in body and body["restart"] is not True:
            raise DrillError(f"step {i}: client.restart must be true (a new client, as an application restart makes)")
    else:
        body = _object(step["throttle"], f"step {i}: throttle", THROTTLE_KNOBS)
        if not body:
            raise DrillError(f"step {i}: a throttle step sets one of {', '.join(THROTTLE_KNOBS)} (PUT /throttle)")
        for knob in ("ru", "burst", "serverless"):
            if knob in body:
                _bool(body[knob], f"step {i}: throttle.{knob}")
        credits = body.get("credits_per_s")
        if credits is not None and credits is not True:
            _int(credits, f"step {i}: throttle.credits_per_s (null: off, true: 1000)", 1, 10**9)
        if "serverless_ru_per_s" in body:
            _int(body["serverless_ru_per_s"], f"step {i}: throttle.serverless_ru_per_s", 1, 10**9)
    return dict(step, at_ms=at)


def _limits(value, where: str, allowed: tuple) -> dict:
    out = dict(_object(value, where, allowed))
    for k, v in out.items():
        _LIMIT_CHECKS[k](v, f"{where}.{k}")
    return out


_LIMIT_CHECKS = {"availability_min": lambda v, w: _number(v, w, 0, 1),
                 "p99_ms_max": lambda v, w: _number(v, w, 0, DURATION_MS_MAX),
                 "rto_ms_max": lambda v, w: _number(v, w, 0, DURATION_MS_MAX),
                 "lost_writes_max": lambda v, w: _int(v, w, 0, COUNT_MAX),
                 "lost_writes_match": _bool, "consistency_valid": _bool, "recovered_in_window": _bool,
                 "error_rate_max": lambda v, w: _number(v, w, 0, 1),
                 "hold_ms": lambda v, w: _int(v, w, 1, DURATION_MS_MAX),
                 "stall_ms": lambda v, w: _int(v, w, 1, DURATION_MS_MAX),
                 "error_rate_above": lambda v, w: _number(v, w, 0, 1),
                 "over_ms": lambda v, w: _int(v, w, 1, DURATION_MS_MAX)}
_NESTED = {"steady_state": STEADY_FIELDS, "faults": WINDOW_FIELDS, "recovery": RECOVERY_FIELDS}


def _assertions(value) -> dict:
    """The assertions (judge.py gives their verdicts): limits outside fault windows, on the
    whole run, on the steady state, on every fault window, and what recovery means."""
    a = dict(_object(value, "assertions", ASSERTION_FIELDS))
    for k, v in a.items():
        a[k] = _limits(v, f"assertions.{k}", _NESTED[k]) if k in _NESTED else _LIMIT_CHECKS[k](v, f"assertions.{k}")
    return a


def _stop(value) -> dict | None:
    """The stop condition: abort the run when this share of the operations that ended in the
    last over_ms failed (a span with none ended counts as all failed)."""
    if value is None:
        return None
    stop = _limits(value, "stop", STOP_FIELDS)
    if "error_rate_above" not in stop:
        raise DrillError('stop needs "error_rate_above" (0-1): the share of failed operations over the last '
                         f'"over_ms" (default {STOP_OVER_MS_DEFAULT}) at which the drill is aborted')
    return {"over_ms": STOP_OVER_MS_DEFAULT, **stop}


# ---- scaling: --duration-scale and --short ---------------------------------------------------
# `--duration-scale F` (and `--short`, F = 0.3): every time of the scenario's timeline, times F:
#     duration_ms, each step's at_ms and window_ms (a failover's default window too), a fault's
#     duration_ms; the replication lags (account.lag_ms, a link_lag fault's lag_ms and
#     jitter_ms) and the account's detection_delay_ms and election_ms (the emulator's defaults
#     when the scenario leaves them out); the recovery's hold_ms and the stop condition's over_ms.
# Not scaled: what is measured against the client's own timers, which the drill cannot scale
# without fixed costs (a request's few ms) taking over: the delays request faults add (latency,
# replica_slow) and the client options (timeout_s, hedging thresholds); the client's built-in
# counts and timers (a breaker opens after 10 failures in a row, backoffs, account refresh); the
# service's (retry-after, the credit window and its "wait 2 seconds"); the recovery's stall_ms
# (a gap between completions is judged against request latency); and the assertions' limits (a
# p99 or RTO bound is a promise to users, not a time of the scenario). So a drill
# whose conclusions need its windows long against those (hedging-vs-breaker: the breaker's 10
# failures per key) states "duration_scale_min", and a smaller scale is raised to it. A time
# that was positive stays at least 1 ms. The scaled drill records its scale; the report states it.
SCALED_ACCOUNT_OPTIONS = ("detection_delay_ms", "election_ms")
SCALED_FAULT_FIELDS = {"link_lag": ("lag_ms", "jitter_ms")}


def _ms(value: int, scale: float) -> int:
    return max(1, int(value * scale)) if value > 0 else 0


def _scaled_step(s: dict, scale: float) -> dict:
    s = dict(s, at_ms=int(s["at_ms"] * scale))
    if "window_ms" in s or "failover" in s:
        s["window_ms"] = int(s.get("window_ms", FAILOVER_WINDOW_MS) * scale)
    if "fault" in s:
        fault = dict(s["fault"])
        if "duration_ms" in fault:
            fault["duration_ms"] = _ms(fault["duration_ms"], scale)
        fault.update({k: _ms(fault[k], scale) for k in SCALED_FAULT_FIELDS.get(fault.get("type"), ())
                      if isinstance(fault.get(k), int) and not isinstance(fault[k], bool)})
        s["fault"] = fault
    return s


def scaled(drill, scale: float):
    """The drill with every time of its timeline (above) times scale, or its duration_scale_min."""
    scale = max(scale, drill.scale_min)
    if scale == 1.0:
        return drill
    options = dict(drill.account_options)
    for k in SCALED_ACCOUNT_OPTIONS:         # the emulator's own default when the scenario has none
        value = options.get(k, getattr(AccountConfig, k))
        if isinstance(value, int) and not isinstance(value, bool):
            options[k] = _ms(value, scale)
    assertions = dict(drill.assertions)
    if "hold_ms" in assertions.get("recovery", {}):
        assertions["recovery"] = dict(assertions["recovery"], hold_ms=_ms(assertions["recovery"]["hold_ms"], scale))
    else:
        assertions["recovery"] = dict(assertions.get("recovery", {}), hold_ms=_ms(drill.recovery["hold_ms"], scale))
    stop = None if drill.stop is None else dict(drill.stop, over_ms=_ms(drill.stop["over_ms"], scale))
    return drill.__class__(**{
        **drill.__dict__, "duration_ms": int(drill.duration_ms * scale),
        "schedule": [_scaled_step(s, scale) for s in drill.schedule],
        "lag_ms": _ms(CROSS_REGION_LAG_MS_DEFAULT if drill.lag_ms is None else drill.lag_ms, scale),
        "account_options": options, "assertions": assertions, "stop": stop, "scale": drill.scale * scale})


# ---- the same file in the simulator ----------------------------------------------------------
DRILL_ONLY_FIELDS = ("name", "description", "duration_ms", "account", "workload", "setups", "assertions", "stop",
                     "duration_scale_min")
SIM_ACCOUNT_OPTIONS = ("detection_delay_ms", "election_ms", "nodes_per_region", "partitions",
                       "intra_region_delay_ms", "max_staleness_prefix", "max_interval_s")


def is_drill(data) -> bool:
    return isinstance(data, dict) and any(k in data for k in ("account", "workload", "assertions"))


def sim_scenario(data, sim_regions: tuple, clients_max: int, keys_max: int) -> dict:
    """A drill file as the simulator's scenario ({"schedule", settings}): the account's
    consistency, lag and timing options, the workload's concurrency as clients and its key space
    (capped at the simulator's limits); the rest (the live workload's client, mix, client options
    and setups, client and throttle steps, assertions) has no meaning in virtual time: the
    simulator's clients are its own and it does not meter. Regions must be the simulator's."""
    drill = parse(data)
    missing = [r for r in drill.regions if r not in sim_regions]
    if missing:
        raise DrillError(f"the simulator's account has the regions {', '.join(sim_regions)}; "
                         f"this drill names {missing[0]!r}")
    settings = {"consistency": drill.consistency, "clients": min(drill.concurrency, clients_max),
                "keys": min(drill.keys, keys_max)}
    if drill.lag_ms is not None:
        settings["lag_ms"] = [[a, b, drill.lag_ms] for a in sim_regions for b in sim_regions if a != b]
    settings.update({k: v for k, v in drill.account_options.items() if k in SIM_ACCOUNT_OPTIONS})
    live_only = {s["as"] for s in drill.schedule if "throttle" in s and "as" in s}
    steps = [{k: v for k, v in s.items() if k not in ("window_ms", "label", "expect")} for s in drill.schedule
             if not ("client" in s or "throttle" in s or s.get("heal") in live_only)]
    return {"schedule": steps, **settings}
