"""Throughput: who may spend request units and credits, and the 429s when they may not.

Theory of operation. Every request passes `Throttle.admit` once, with its charge, before
anything of it is applied (writes: after staging, before `Writer.commit()`; reads, queries and
feeds change nothing, so they are evaluated first and admitted with their real charge). Admit
either returns, having debited the budgets, or raises a 429 CosmosError having changed nothing
but the throttled counters. Three things can refuse a request, checked in this order:

* a throttle storm on the serving region (a fault: a seeded share of requests, optionally of
  one operation kind, gets 429/3200 with the storm's retry-after);
* the request-unit budget of the physical partition in the serving region (429/3200);
* the account-wide credit window, Service Bus Standard style (429/50009, retry after 2 s).
When both budgets refuse, the reply carries the longer retry-after (the stricter wins).

RU budgets. A container with its own offer (manual throughput, or the autoscale maximum) splits
it evenly across its physical partitions, giving each partition a bucket of B RU per one-second
window (`now_ms // 1000` on the injected clock). The containers sharing their database's offer
draw from one pool bucket per region holding the whole offer, as the service lets one busy
container of a shared database use all of it: every partition of every sharing container spends
from that pool (`pools`), while its own bucket only counts what it accepted. Budgets live per
region: a region's reads and writes spend only that region's buckets. A serverless account has
no offers; every partition has the same ceiling instead. A container with no offer at all in a
provisioned account is unmetered (admit only counts its charges).

A bucket's invariants (checked by tests/unit/core/test_throttle.py):
* in a window, the RU accepted (plus debt carried in) never exceeds B, or with burst capacity
  B + min(reserve, BURST_RU_PER_S_MAX - B), except that
* a request dearer than a whole window is accepted alone into an idle bucket (nothing used,
  no debt), so no request is throttled forever; its excess is debt that uses up the following
  windows' budget before anything else is accepted;
* burst reserve (when on) grows by the unused part of each closed window, up to
  BURST_ACCRUAL_S windows' worth, and shrinks by what a window spent above B;
* a refused request leaves every bucket and the credit window exactly as they were.
`retry_after_ms` is the integer time from now until the start of the first window in which the
request would fit if nothing else arrived (at least 1 ms).

Credits: an account-wide count per window (default 1000/s when enabled). A data operation costs
1 credit per item it touches or returns (at least 1), a management operation (databases,
containers, offers: create, replace, delete, read, list, query) MANAGEMENT_CREDITS, and each
filter evaluation 1. A request costing more than a whole window is accepted alone into an empty
window (no debt: credits model request counts, not work).

Only the shell changes knobs (control port, CLI, tests); the gateway only calls admit.
The storm's randomness comes from an rng built from the injected one's type, seeded per storm.
"""
from dataclasses import dataclass

from . import charge
from .errors import CosmosError

WINDOW_MS = 1000
BURST_ACCRUAL_S = 300                 # unused budget accrues for at most this many windows
BURST_RU_PER_S_MAX = 3000             # a partition never spends faster than this with burst
SERVERLESS_RU_PER_S_DEFAULT = 5000    # per physical partition
CREDITS_PER_S_DEFAULT = 1000
CREDITS_RETRY_AFTER_MS = 2000
MANAGEMENT_CREDITS = 10
STORM_RETRY_AFTER_MS_DEFAULT = 100
STORM_RETRY_AFTER_MS_MAX = 60 * 60 * 1000       # an hour: longer is no retry-after a client honours
RETRY_AFTER_WINDOWS_MAX = 100_000     # bounds the retry-after search (a debt of ~1 day at 1 RU/s)
CREDIT_HISTORY_MAX = 64               # closed credit windows kept for the control port

SUB_RU_THROTTLED = 3200
SUB_CREDITS_THROTTLED = 50009
CREDITS_MESSAGE = ("The request was terminated because the entity is being throttled. "
                   "Error code: 50009. Please wait 2 seconds and try again.")

# Operation kinds, as the gateway names them; a storm may target one kind or a class of them.
READ, CREATE, UPSERT, REPLACE, PATCH, DELETE = "read", "create", "upsert", "replace", "patch", "delete"
DELETE_BY_PK, BATCH, QUERY, READ_FEED, CHANGE_FEED, MANAGEMENT = (
    "delete_by_partition_key", "batch", "query", "read_feed", "change_feed", "management")
OP_KINDS = (READ, CREATE, UPSERT, REPLACE, PATCH, DELETE, DELETE_BY_PK, BATCH, QUERY, READ_FEED,
            CHANGE_FEED, MANAGEMENT)
OP_CLASSES = {"write": frozenset((CREATE, UPSERT, REPLACE, PATCH, DELETE, DELETE_BY_PK, BATCH)),
              "read": frozenset((READ, QUERY, READ_FEED, CHANGE_FEED)),
              "data": frozenset(OP_KINDS) - {MANAGEMENT}}
REASONS = ("ru", "credits", "storm")


@dataclass
class ThrottleConfig:
    ru: bool = True                        # enforce RU budgets of provisioned containers
    credits_per_s: int | None = None       # None: no credit limit
    burst: bool = False
    serverless: bool = False
    serverless_ru_per_s: int = SERVERLESS_RU_PER_S_DEFAULT


class Bucket:
    """One physical partition's RU budget in one region, and its counters."""
    __slots__ = ("window", "used_ru", "reserve_ru", "accepted", "charged_ru")

    def __init__(self):
        self.window = -1            # not metered yet: the first metered request starts it
        self.used_ru = 0.0          # spent in `window`, including debt carried in
        self.reserve_ru = 0.0       # burst capacity accrued (only while burst is on)
        self.accepted = 0
        self.charged_ru = 0.0       # every accepted charge, metered or not

    def state(self) -> tuple:
        return (self.window, self.used_ru, self.reserve_ru)


def capacity(budget: float, reserve: float, burst: bool) -> float:
    """What one window may spend: the budget, plus burst reserve up to the burst rate."""
    if not burst:
        return budget
    return budget + min(reserve, max(0.0, BURST_RU_PER_S_MAX - budget))


def close_window(used: float, reserve: float, budget: float, burst: bool) -> tuple[float, float]:
    """(used, reserve) at the start of the next window: spending above the budget draws the
    reserve first; what is left over is debt carried in; an underspent window accrues."""
    over = max(0.0, used - budget)
    drawn = min(over, capacity(budget, reserve, burst) - budget)
    debt = over - drawn
    if burst:
        reserve = min(BURST_ACCRUAL_S * budget, reserve - drawn + max(0.0, budget - used))
    return debt, reserve


def advance(bucket_state: tuple, window: int, budget: float, burst: bool) -> tuple:
    """The (window, used, reserve) of a bucket moved forward to `window`."""
    w, used, reserve = bucket_state
    if w < 0:
        return window, 0.0, 0.0
    if window <= w:
        return bucket_state
    k = window - w
    while k and (used > 0 or (burst and reserve < BURST_ACCRUAL_S * budget)):
        if used == 0:               # idle windows from here on: each accrues a full budget
            reserve = min(BURST_ACCRUAL_S * budget, reserve + k * budget)
            break
        used, reserve = close_window(used, reserve, budget, burst)
        k -= 1
    return window, used, reserve


def fits(used: float, reserve: float, ru: float, budget: float, burst: bool) -> bool:
    return used + ru <= capacity(budget, reserve, burst) + 1e-9 or used == 0


class Storm:
    """Forced 429s for a share of one region's requests (optionally of one operation kind)."""
    __slots__ = ("region", "share", "op", "retry_after_ms", "seed", "rng", "hits", "seen")

    def __init__(self, region: str, share: float, op: str | None, retry_after_ms: int, seed: int, rng):
        self.region = region
        self.share = share
        self.op = op
        self.retry_after_ms = retry_after_ms
        self.seed = seed
        self.rng = rng
        self.hits = 0
        self.seen = 0

    def matches(self, op: str) -> bool:
        o = self.op
        return o is None or o == op or (o in OP_CLASSES and op in OP_CLASSES[o])

    def describe(self) -> dict:
        return {"region": self.region, "share": self.share, "op": self.op,
                "retry_after_ms": self.retry_after_ms, "seed": self.seed,
                "requests_seen": self.seen, "requests_throttled": self.hits}


class Throttle:
    def __init__(self, account, config: ThrottleConfig | None = None):
        self.account = account
        self.clock = account.clock
        self.config = config or ThrottleConfig()
        self._rng_type = type(account.rng)
        self.buckets: dict[tuple, Bucket] = {}          # (region, container rid, range id)
        self.pools: dict[tuple, Bucket] = {}            # (region, shared offer rid): its window state
        self.storms: dict[str, Storm] = {}
        self.throttled: dict[tuple, int] = {}           # (region, container rid|None, range id|None, reason)
        self.credit_window = -1
        self.credits_used = 0
        self.credits_spent = {"data": 0, "management": 0, "filter": 0}
        self.credit_history: list = []                  # [(window, used, throttled)], last CREDIT_HISTORY_MAX
        self._credit_throttled_now = 0

    # ---- budgets ---------------------------------------------------------------------------
    def partition_budget(self, container) -> float | None:
        """RU per window one of the container's physical partitions may spend; None = unmetered.
        For a container sharing its database's offer, the whole offer (its pool's budget)."""
        return self._budget_and_pool(None, container)[0]

    def shared_pool(self, region: str, container) -> Bucket | None:
        """The pool bucket a container sharing its database's offer spends from (a new one is
        only kept, by _keep_pool, once a request was accepted into it); None for a container
        with its own offer, or none to share."""
        return self._budget_and_pool(region, container)[1]

    def _budget_and_pool(self, region: str | None, container) -> tuple:
        """(partition_budget, shared_pool in region; None without a region): admit needs both,
        for every request, and one call costs less than two."""
        cfg = self.config
        db = container.db
        pool = None
        if region is not None and container.offer_rid is None and db.offer_rid is not None and not cfg.serverless:
            pool = self.pools.get((region, db.offer_rid))
            if pool is None:
                pool = Bucket()
        if cfg.serverless:
            return float(cfg.serverless_ru_per_s), pool
        if not cfg.ru:
            return None, pool
        offers = self.account.offers
        if container.offer_rid is not None:
            o = offers.get(container.offer_rid)
            if o is not None:
                return (o.autoscale_max or o.throughput) / len(container.partitions), pool
        if db.offer_rid is None:
            return None, pool
        o = offers.get(db.offer_rid)
        if o is None:
            return None, pool
        return float(o.autoscale_max or o.throughput), pool

    def _keep_pool(self, region: str, container, pool: Bucket) -> None:
        self.pools.setdefault((region, container.db.offer_rid), pool)

    def forget_offer(self, rid: str) -> None:
        """Drop a removed shared offer's pools, as forget_container drops a container's buckets."""
        for key in [k for k in self.pools if k[1] == rid]:
            del self.pools[key]

    def _bucket(self, region: str, container, range_id: str) -> Bucket:
        """The partition's bucket; a new one is only kept once a request was accepted into it."""
        b = self.buckets.get((region, container.rid, range_id))
        return Bucket() if b is None else b

    def _accepted(self, region: str, container, range_id: str, b: Bucket, ru: float) -> None:
        if b.accepted == 0:
            self.buckets[(region, container.rid, range_id)] = b
        b.accepted += 1
        b.charged_ru += ru

    def forget_container(self, rid: str) -> None:
        """Drop a deleted container's buckets and 429 counters (nothing reports them any more),
        so that creating and deleting containers does not grow these tables without end."""
        for key in [k for k in self.buckets if k[1] == rid]:
            del self.buckets[key]
        for key in [k for k in self.throttled if k[1] == rid]:
            del self.throttled[key]

    # ---- admission -------------------------------------------------------------------------
    def admit(self, region: str, container, range_id: str, ru: float, credits: int, op: str,
              filters: int = 0) -> None:
        """Admit one request charged to one partition, or raise 429 with nothing changed.
        `credits` counts items touched or returned, `filters` filter evaluations."""
        if self.storms:
            self._storm(region, op, container.rid, range_id)
        cfg = self.config
        # (partition_budget is None without RU budgets: known without the call)
        budget, pool = self._budget_and_pool(region, container) if cfg.ru or cfg.serverless else (None, None)
        key = (region, container.rid, range_id)
        b = self.buckets.get(key)
        if b is None:
            b = Bucket()                # kept only once a request was accepted into it
        if budget is not None:
            meter = pool or b
            if (cfg.credits_per_s is None and meter.window == self.clock.now_ms() // WINDOW_MS
                    and meter.used_ru + ru <= capacity(budget, meter.reserve_ru, cfg.burst) + 1e-9):
                # The common case: the bucket's window is current and it fits. What _admit_ru
                # would do then; test_throttle's test_admit_answers_as_the_general_path_does
                # holds the two to the same answers and state.
                meter.used_ru += ru
            else:
                self._admit_ru(region, container, ((meter, range_id),), ru, credits, filters, op, budget)
            if meter is not b:
                self._keep_pool(region, container, meter)
        elif cfg.credits_per_s is not None:
            self._admit_credits(region, container.rid, credits, filters, op)
        if b.accepted == 0:
            self.buckets[key] = b
        b.accepted += 1
        b.charged_ru += ru

    def admit_many(self, region: str, container, range_ids, ru: float, credits: int, op: str,
                   filters: int = 0) -> None:
        """Admit a request that read several partitions: its charge is split evenly between
        them and must fit each of them (all or nothing)."""
        range_ids = list(range_ids)
        if len(range_ids) == 1:
            return self.admit(region, container, range_ids[0], ru, credits, op, filters)
        if self.storms:
            self._storm(region, op, container.rid, None)
        budget = self.partition_budget(container)
        share = ru / len(range_ids) if range_ids else 0.0
        pairs = tuple((self._bucket(region, container, r), r) for r in range_ids)
        pool = self.shared_pool(region, container) if budget is not None and range_ids else None
        if pool is not None:            # one pool: the whole charge must fit it once
            self._admit_ru(region, container, ((pool, range_ids[0]),), ru, credits, filters, op, budget)
            self._keep_pool(region, container, pool)
        elif budget is not None:
            self._admit_ru(region, container, pairs, share, credits, filters, op, budget)
        elif self.config.credits_per_s is not None:
            self._admit_credits(region, container.rid, credits, filters, op)
        for b, range_id in pairs:
            self._accepted(region, container, range_id, b, share)

    def admit_writer(self, writer, op: str, ru: float | None = None, credits: int | None = None) -> float:
        """Admit what a core Writer has staged, before its commit: by default its charge
        (charge.staged) and one credit per item it touches. A refused write also gives back the
        document rids it drew, so nothing of it remains. Returns the charge."""
        if ru is None:
            ru = charge.staged(writer)
        if credits is None:
            # One operation touches at most one item, and a request costs at least one credit.
            credits = 1 if len(writer.pending) <= 1 else max(1, charge.staged_count(writer))
        try:
            self.admit(writer.region, writer.container, writer.rs.range_id, ru, credits, op)
        except CosmosError:
            writer.container.doc_seq -= writer.rids_drawn
            raise
        return ru

    def admit_management(self, region: str, op: str = MANAGEMENT) -> None:
        """Databases, containers, offers: no partition budget, MANAGEMENT_CREDITS credits."""
        if self.storms:
            self._storm(region, op, None, None)
        if self.config.credits_per_s is not None:
            self._admit_credits(region, None, MANAGEMENT_CREDITS, 0, op)

    def _admit_ru(self, region, container, pairs, ru, credits, filters, op, budget) -> None:
        window = self.clock.now_ms() // WINDOW_MS
        burst = self.config.burst
        moved = []
        refused = None
        for b, range_id in pairs:
            w, used, reserve = advance(b.state(), window, budget, burst)
            moved.append((w, used, reserve))
            if refused is None and not fits(used, reserve, ru, budget, burst):
                refused = (range_id, self._ru_retry_after(w, used, reserve, ru, budget, burst))
        credits_on = self.config.credits_per_s is not None
        credit_wait = self._credits_refusal(window, credits + filters) if credits_on else None
        if refused is not None or credit_wait is not None:
            self._refuse(region, container, refused, credit_wait)
        for (b, _), (w, used, reserve) in zip(pairs, moved):
            b.window, b.used_ru, b.reserve_ru = w, used + ru, reserve
        if credits_on:
            self._spend_credits(credits, filters, op)

    def _refuse(self, region, container, refused, credit_wait):
        ru_wait = refused[1] if refused is not None else -1
        if credit_wait is not None and credit_wait >= ru_wait:
            self._count(region, container.rid, None, "credits")
            self._credit_throttled_now += 1
            raise _credits_error()
        range_id = refused[0]
        self._count(region, container.rid, range_id, "ru")
        raise CosmosError(429, SUB_RU_THROTTLED,
                          f"Request rate is large: partition {range_id} of container {container.id} "
                          f"in {region} has spent its {self.partition_budget(container):.2f} RU for this "
                          f"second. Retry after {ru_wait} ms.", retry_after_ms=ru_wait)

    def _ru_retry_after(self, w, used, reserve, ru, budget, burst) -> int:
        now = self.clock.now_ms()
        for k in range(1, RETRY_AFTER_WINDOWS_MAX):
            used, reserve = close_window(used, reserve, budget, burst)
            if fits(used, reserve, ru, budget, burst):
                return max(1, (w + k) * WINDOW_MS - now)
        return RETRY_AFTER_WINDOWS_MAX * WINDOW_MS

    # ---- credits ---------------------------------------------------------------------------
    def _roll_credits(self, window: int) -> None:
        if window != self.credit_window:
            if self.credit_window >= 0:
                self.credit_history.append((self.credit_window, self.credits_used, self._credit_throttled_now))
                del self.credit_history[:-CREDIT_HISTORY_MAX]
            self.credit_window, self.credits_used, self._credit_throttled_now = window, 0, 0

    def _credits_refusal(self, window: int, credits: int) -> int | None:
        self._roll_credits(window)
        used = self.credits_used
        if used + credits <= self.config.credits_per_s or used == 0:
            return None
        return CREDITS_RETRY_AFTER_MS

    def _spend_credits(self, credits: int, filters: int, op: str) -> None:
        self.credits_used += credits + filters
        self.credits_spent["management" if op == MANAGEMENT else "data"] += credits
        self.credits_spent["filter"] += filters

    def _admit_credits(self, region, rid, credits, filters, op) -> None:
        if self._credits_refusal(self.clock.now_ms() // WINDOW_MS, credits + filters) is not None:
            self._count(region, rid, None, "credits")
            self._credit_throttled_now += 1
            raise _credits_error()
        self._spend_credits(credits, filters, op)

    # ---- storms ----------------------------------------------------------------------------
    def _storm(self, region: str, op: str, rid, range_id) -> None:
        s = self.storms.get(region)
        if s is None or not s.matches(op):
            return
        s.seen += 1
        if s.rng.random() < s.share:
            s.hits += 1
            self._count(region, rid, range_id, "storm")
            raise CosmosError(429, SUB_RU_THROTTLED,
                              f"Request rate is large: a throttle storm is forcing 429s for "
                              f"{s.share:.0%} of {s.op or 'all'} requests in {region}.",
                              retry_after_ms=s.retry_after_ms)

    def set_storm(self, region: str, share: float, op: str | None = None,
                  retry_after_ms: int = STORM_RETRY_AFTER_MS_DEFAULT, seed: int = 0) -> Storm:
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= 1:
            raise ValueError(f"a storm's share must be a number between 0 and 1, got {share!r}")
        if op is not None and (not isinstance(op, str) or (op not in OP_KINDS and op not in OP_CLASSES)):
            raise ValueError(f"unknown operation kind {op!r}; use one of "
                             f"{', '.join(OP_KINDS + tuple(OP_CLASSES))}")
        if type(retry_after_ms) is not int or not 0 <= retry_after_ms <= STORM_RETRY_AFTER_MS_MAX:
            raise ValueError(f"retry_after_ms must be an integer 0-{STORM_RETRY_AFTER_MS_MAX}")
        if type(seed) is not int:
            raise ValueError(f"a storm's seed must be an integer, got {seed!r}")
        self.account.region(region)             # KeyError for an unknown region
        storm = Storm(region, float(share), op, retry_after_ms, seed, self._rng_type(seed))
        self.storms[region] = storm
        return storm

    def clear_storm(self, region: str) -> Storm | None:
        return self.storms.pop(region, None)

    # ---- counters --------------------------------------------------------------------------
    def _count(self, region, rid, range_id, reason) -> None:
        key = (region, rid, range_id, reason)
        self.throttled[key] = self.throttled.get(key, 0) + 1

    def credits_now(self) -> dict:
        self._roll_credits(self.clock.now_ms() // WINDOW_MS)
        return {"limit_per_s": self.config.credits_per_s, "window": self.credit_window,
                "used": self.credits_used, "throttled": self._credit_throttled_now,
                "spent": dict(self.credits_spent),
                "recent_windows": [{"window": w, "used": u, "throttled": t} for w, u, t in self.credit_history]}



def _credits_error() -> CosmosError:
    return CosmosError(429, SUB_CREDITS_THROTTLED, CREDITS_MESSAGE, retry_after_ms=CREDITS_RETRY_AFTER_MS)
