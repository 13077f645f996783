"""Every setting of a regionlab server, read and checked in one place.

Theory of operation: three entries configure a server — command-line flags and REGIONLAB_*
environment variables (cli.py, through `from_command_line`), and the keyword options of
`running_emulator(...)` and the `regionlab_config` marker (testing.py, through `from_keywords`).
The simulator's settings, from its flags or a scenario file, use the same checks
(`check_value`, sim/run.py). Each setting is one `Option` in OPTIONS: its keyword name, its
flag and variable, its default, its check and its help. A value that fails its check raises
ConfigError, whose text is one line naming where the value came from, the value, and what is
allowed; a server is only built from values that all passed. A flag wins over its variable,
which wins over the default. An empty variable counts as unset.

Adding a setting: one Option below, and where its value goes in `_build`.
"""
import base64
import binascii
import ipaddress
from dataclasses import dataclass
from typing import Callable

from regionlab.client.protocol import direct as direct_protocol
from regionlab.client.protocol.auth import CLOCK_SKEW_MAX_S

from . import defaults, profile as profiles
from .core.account import AccountConfig
from .core.consistency import LEVELS, canonical
from .core.errors import CosmosError
from .core.placement import NODES_PER_REGION_DEFAULT, NODES_PER_REGION_MAX, NODES_PER_REGION_MIN
from .core.read_routing import STRATEGIES, check_weights
from .core.throttle import CREDITS_PER_S_DEFAULT, SERVERLESS_RU_PER_S_DEFAULT, ThrottleConfig
from .core.limits import (
    CONNECTIONS_PER_LISTENER_MAX, HEAD_DEADLINE_S, REGION_NAME_MAX_CHARS, SCRIPT_TIMEOUT_MS, WRITE_ACK_DEADLINE_MS,
)

ENV_PREFIX = "REGIONLAB_"
PORT_MAX = 65_535
PARTITIONS_MAX = 256                       # physical partitions per container
INTRA_REGION_DELAY_MS_MAX = 60_000
DELAY_MS_MAX = 24 * 3600 * 1000          # lags and delays: a day is "never" in a test
# Bounded staleness: the service's ceilings. Its floors (10 writes / 5 s for one region,
# 100,000 writes / 300 s for several) are not enforced, so a test can reach the bound quickly.
STALENESS_PREFIX_MAX = 2_147_483_647
STALENESS_INTERVAL_S_MAX = 86_400
SEED_MAX = 2**63 - 1
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
TRUE_WORDS = ("true", "1", "yes", "on")
FALSE_WORDS = ("false", "0", "no", "off")
_ACCOUNT = AccountConfig()


class ConfigError(ValueError):
    """A setting regionlab cannot run with; str() is one line an operator can act on."""


# ---- checks: a value (text from a flag or variable, or a Python value) -> the value to use ----
# Each raises ValueError with the rule the value broke, e.g. "must be an integer from 0 to 65535".

def integer(lo: int, hi: int, note: str = "") -> Callable:
    rule = f"must be an integer from {lo} to {hi}" + (f" ({note})" if note else "")

    def check(value):
        if isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise ValueError(rule) from None
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise ValueError(rule)
        return value
    return check


def optional(check: Callable) -> Callable:
    """None (unset) passes; anything else is checked."""
    return lambda value: None if value is None else check(value)


def seconds(value):
    rule = "must be a positive number of seconds"
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ValueError(rule) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ValueError(rule)
    return value


def boolean(value) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in TRUE_WORDS + FALSE_WORDS:
        return value.strip().lower() in TRUE_WORDS
    raise ValueError("must be one of " + ", ".join(f"{t}/{f}" for t, f in zip(TRUE_WORDS, FALSE_WORDS)))


def text(value) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("must be a non-empty string")
    return value.strip()


def pem_file(value) -> str:
    path = text(value)
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as e:
        raise ValueError(f"must be a readable PEM file ({e.strerror or e})") from None
    return path


def regions(value) -> tuple:
    names = value.split(",") if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise ValueError("must be region names: comma-separated text, or a list of strings")
    names = tuple(n.strip() for n in names if n.strip())
    if not names:
        raise ValueError("names no region: give at least one, the write region first, e.g. 'East US,West US'")
    seen = set()
    for name in names:
        if len(name) > REGION_NAME_MAX_CHARS or not name.isprintable():
            raise ValueError(f"has a bad region name {name[:80]!r}: at most {REGION_NAME_MAX_CHARS} "
                             "printable characters")
        if name.lower() in seen:
            raise ValueError(f"names {name!r} twice: each region once (names ignore case)")
        seen.add(name.lower())
    return names


def consistency(value) -> str:
    try:
        return canonical(value) if isinstance(value, str) else canonical("")
    except CosmosError:
        raise ValueError(f"must be one of {', '.join(LEVELS)} (any case)") from None


def read_strategy(value) -> str:
    if isinstance(value, str) and value.strip().lower() in STRATEGIES:
        return value.strip().lower()
    raise ValueError(f"must be one of {', '.join(STRATEGIES)}")


def key(value) -> str:
    rule = "must be the account key in base64, e.g. the well-known emulator key"
    if not isinstance(value, str) or not value.strip():
        raise ValueError(rule)
    try:
        base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(rule) from None
    return value.strip()


def log_level(value) -> str:
    if isinstance(value, str) and value.strip().upper() in LOG_LEVELS:
        return value.strip().upper()
    raise ValueError(f"must be one of {', '.join(LOG_LEVELS)} (any case)")


def credits(value):
    """None (off), True or 'default' (the default budget), or a positive number of credits/s."""
    if value is True or (isinstance(value, str) and value.strip().lower() == "default"):
        return CREDITS_PER_S_DEFAULT
    if value is None or value is False:
        return None
    return integer(1, 10**9, "or 'default'; leave it unset for no credit limit")(value)


def lag_matrix(value) -> dict:
    rule = "must be {(source region, target region): one-way lag in ms}"
    if not isinstance(value, dict):
        raise ValueError(rule)
    out = {}
    for pair, ms in value.items():
        if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(r, str) for r in pair)):
            raise ValueError(rule)
        out[pair] = integer(0, DELAY_MS_MAX, "one-way lag in ms")(ms)
    return out


def instance_id(value):
    """The emulator instance id direct addresses name (docs/direct-protocol.md, "Instances")."""
    if not direct_protocol.valid_instance(value):
        raise ValueError(f"must be 1-{direct_protocol.INSTANCE_MAX_CHARS} of the characters A-Z a-z 0-9 . _ - "
                         "(it is a segment of every direct address)")
    return value


def direct_ports(value):
    """--direct-ports: "MIN-MAX", or "0" for free ports; None (unset) is decided in _build."""
    rule = "must be MIN-MAX (1-65535, MIN <= MAX), or 0 for free ports"
    if isinstance(value, (tuple, list)) and len(value) == 2:
        lo, hi = value
    elif isinstance(value, str) and value.strip() == "0" or value == 0:
        return (0, 0)
    elif isinstance(value, str):
        lo, sep, hi = value.strip().partition("-")
        if not sep:
            raise ValueError(rule)
        try:
            lo, hi = int(lo), int(hi)
        except ValueError:
            raise ValueError(rule) from None
    else:
        raise ValueError(rule)
    if isinstance(lo, bool) or not isinstance(lo, int) or not isinstance(hi, int) or not 1 <= lo <= hi <= PORT_MAX:
        if (lo, hi) == (0, 0):
            return (0, 0)
        raise ValueError(rule)
    return (lo, hi)


def path(value) -> str:
    """A file or directory name; `~` is the user's home. Whether it exists is checked where it is used."""
    import os
    return os.path.abspath(os.path.expanduser(text(value)))


def query_mode(value) -> str:
    from .service.queries import QUERY_MODES
    if isinstance(value, str) and value.strip().lower() in QUERY_MODES:
        return value.strip().lower()
    raise ValueError(f"must be one of {', '.join(QUERY_MODES)}")


def durability(value) -> str:
    from .runtime.persistence import DURABILITY_MODES
    if isinstance(value, str) and value.strip().lower() in DURABILITY_MODES:
        return value.strip().lower()
    raise ValueError(f"must be one of {', '.join(DURABILITY_MODES)}")


def limits(value) -> dict:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ValueError("must be a dict of the direct server's limits, e.g. {'idle_timeout_s': 0.5}")
    return dict(value)


def read_weights(value):
    """Replica weights: "0,1,2,3" (a flag or variable) or a list of four integers 0-100."""
    if isinstance(value, str):
        try:
            value = [int(w) for w in value.split(",")]
        except ValueError:
            value = None
    try:
        return tuple(check_weights(list(value) if isinstance(value, (list, tuple)) else value))
    except ValueError:
        raise ValueError("must be four replica weights 0-100, one per replica index 0-3, e.g. 0,1,2,3") from None


# ---- the settings -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Option:
    name: str                        # the keyword of running_emulator() and the marker
    check: Callable
    default: object = None
    flag: str | None = None          # None: not on the command line
    env: str | None = None           # the variable is ENV_PREFIX + env; None: none
    help: str = ""
    switch: bool = False             # a flag without a value (it sets True, or False if negated)
    negated: bool = False            # flag and variable say "no": --no-auth sets auth to False
    keyword: bool = True             # also a running_emulator() option
    group: str = "server"
    metavar: str | None = None
    alone: str | None = None         # the flag may come without a value, which then means this

    @property
    def variable(self) -> str | None:
        return ENV_PREFIX + self.env if self.env else None


THROUGHPUT = "throughput (docs/throughput.md; change them later with `regionlab throttle`)"
STALENESS = "bounded staleness (with --consistency BoundedStaleness)"
_ports = "0: free ports for all"
DIRECT = "direct mode (docs/direct.md)"
HTTPS = "HTTPS (docs/https.md; the control port stays plain HTTP)"
DURABILITY = "durability (docs/durability.md)"

OPTIONS = (
    Option("profile", profiles.profile_name, "default", "--profile", "PROFILE",
           f"{profiles.OFFICIAL_EMULATOR}: look like the official Azure Cosmos DB emulator (HTTPS on 8081, one "
           f"region '{profiles.OFFICIAL_REGION}', no RU limits, control port {profiles.OFFICIAL_CONTROL_PORT}; "
           "docs/official-emulator.md); other flags still override it", metavar="NAME"),
    Option("host", text, defaults.HOST, "--host", "HOST", "address to listen on"),
    Option("advertise_host", optional(text), None, "--advertise-host", "ADVERTISE_HOST",
           "host name in the endpoints the server advertises (default: --host, or 127.0.0.1 when --host is 0.0.0.0)"),
    Option("port", integer(0, PORT_MAX, _ports), defaults.GLOBAL_PORT, "--port", "PORT",
           "global (account) endpoint port; region i listens on port+1+i; 0 picks free ports"),
    Option("control_port", integer(0, PORT_MAX, "0: a free port"), defaults.CONTROL_PORT, "--control-port",
           "CONTROL_PORT", "control port: health, topology, faults, failover, metrics; 0 picks a free port"),
    Option("control_token", optional(text), None, "--control-token", "CONTROL_TOKEN",
           "require 'Authorization: Bearer TOKEN' on the control port (all but GET /health and GET /)",
           metavar="TOKEN"),
    Option("regions", regions, defaults.REGIONS, "--regions", "REGIONS",
           "comma-separated region names, write region first"),
    Option("consistency", consistency, defaults.CONSISTENCY, "--consistency", "CONSISTENCY",
           f"default consistency level: {', '.join(LEVELS)} (any case)"),
    Option("multi_write", boolean, False, "--multi-write", "MULTI_WRITE", "every region takes writes", switch=True),
    Option("partitions", optional(integer(1, PARTITIONS_MAX, "leave it unset to derive the count from throughput")),
           None, "--partitions", "PARTITIONS",
           f"physical partitions per container, 1-{PARTITIONS_MAX} (default: derived from throughput)"),
    Option("key", key, defaults.EMULATOR_KEY, "--key", "KEY",
           "account master key, base64 (default: the well-known emulator key)"),
    Option("auth", boolean, True, "--no-auth", "NO_AUTH", "accept requests without checking signatures",
           switch=True, negated=True),
    Option("max_clock_skew_s", integer(0, 10**9, "0 turns the check off"), CLOCK_SKEW_MAX_S,
           "--max-clock-skew-s", "MAX_CLOCK_SKEW_S",
           "refuse (401) a signed request whose x-ms-date is further than this many seconds from the "
           "server's clock, as the service does; 0 turns the check off (a host with a broken clock)"),
    Option("intra_region_delay_ms", integer(0, INTRA_REGION_DELAY_MS_MAX), defaults.INTRA_REGION_DELAY_MS,
           "--intra-region-delay-ms", "INTRA_REGION_DELAY_MS", "replication delay primary -> secondaries, per hop"),
    Option("seed", integer(0, SEED_MAX), 0, "--seed", "SEED",
           "seeds the account's random choices (replication jitter)"),
    Option("log_level", log_level, "WARNING", "--log-level", "LOG_LEVEL",
           f"stderr log level: {', '.join(LOG_LEVELS)}; DEBUG logs one line per request", keyword=False),
    Option("max_staleness_prefix", integer(1, STALENESS_PREFIX_MAX), _ACCOUNT.staleness_ops,
           "--max-staleness-prefix", "MAX_STALENESS_PREFIX",
           "K: how many writes a region may lag before writes get 429/3200", group=STALENESS, metavar="K"),
    Option("max_interval_s", integer(1, STALENESS_INTERVAL_S_MAX), _ACCOUNT.staleness_s,
           "--max-interval-s", "MAX_INTERVAL_S",
           "T: how many seconds a region may lag before writes get 429/3200", group=STALENESS, metavar="T"),
    Option("connections_max", integer(1, 1_000_000), CONNECTIONS_PER_LISTENER_MAX, "--connections-max",
           "CONNECTIONS_MAX", "connections each listener (gateway port, control port) serves at once; one more "
           "is answered 503 and closed"),
    Option("ru_limits", boolean, True, "--no-ru-limits", "NO_RU_LIMITS",
           "do not enforce provisioned RU/s (charges are still reported)", switch=True, negated=True, group=THROUGHPUT),
    Option("enable_rate_limiting", boolean, False, "--enable-rate-limiting", "ENABLE_RATE_LIMITING",
           "enforce provisioned RU/s even where the profile does not (the official emulator's "
           "/EnableRateLimiting)", switch=True, group=THROUGHPUT),
    Option("credits_per_s", credits, None, "--credits-per-s", "CREDITS_PER_S",
           f"account-wide credits per second, Service Bus style (429/50009); alone or 'default': "
           f"{CREDITS_PER_S_DEFAULT} (default: off)", group=THROUGHPUT, metavar="N", alone="default"),
    Option("burst", boolean, False, "--burst", "BURST",
           "burst capacity: idle partitions bank up to 300 s of budget, spent at up to 3000 RU/s",
           switch=True, group=THROUGHPUT),
    Option("serverless", boolean, False, "--serverless", "SERVERLESS",
           "a serverless account: no provisioned throughput, a per-partition ceiling", switch=True, group=THROUGHPUT),
    Option("serverless_ru_per_s", integer(1, 10**6), SERVERLESS_RU_PER_S_DEFAULT, "--serverless-ru-per-s",
           "SERVERLESS_RU_PER_S", "the serverless per-partition ceiling", group=THROUGHPUT),
    Option("nodes_per_region", integer(NODES_PER_REGION_MIN, NODES_PER_REGION_MAX,
                                       "a replica set's four replicas live on distinct nodes"),
           NODES_PER_REGION_DEFAULT, "--nodes-per-region", "NODES_PER_REGION",
           "backend nodes per region, each a TCP listener", group=DIRECT),
    Option("direct_ports", optional(direct_ports), None, "--direct-ports", "DIRECT_PORTS",
           f"port range the nodes listen on, MIN-MAX (each node takes exactly its port), or 0 for free "
           f"ports (default: the first free ports of {defaults.DIRECT_PORT_MIN}-{defaults.DIRECT_PORT_MAX}; "
           f"free ports with --port 0)",
           group=DIRECT, metavar="MIN-MAX"),
    Option("query_mode", query_mode, "whole", "--query-mode", "QUERY_MODE",
           "whole: the gateway runs every query whole and returns final results; service: as the service, "
           "cross-partition ORDER BY/aggregate/DISTINCT/TOP/OFFSET queries get 400/1004 and the SDK plans "
           "them from the query plan and fans out (docs/queries.md)", metavar="MODE"),
    Option("https", boolean, False, "--https", "HTTPS",
           "the gateway ports (global and regions) serve TLS with a certificate generated on first start "
           "in --cert-dir and reused; endpoints become https://", switch=True, group=HTTPS),
    Option("cert_dir", optional(path), None, "--cert-dir", "CERT_DIR",
           "where the generated certificate is kept; clients trust its emulator.pem once "
           "(default: $XDG_CACHE_HOME/regionlab/certs, else ~/.cache/regionlab/certs)", group=HTTPS, metavar="DIR"),
    Option("cert", optional(path), None, "--cert", "CERT",
           "serve HTTPS with your own certificate (PEM, chain after it); implies --https; needs --cert-key",
           group=HTTPS, metavar="FILE"),
    Option("cert_key", optional(path), None, "--cert-key", "CERT_KEY",
           "the private key (PEM, unencrypted) of --cert", group=HTTPS, metavar="FILE"),
    Option("direct_tls_cert", optional(pem_file), None, "--direct-tls-cert", "DIRECT_TLS_CERT",
           "PEM certificate (chain) for TLS on the direct ports; plain connections keep working on the same "
           "ports (with --direct-tls-key)", group=DIRECT, metavar="FILE"),
    Option("direct_tls_key", optional(pem_file), None, "--direct-tls-key", "DIRECT_TLS_KEY",
           "PEM private key of --direct-tls-cert", group=DIRECT, metavar="FILE"),
    Option("data_dir", optional(path), None, "--data-dir", "DATA_DIR",
           "keep the account (databases, containers, offers, items) in DIR/regionlab.sqlite and restore it "
           "at start; without it, data lives in memory only (docs/durability.md)", group=DURABILITY, metavar="DIR"),
    Option("durability", durability, "strict", "--durability", "DURABILITY",
           "strict: each group of writes is fsynced before it is acknowledged (survives power loss); "
           "relaxed: written to the OS before it is acknowledged (survives a killed process, not a power loss)",
           group=DURABILITY, metavar="MODE"),
    Option("reset_data", boolean, False, "--reset-data", "RESET_DATA",
           "with --data-dir: discard what DIR holds and start empty", switch=True, group=DURABILITY),
    Option("seed_data", optional(path), None, "--seed-data", "SEED_DATA",
           "load databases, containers and items from PATH (a JSON file, or a directory of them) before the "
           "ready line; idempotent, so with --data-dir each start upserts only what changed (docs/seed-data.md)",
           group=DURABILITY, metavar="PATH"),
    # Options of running_emulator() and the marker only.
    Option("direct_limits", limits, {}),
    Option("instance_id", optional(instance_id), None),        # None: random per process (tests fix it)
    Option("lag_ms", lag_matrix, {}),
    Option("primary_accepts_reads", boolean, _ACCOUNT.primary_accepts_reads, "--primary-accepts-reads",
           "PRIMARY_ACCEPTS_READS", "whether primaries serve reads too (true/false; change it later with "
           "`regionlab routing set`)"),
    Option("read_strategy", read_strategy, _ACCOUNT.read_strategy, "--read-strategy", "READ_STRATEGY",
           "how a region balances reads over replicas: active_requests (per read) or connections (each "
           "client connection pinned to one replica; eventual and consistent-prefix reads only; "
           "`regionlab routing set`)"),
    Option("read_only_endpoints", boolean, False, "--read-only-endpoints", "READ_ONLY_ENDPOINTS",
           "one more endpoint per region that reads from secondaries only (listed in the ready line)",
           switch=True),
    Option("regional_hostnames", boolean, False, "--regional-hostnames", "REGIONAL_HOSTNAMES",
           "serve every region on the account's port (instead of ports of their own), chosen by the "
           "Host header, advertised as <host>-<region> (localhost-eastus2), the names the SDKs compute; "
           "they must resolve to this machine (docs/regional-hostnames.md)", switch=True),
    Option("read_weights", optional(read_weights), None, "--read-weights", "READ_WEIGHTS",
           "replica read weights by index 0-3, 0-100 each, e.g. 0,1,2,3 (default 1 each; "
           "`regionlab routing weights`)", metavar="W0,W1,W2,W3"),
    Option("detection_delay_ms", integer(0, DELAY_MS_MAX), _ACCOUNT.detection_delay_ms),
    Option("election_ms", integer(0, DELAY_MS_MAX), _ACCOUNT.election_ms),
    Option("header_timeout_s", seconds, HEAD_DEADLINE_S),
    Option("write_ack_timeout_s", seconds, WRITE_ACK_DEADLINE_MS / 1000),
    Option("script_timeout_s", seconds, SCRIPT_TIMEOUT_MS / 1000, "--script-timeout", "SCRIPT_TIMEOUT",
           "seconds a stored procedure, trigger or UDF may run before it is stopped with 408 (docs/scripts.md)",
           metavar="S"),
    # Short, so a test lags a region past the retained log quickly (snapshot backfill).
    Option("log_retained_commits", integer(1, _ACCOUNT.log_retained_commits), _ACCOUNT.log_retained_commits),
)
BY_NAME = {o.name: o for o in OPTIONS}
# running_emulator() serves on loopback, on free ports.
KEYWORD_DEFAULTS = {"host": "127.0.0.1", "port": 0, "control_port": 0, "direct_ports": (0, 0)}


def check_value(check: Callable, value, source: str):
    """check(value), or ConfigError "<source>: <rule>"."""
    try:
        return check(value)
    except ValueError as e:
        raise ConfigError(f"{source}: {e}") from None


def _shown(value) -> str:
    return repr(value)[:100]


# ---- the entries --------------------------------------------------------------------------------

def from_keywords(options: dict):
    """The ServerConfig that running_emulator(**options) and the marker describe."""
    known = [o.name for o in OPTIONS if o.keyword]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ConfigError(f"unknown regionlab option {unknown[0]!r}; the options are: {', '.join(known)}")
    name = options.get("profile", "default")
    prof = profiles.PROFILES[check_value(profiles.profile_name, name, f"profile={_shown(name)}")]
    values = {o.name: KEYWORD_DEFAULTS.get(o.name, prof.defaults.get(o.name, o.default))
              for o in OPTIONS if o.keyword}
    for name, value in options.items():
        values[name] = check_value(BY_NAME[name].check, value, f"{name}={_shown(value)}")
    return _build(values)


def from_command_line(flags: dict, environ) -> tuple:
    """(ServerConfig, log level) from parsed flags ({name: value or None}) and the environment."""
    values = {}
    chosen = _profile_of(flags, environ)
    profile_defaults = _profile_defaults(chosen, environ)
    for o in OPTIONS:
        if o.flag is None:
            values[o.name] = o.default
            continue
        given = flags.get(o.name)
        raw = environ.get(o.variable, "") if o.variable else ""
        if given is not None:
            value = (not o.negated) if o.switch else check_value(o.check, given, f"{o.flag} {_shown(given)}")
        elif raw.strip():
            value = check_value(boolean if o.switch else o.check, raw, f"{o.variable}={_shown(raw)}")
            value = (not value) if o.negated else value
        else:
            value = profile_defaults.get(o.name, o.default)
        values[o.name] = value
    level = values.pop("log_level")
    return _build(values), level


def _profile_of(flags: dict, environ):
    o = BY_NAME["profile"]
    given, raw = flags.get("profile"), environ.get(o.variable, "")
    if given is not None:
        return profiles.PROFILES[check_value(o.check, given, f"{o.flag} {_shown(given)}")]
    if raw.strip():
        return profiles.PROFILES[check_value(o.check, raw, f"{o.variable}={_shown(raw)}")]
    return profiles.PROFILES["default"]


def _profile_defaults(prof, environ) -> dict:
    """The profile's defaults, with the replaced emulator's variables it reads applied, each checked."""
    out = dict(prof.defaults)
    for name, raw, variable in prof.environment(environ):
        if name == "_persistence":
            if check_value(boolean, raw, f"{variable}={_shown(raw)}"):
                out["data_dir"] = profiles.default_data_dir(environ)
        elif name == "_partition_budget":
            check_value(integer(1, profiles.PARTITION_COUNT_MAX, "regionlab has no partition budget; see "
                                "docs/official-emulator.md"), raw, f"{variable}={_shown(raw)}")
        else:
            out[name] = check_value(BY_NAME[name].check, raw, f"{variable}={_shown(raw)}")
    return out


def _cross_check(v: dict) -> None:
    if v["multi_write"] and v["consistency"] == "Strong":
        raise ConfigError("Strong consistency cannot be combined with multi-write regions "
                          "(the service does not offer it either); pick another consistency level.")
    if v["reset_data"] and v["data_dir"] is None:
        raise ConfigError("--reset-data needs --data-dir: without a data dir there is nothing to reset")
    if v["regional_hostnames"] and v["profile"] != "default":
        raise ConfigError(f"--regional-hostnames cannot be combined with --profile {v['profile']}: that "
                          "profile serves its one region on the account's own URL")
    n = len(v["regions"])
    port, control = v["port"], v["control_port"]
    if port and port + n > PORT_MAX:
        raise ConfigError(f"port {port}: its {n} regions would listen on ports {port + 1}-{port + n}, "
                          f"past {PORT_MAX}; pick a lower port, or 0 for free ports")
    if port and control and port <= control <= port + n:
        raise ConfigError(f"control port {control} collides with the account's ports {port}-{port + n}; "
                          "pick another, or 0 for a free one")
    lo, hi = v["direct_ports"]
    nodes = v["nodes_per_region"] * n
    if lo and hi - lo + 1 < nodes:
        raise ConfigError(f"direct ports {lo}-{hi}: {hi - lo + 1} ports, but {n} regions x "
                          f"{v['nodes_per_region']} nodes need {nodes}; widen the range, or 0 for free ports")
    if bool(v["direct_tls_cert"]) != bool(v["direct_tls_key"]):
        raise ConfigError("--direct-tls-cert and --direct-tls-key come together: the certificate and its "
                          "private key, both PEM files")
    if v["direct_tls_cert"]:
        from .direct.tls import server_context
        try:
            server_context(v["direct_tls_cert"], v["direct_tls_key"])
        except ValueError as e:
            raise ConfigError(str(e)) from None
    names = set(v["regions"])
    for a, b in v["lag_ms"]:
        if a not in names or b not in names:
            raise ConfigError(f"lag_ms names the pair ({a!r}, {b!r}); the regions are {', '.join(v['regions'])}")


def _tls(v: dict) -> dict:
    """The ServerConfig fields of HTTPS: a generated certificate's directory and files, or the
    user's own pair, checked now (it loads and the key matches)."""
    from .runtime import certificate
    if (v["cert"] is None) != (v["cert_key"] is None):
        raise ConfigError("--cert and --cert-key go together: give the certificate (PEM) and its private key, "
                          "or neither to have regionlab generate one")
    if v["cert"] is not None:
        try:
            own = certificate.bring_your_own(v["cert"], v["cert_key"])
        except certificate.CertificateError as e:
            raise ConfigError(f"--cert {v['cert']}: {e}") from None
        return {"https": True, "tls_cert_file": own.cert_file, "tls_key_file": own.key_file,
                "tls_trust_file": own.trust_file}
    if not v["https"]:
        return {}
    d = v["cert_dir"] or certificate.default_dir()
    return {"https": True, "cert_dir": d, "tls_cert_file": f"{d}/{certificate.SERVER_CERT_FILE}",
            "tls_key_file": f"{d}/{certificate.SERVER_KEY_FILE}",
            "tls_trust_file": f"{d}/{certificate.TRUST_FILE}"}


def _build(v: dict):
    from .server import ServerConfig
    direct_ports_given = v["direct_ports"] is not None
    if v["direct_ports"] is None:          # the nodes follow the region ports: free with --port 0
        v["direct_ports"] = (0, 0) if v["port"] == 0 else (defaults.DIRECT_PORT_MIN, defaults.DIRECT_PORT_MAX)
    _cross_check(v)
    prof = profiles.PROFILES[v["profile"]]
    throttle = ThrottleConfig(ru=v["ru_limits"] or v["enable_rate_limiting"], credits_per_s=v["credits_per_s"], burst=v["burst"],
                              serverless=v["serverless"], serverless_ru_per_s=v["serverless_ru_per_s"])
    account = AccountConfig(regions=v["regions"], multi_write=v["multi_write"], consistency=v["consistency"],
                            partition_count=v["partitions"], intra_region_delay_ms=v["intra_region_delay_ms"],
                            lag_ms=dict(v["lag_ms"]), primary_accepts_reads=v["primary_accepts_reads"],
                            read_weights=v["read_weights"], read_strategy=v["read_strategy"],
                            detection_delay_ms=v["detection_delay_ms"], election_ms=v["election_ms"],
                            staleness_ops=v["max_staleness_prefix"], staleness_s=v["max_interval_s"],
                            log_retained_commits=v["log_retained_commits"], throttle=throttle,
                            nodes_per_region=v["nodes_per_region"], placement_seed=v["seed"],
                            account_id=prof.account_id, ru_per_partition=prof.ru_per_partition,
                            range_layout=prof.range_layout)
    host = v["host"]
    advertise = v["advertise_host"] or ("127.0.0.1" if host in ("0.0.0.0", "::") else host)
    if v["regional_hostnames"] and not v["advertise_host"] and _is_ip(advertise):
        advertise = "localhost"     # the SDKs derive regional names from a host name, not an address
    return ServerConfig(account=account, host=host, advertise_host=advertise, global_port=v["port"],
                        control_port=v["control_port"], key=v["key"] if v["auth"] else None, seed=v["seed"],
                        header_timeout_s=v["header_timeout_s"], write_ack_timeout_s=v["write_ack_timeout_s"],
                        script_timeout_s=v["script_timeout_s"], direct_port_range=v["direct_ports"],
                        direct_ports_given=direct_ports_given, direct_limits=v["direct_limits"],
                        control_token=v["control_token"], connections_max=v["connections_max"],
                        read_only_endpoints=v["read_only_endpoints"], max_clock_skew_s=v["max_clock_skew_s"],
                        query_mode=v["query_mode"], direct_tls_cert=v["direct_tls_cert"],
                        direct_tls_key=v["direct_tls_key"], data_dir=v["data_dir"], durability=v["durability"],
                        reset_data=v["reset_data"], seed_data=v["seed_data"], instance_id=v["instance_id"],
                        region_on_account_port=prof.region_on_account_port,
                        regional_hostnames=v["regional_hostnames"], **_tls(v))


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def environment_help() -> str:
    """The variables, one per line, for `regionlab --help`."""
    return "\n".join(f"  {o.variable:<34} {o.flag}" for o in OPTIONS if o.variable)

