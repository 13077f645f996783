"""The drill's workload: `concurrency` workers driving the bundled client's aio API with the
scenario's operation mix, each operation recorded as one `Op` (when it started, how long it took,
its status, the region that served it, its retries by reason, its charge and the hedged share).

Writes create new items (`w-<run>-<worker>-<n>`), so the record of acknowledged writes is exact: after
the run every acknowledged one is read back in the write region, and the ones no longer there are
the writes the application lost (the report cross-checks them against GET /lost-writes).
"""
import asyncio
import random
import time
from dataclasses import dataclass, field

from regionlab.client import PartitionKey
from regionlab.client.aio import CosmosClient
from regionlab.client.exceptions import CosmosHttpResponseError
from regionlab.client.policies.breaker import UNAVAILABLE

from . import observed
from .verdict import attempt_outcomes

DATABASE = "drill"
CONTAINER = "items"
PREFILL_CONCURRENCY = 16
READBACK_PAGE_ITEMS = 1000             # the query's page size (the service's most)
TRANSPORT_ERROR_STATUS = 0             # no reply at all (connection refused, reset, timed out)


@dataclass
class Op:
    start_ms: float                  # from the start of the drill
    kind: str                        # read, write, query
    status: int
    sub_status: int
    latency_ms: float
    region: str | None               # the region whose reply was final
    retries: list = field(default_factory=list)      # reasons of the retry attempts
    charge: float = 0.0
    hedged_charge: float = 0.0
    item_id: str | None = None       # writes: the item created
    breaker_opened: int = 0          # circuit-breaker transitions to Unavailable it caused
    outcomes: tuple = ()             # writes: each attempt's "ok" / "fail" / "unknown" (verdict.py)
    client_error: str | None = None  # an exception of the client library's own, not a reply (sdk_workload.py)

    @property
    def error_key(self) -> str:
        """How errors_by_status counts it: "503/0", "transport" (no reply) or the client's own error."""
        if self.client_error:
            return self.client_error
        return f"{self.status}/{self.sub_status}" if self.status else "transport"

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300 or (self.kind == "read" and self.status == 404 and self.sub_status == 0)


def reason_class(reason: str) -> str:
    """'429/3200 throttled: retry-after 100 ms (retry 1/9)' -> '429/3200 throttled'."""
    return reason.split(":", 1)[0].split(" (", 1)[0].strip()


def _record(kind: str, start_ms: float, diagnostics, status: int, sub: int, item_id=None) -> Op:
    d = diagnostics
    attempts = d.attempts if d is not None else []
    final = next((a for a in reversed(attempts) if a.status is not None), None)
    retries = [reason_class(a.reason) for a in attempts[1:] if not a.hedge]
    # Direct mode retries inside an attempt too: each 410 that refreshed the address cache.
    retries += [f"direct: address refresh after {r}" for a in attempts if a.direct for r in a.direct["refreshes"]]
    opened = sum(1 for e in (d.events if d is not None else []) if e.kind == "breaker" and e.detail.endswith(UNAVAILABLE))
    return Op(start_ms=start_ms, kind=kind, status=status, sub_status=sub,
              latency_ms=d.latency_ms if d is not None else 0.0,
              region=final.region if final is not None and 200 <= (final.status or 0) < 300 else None,
              retries=retries, charge=sum(a.request_charge for a in attempts),
              hedged_charge=sum(a.request_charge for a in attempts if a.hedge), item_id=item_id,
              breaker_opened=opened, outcomes=_outcomes(kind, attempts, status, sub))


def _outcomes(kind: str, attempts: list, status: int, sub: int) -> tuple:
    if kind != "write":
        return ()
    if attempts:
        return attempt_outcomes(attempts)
    # No diagnostics: the final status is all there is (0: no reply, the write may have applied).
    return (observed.attempt_outcome("create", status or None, sub),)


class Workload:
    partition_key_class = PartitionKey         # the PartitionKey of the workload's client library
    def __init__(self, drill, endpoint: str, key: str, seed: int = 0):
        self.drill = drill
        self.endpoint = endpoint
        self.key = key
        self.rng = random.Random(seed)
        # New ids each run, so a drill against a running emulator never collides with an earlier one.
        self.run_tag = f"{time.time_ns() // 1_000_000 % 16**8:08x}"
        self.ops: list[Op] = []
        self.injected: list[int] = []      # ids of the faults the drill injected
        self.step_started_ms: list[float] = []   # when each schedule step actually ran
        self.active_faults: dict = {}            # fault id -> (label, ends_ms or None): the progress line
        self.knobs_changed: dict = {}            # throttle step name -> the knobs' values before it
        self.started_s = 0.0
        self._stop = asyncio.Event()
        self._client = None
        self._container = None
        self.in_flight: dict = {}         # worker -> when its operation in flight started (guard.py)
        self._excluded = None             # excluded regions a client step set
        self._retired: list = []          # clients a restart step replaced

    def now_ms(self) -> float:
        return (time.monotonic() - self.started_s) * 1000.0

    def _client_kwargs(self) -> dict:
        opts = dict(self.drill.client_options)
        kw = {"preferred_locations": opts.get("preferred_locations"),
              "excluded_locations": opts.get("excluded_locations"),
              "connection_mode": opts.get("connection_mode", "gateway"),
              "multiple_write_locations": opts.get("multiple_write_locations", True)}
        if "availability_strategy" in opts:
            kw["availability_strategy"] = opts["availability_strategy"]
        if "circuit_breaker" in opts:
            kw["circuit_breaker"] = opts["circuit_breaker"]
        if "timeout_s" in opts:
            kw["timeout"] = opts["timeout_s"]
        return kw

    def _new_client(self):
        client = CosmosClient(self.endpoint, self.key, **self._client_kwargs())
        if self._excluded is not None:
            client.excluded_locations = list(self._excluded)
        return client

    async def change_client(self, options: dict) -> None:
        """A client step: the running client's excluded regions (docs/client.md), or a restart:
        a new client, as an application restart makes one (no caches, sessions, or regions it
        had sidelined). The old one finishes its operations in flight and is closed at the end."""
        if "excluded_locations" in options:
            self._excluded = list(options["excluded_locations"])
            self._apply_excluded()
        if options.get("restart"):
            client = self._new_client()
            await client.__aenter__()
            self._retired.append(self._client)
            self._client = client
            self._container = client.get_database_client(DATABASE).get_container_client(CONTAINER)

    def _apply_excluded(self) -> None:
        self._client.excluded_locations = list(self._excluded)

    async def setup(self) -> None:
        self._client = self._new_client()
        await self._client.__aenter__()
        await self.prefill()

    async def prefill(self) -> None:
        """The drill's container, through the workload's client, with its keys written once."""
        db = await self._client.create_database_if_not_exists(DATABASE)
        self._container = await db.create_container_if_not_exists(
            CONTAINER, partition_key=self.partition_key_class(path="/pk"))
        sem = asyncio.Semaphore(PREFILL_CONCURRENCY)

        async def put(i):
            async with sem:
                await self._container.upsert_item({"id": f"k-{i}", "pk": f"k-{i}", "n": i})
        await asyncio.gather(*(put(i) for i in range(self.drill.keys)))

    def start_clock(self) -> None:
        self.started_s = time.monotonic()

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        await asyncio.gather(*(self._worker(w) for w in range(self.drill.concurrency)))

    async def _worker(self, worker: int) -> None:
        interval_s = self.drill.concurrency / self.drill.rate_per_s if self.drill.rate_per_s else 0.0
        kinds, weights = zip(*self.drill.mix.items())
        n = 0
        while not self._stop.is_set():
            began = time.monotonic()
            kind = self.rng.choices(kinds, weights)[0]
            self.in_flight[worker] = self.now_ms()
            self.ops.append(await self._one(kind, worker, n))
            del self.in_flight[worker]
            n += 1
            wait_s = interval_s - (time.monotonic() - began)
            if wait_s > 0:
                try:
                    await asyncio.wait_for(self._stop.wait(), wait_s)
                except asyncio.TimeoutError:
                    pass
            else:
                await asyncio.sleep(0)          # let the progress line and the schedule run

    async def _one(self, kind: str, worker: int, n: int) -> Op:
        start = self.now_ms()
        key = f"k-{self.rng.randrange(self.drill.keys)}"
        item_id = f"w-{self.run_tag}-{worker}-{n}" if kind == "write" else None
        try:
            if kind == "read":
                reply = await self._container.read_item(key, partition_key=key)
                return _record(kind, start, reply.diagnostics, 200, 0)
            if kind == "write":
                reply = await self._container.create_item({"id": item_id, "pk": item_id, "worker": worker})
                return _record(kind, start, reply.diagnostics, 201, 0, item_id)
            pager = self._container.query_items("SELECT * FROM c WHERE c.pk = @pk",
                                                parameters=[{"name": "@pk", "value": key}], partition_key=key)
            last = None
            async for page in pager.by_page():
                last = page.diagnostics
            return _record(kind, start, last, 200, 0)
        except CosmosHttpResponseError as e:
            return _record(kind, start, e.diagnostics, e.status_code or TRANSPORT_ERROR_STATUS,
                           e.sub_status or 0, item_id)
        except (OSError, asyncio.TimeoutError) as e:      # a transport failure the client gave up on
            return Op(start, kind, TRANSPORT_ERROR_STATUS, 0, self.now_ms() - start, None, [type(e).__name__],
                      item_id=item_id, outcomes=(observed.UNKNOWN,) if kind == "write" else ())

    async def read_back(self, write_region: str) -> set:
        """The ids of every write the workload issued (answered or not) that the write region
        has: what the history checker judges each write's fate by. One query of this run's ids
        (they share its prefix), READBACK_PAGE_ITEMS to a page: a point read per write took 24 s
        for the 11,331 writes of `failover` on a loaded 2-core machine."""
        issued = {op.item_id for op in self.ops if op.kind == "write" and op.item_id is not None}
        if not issued:
            return set()
        present = set()
        async with CosmosClient(self.endpoint, self.key, preferred_locations=[write_region]) as client:
            container = client.get_database_client(DATABASE).get_container_client(CONTAINER)
            pages = container.query_items("SELECT VALUE c.id FROM c WHERE STARTSWITH(c.id, @run)",
                                          parameters=[{"name": "@run", "value": f"w-{self.run_tag}-"}],
                                          max_item_count=READBACK_PAGE_ITEMS)
            async for item_id in pages:
                present.add(item_id)
        return present & issued

    async def close(self) -> None:
        for client in self._retired + [self._client]:
            if client is not None:
                await client.close()
