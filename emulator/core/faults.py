"""The fault catalogue as data: each fault is a small JSON object, applied by id and healed by
id, the same in the live control API, the CLI and scenario files.

    {"type": "region_outage", "region": "East US", "duration_ms": 30000}
    {"type": "link_cut", "from": "East US", "to": "West US", "one_way": false}
    {"type": "link_lag", "from": "East US", "to": "West US", "lag_ms": 500, "jitter_ms": 50}
    {"type": "primary_crash", "region": "East US", "database": "db", "container": "c", "partition": "0"}
    {"type": "replica_crash", "region": ..., "replica": 2, ...same partition selectors}
    {"type": "replica_slow", "region": ..., "replica": 1, "delay_ms": 200, ...}
    {"type": "throttle_storm", "region": "West US", "share": 0.3, "op": "read", "retry_after_ms": 100}
    latency, error, timeout_after_apply, tcp_reset, clock_skew: see request_faults.py

Partition selectors (database, container, partition) are optional: a missing one selects all.
`duration_ms` heals the fault by itself after that long on the account's clock. Healing puts
back exactly what the fault changed (a recovered replica catches up; a healed link drains its
backlog in order).
"""
from .errors import bad_request, not_found
from .link import ACTIVE, CUT
from .replica import DOWN, UP
from . import request_faults

FAULT_TYPES = ("region_outage", "link_cut", "link_lag", "primary_crash", "replica_crash", "replica_slow",
               "throttle_storm") + request_faults.REQUEST_FAULT_TYPES


class FaultRegistry:
    def __init__(self, account):
        self.account = account
        self.active: dict[int, dict] = {}
        self._undo: dict[int, list] = {}
        self._seq = 0
        self.requests = request_faults.RequestFaults()     # the request faults, per region

    def inject(self, spec: dict) -> int:
        if not isinstance(spec, dict) or spec.get("type") not in FAULT_TYPES:
            raise bad_request(f"A fault needs a 'type', one of: {', '.join(FAULT_TYPES)}.")
        duration = spec.get("duration_ms")
        if duration is not None and (not isinstance(duration, int) or duration < 0):
            raise bad_request("duration_ms must be a non-negative integer.")
        # A fault is checked whole before any of it applies: a refused fault changes nothing.
        spec = dict(spec)        # its handler may fill in what it drew (a request fault's seed)
        handler = getattr(self, "_" + spec["type"], None)
        undo = handler(spec) if handler is not None else request_faults.inject(self, spec)
        self._seq += 1
        fid = self._seq
        self.active[fid] = dict(spec, id=fid, started_ms=self.account.clock.now_ms())
        self._undo[fid] = undo
        if duration is not None:
            self.account.scheduler.call_at(self.account.clock.now_ms() + duration, self._expire, fid)
        return fid

    def heal(self, fid: int) -> dict:
        if fid not in self.active:
            raise not_found(f"No active fault with id {fid}.")
        spec = self.active.pop(fid)
        for fn in reversed(self._undo.pop(fid)):
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
        if not isinstance(idx, int) or not 0 <= idx < 4:
            raise bad_request("'replica' must be a replica index 0-3 (see GET /topology).")
        return idx

    # ---- faults --------------------------------------------------------------------------
    def _region_outage(self, spec) -> list:
        region = self._region(spec)
        self.account.set_region_state(region, "down")
        return [lambda: self.account.set_region_state(region, "up")]

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
        if not isinstance(lag, int) or lag < 0 or not isinstance(jitter, int) or jitter < 0:
            raise bad_request("link_lag needs integer lag_ms >= 0 (and optional jitter_ms >= 0).")
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
        share = spec.get("share", 1.0)
        if isinstance(share, bool) or not isinstance(share, (int, float)):
            raise bad_request("throttle_storm needs a numeric 'share' between 0 and 1.")
        try:
            throttle.set_storm(region, float(share), spec.get("op"),
                               spec.get("retry_after_ms", 100), spec.get("seed", 0))
        except ValueError as e:
            raise bad_request(f"Invalid throttle_storm: {e}") from None
        return [lambda: _storm_undo(throttle, region, previous)]

    def _replica_slow(self, spec) -> list:
        idx = self._replica_index(spec)
        delay = spec.get("delay_ms")
        if not isinstance(delay, int) or delay < 0:
            raise bad_request("replica_slow needs an integer delay_ms >= 0.")
        undo = []
        for rs in self._replica_sets(spec):
            r = rs.replicas[idx]
            undo.append(lambda r=r, old=r.extra_delay_ms: setattr(r, "extra_delay_ms", old))
            r.extra_delay_ms = delay
        return undo


def _storm_undo(throttle, region: str, previous) -> None:
    if previous is None:
        throttle.clear_storm(region)
    else:
        throttle.storms[region] = previous


def _set_lag(link, lag_ms: int, jitter_ms: int) -> None:
    link.set_lag(lag_ms, jitter_ms)
