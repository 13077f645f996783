"""The garbage collector of a serving process: how often it runs, what it may skip, what it paused.

Theory of operation. Every region shares one event loop, so a collector pause is a pause of
every endpoint. CPython's cyclic collector walks every tracked object of the generations it
collects; a full collection walks them all. Refcounting frees nearly everything a request
allocates, so what a full collection finds among stored state is nothing, every time: a stored
Version holds atoms only and is not tracked at all (store.py), so a create or an upsert leaves
~0.03-0.8 tracked objects behind instead of 1-2 (bench/gc_census.py); what is tracked and long-
lived is the structure around the versions (each store's item map, key lists, indexes, the
account), and the cached compiled queries.

So, in a serving process (`install`, called by the CLI's server, not by the in-process test
fixture, whose process the tests own):
* once it serves (imports done, account built), everything there is is frozen (gc.freeze():
  moved to the permanent generation, which no collection walks);
* the thresholds stay CPython's (700, 10, 10): each stored version passes through the young
  generations once, and a collection of generation 1 walks what ten young ones left, so a larger
  young threshold makes those pauses longer (5,000 made them 5-10x longer while loading:
  docs/performance.md, "Garbage collector");
* after a full collection that took FREEZE_AFTER_FULL_MS or more, everything that survived it
  is frozen too. What survived a full collection is long-lived by then: stored versions, indexes, the account. The
  next full collections walk only what came since, so their pause stays about
  FREEZE_AFTER_FULL_MS however much is stored;
* a frozen object is still freed by refcounting, but a frozen *cycle* is never collected. The
  one long-lived structure that becomes cyclic garbage is a deleted container, database or
  region (replica sets and partitions refer to each other), so when one the account held is
  gone the collector unfreezes everything (gc.unfreeze()) and collects it all at once, between
  requests (one long pause after such a delete, ~0.1 tracked objects per stored item; then
  freezing starts over).

It also measures, without changing anything: every collection's pause by generation (gc
callbacks: wall time, and the collecting thread's CPU time, which other processes on a shared
machine do not inflate; a histogram and the last SLOW_PAUSES_KEPT pauses of SLOW_PAUSE_MS or
more), and the event loop's lag (a timer due every LAG_SAMPLE_INTERVAL_MS: how late it ran, a
histogram), so a latency spike can be told apart: a collection, the loop busy with a long request, or the machine
(other processes on its cores: the lag grows with no collection under it). `GET /debug/gc` on the
control port and `regionlab_gc_*` in /metrics show them (docs/control-api.md).
"""
import asyncio
import bisect
import gc
import itertools
import time
from collections import deque

GEN0_THRESHOLD = 700               # young objects before a young collection (CPython's own)
GEN1_THRESHOLD = 10
GEN2_THRESHOLD = 10
FREEZE_AFTER_FULL_MS = 5.0         # a full collection this slow freezes what survived it
SLOW_PAUSE_MS = 10.0               # pauses this long are kept one by one
SLOW_PAUSES_KEPT = 200
LAG_SAMPLE_INTERVAL_MS = 50
RELEASE_CHECK_SAMPLES = 20         # the loop's own sampler looks for deletes every this many samples (~1 s)
BUCKETS_MS = (0.1, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, float("inf"))


_FIRST_BOUND_MS = BUCKETS_MS[0]


class Histogram:
    """Counts of durations (ms) at or below each of BUCKETS_MS, plus count, sum and max."""
    __slots__ = ("counts", "n", "total_ms", "max_ms")

    def __init__(self):
        self.counts = [0] * len(BUCKETS_MS)
        self.n = 0
        self.total_ms = 0.0
        self.max_ms = 0.0

    def add(self, ms: float) -> None:
        if ms <= _FIRST_BOUND_MS:            # the loop's lag, nearly always
            self.counts[0] += 1
        elif ms <= BUCKETS_MS[-1]:           # the first bound at or above ms (not a NaN)
            self.counts[bisect.bisect_left(BUCKETS_MS, ms)] += 1
        self.n += 1
        self.total_ms += ms
        if ms > self.max_ms:
            self.max_ms = ms

    def describe(self) -> dict:
        return {"count": self.n, "total_ms": round(self.total_ms, 3), "max_ms": round(self.max_ms, 3),
                "le_ms": {("+Inf" if b == float("inf") else f"{b:g}"): c for b, c in zip(BUCKETS_MS, self.counts)}}


class Collector:
    """The policy and the measurements of one process's collector (see the module docstring)."""

    def __init__(self, account=None, policy: bool = True, freeze_after_full_ms: float = FREEZE_AFTER_FULL_MS,
                 lag_interval_ms: float = LAG_SAMPLE_INTERVAL_MS, timer=None):
        self.account = account
        self.policy = policy
        self.freeze_after_full_ms = freeze_after_full_ms
        # The lag sampler's timer: (now_s, sleep); None is the running loop's clock and
        # asyncio.sleep. Tests pass a virtual one. `sampled` is set after every sample.
        self.lag_interval_ms = lag_interval_ms
        self._timer = timer
        self.sampled = asyncio.Event()
        self.pauses = [Histogram() for _ in range(3)]     # wall time, by generation
        self.pauses_cpu = [Histogram() for _ in range(3)]  # the collecting thread's CPU time
        self.lag = Histogram()
        self.slow: deque = deque(maxlen=SLOW_PAUSES_KEPT)
        self.freezes = 0
        self.unfreezes = 0
        self._t0 = self._cpu0 = 0
        self._started = time.monotonic()
        self._held = self._resources()
        self._seen = self._snapshot()        # what _release_deleted compares with
        self._task = None
        self._time = self._call_later = self._handle = None     # the running loop's, for _tick
        self._interval_s = lag_interval_ms / 1000
        self._due_s = 0.0
        self._until_check = 1                # samples of _tick until it looks for deletes (the first does)
        self._old_threshold = gc.get_threshold()

    # ---- gc callbacks ----------------------------------------------------------------------
    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter_ns()
            self._cpu0 = time.thread_time_ns()
            return
        ms = (time.perf_counter_ns() - self._t0) / 1e6
        cpu_ms = (time.thread_time_ns() - self._cpu0) / 1e6
        generation = info["generation"]
        self.pauses[generation].add(ms)
        self.pauses_cpu[generation].add(cpu_ms)
        if ms >= SLOW_PAUSE_MS:
            self.slow.append({"generation": generation, "ms": round(ms, 2), "cpu_ms": round(cpu_ms, 2),
                              "collected": info["collected"],
                              "at_s": round(time.monotonic() - self._started, 3),
                              "frozen_after": self.policy and generation == 2 and ms >= self.freeze_after_full_ms})
        if self.policy and generation == 2 and ms >= self.freeze_after_full_ms:
            gc.freeze()
            self.freezes += 1

    # ---- the loop's lag, and deletes that frozen cycles would keep ---------------------------
    # On the running loop the sampler is a plain timer callback that re-arms itself: a task
    # sleeping in asyncio.sleep paid a future, its callback, a task step and a coroutine resume
    # per sample (about 30 k instructions under callgrind, 20 times a second in an idle server),
    # and a look at the account every sample (2-3 k more; now every RELEASE_CHECK_SAMPLES).
    def _tick(self) -> None:
        now = self._time()
        late_s = now - self._due_s
        self.lag.add(late_s * 1000 if late_s > 0.0 else 0.0)
        self._until_check -= 1
        if not self._until_check:            # deletes are looked for about once a second
            self._until_check = RELEASE_CHECK_SAMPLES
            self._release_deleted()
        self.sampled.set()
        self._due_s = now + self._interval_s
        self._handle = self._call_later(self._interval_s, self._tick)

    async def _sample(self) -> None:
        """The sampler on an injected timer (tests drive it in virtual time): what _tick does."""
        interval_s = self.lag_interval_ms / 1000
        now_s, sleep = self._timer
        while True:
            due = now_s() + interval_s
            await sleep(interval_s)
            self.lag.add(max(0.0, (now_s() - due) * 1000))
            self._release_deleted()
            self.sampled.set()

    def _resources(self) -> frozenset:
        """What the account holds whose deletion leaves cyclic garbage: databases and containers
        by rid, regions by name. Identities, not counts: a container deleted and another created
        within one sample left the count unchanged, and the deleted one frozen for good."""
        a = self.account
        if a is None:
            return frozenset()
        return frozenset(itertools.chain(a.dbs_by_rid, a.colls_by_rid, (r.name for r in a.regions)))

    def _release_deleted(self) -> None:
        a = self.account
        if a is None:
            return
        dbs, colls, regions = self._seen
        # The same databases, containers and regions as at the last sample, told without
        # building _resources() (which every sample did): key views compare with the sets kept
        # then in C, so a delete and a create within one sample are still told apart.
        if a.dbs_by_rid.keys() == dbs and a.colls_by_rid.keys() == colls and a.regions == regions:
            return
        held = self._resources()
        if not held >= self._held and gc.get_freeze_count():
            gc.unfreeze()
            self.unfreezes += 1
            # Now, between requests: left to CPython's thresholds the next full collection may
            # be many thousands of writes away (stored versions are not tracked, so writes hardly
            # move them), and the deleted container's memory with it (bench/soak.py
            # --delete-cycles). It walks every tracked object: ~0.1 per stored item.
            gc.collect()
        self._held = held
        self._seen = self._snapshot()

    def _snapshot(self) -> tuple:
        """What _release_deleted compares with: (database rids, container rids, regions)."""
        a = self.account
        if a is None:
            return None, None, None
        return frozenset(a.dbs_by_rid), frozenset(a.colls_by_rid), list(a.regions)

    # ---- install / uninstall ---------------------------------------------------------------
    def start(self) -> "Collector":
        if self.policy:
            gc.set_threshold(GEN0_THRESHOLD, GEN1_THRESHOLD, GEN2_THRESHOLD)
            gc.freeze()
            self.freezes += 1
        gc.callbacks.append(self._on_gc)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return self                   # no loop: pauses only (bench scripts)
        if self._timer is not None:
            self._task = loop.create_task(self._sample())
        else:
            self._time, self._call_later = loop.time, loop.call_later
            self._due_s = loop.time() + self._interval_s
            self._handle = loop.call_later(self._interval_s, self._tick)
        return self

    def stop(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self._task is not None:
            self._task.cancel()
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self.policy:
            gc.set_threshold(*self._old_threshold)

    def describe(self) -> dict:
        return {"policy": self.policy, "threshold": list(gc.get_threshold()), "frozen_objects": gc.get_freeze_count(),
                "freezes": self.freezes, "unfreezes": self.unfreezes,
                "pauses_ms": {f"gen{i}": h.describe() for i, h in enumerate(self.pauses)},
                "pauses_cpu_ms": {f"gen{i}": h.describe() for i, h in enumerate(self.pauses_cpu)},
                "slow_pauses": list(self.slow), "slow_pause_ms": SLOW_PAUSE_MS,
                "loop_lag_ms": self.lag.describe(), "loop_lag_interval_ms": self.lag_interval_ms}

    def metrics(self) -> list:
        """Prometheus lines: collector pauses by generation, and the loop's lag."""
        out = ["# HELP regionlab_gc_pause_ms Garbage collector pauses by generation (ms).",
               "# TYPE regionlab_gc_pause_ms histogram"]
        for i, h in enumerate(self.pauses):
            out.extend(_histogram_lines("regionlab_gc_pause_ms", h, f'generation="{i}"'))
        out += ["# HELP regionlab_loop_lag_ms How late a timer due every "
                f"{self.lag_interval_ms:g} ms ran (ms).", "# TYPE regionlab_loop_lag_ms histogram"]
        out.extend(_histogram_lines("regionlab_loop_lag_ms", self.lag, ""))
        out += ["# HELP regionlab_gc_frozen_objects Objects in the permanent generation (gc.freeze).",
                "# TYPE regionlab_gc_frozen_objects gauge", f"regionlab_gc_frozen_objects {gc.get_freeze_count()}"]
        return out


def _histogram_lines(name: str, h: Histogram, labels: str) -> list:
    sep = "," if labels else ""
    out, cumulative = [], 0
    for bound, count in zip(BUCKETS_MS, h.counts):
        cumulative += count
        le = "+Inf" if bound == float("inf") else f"{bound:g}"
        out.append(f'{name}_bucket{{{labels}{sep}le="{le}"}} {cumulative}')
    tail = f"{{{labels}}}" if labels else ""
    out.append(f"{name}_sum{tail} {h.total_ms:.3f}")
    out.append(f"{name}_count{tail} {h.n}")
    return out


def install(account, policy: bool = True) -> Collector:
    """The serving process's collector: policy on (thresholds, freezing) unless policy=False."""
    return Collector(account, policy).start()
