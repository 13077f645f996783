"""Profiles: a named set of defaults that makes regionlab look like another emulator.

Theory of operation: a profile replaces the defaults of some settings (config.OPTIONS) and
fixes a few things no flag reaches (the account's id, whether the one region is served on the
account's own port, how a new container's partitions are cut). A flag or a REGIONLAB_*
variable still wins over a profile's default, as over any default. A profile may also read the
environment variables of the emulator it replaces (`environment`), which then sit between the
REGIONLAB_* variables and the profile's defaults.

`official-emulator` (docs/official-emulator.md) looks like the Azure Cosmos DB emulator to a
client: HTTPS on 8081, the well-known key, one region "South Central US" whose endpoint is the
account's own URL, account id "localhost", partitions where that emulator cuts them, no RU
enforcement unless --enable-rate-limiting, and the control port on 7081, away from the ports
8082-8090 that SDK tests put proxies on.
"""
import os
from dataclasses import dataclass, field
from typing import Callable

from . import defaults as topology_defaults
from .core.container import RU_PER_PARTITION

OFFICIAL_EMULATOR = "official-emulator"
OFFICIAL_REGION = "South Central US"       # the region the official emulator's account document names
OFFICIAL_ACCOUNT_ID = "localhost"
OFFICIAL_CONTROL_PORT = 7081
# The official emulator (and the service, at creation) gives a container one partition per
# 6,000 RU/s: the SDKs' emulator tests create 30,000 RU/s for 5 ranges and 12,000 for 2.
OFFICIAL_RU_PER_PARTITION = 6_000
ENV_PERSISTENCE = "AZURE_COSMOS_EMULATOR_ENABLE_DATA_PERSISTENCE"
ENV_IP_OVERRIDE = "AZURE_COSMOS_EMULATOR_IP_ADDRESS_OVERRIDE"
ENV_PARTITION_COUNT = "AZURE_COSMOS_EMULATOR_PARTITION_COUNT"
PARTITION_COUNT_MAX = 250                  # the Linux emulator's own ceiling for its variable


@dataclass(frozen=True)
class Profile:
    name: str
    defaults: dict = field(default_factory=dict)     # option name -> its default in this profile
    account_id: str = topology_defaults.ACCOUNT_ID
    region_on_account_port: bool = False             # the first region is served on --port itself
    ru_per_partition: int = RU_PER_PARTITION
    range_layout: str = "occupied"                   # core/epk.py RANGE_LAYOUTS
    # environ -> [(option name, raw value, variable name)]: the replaced emulator's variables
    environment: Callable = lambda environ: []


def default_data_dir(environ) -> str:
    """Where AZURE_COSMOS_EMULATOR_ENABLE_DATA_PERSISTENCE keeps the account without --data-dir."""
    base = environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "regionlab", OFFICIAL_EMULATOR)


def _linux_emulator_environment(environ) -> list:
    """The Linux emulator's variables that mean something here. Its partition count is a budget
    of partitions for the whole emulator (past it, creates get 503); regionlab has none, so the
    variable is checked and otherwise has no effect."""
    out = []
    override = environ.get(ENV_IP_OVERRIDE, "").strip()
    if override:
        out.append(("advertise_host", override, ENV_IP_OVERRIDE))
    persist = environ.get(ENV_PERSISTENCE, "").strip()
    if persist:
        out.append(("_persistence", persist, ENV_PERSISTENCE))
    count = environ.get(ENV_PARTITION_COUNT, "").strip()
    if count:
        out.append(("_partition_budget", count, ENV_PARTITION_COUNT))
    return out


PROFILES = {
    "default": Profile("default"),
    OFFICIAL_EMULATOR: Profile(
        OFFICIAL_EMULATOR,
        defaults={"regions": (OFFICIAL_REGION,), "https": True, "port": topology_defaults.GLOBAL_PORT,
                  "control_port": OFFICIAL_CONTROL_PORT, "ru_limits": False},
        account_id=OFFICIAL_ACCOUNT_ID, region_on_account_port=True,
        ru_per_partition=OFFICIAL_RU_PER_PARTITION, range_layout="even",
        environment=_linux_emulator_environment),
}


def profile_name(value) -> str:
    if isinstance(value, str) and value.strip().lower() in PROFILES:
        return value.strip().lower()
    raise ValueError(f"must be one of {', '.join(PROFILES)}")
