"""The fault workload: random faults from the catalogue and failovers, or a scenario's steps.

Theory of operation: every action goes through the same entry points the control API uses
(`account.faults.inject(spec)` with the POST /faults JSON, `faults.heal(id)`,
`account.failover(region, forced)`), so a random run, a scenario file and a live drill exercise
one code path. Random mode draws an action every INTERVAL_MS_MIN..MAX: inject a fault (most
with a duration_ms, so they heal themselves), heal one, or fail over gracefully or by force.
An action the core refuses (a 400/409: failing over to a region that is down, crashing a
replica that is now the primary) is recorded as refused; it changed nothing.
"""
from ..core.errors import CosmosError
from .world import DATABASE, World

INTERVAL_MS_MIN = 50
INTERVAL_MS_MAX = 500
DURATION_MS_MIN = 50
DURATION_MS_MAX = 2_000
# (action, weight)
ACTIONS = (("region_outage", 3), ("link_cut", 3), ("link_lag", 3), ("primary_crash", 3),
           ("replica_crash", 3), ("replica_slow", 2), ("heal", 3), ("graceful_failover", 2),
           ("forced_failover", 1), ("latency", 2), ("error", 2), ("timeout_after_apply", 1),
           ("tcp_reset", 1), ("clock_skew", 1))
ERROR_STATUSES = (500, 503, 408, 429, 449)


class Nemesis:
    def __init__(self, world: World, rng, schedule: list | None = None):
        self.world = world
        self.rng = rng
        self.schedule = schedule
        self.stopped = False
        self.names: dict = {}                # scenario "as" name -> fault id
        self.counts = {"faults": 0, "failovers": 0, "refused": 0}

    @property
    def last_step_ms(self) -> int:
        return max((s["at_ms"] for s in self.schedule or ()), default=0)

    def start(self) -> None:
        w = self.world
        if self.schedule is not None:
            t0 = w.now_ms
            for step in self.schedule:
                w.scheduler.call_at(t0 + step["at_ms"], self._run_step, step)
        else:
            self._next()

    def stop(self) -> None:
        self.stopped = True

    def _next(self) -> None:
        w = self.world
        w.scheduler.call_at(w.now_ms + self.rng.randint(INTERVAL_MS_MIN, INTERVAL_MS_MAX), self._random)

    # ---- actions --------------------------------------------------------------------------
    def inject(self, spec: dict, name: str | None = None) -> int | None:
        w = self.world
        try:
            fid = w.account.faults.inject(spec)
        except CosmosError as e:
            self.counts["refused"] += 1
            w.history.event(w.now_ms, "fault", spec=spec, refused=e.message)
            return None
        self.counts["faults"] += 1
        if name is not None:
            self.names[name] = fid
        w.history.event(w.now_ms, "fault", spec=spec, id=fid)
        w.observe()
        return fid

    def heal(self, fid: int) -> None:
        w = self.world
        try:
            w.account.faults.heal(fid)
        except CosmosError as e:
            w.history.event(w.now_ms, "heal", fault=fid, refused=e.message)
            return
        w.history.event(w.now_ms, "heal", fault=fid)
        w.observe()

    def failover(self, region: str, kind: str) -> None:
        w = self.world
        try:
            f = w.account.failover(region, forced=kind == "forced")
        except CosmosError as e:
            self.counts["refused"] += 1
            w.history.event(w.now_ms, "failover", region=region, mode=kind, refused=e.message)
            return
        self.counts["failovers"] += 1
        w.history.event(w.now_ms, "failover", region=region, mode=kind, id=f.id, state=f.state,
                        lost_writes=f.lost)
        w.observe()

    def _run_step(self, step: dict) -> None:
        if "fault" in step:
            self.inject(step["fault"], step.get("as"))
        elif "failover" in step:
            self.failover(step["failover"]["region"], step["failover"].get("kind", "graceful"))
        elif step["heal"] == "all":
            for fid in list(self.world.account.faults.active):
                self.heal(fid)
        else:
            self.heal(self.names.get(step["heal"], step["heal"]))

    def _random(self) -> None:
        if self.stopped:
            return
        action = self.rng.choices([a for a, _ in ACTIONS], weights=[wt for _, wt in ACTIONS])[0]
        acct = self.world.account
        regions = [r.name for r in acct.regions]
        if action == "heal":
            if acct.faults.active:
                self.heal(self.rng.choice(sorted(acct.faults.active)))
        elif action.endswith("_failover"):
            self.failover(self.rng.choice(regions), action.split("_")[0])
        else:
            self.inject(self.random_fault(action, regions))
        self._next()

    def random_fault(self, kind: str, regions: list) -> dict:
        rng = self.rng
        spec = {"type": kind}
        if kind in ("link_cut", "link_lag"):
            a, b = rng.sample(regions, 2)
            spec.update({"from": a, "to": b, "one_way": rng.random() < 0.3})
            if kind == "link_lag":
                spec.update(lag_ms=rng.randint(50, 1500), jitter_ms=rng.choice((0, 0, 20, 100)))
        else:
            spec["region"] = rng.choice(regions)
        if kind in ("primary_crash", "replica_crash", "replica_slow"):
            w = self.world
            container = rng.choice(sorted(w.containers))
            spec.update(database=DATABASE, container=container)
            if rng.random() < 0.7:
                spec["partition"] = rng.choice(w.containers[container].partitions).range_id
        if kind in ("latency", "error", "timeout_after_apply"):
            spec["op"] = rng.choice(("read", "write", "all"))
            if rng.random() < 0.3:
                w = self.world
                container = rng.choice(sorted(w.containers))
                spec.update(database=DATABASE, container=container,
                            partition=rng.choice(w.containers[container].partitions).range_id)
        if kind == "latency":
            spec.update(delay_ms=rng.randint(5, 1500), jitter_ms=rng.choice((0, 0, 20, 100)))
        if kind == "error":
            spec["status"] = rng.choice(ERROR_STATUSES)
            if rng.random() < 0.5:
                spec["count"] = rng.randint(1, 20)
        if kind in ("error", "timeout_after_apply", "tcp_reset"):
            spec["share"] = rng.choice((0.1, 0.5, 1.0))
        if kind == "clock_skew":
            spec["offset_ms"] = rng.randint(-120_000, 120_000)
        if kind == "replica_crash":
            spec["replica"] = rng.randint(1, 3)
        if kind == "replica_slow":
            spec.update(replica=rng.randint(0, 3), delay_ms=rng.randint(5, 400))
        if rng.random() < 0.8:
            spec["duration_ms"] = rng.randint(DURATION_MS_MIN, DURATION_MS_MAX)
        return spec
