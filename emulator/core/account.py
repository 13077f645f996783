"""The account: its regions, its databases and containers, its offers, its replication links.

Theory of operation: an Account is built from an AccountConfig, a clock, a scheduler and a
seeded rng (see STYLE.md: the core takes time and randomness in). Regions are ordered; the
first is the write region unless the account is multi-write, in which case every region
accepts writes. Each container's partitions get a replica set in every region and share one
Link per ordered region pair. Metadata changes are account-wide and immediate (see
container.py for why).
"""
from dataclasses import dataclass, field

from . import rid as rids, ttl
from .conflicts import ConflictLog, resolver_for
from .documents import writer_for_key
from .container import RU_PER_PARTITION, Container, Database, container_definition, partition_count_for
from .epk import PartitionKeyDef, ranges_for
from .errors import CosmosError, bad_request, conflict, not_found
from .geography import default_lag_ms
from .link import Link
from .offers import Offer, check_throughput
from .partition import Partition
from .placement import NODES_PER_REGION_DEFAULT, Placement
from .read_routing import ACTIVE_REQUESTS, ReadRoutingPolicy
from .replica_set import LOG_RETAINED_COMMITS_MAX, ReplicaSet
from .throttle import Throttle, ThrottleConfig
from .users import Users
from .validation import ValidationError, check_container_id
from .limits import REGION_NAME_MAX_CHARS


@dataclass
class AccountConfig:
    regions: tuple = ("East US", "East US 2", "West US")
    multi_write: bool = False
    consistency: str = "Session"
    partition_count: int | None = None        # overrides the count derived from throughput
    ru_per_partition: int = RU_PER_PARTITION  # a new container gets ceil(RU/s / this) partitions
    range_layout: str = "occupied"            # where their boundaries lie: epk.RANGE_LAYOUTS
    intra_region_delay_ms: int = 0
    lag_ms: dict = field(default_factory=dict)   # {(src, dst): ms}; missing pairs use default_lag_ms
    jitter_ms: int = 0
    primary_accepts_reads: bool = True
    read_weights: tuple | None = None         # replica weights by index 0-3 (None: 1 each); read_routing.py
    read_strategy: str = ACTIVE_REQUESTS      # or "connections" (read_routing.py)
    account_id: str = "regionlab"
    auto_failover: bool = True                # service-managed failover when the write region is down
    detection_delay_ms: int = 10_000          # how long the write region must be down, without a break,
                                              # before a service-managed failover
    election_ms: int = 500                    # from a primary crash to a new primary
    staleness_ops: int = 100_000              # bounded staleness K (operations)
    staleness_s: int = 300                    # bounded staleness T (seconds)
    throttle: ThrottleConfig = field(default_factory=ThrottleConfig)   # RU budgets, credits, burst
    log_retained_commits: int = LOG_RETAINED_COMMITS_MAX   # per replica set; a region lagging further
                                                           # is caught up by a snapshot
    nodes_per_region: int = NODES_PER_REGION_DEFAULT   # direct mode's backend nodes (core/placement.py)
    placement_seed: int = 0                   # which nodes each replica set lands on


class Region:
    __slots__ = ("name", "id", "state", "outages", "outage_mode")

    def __init__(self, name: str, id: int):
        self.name = name
        self.id = id
        self.state = "up"
        self.outages = 0          # how many times it went down: names the outage a timer is for
        self.outage_mode = None         # while down: how its endpoint fails (core/faults.py OUTAGE_MODES)


class Account:
    def __init__(self, config: AccountConfig, clock, scheduler, rng):
        if not config.regions:
            raise ValueError("an account needs at least one region")
        if config.multi_write and config.consistency == "Strong":
            raise ValueError("Strong consistency cannot be combined with multi-write regions "
                             "(the service does not offer it either)")
        if config.log_retained_commits < 1:
            raise ValueError("log_retained_commits must be at least 1")
        if len({r.lower() for r in config.regions}) != len(config.regions):
            raise ValueError(f"region names must be unique: {config.regions}")
        self.config = config
        self.clock = clock
        self.scheduler = scheduler
        self.rng = rng
        self.regions = [Region(name, i) for i, name in enumerate(config.regions)]
        self.write_regions = tuple(config.regions) if config.multi_write else (config.regions[0],)
        self.consistency = config.consistency
        self.routing = ReadRoutingPolicy(config.primary_accepts_reads, config.read_strategy, config.read_weights)
        self.databases: dict[str, Database] = {}
        self.dbs_by_rid: dict[str, Database] = {}
        self.colls_by_rid: dict[str, Container] = {}
        self.offers: dict[str, Offer] = {}
        self.links: dict = {}
        self._seq = 0
        self.lost_writes: list[dict] = []       # writes discarded by forced failovers
        self.pending_cuts: dict = {}            # region -> [(partition, keep_lsn)] to apply on recovery
        self.failovers: list = []               # every failover, oldest first
        self.draining = None                    # the graceful failover in progress, if any
        self.failover_waiting = None            # (region, outage): a service-managed failover that
                                                # waits for a region that can take over (Strong)
        self.region_listeners: list = []        # fn(region_name, state): shells open/close endpoints
        self.global_outage_mode = None          # while a global_endpoint_outage is on: its mode
        self.global_endpoint_listeners: list = []   # fn(state): the shell fails its global endpoint
        # Durability (core/account_image.py, runtime/persistence.py): fn(container, partition, rs,
        # old, new) for each write-region commit, and fn() after any metadata change. None (the
        # default, memory only) costs nothing.
        self.commit_hook = None
        self.metadata_hook = None
        self.conflict_hook = None               # fn(container, ident, entry) for each new conflict
        self.users = Users(self.now_s, self._next, self._etag, self.metadata_changed)
        from .faults import FaultRegistry
        self.faults = FaultRegistry(self)
        self.throttle = Throttle(self, config.throttle)
        self.ttl_sweeper = ttl.Sweeper(self, writer_for_key)
        self.placement = Placement(config.nodes_per_region, config.placement_seed)
        for a in config.regions:
            for b in config.regions:
                if a != b:
                    lag = config.lag_ms.get((a, b), default_lag_ms(a, b))
                    self.links[(a, b)] = self._link(a, b, lag)

    def _link(self, a: str, b: str, lag: int) -> Link:
        link = Link(a, b, lag, self.scheduler, self.clock, self.rng, self.config.jitter_ms)
        link.receiver_up = self._ends_up(a, b)
        link.on_state = self._link_state_changed
        return link

    def _ends_up(self, a: str, b: str) -> bool:
        """Whether a link from a to b may deliver: both regions up. Each link keeps the answer
        (every send and delivery asks), so every change of a region's state sets it again."""
        return self.region(a).state == "up" and self.region(b).state == "up"

    def _link_state_changed(self, link) -> None:
        self._retry_waiting_failover()

    def _retry_waiting_failover(self) -> None:
        """Something that could let a waiting service-managed failover go ahead changed (a
        region came back, a link healed): try again, from the scheduler, not inside the change."""
        if self.failover_waiting is not None:
            self.scheduler.call_at(self.clock.now_ms(), self._service_managed_failover, *self.failover_waiting)

    def region_state(self, name: str) -> str | None:
        """"up" or "down", or None for a region the account does not have (any more)."""
        for r in self.regions:
            if r.name == name:
                return r.state
        return None

    def region(self, name: str) -> Region:
        for r in self.regions:
            if r.name == name:
                return r
        raise KeyError(name)

    @property
    def hub_region(self) -> str:
        """Where the global endpoint sends requests: the (first) write region, or the target of a
        graceful failover while it drains."""
        if self.write_regions:
            return self.write_regions[0]
        return self.draining.target

    def partitions(self):
        for db in self.databases.values():
            for c in db.containers.values():
                for p in c.partitions:
                    yield c, p

    # ---- regions and failover ------------------------------------------------------------
    def set_global_endpoint(self, mode: str | None) -> None:
        """The global endpoint fails in mode (None: serves again). Only the shell's endpoint is
        involved: the account document, the regions and their data are untouched."""
        if (mode is None) == (self.global_outage_mode is None):
            return                      # a second outage keeps the first one's mode
        self.global_outage_mode = mode
        for fn in self.global_endpoint_listeners:
            fn("up" if mode is None else "down")

    def set_region_state(self, name: str, state: str) -> None:
        region = self.region(name)
        if region.state == state:
            return
        region.state = state
        for (a, b), link in self.links.items():
            if name in (a, b):
                link.receiver_up = self._ends_up(a, b)     # kicked below once the cuts are taken
        if state == "up":
            region.outage_mode = None
            for p, keep in self.pending_cuts.pop(name, []):
                rs = p.replica_sets.get(name)
                if rs is not None:
                    rs.truncate_to(keep)
                    rs.new_epoch()
            for (a, b), link in self.links.items():
                if name in (a, b):
                    link.kick()
            self._retry_waiting_failover()
        else:
            region.outages += 1
            if name in self.write_regions and self.config.auto_failover and not self.config.multi_write:
                # The timer names this outage: a recovery in between ends it, and a later outage
                # starts its own detection delay instead of inheriting what is left of this one.
                self.scheduler.call_at(self.clock.now_ms() + self.config.detection_delay_ms,
                                       self._service_managed_failover, name, region.outages)
        for fn in self.region_listeners:
            fn(name, state)

    def _service_managed_failover(self, region: str, outage: int) -> None:
        from . import failover as fo
        down = next((r for r in self.regions if r.name == region), None)     # None: removed since
        if down is None or down.state == "up" or down.outages != outage or region not in self.write_regions:
            if self.failover_waiting == (region, outage):
                self.failover_waiting = None
            return
        target, sources = None, ()
        for r in self.regions:
            if r.name == region or r.state != "up":
                continue
            if self.consistency != "Strong":
                target = r.name
                break
            sources = fo.strong_sources(self, r.name)
            if fo.strong_refusal(self, r.name, sources) is None:
                target = r.name
                break
        if target is None:
            # Under Strong no region that is up can take over without losing an acknowledged
            # write: wait until one can (a region or a link comes back) or the region recovers.
            self.failover_waiting = (region, outage)
            return
        self.failover_waiting = None
        self._forced_failover(target, f"service-managed: {region} down for {self.config.detection_delay_ms} ms",
                              sources)

    def describe_waiting_failover(self) -> dict | None:
        """The service-managed failover that waits (Strong), as the control plane reports it."""
        if self.failover_waiting is None:
            return None
        region = self.failover_waiting[0]
        return {"region": region,
                "reason": f"{region} is down, and under Strong consistency no region that is up can take "
                          "over without losing acknowledged writes: waiting until a region that holds them "
                          "(or its link) comes back, or until the write region recovers"}

    def failover(self, target: str, forced: bool = False, reason: str = "manual"):
        from . import failover as fo
        names = [r.name for r in self.regions]
        if target not in names:
            raise bad_request(f"Unknown region '{target}'; the account has {', '.join(names)}.")
        if self.config.multi_write:
            raise bad_request("A multi-write account has no single write region to fail over.")
        if self.draining is not None:
            raise conflict(f"A failover to {self.draining.target} is already in progress.")
        if target in self.write_regions:
            raise bad_request(f"{target} is already the write region.")
        if self.region(target).state != "up":
            raise bad_request(f"Cannot fail over to {target}: the region is down.")
        if forced:
            sources = fo.check_strong(self, target) if self.consistency == "Strong" else ()
            return self._forced_failover(target, reason, sources)
        source = self.write_regions[0]
        f = fo.Failover(len(self.failovers) + 1, source, target, forced, self.clock.now_ms(), reason)
        self.failovers.append(f)
        self.draining = f
        self.write_regions = ()
        for _, p in self.partitions():
            p.write_regions, p.draining_from = (), source
        self._drain_step(f)
        return f

    def _forced_failover(self, target: str, reason: str, sources):
        from . import failover as fo
        f = fo.Failover(len(self.failovers) + 1, self.write_regions[0], target, True, self.clock.now_ms(), reason)
        self.failovers.append(f)
        fo.forced(self, f, sources)
        self._notify_failover(f)
        return f

    def _drain_step(self, f) -> None:
        from . import failover as fo
        if self.draining is not f:
            return
        now = self.clock.now_ms()
        if fo.drained(self, f.source, f.target):
            f.state, f.finished_ms = "completed", now
            self.draining = None
            fo.switch_write_region(self, f.target)
            self._notify_failover(f)
        elif now - f.started_ms >= fo.DRAIN_TIMEOUT_MS:
            f.state, f.finished_ms = "aborted", now
            self.draining = None
            fo.switch_write_region(self, f.source)
            self._notify_failover(f)
        else:
            self.scheduler.call_at(now + fo.DRAIN_POLL_MS, self._drain_step, f)

    def _notify_failover(self, f) -> None:
        for fn in f.listeners:
            fn(f)
        f.listeners.clear()

    # ---- regions joining and leaving -----------------------------------------------------
    def add_region(self, name: str) -> Region:
        """A new region joins: every partition gets a replica set seeded with a snapshot of the
        write region's committed state, and links to and from every region. Later commits reach
        it by ordinary log shipping."""
        self.check_new_region(name)
        region = Region(name, max(r.id for r in self.regions) + 1)
        others = list(self.regions)
        self.regions.append(region)
        for other in others:
            self.links[(other.name, name)] = self._link(other.name, name, default_lag_ms(other.name, name))
            self.links[(name, other.name)] = self._link(name, other.name, default_lag_ms(name, other.name))
        if self.config.multi_write:
            self.write_regions = self.write_regions + (name,)
        for c, p in self.partitions():
            self._join_partition(c, p, name)
        self._regions_changed()
        self.metadata_changed()               # a durable account keeps its regions (account_image.py)
        for fn in self.region_listeners:
            fn(name, "added")
        return region

    def check_new_region(self, name: str) -> None:
        """Refuse (400/409) a region that add_region would refuse, without changing anything."""
        if not name.strip():
            raise bad_request("A region needs a non-empty name.")
        if len(name) > REGION_NAME_MAX_CHARS or not name.isprintable() or "/" in name or name != name.strip():
            raise bad_request(f"A region name is 1-{REGION_NAME_MAX_CHARS} printable characters without '/' "
                              f"or surrounding spaces, like 'North Europe'; got {name!r}.")
        if any(r.name.lower() == name.lower() for r in self.regions):
            raise conflict(f"The account already has a region named '{name}'.")

    def _join_partition(self, c, p, name: str) -> None:
        seed = p.replica_sets[self.hub_region]
        rs = ReplicaSet(name, p.range_id, self.scheduler, self.clock,
                        delay_ms=self.config.intra_region_delay_ms, routing=self.routing)
        rs.log_retained_commits = self.config.log_retained_commits
        if self.config.multi_write:
            rs.multi_write, rs.resolver, rs.on_conflict = True, seed.resolver, seed.on_conflict
        lsn = seed.committed_lsn
        for key, versions in list(seed.store.keys_with_versions()):
            v = seed.store.get(key, lsn)
            if v is not None:
                rs.store.add(v.with_lsn(lsn), 0)
        rs.lsn = rs.committed_lsn = lsn
        rs.epoch, rs.epoch_start_lsn, rs.epoch_starts = seed.epoch, seed.epoch_start_lsn, list(seed.epoch_starts)
        rs.progress = dict(seed.progress)
        rs.progress_seq += 1
        rs.progress_moved = None
        for r in rs.replicas:
            r.applied_lsn = lsn
        p.set_region_id(name, self.region(name).id)
        p.attach(name, rs)
        self.placement.layout_changed()
        if self.config.multi_write:           # what others originated that the seed had not merged yet
            for other, ors in p.replica_sets.items():
                if other in (name, seed.region):
                    continue
                for o_lsn, versions in ors.commits_between(0, ors.committed_lsn):
                    if versions[0].origin == other and versions[0].oseq > rs.progress.get(other, 0):
                        self.links[(other, name)].send(rs, o_lsn, versions)

    def remove_region(self, name: str) -> None:
        self.region(name)
        if len(self.regions) == 1:
            raise bad_request("An account keeps at least one region.")
        if name in self.write_regions and not self.config.multi_write:
            raise bad_request(f"{name} is the write region: fail over to another region before removing it.")
        if self.draining is not None:
            raise conflict("A failover is in progress; remove the region after it completes.")
        self.region(name).state = "removed"
        for pair, link in self.links.items():
            if name in pair:
                link.receiver_up = False      # a timer still holding it delivers nothing to it
        self.regions = [r for r in self.regions if r.name != name]
        self.write_regions = tuple(r for r in self.write_regions if r != name)
        self.links = {pair: l for pair, l in self.links.items() if name not in pair}
        for _, p in self.partitions():
            p.links = self.links
            p.drop_region_id(name)
            p.detach(name)
        self.placement.layout_changed()
        self.throttle.clear_storm(name)       # a region re-added under this name starts without it
        self._regions_changed()
        self.metadata_changed()
        for fn in self.region_listeners:
            fn(name, "removed")

    def _regions_changed(self) -> None:
        """Session tokens list every region; a changed set starts a new token version, since the
        SDKs refuse to merge tokens of one version with different regions. No history is cut."""
        for _, p in self.partitions():
            p.links = self.links
            for rs in p.replica_sets.values():
                rs.next_version()

    def crash_primary(self, rs) -> None:
        """The partition's primary in one region stops; a new one is elected after election_ms."""
        rs.crash_primary(discard_tail=rs.region in self.write_regions)
        self.scheduler.call_at(self.clock.now_ms() + self.config.election_ms, self._elect, rs)

    def _elect(self, rs) -> None:
        if rs.electing:
            rs.discard_tail = rs.region in self.write_regions
            rs.elect()

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def _etag(self) -> str:
        return f'"{self._next():08x}-0000-0000-0000-000000000000"'

    next_seq = _next        # for the other metadata a container holds (core/scripts.py)
    new_etag = _etag

    def now_s(self) -> int:
        return self.clock.now_ms() // 1000

    def region_now_ms(self, region: str, account_ms: int | None = None) -> int:
        """The region's clock: the account's (account_ms if the caller read it already), plus any
        clock_skew fault on the region."""
        return (self.clock.now_ms() if account_ms is None else account_ms) + self.faults.requests.skew_ms(region)

    # ---- databases ---------------------------------------------------------------------
    def create_database(self, body: dict, throughput: int | None = None,
                        autoscale_max: int | None = None, auto_upgrade: dict | None = None) -> Database:
        id = checked_id(body)
        if id in self.databases:
            raise conflict(f"A database with id '{id}' already exists.")
        self._check_provisionable(throughput, autoscale_max)
        db = Database(id, rids.database_rid(self._next()), self.now_s(), self._etag())
        self.databases[id] = db
        self.dbs_by_rid[db.rid] = db
        if throughput or autoscale_max:
            db.offer_rid = self._add_offer(db.self_link, db.rid, throughput, autoscale_max, auto_upgrade).rid
        self.metadata_changed()
        return db

    def database(self, name_or_rid: str, by_rid: bool = False) -> Database:
        db = self.dbs_by_rid.get(name_or_rid) if by_rid else self.databases.get(name_or_rid)
        if db is None:
            raise not_found(f"Database '{name_or_rid}' does not exist.")
        return db

    def delete_database(self, db: Database) -> None:
        for c in list(db.containers.values()):
            self.delete_container(c)
        if db.offer_rid:
            self.offers.pop(db.offer_rid, None)
            self.throttle.forget_offer(db.offer_rid)
        self.users.forget_database(db)
        del self.databases[db.id]
        del self.dbs_by_rid[db.rid]
        self.metadata_changed()

    # ---- containers --------------------------------------------------------------------
    def create_container(self, db: Database, body: dict, throughput: int | None = None,
                         autoscale_max: int | None = None, auto_upgrade: dict | None = None) -> Container:
        id = checked_id(body)
        definition = container_definition(body)        # a bad definition is 400 before a 409, as in the service
        if id in db.containers:
            raise conflict(f"A container with id '{id}' already exists in database '{db.id}'.")
        self._check_provisionable(throughput, autoscale_max)
        pk_def = PartitionKeyDef.from_json(definition["partitionKey"])
        cfg = self.config
        count = cfg.partition_count or partition_count_for(throughput, autoscale_max, cfg.ru_per_partition)
        rid = rids.collection_rid(db.rid, self._next())
        c = self.build_container(db, definition, rid, self.now_s(), self._etag(),
                                 ranges_for(cfg.range_layout, pk_def, count))
        if throughput or autoscale_max:
            c.offer_rid = self._add_offer(c.self_link, c.rid, throughput, autoscale_max, auto_upgrade).rid
        self.metadata_changed()
        return c

    def build_container(self, db: Database, definition: dict, rid: str, ts: int, etag: str, ranges) -> Container:
        """A container with one partition per (min, max) EPK range, each with a replica set in
        every region: what create_container makes, and what a restart restores."""
        conflict_log = ConflictLog(rid)
        resolver = resolver_for(definition, {r.name: r.id for r in self.regions})
        partitions = []
        for i, (lo, hi) in enumerate(ranges):
            p = Partition(str(i), lo, hi)
            p.write_regions = self.write_regions if self.draining is None else ()
            p.links = self.links
            p.region_ids = {r.name: r.id for r in self.regions}
            p.region_up = lambda name: self.region(name).state == "up"
            if self.consistency == "BoundedStaleness":
                p.staleness_ops, p.staleness_s = self.config.staleness_ops, self.config.staleness_s
            for region in self.regions:
                rs = ReplicaSet(region.name, p.range_id, self.scheduler, self.clock,
                                delay_ms=self.config.intra_region_delay_ms, routing=self.routing)
                rs.log_retained_commits = self.config.log_retained_commits
                if self.config.multi_write:
                    rs.multi_write, rs.resolver, rs.on_conflict = True, resolver, conflict_log.record
                p.attach(region.name, rs)
            partitions.append(p)
        c = Container(db, definition, rid, ts, etag, partitions)
        c.conflicts = conflict_log
        ttl.attach(self, c)
        if self.conflict_hook is not None:
            conflict_log.on_record = lambda ident, entry, c=c, hook=self.conflict_hook: hook(c, ident, entry)
        if self.commit_hook is not None:
            hook = self.commit_hook
            for p in partitions:
                p.durable = lambda p, rs, old, new, c=c: hook(c, p, rs, old, new)
        db.containers[c.id] = c
        self.colls_by_rid[rid] = c
        self.placement.layout_changed()
        return c

    def metadata_changed(self) -> None:
        """Databases, containers, offers or the write region changed: a durable account writes
        its metadata again (runtime/persistence.py)."""
        if self.metadata_hook is not None:
            self.metadata_hook()

    def container(self, db: Database, name_or_rid: str, by_rid: bool = False) -> Container:
        c = self.colls_by_rid.get(name_or_rid) if by_rid else db.containers.get(name_or_rid)
        if c is None or c.db is not db:
            raise not_found(f"Container '{name_or_rid}' does not exist in database '{db.id}'.")
        return c

    def replace_container(self, c: Container, body: dict) -> Container:
        if body.get("id") != c.id:
            raise bad_request(f"The id in the body must be '{c.id}' to replace that container.")
        definition = container_definition(body)
        if PartitionKeyDef.from_json(definition["partitionKey"]) != c.pk_def:
            raise bad_request("The partition key of a container cannot be changed.")
        c.definition = definition
        ttl.attach(self, c)
        c.etag = self._etag()
        c.ts = self.now_s()
        self.metadata_changed()
        return c

    def delete_container(self, c: Container) -> None:
        """Forget the container everywhere the account keeps per-container state, so that its
        partitions, and every item version they hold, can be freed."""
        if c.offer_rid:
            self.offers.pop(c.offer_rid, None)
        del c.db.containers[c.id]
        del self.colls_by_rid[c.rid]
        self.placement.layout_changed()
        self.throttle.forget_container(c.rid)
        gone = set(map(id, c.partitions))
        for region, cuts in list(self.pending_cuts.items()):
            self.pending_cuts[region] = [(p, keep) for p, keep in cuts if id(p) not in gone]
        sets = {id(rs) for p in c.partitions for rs in p.replica_sets.values()}
        for link in self.links.values():
            link.forget(sets)
        self.metadata_changed()

    # ---- offers ------------------------------------------------------------------------
    def _add_offer(self, resource_self: str, resource_rid: str, throughput, autoscale_max,
                   auto_upgrade: dict | None = None) -> Offer:
        offer = Offer(rids.offer_rid(self._next()), resource_self, resource_rid, throughput,
                      autoscale_max, self._etag(), self.now_s(), auto_upgrade)
        self.offers[offer.rid] = offer
        return offer

    def offer(self, rid: str) -> Offer:
        o = self.offers.get(rid)
        if o is None:
            raise not_found(f"Offer '{rid}' does not exist.")
        return o

    def replace_offer(self, offer: Offer, body: dict) -> Offer:
        offer.replace(body)
        offer.etag = self._etag()
        offer.ts = self.now_s()
        self.metadata_changed()
        return offer

    def set_throughput(self, resource, throughput: int | None = None,
                       autoscale_max: int | None = None) -> Offer | None:
        """Provision a database or container (manual or autoscale) at runtime, replacing its
        offer or creating one; with neither value, remove its offer (a container then shares
        its database's throughput, or is unmetered). The control port's RU/s knob."""
        current = self.offers.get(resource.offer_rid) if resource.offer_rid else None
        if throughput is None and autoscale_max is None:
            if current is not None:
                del self.offers[current.rid]
                self.throttle.forget_offer(current.rid)
            resource.offer_rid = None
            self.metadata_changed()
            return None
        self._check_provisionable(throughput, autoscale_max)
        if current is None:
            current = self._add_offer(resource.self_link, resource.rid, throughput, autoscale_max)
            resource.offer_rid = current.rid
            self.metadata_changed()
            return current
        content = ({"offerAutopilotSettings": {"maxThroughput": autoscale_max}} if autoscale_max is not None
                   else {"offerThroughput": throughput})
        return self.replace_offer(current, {"content": content})

    def _check_provisionable(self, throughput, autoscale_max) -> None:
        if (throughput or autoscale_max) and self.throttle.config.serverless:
            raise bad_request("Setting offer throughput or autopilot on a database or container is not "
                              "supported for serverless accounts.")
        check_throughput(throughput, autoscale_max)     # before partitions are derived from it


def checked_id(body) -> str:
    """A resource body's id, checked as the service checks ids (databases, containers, users)."""
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.")
    try:
        check_container_id(body.get("id"))
    except ValidationError as e:
        raise CosmosError(e.status, e.substatus, e.message) from None
    return body["id"]
