"""The fault catalogue as data: each fault is a small JSON object, applied by id and healed by
id, the same in the live control API, the CLI and scenario files.

    {"type": "region_outage", "region": "East US", "mode": "unavailable", "duration_ms": 30000}
    {"type": "global_endpoint_outage", "mode": "reset"}      the account's own URL only
    {"type": "link_cut", "from": "East US", "to": "West US", "one_way": false}
    {"type": "link_lag", "from": "East US", "to": "West US", "lag_ms": 500, "jitter_ms": 50}
    {"type": "primary_crash", "region": "East US", "database": "db", "container": "c", "partition": "0"}
    {"type": "replica_crash", "region": ..., "replica": 2, ...same partition selectors}
    {"type": "replica_slow", "region": ..., "replica": 1, "delay_ms": 200, ...}
    {"type": "throttle_storm", "region": "West US", "share": 0.3, "op": "read", "retry_after_ms": 100}
    {"type": "replica_move" | "node_crash" | "direct_ports_blocked", ...}   (see direct_faults.py)
    latency, error, timeout_after_apply, tcp_reset, clock_skew: see request_faults.py

Partition selectors (database, container, partition) are optional: a missing one selects all.
`duration_ms` heals the fault by itself after that long on the account's clock. Healing puts
back exactly what the fault changed (a recovered replica catches up; a healed link drains its
backlog in order).

A fault remembers the regions it names. If one of them has left the account by the time the
fault is healed (by id or by its duration), the fault just ends: what it changed left with the
region, so nothing is put back, and the healed spec says so in `note`.
"""
from .direct_faults import DIRECT_FAULT_TYPES, DirectFaults
from .errors import bad_request, not_found
from .link import ACTIVE, CUT
from .replica import DOWN, UP
from . import request_faults

FAULT_MS_MAX = 7 * 24 * 3600 * 1000      # a week: every duration, lag and delay field
REGION_FIELDS = ("region", "from", "to")
FAULT_TYPES = ("region_outage", "global_endpoint_outage", "link_cut", "link_lag", "primary_crash", "replica_crash", "replica_slow",
               "throttle_storm") + request_faults.REQUEST_FAULT_TYPES
# How a region's endpoint fails during a region_outage (the runtime carries it out; the core and
# the simulator see one state, "down"): refuse = the port is closed; reset = connections are
# accepted, then reset; unavailable = every request is answered 503, connections stay open;
# blackhole = connections are accepted and read, never answered. The default is the mode both
# official SDKs (Python, JS) ride through without an error reaching the app (docs/control-api.md).
OUTAGE_REFUSE = "refuse"
OUTAGE_RESET = "reset"
OUTAGE_UNAVAILABLE = "unavailable"
OUTAGE_BLACKHOLE = "blackhole"
OUTAGE_MODES = (OUTAGE_REFUSE, OUTAGE_RESET, OUTAGE_UNAVAILABLE, OUTAGE_BLACKHOLE)
OUTAGE_MODE_DEFAULT = OUTAGE_UNAVAILABLE
FAULT_TYPES += DIRECT_FAULT_TYPES              # replica_move, node_crash, direct_ports_blocked
# The fields each fault type takes (beyond "type" and "duration_ms"), and which of them name
# regions: what a scenario file is checked against before a run starts (scenario_steps.py). The
# registry reads what it needs of a spec; this table is the catalogue's list of all of it.
_SELECTORS = ("database", "container", "partition")
FAULT_FIELDS = {
    "region_outage": ("region", "mode"),
    "global_endpoint_outage": ("mode",),
    "link_cut": ("from", "to", "one_way"),
    "link_lag": ("from", "to", "one_way", "lag_ms", "jitter_ms"),
    "primary_crash": ("region",) + _SELECTORS,
    "replica_crash": ("region", "replica") + _SELECTORS,
    "replica_slow": ("region", "replica", "delay_ms") + _SELECTORS,
    "throttle_storm": ("region", "share", "op", "retry_after_ms", "seed"),
    "latency": ("region", "delay_ms", "jitter_ms", "op", "share", "seed") + _SELECTORS,
    "error": ("region", "status", "substatus", "share", "count", "op", "seed") + _SELECTORS,
    "timeout_after_apply": ("region", "share", "op", "seed") + _SELECTORS,
    "tcp_reset": ("region", "share", "seed"),
    "clock_skew": ("region", "offset_ms"),
    "replica_move": ("region", "replica", "to") + _SELECTORS,
    "node_crash": ("region", "node"),
    "direct_ports_blocked": ("region",),
}
FAULT_REGION_FIELDS = {t: tuple(f for f in fields if f == "region" or f in ("from", "to") and t.startswith("link_"))
                       for t, fields in FAULT_FIELDS.items()}
# The faults a durable account keeps across a restart (account_image.py): the links' state.
# The others (outages, crashes, request faults) are what a process restart itself ends.
KEPT_FAULT_TYPES = ("link_cut", "link_lag")


class FaultRegistry(DirectFaults):
    def __init__(self, account):
        self.account = account
        self.active: dict[int, dict] = {}
        self._undo: dict[int, list] = {}
        self._regions: dict[int, list] = {}    # fault id -> [(name, Region)] it names
        self._seq = 0
        self.requests = request_faults.RequestFaults()     # the request faults, per region

    def inject(self, spec: dict) -> int:
        if not isinstance(spec, dict) or spec.get("type") not in FAULT_TYPES:
            raise bad_request(f"A fault needs a 'type', one of: {', '.join(FAULT_TYPES)}.")
        duration = spec.get("duration_ms")
        if duration is not None and not _ms_ok(duration):
            raise bad_request(f"duration_ms must be an integer 0-{FAULT_MS_MAX}.")
        if not isinstance(spec.get("one_way", False), bool):
            raise bad_request("one_way must be true or false.")
        if spec["type"] in ("region_outage", "global_endpoint_outage"):
            spec = dict(spec, mode=spec.get("mode", OUTAGE_MODE_DEFAULT))    # listed with its mode
        # A fault is checked whole before any of it applies: a refused fault changes nothing.
        spec = dict(spec)        # its handler may fill in what it drew (a request fault's seed)
        handler = getattr(self, "_" + spec["type"], None)
        undo = handler(spec) if handler is not None else request_faults.inject(self, spec)
        self._seq += 1
        fid = self._seq
        self.active[fid] = dict(spec, id=fid, started_ms=self.account.clock.now_ms())
        self._undo[fid] = undo
        self._regions[fid] = [(spec[k], self.account.region(spec[k])) for k in REGION_FIELDS if k in spec
                              and self.account.region_state(spec[k]) is not None]
        if duration is not None:
            self.account.scheduler.call_at(self.account.clock.now_ms() + duration, self._expire, fid)
        if spec["type"] in KEPT_FAULT_TYPES:
            self.account.metadata_changed()
        return fid

    def heal(self, fid: int) -> dict:
        if fid not in self.active:
            raise not_found(f"No active fault with id {fid}.")
        spec = self.active.pop(fid)
        undo = self._undo.pop(fid)
        if spec["type"] in KEPT_FAULT_TYPES:
            self.account.metadata_changed()
        gone = [name for name, region in self._regions.pop(fid)         # by identity: a region re-added
                if not any(r is region for r in self.account.regions)]  # under the name is another one
        if gone:
            return dict(spec, note=f"Region {gone[0]!r} was removed from the account after this fault was "
                                   f"injected; the fault ended with nothing to put back.")
        for fn in reversed(undo):
            fn()
        return spec

    def _expire(self, fid: int) -> None:
        if fid in self.active:
            self.heal(fid)

    # ---- selectors -----------------------------------------------------------------------
    def _region(self, spec, key="region") -> str:
        name = spec.get(key)
        try:
            self.account.region(name)
        except KeyError:
            raise bad_request(f"Unknown region {name!r} in fault field '{key}'.") from None
        return name

    def _replica_sets(self, spec) -> list:
        region = self._region(spec)
        out = []
        for c, p in self.account.partitions():
            if spec.get("database") not in (None, c.db.id) or spec.get("container") not in (None, c.id):
                continue
            if spec.get("partition") not in (None, p.range_id):
                continue
            out.append(p.replica_sets[region])
        if not out:
            raise bad_request("The fault's database/container/partition selectors match no partition.")
        return out

    def _replica_index(self, spec) -> int:
        idx = spec.get("replica")
        if type(idx) is not int or not 0 <= idx < 4:
            raise bad_request("'replica' must be a replica index 0-3 (see GET /topology).")
        return idx

    # ---- faults --------------------------------------------------------------------------
    def _region_outage(self, spec) -> list:
        region = self._region(spec)
        mode = spec["mode"]
        if mode not in OUTAGE_MODES:
            raise bad_request(f"Unknown region_outage mode {mode!r}; use one of: {', '.join(OUTAGE_MODES)}.")
        r = self.account.region(region)
        if r.state == "up":             # an outage of a region already down keeps the first one's mode
            r.outage_mode = mode
        self.account.set_region_state(region, "down")
        return [lambda: self.account.set_region_state(region, "up")]

    def _global_endpoint_outage(self, spec) -> list:
        mode = spec["mode"]
        if mode not in OUTAGE_MODES:
            raise bad_request(f"Unknown global_endpoint_outage mode {mode!r}; use one of: {', '.join(OUTAGE_MODES)}.")
        if not self.account.global_endpoint_listeners:
            raise bad_request("This account has no global endpoint of its own (its first region is served on "
                              "the account's URL, as in --profile official-emulator); use region_outage.")
        if self.account.global_outage_mode is not None:
            raise bad_request("The global endpoint is already out (another global_endpoint_outage); "
                              "heal that one first.")
        self.account.set_global_endpoint(mode)
        return [lambda: self.account.set_global_endpoint(None)]

    def _links(self, spec) -> list:
        a, b = self._region(spec, "from"), self._region(spec, "to")
        if a == b:
            raise bad_request("A link joins two different regions.")
        pairs = [(a, b)] if spec.get("one_way") else [(a, b), (b, a)]
        return [self.account.links[pair] for pair in pairs]

    def _link_cut(self, spec) -> list:
        links = self._links(spec)
        for link in links:
            link.set_state(CUT)
        return [lambda l=link: l.set_state(ACTIVE) for link in links]

    def _link_lag(self, spec) -> list:
        lag, jitter = spec.get("lag_ms"), spec.get("jitter_ms", 0)
        if not _ms_ok(lag) or not _ms_ok(jitter):
            raise bad_request(f"link_lag needs an integer lag_ms 0-{FAULT_MS_MAX} (and optional jitter_ms, the same).")
        undo = []
        for link in self._links(spec):
            undo.append(lambda l=link, old=(link.lag_ms, link.jitter_ms): _set_lag(l, *old))
            _set_lag(link, lag, jitter)
        return undo

    def _primary_crash(self, spec) -> list:
        undo = []
        for rs in self._replica_sets(spec):
            crashed = rs.primary
            self.account.crash_primary(rs)
            undo.append(lambda rs=rs, r=crashed: rs.set_replica_state(r.index, UP))
        return undo

    def _replica_crash(self, spec) -> list:
        idx = self._replica_index(spec)
        targets = self._replica_sets(spec)
        if any(rs.replicas[idx].role == "primary" for rs in targets):
            raise bad_request(f"Replica {idx} is the primary; use a primary_crash fault for it.")
        undo = []
        for rs in targets:
            rs.set_replica_state(idx, DOWN)
            undo.append(lambda rs=rs: rs.set_replica_state(idx, UP))
        return undo

    def _throttle_storm(self, spec) -> list:
        """A share of the region's requests (optionally of one operation kind) gets 429s."""
        region = self._region(spec)
        throttle = self.account.throttle
        previous = throttle.storms.get(region)
        try:
            throttle.set_storm(region, spec.get("share", 1.0), spec.get("op"),
                               spec.get("retry_after_ms", 100), spec.get("seed", 0))
        except ValueError as e:
            raise bad_request(f"Invalid throttle_storm: {e}") from None
        return [lambda: _storm_undo(throttle, region, previous)]

    def _replica_slow(self, spec) -> list:
        idx = self._replica_index(spec)
        delay = spec.get("delay_ms")
        if not _ms_ok(delay):
            raise bad_request(f"replica_slow needs an integer delay_ms 0-{FAULT_MS_MAX}.")
        undo = []
        for rs in self._replica_sets(spec):
            r = rs.replicas[idx]
            undo.append(lambda rs=rs, old=r.extra_delay_ms: rs.set_replica_delay(idx, old))
            rs.set_replica_delay(idx, delay)
        return undo


def _ms_ok(value) -> bool:
    """An integer (not a bool, which JSON would make 1) of milliseconds in 0..FAULT_MS_MAX."""
    return type(value) is int and 0 <= value <= FAULT_MS_MAX


def _storm_undo(throttle, region: str, previous) -> None:
    if previous is None:
        throttle.clear_storm(region)
    else:
        throttle.storms[region] = previous


def _set_lag(link, lag_ms: int, jitter_ms: int) -> None:
    link.set_lag(lag_ms, jitter_ms)
