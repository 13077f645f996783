"""Request faults: what a region going bad does to the requests it serves, decided per request.

    {"type": "latency", "region": "East US", "delay_ms": 1000, "jitter_ms": 50, "op": "read"}
    {"type": "error", "region": "East US", "status": 503, "substatus": 0, "share": 0.5, "count": 10}
    {"type": "timeout_after_apply", "region": "East US", "share": 1, "op": "write"}
    {"type": "tcp_reset", "region": "East US", "share": 0.2}
    {"type": "clock_skew", "region": "East US", "offset_ms": -90000}

Theory of operation: `RequestFaults` holds the active request faults of each region. For every
request the request layer (service/request_faults.py, for every surface) asks `decide(region,
op, database, container, partition)` and gets back None (nothing to do, the common case) or an
`Effect`:

* `error`: a CosmosError to answer *instead of* running the request (a definite failure:
  nothing of it is applied);
* `drop`: run the request, then `DROP_AFTER_APPLY` (close without answering: the outcome is
  unknown to the client) or `RESET` (reset the connection part-way through the reply);
* `delay_ms`: run the request at once, and hold its reply this long (the write is applied even
  if the client gives up meanwhile).

Faults of one region combine: the first matching error fault (in injection order) wins over
drops; delays of every matching latency fault add up. `share`, `jitter_ms` and the error's
`count` are decided by each fault's own Rng, seeded from the fault's `seed` (drawn from the
account's Rng when the spec gives none, and recorded in the fault), so a run replays. A clock
skew is not per request: `skew_ms(region)` is the offset the region's clock runs at; the shells
add it wherever they stamp time (item `_ts`, LWW timestamps, auth's date window).

`op` is the class of request: `read` (point reads, read feeds, change feeds), `write` (creates,
upserts, replaces, patches, deletes, batches, delete by partition key), `query` (queries and
query plans), `metadata` (the account, databases, containers, partition key ranges, offers),
or `all` (default). Selectors (`database`, `container`, `partition`) narrow a fault as they do
for replica faults; a request that does not name a partition (a cross-partition query) matches
only faults without a partition selector.
"""
from .errors import CosmosError, bad_request

OPS = ("read", "write", "query", "metadata", "all")
REQUEST_FAULT_TYPES = ("latency", "error", "timeout_after_apply", "tcp_reset", "clock_skew")
DROP_AFTER_APPLY = "drop_after_apply"
RESET = "reset"
DELAY_MS_MAX = 10 * 60 * 1000            # a reply held ten minutes is "never" to any client
SKEW_MS_MAX = 7 * 24 * 3600 * 1000       # a week either way
ERROR_STATUS_MIN, ERROR_STATUS_MAX = 400, 599
SUBSTATUS_MAX = 2**31 - 1
COUNT_MAX = 2**31 - 1
SEED_MAX = 2**63 - 1
RETRY_AFTER_MS_DEFAULT = 100             # what a 429 from an error fault asks the client to wait


class Effect:
    __slots__ = ("delay_ms", "error", "drop")

    def __init__(self):
        self.delay_ms = 0
        self.error: CosmosError | None = None
        self.drop: str | None = None


class RequestFault:
    """One active request fault: what it selects and its seeded decisions."""
    __slots__ = ("kind", "region", "op", "database", "container", "partition", "share", "rng",
                 "delay_ms", "jitter_ms", "status", "substatus", "count", "offset_ms", "seen", "hits",
                 "on_spent")

    def __init__(self, kind: str, region: str, spec: dict, rng):
        self.kind = kind
        self.region = region
        self.op = spec.get("op", "all")
        self.database = spec.get("database")
        self.container = spec.get("container")
        self.partition = spec.get("partition")
        self.share = float(spec.get("share", 1.0))
        self.rng = rng
        self.delay_ms = spec.get("delay_ms", 0)
        self.jitter_ms = spec.get("jitter_ms", 0)
        self.status = spec.get("status")
        self.substatus = spec.get("substatus", 0)
        self.count = spec.get("count")
        self.offset_ms = spec.get("offset_ms", 0)
        self.seen = 0                 # requests it matched
        self.hits = 0                 # requests it acted on
        self.on_spent = None          # called once when an error fault's count is used up

    def selects(self, op: str, database, container, partition) -> bool:
        return ((self.op == "all" or self.op == op)
                and (self.database is None or self.database == database)
                and (self.container is None or self.container == container)
                and (self.partition is None or self.partition == partition))

    def strikes(self) -> bool:
        """Whether this matching request is one of the fault's share (one draw per request)."""
        self.seen += 1
        if self.share < 1.0 and self.rng.random() >= self.share:
            return False
        self.hits += 1
        return True

    def error(self) -> CosmosError:
        e = CosmosError(self.status, self.substatus,
                        f"An error fault in {self.region} answers this request {self.status}"
                        f"{'/' + str(self.substatus) if self.substatus else ''}; it was not applied.",
                        retry_after_ms=RETRY_AFTER_MS_DEFAULT if self.status == 429 else None)
        return e


class RequestFaults:
    def __init__(self):
        self.by_region: dict[str, list[RequestFault]] = {}
        self.skews: dict[str, list[RequestFault]] = {}

    # ---- the registry's side ------------------------------------------------------------
    def add(self, fault: RequestFault) -> None:
        table = self.skews if fault.kind == "clock_skew" else self.by_region
        table.setdefault(fault.region, []).append(fault)

    def remove(self, fault: RequestFault) -> None:
        table = self.skews if fault.kind == "clock_skew" else self.by_region
        faults = table.get(fault.region, [])
        if fault in faults:
            faults.remove(fault)
        if not faults:
            table.pop(fault.region, None)

    # ---- the shells' side ---------------------------------------------------------------
    def active_in(self, region: str) -> bool:
        return region in self.by_region

    def selects_partitions(self, region: str) -> bool:
        """Whether deciding needs the request's database/container/partition (else None will do)."""
        return any(f.database is not None or f.container is not None or f.partition is not None
                   for f in self.by_region.get(region, ()))

    def skew_ms(self, region: str) -> int:
        skews = self.skews.get(region)       # every request asks; nearly always there is none
        return sum(f.offset_ms for f in skews) if skews else 0

    def decide(self, region: str, op: str, database=None, container=None, partition=None) -> Effect | None:
        faults = self.by_region.get(region)
        if not faults:
            return None
        effect = None
        for f in list(faults):
            if not f.selects(op, database, container, partition):
                continue
            if f.kind == "error" and (effect is None or effect.error is None):
                if f.count is not None and f.hits >= f.count:
                    continue
                if f.strikes():
                    effect = effect or Effect()
                    effect.error = f.error()
                    if f.count is not None and f.hits >= f.count and f.on_spent is not None:
                        f.on_spent()
            elif f.kind == "latency":
                f.seen += 1
                f.hits += 1
                effect = effect or Effect()
                jitter = f.rng.randint(0, f.jitter_ms) if f.jitter_ms else 0
                effect.delay_ms += f.delay_ms + jitter
            elif f.kind in ("timeout_after_apply", "tcp_reset") and (effect is None or effect.drop is None):
                if f.strikes():
                    effect = effect or Effect()
                    effect.drop = DROP_AFTER_APPLY if f.kind == "timeout_after_apply" else RESET
        if effect is not None and effect.error is not None:
            effect.drop = None              # not applied: there is nothing to drop after
        return effect


# ---- checking a spec (the registry calls these; a refused fault changes nothing) ------------------
def check_spec(kind: str, spec: dict) -> None:
    """Raise a 400 naming the first field of spec that a fault of this kind cannot take."""
    op = spec.get("op", "all")
    if op not in OPS:
        raise bad_request(f"'op' must be one of {', '.join(OPS)}; got {op!r}.")
    if kind in ("error", "timeout_after_apply", "tcp_reset"):
        share = spec.get("share", 1.0)
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share <= 1.0:
            raise bad_request(f"{kind} needs 'share' to be a number from 0 to 1 (default 1); got {share!r}.")
    if "seed" in spec:
        _integer(spec, "seed", 0, SEED_MAX, kind)
    if kind == "latency":
        _integer(spec, "delay_ms", 0, DELAY_MS_MAX, kind, required=True)
        _integer(spec, "jitter_ms", 0, DELAY_MS_MAX, kind)
    elif kind == "error":
        _integer(spec, "status", ERROR_STATUS_MIN, ERROR_STATUS_MAX, kind, required=True,
                 example="e.g. 503, 500, 408, 410, 429 or 449")
        _integer(spec, "substatus", 0, SUBSTATUS_MAX, kind)
        _integer(spec, "count", 1, COUNT_MAX, kind)
    elif kind == "clock_skew":
        _integer(spec, "offset_ms", -SKEW_MS_MAX, SKEW_MS_MAX, kind, required=True)
    if kind in ("tcp_reset", "clock_skew"):
        for field in ("op", "database", "container", "partition"):
            if field in spec:
                raise bad_request(f"{kind} applies to a whole region; it takes no '{field}'.")


def _integer(spec: dict, field: str, lo: int, hi: int, kind: str, required: bool = False,
             example: str = "") -> None:
    if field not in spec:
        if required:
            raise bad_request(f"{kind} needs an integer '{field}' from {lo} to {hi}"
                              f"{' (' + example + ')' if example else ''}.")
        return
    v = spec[field]
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise bad_request(f"{kind}: '{field}' must be an integer from {lo} to {hi}"
                          f"{' (' + example + ')' if example else ''}; got {v!r}.")


def inject(registry, spec: dict) -> list:
    """The FaultRegistry's handler for the request fault types: check spec whole, then add it;
    returns the undo list. An error fault with a `count` heals itself once it is used up."""
    kind = spec["type"]
    region = registry._region(spec)
    check_spec(kind, spec)
    if any(spec.get(s) is not None for s in ("database", "container", "partition")):
        registry._replica_sets(spec)            # a selector that matches nothing is a 400
    account = registry.account
    seed = spec.get("seed")
    if seed is None:
        # Drawn from the account's Rng (so a simulated run replays) and written into the fault
        # (so GET /faults shows what reproduces it).
        seed = spec["seed"] = account.rng.randrange(2**32)
    fault = RequestFault(kind, region, spec, type(account.rng)(seed))
    fid = registry._seq + 1                     # inject numbers the fault right after this
    if fault.count is not None:
        fault.on_spent = lambda: account.scheduler.call_at(account.clock.now_ms(), registry._expire, fid)
    table = registry.requests
    table.add(fault)
    if kind == "clock_skew":
        account.ttl_sweeper.hurry()           # a clock moved on may have made items due now
    return [lambda: table.remove(fault)]
