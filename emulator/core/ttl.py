"""Time to live: when an item expires, and the sweep that deletes expired items.

Theory of operation, as the service defines TTL:
* A container's `defaultTtl` absent (or null): nothing expires and an item's `ttl` is ignored.
  -1: items never expire unless their own `ttl` is n > 0. n > 0: items expire n seconds after
  their `_ts`, unless their own `ttl` says otherwise (-1 never, m > 0 after m seconds).
* An item is expired once its region's clock (the account's injected clock plus any
  clock_skew fault on the region) reaches `(_ts + ttl) * 1000` ms. Every read path asks
  `Expiry.expired` itself (point reads, writes' view of the current item, queries, read feed,
  latest-version change feed), so an expired item is never served, even before the sweep
  deleted it.
* The sweep (`Sweeper`, one per account) deletes expired items for real: a commit of one
  tombstone (op `expire`) at the partition's write region, replicated like any delete, so every
  region agrees and the all-versions change feed shows it (`timeToLiveExpired: true`). It runs
  outside any request, so it charges no client's request units. It keeps, per partition, an
  expiry index (a heap of (expiry ms, key, LSN)) fed from the write region's change log from a
  cursor LSN; an entry is acted on only if the item's newest version is still that LSN (a
  replace, upsert or patch gave it a new `_ts`, and a new entry). Its work is bounded per timer
  turn (TTL_SWEEP_TURN_MAX_ENTRIES log entries read or items deleted), then it yields to the loop;
  turns take the partitions round robin, so one partition's backlog does not hold up the others.
  After a failover (another write region, or its log cut), a restart or a change of
  `defaultTtl`, a partition's index is rebuilt from LSN 0 in the same bounded turns.
* A TTL delete that a forced failover cuts is not a lost write of any client: the new write
  region expires the item again (failover.cut_history leaves it out of the lost-writes log).

Who changes what: the account attaches an `Expiry` to each container whose definition has a
`defaultTtl` (`attach`); only the sweep deletes by TTL.
"""
import heapq
import json

from .errors import CosmosError, bad_request
from .limits import TTL_MAX_S, TTL_SWEEP_TURN_MAX_ENTRIES

NEVER = -1
SWEEP_INTERVAL_MS = 1000             # how often the sweep looks for newly expired items
HEAP_SLACK_ENTRIES = 1024            # stale expiry-heap entries tolerated beyond the live ones
EXPIRE_OP = "expire"                 # Version.op of a delete by TTL
_TTL_MEMBER = b'"ttl"'


def _invalid(name: str, value) -> CosmosError:
    shown = json.dumps(value) if not isinstance(value, str) else value
    return bad_request(f"The input {name} '{shown}' is invalid. Ensure to provide a nonzero positive integer "
                       f"less than or equal to '{TTL_MAX_S}', or '-1' which means never expire.")


def _valid(value) -> bool:
    return type(value) is int and (value == NEVER or 0 < value <= TTL_MAX_S)


def check_default_ttl(definition: dict) -> None:
    """400 for a container definition whose defaultTtl is not absent, null, -1 or 1..2^31-1."""
    value = definition.get("defaultTtl")
    if value is not None and not _valid(value):
        raise _invalid("defaultTtl", value)


def check_item_ttl(doc: dict) -> None:
    """400 for an item whose ttl is present and not -1 or 1..2^31-1 (null included, as the
    service refuses it). Asked only in containers with TTL on, where the value means something."""
    if "ttl" in doc and not _valid(doc["ttl"]):
        raise _invalid("ttl", doc["ttl"])


def item_ttl_of(body: bytes):
    """The item's own ttl from its stored JSON, or None. Most bodies have no "ttl" anywhere, and
    a byte search settles those without parsing."""
    if _TTL_MEMBER not in body:
        return None
    value = json.loads(body).get("ttl")
    return value if type(value) is int else None


class Expiry:
    """A container's TTL rule: `default_s` its defaultTtl (-1 or n > 0), `now_ms(region)` the
    region's clock, `wake()` arms the account's sweep (a commit in the container calls it).
    `sweeps` holds the sweep's per-partition index (PartitionSweep by ordinal)."""
    __slots__ = ("default_s", "now_ms", "wake", "sweeps")

    def __init__(self, default_s: int, now_ms, wake):
        self.default_s = default_s
        self.now_ms = now_ms
        self.wake = wake
        self.sweeps: dict = {}

    def expires_ms(self, v):
        """When version v expires, in ms on the account clock, or None if never."""
        own = item_ttl_of(v.body)
        ttl_s = own if own is not None else self.default_s
        if ttl_s <= 0:
            return None
        return (v.ts_ms // 1000 + ttl_s) * 1000

    def expired_at(self, v, now_ms: int) -> bool:
        expires = self.expires_ms(v)
        return expires is not None and now_ms >= expires

    def expired(self, v, region: str) -> bool:
        return self.expired_at(v, self.now_ms(region))


def visible(container, v, region: str):
    """v, or None when it is expired (a read's one check)."""
    ttl = container.ttl
    if v is None or ttl is None or not ttl.expired(v, region):
        return v
    return None


def attach(account, container) -> None:
    """Give the container the Expiry its definition asks for (or none), and wake the sweep.
    Called when a container is built (created or restored) and when it is replaced."""
    default_s = container.definition.get("defaultTtl")
    if default_s is None:
        container.ttl = None
        return
    old = container.ttl
    if old is not None and old.default_s == default_s:
        return
    # A new defaultTtl changes every item's expiry: the sweep's indexes start again.
    container.ttl = Expiry(default_s, account.region_now_ms, account.ttl_sweeper.wake)
    account.ttl_sweeper.hurry()


class PartitionSweep:
    """The expiry index of one partition at its write region's replica set `rs`: `due` maps each
    key to (expiry ms, LSN) of its newest indexed version with an expiry, and `heap` orders them.
    A newer version leaves its key's older heap entry stale; once stale entries outnumber live ones
    (HEAP_SLACK_ENTRIES of slack) the heap is rebuilt from `due`, so its size stays within about
    twice the number of items that can expire, however often they are rewritten."""
    __slots__ = ("rs", "epoch", "cursor_lsn", "heap", "due")

    def __init__(self, rs):
        self.rs = rs
        self.epoch = rs.epoch
        self.cursor_lsn = 0
        self.heap: list = []
        self.due: dict = {}

    def current_for(self, rs) -> bool:
        return rs is self.rs and rs.epoch == self.epoch and self.cursor_lsn <= rs.committed_lsn

    def note(self, v, expires_ms) -> None:
        """v is its key's newest version: index its expiry (None: it has none any more)."""
        if expires_ms is None:
            self.due.pop(v.key, None)
            return
        self.due[v.key] = (expires_ms, v.lsn)
        heapq.heappush(self.heap, (expires_ms, v.key, v.lsn))

    def compact(self) -> None:
        if len(self.heap) > 2 * len(self.due) + HEAP_SLACK_ENTRIES:
            self.heap = [(e, k, lsn) for k, (e, lsn) in self.due.items()]
            heapq.heapify(self.heap)

    def pop_due(self, now_ms: int):
        """(key, LSN) of the earliest entry if it is due at now_ms; (None, None) for a stale one
        (its key was rewritten since); None when nothing is due."""
        heap = self.heap
        if not heap or heap[0][0] > now_ms:
            return None
        expires_ms, key, lsn = heapq.heappop(heap)
        if self.due.get(key) != (expires_ms, lsn):
            return None, None
        del self.due[key]
        return key, lsn


class Sweeper:
    """The account's TTL sweep: a timer that runs while some partition of a container with TTL on
    has work (a log not indexed yet, an expiry pending, a write region down), at least every
    SWEEP_INTERVAL_MS, each turn bounded by TTL_SWEEP_TURN_MAX_ENTRIES (module docstring). Idle, it
    waits for `wake` (a commit in such a container) or `hurry`."""

    def __init__(self, account, writer_of):
        self.account = account
        self.writer_of = writer_of       # (container, region, pk_json, now_ms) -> documents.Writer
        self.armed = False               # a turn is scheduled (or running)
        self._due_ms = 0                 # when the scheduled turn is due
        self._token = 0                  # the scheduled turn's; an older timer finds it moved on
        self._resume = 0                 # where the next turn starts in the list of partitions
        self.deleted = 0                 # items deleted by TTL since start (metrics, tests)

    def wake(self) -> None:
        """A commit in a container with TTL on: a turn now if idle (else the next turn sees it)."""
        if not self.armed:
            self._arm(self.account.clock.now_ms())

    def hurry(self) -> None:
        """Expiries may have moved (a clock_skew, a new defaultTtl, a forced failover's cut): a turn
        now, even if one is due later."""
        now_ms = self.account.clock.now_ms()
        if not self.armed or self._due_ms > now_ms:
            self._arm(now_ms)

    def _arm(self, due_ms: int) -> None:
        self._token += 1
        self.armed, self._due_ms = True, due_ms
        self.account.scheduler.call_at(due_ms, self._turn, self._token)

    def _containers(self) -> list:
        return [c for db in self.account.databases.values() for c in db.containers.values() if c.ttl is not None]

    def _turn(self, token: int) -> None:
        if token != self._token:
            return                       # hurry() scheduled another turn in this one's place
        # armed stays True (and due now) while the turn runs: its own commits' wake() and a
        # hurry() add no second timer.
        budget, earliest_ms = TTL_SWEEP_TURN_MAX_ENTRIES, None
        containers = self._containers()
        work = [(c, ordinal, p) for c in containers for ordinal, p in enumerate(c.partitions)]
        # Round robin: a turn starts after the partition where the last one ran out of budget,
        # so a partition with a long backlog does not hold up the others.
        first = self._resume % len(work) if work else 0
        for k in range(len(work)):
            c, ordinal, p = work[(first + k) % len(work)]
            budget, due_ms = self._sweep(c, ordinal, p, budget)
            if due_ms is not None and (earliest_ms is None or due_ms < earliest_ms):
                earliest_ms = due_ms
            if budget <= 0:
                self._resume = first + k + 1
                break
        now_ms = self.account.clock.now_ms()
        if budget <= 0:
            # More work left: the next millisecond, so the loop serves everyone else in between.
            due_ms = now_ms + 1
        elif earliest_ms is None and not (containers and self.account.config.multi_write):
            self.armed = False           # idle until a commit wakes it
            return
        elif earliest_ms is None:
            # Multi-write: another region's writes reach the write region's log by replication,
            # which wakes nobody; look again while any container has TTL on.
            due_ms = now_ms + SWEEP_INTERVAL_MS
        else:
            due_ms = max(now_ms + 1, min(now_ms + SWEEP_INTERVAL_MS, earliest_ms))
        self._arm(due_ms)

    def _write_rs(self, p):
        region = self.account.hub_region
        if region not in p.write_regions or self.account.region_state(region) != "up":
            return None
        return p.replica_sets.get(region)

    def _sweep(self, c, ordinal: int, p, budget: int):
        """(budget left, when this partition needs the next turn or None)."""
        rs = self._write_rs(p)
        if rs is None:
            return budget, self.account.clock.now_ms() + SWEEP_INTERVAL_MS     # try again
        sweep = c.ttl.sweeps.get(ordinal)
        if sweep is None or not sweep.current_for(rs):
            sweep = c.ttl.sweeps[ordinal] = PartitionSweep(rs)
        budget = self._index(c.ttl, sweep, budget)
        budget = self._expire(c, sweep, budget)
        now_ms = self.account.clock.now_ms()
        if sweep.cursor_lsn < rs.committed_lsn:
            return budget, now_ms
        if rs.lsn > rs.committed_lsn:    # writes not committed yet (a replica delay): index them later
            return budget, now_ms + SWEEP_INTERVAL_MS
        if not sweep.heap:
            return budget, None
        # The heap holds expiries on the write region's clock; the scheduler runs on the account's.
        return budget, sweep.heap[0][0] - (self.account.region_now_ms(rs.region) - now_ms)

    def _index(self, ttl: Expiry, sweep: PartitionSweep, budget: int) -> int:
        """Read the write region's change log past the cursor into the heap; stop only between
        commits, so the cursor never splits one."""
        rs = sweep.rs
        upto = rs.committed_lsn
        for v in rs.store.changes_after(sweep.cursor_lsn, upto):
            if budget <= 0 and v.lsn != sweep.cursor_lsn:
                break
            sweep.note(v, ttl.expires_ms(v))
            sweep.cursor_lsn = v.lsn
            budget -= 1
        else:
            sweep.cursor_lsn = upto
        sweep.compact()
        return budget

    def _expire(self, c, sweep: PartitionSweep, budget: int) -> int:
        rs = sweep.rs
        now_ms = self.account.region_now_ms(rs.region)
        while budget > 0:
            entry = sweep.pop_due(now_ms)
            if entry is None:
                break
            key, lsn = entry
            budget -= 1
            v = None if key is None else rs.store.latest(key)
            if v is None or v.deleted or v.lsn != lsn or not c.ttl.expired_at(v, now_ms):
                continue                 # stale, deleted or rewritten since (a newer entry stands for it)
            try:
                writer = self.writer_of(c, rs.region, key[0], now_ms)
                writer.expire(v)
                writer.commit()
            except CosmosError:
                sweep.note(v, now_ms)    # not writable now (no quorum, throttled): the next turn
                return budget
            self.deleted += 1
        return budget
