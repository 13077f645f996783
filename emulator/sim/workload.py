"""The correctness workload: a few clients issuing item operations against the account.

Theory of operation: each client has a home region for reads, a consistency level (no
stronger than the account's), the region it believes takes writes, and session tokens per
container ({range_id: VectorToken}, merged from every reply as the SDK merges them). A client
runs one operation at a time: it issues the next THINK_MS_MAX-bounded while after the last one
completed, until the workload has invoked `steps` operations (and, when a scenario runs, until
its last step is past). Operations: create, upsert, replace, delete of a small set of keys
(contention on purpose), point reads and whole-partition snapshot reads.

Like the SDK, a client that is refused a write with 403/3 refreshes its idea of the write
region (the account's current one), and a client whose read region answers 503 marks it
unavailable for UNAVAILABLE_MS and reads from the next region of its preference list meanwhile,
then tries its preferred region again.
"""
from ..core.consistency import BOUNDED, EVENTUAL, PREFIX, SESSION, STRONG
from ..core.errors import SUB_WRITE_FORBIDDEN
from .world import WRITE_FS, World, token_merge

THINK_MS_MAX = 100
UNAVAILABLE_MS = 1_000
WRITE_SHARE = 0.45
SNAPSHOT_SHARE = 0.1
READ_LEVELS = {STRONG: (STRONG, STRONG, SESSION), BOUNDED: (BOUNDED, SESSION), SESSION: (SESSION, SESSION, PREFIX),
               PREFIX: (PREFIX, EVENTUAL), EVENTUAL: (EVENTUAL,)}


class Client:
    __slots__ = ("id", "regions", "unavailable", "consistency", "write_region", "tokens")

    def __init__(self, id: int, regions: list, consistency: str, write_region: str):
        self.id = id
        self.regions = regions               # preference order for reads
        self.unavailable: dict = {}          # region -> until when (ms) reads avoid it
        self.consistency = consistency
        self.write_region = write_region
        self.tokens: dict = {}               # container -> {range_id: VectorToken}

    def read_region(self, now_ms: int) -> str:
        for r in self.regions:
            if self.unavailable.get(r, 0) <= now_ms:
                return r
        return self.regions[0]


class Workload:
    def __init__(self, world: World, rng, clients: int, steps: int):
        self.world = world
        self.rng = rng
        self.steps = steps
        self.invoked = 0
        self.not_before_ms = 0               # keep invoking until then, even past `steps`
        acct = world.account
        names = [r.name for r in acct.regions]
        self.clients = []
        for i in range(clients):
            home = i % len(names)
            prefs = names[home:] + names[:home]
            level = rng.choice(READ_LEVELS[acct.consistency])
            self.clients.append(Client(i, prefs, level, acct.hub_region))

    @property
    def done(self) -> bool:
        return self.invoked >= self.steps and self.world.now_ms >= self.not_before_ms

    def start(self) -> None:
        for c in self.clients:
            self._schedule(c)

    def _schedule(self, c: Client) -> None:
        if self.done:
            return
        self.world.scheduler.call_at(self.world.now_ms + self.rng.randint(0, THINK_MS_MAX), self._issue, c)

    def _issue(self, c: Client) -> None:
        if self.done:
            return
        self.invoked += 1
        w = self.world
        container = self.rng.choice(sorted(w.containers))
        key = self.rng.choice(w.keys)
        roll = self.rng.random()
        if roll < WRITE_SHARE:
            f = self.rng.choice(("create", "upsert", "upsert", "replace", "delete"))
            op = w.history.invoke(w.now_ms, client=c.id, f=f, container=container, key=key,
                                  partition=w.partition_of(container, key).range_id,
                                  region=c.write_region, consistency=None, lost=False)
            w.write(op, lambda op, tokens: self._completed(c, op, tokens))
            return
        partition = w.partition_of(container, key)
        f = "snapshot" if roll > 1 - SNAPSHOT_SHARE else "read"
        if f == "snapshot":
            partition = self.rng.choice(w.containers[container].partitions)
            key = None
        session = dict(c.tokens.get(container, {}))
        sent = session.get(partition.range_id)
        op = w.history.invoke(w.now_ms, client=c.id, f=f, container=container, key=key,
                              partition=partition.range_id, region=c.read_region(w.now_ms),
                              consistency=c.consistency,
                              sent_token=None if sent is None else [sent.version, sent.global_lsn])
        w.read(op, session or None, lambda op, tokens: self._completed(c, op, tokens))

    def _completed(self, c: Client, op: dict, tokens: dict | None) -> None:
        acct = self.world.account
        if op["outcome"] == "ok":
            token_merge(c.tokens.setdefault(op["container"], {}), tokens)
        elif op.get("status") == 403 and op.get("substatus") == SUB_WRITE_FORBIDDEN:
            c.write_region = acct.hub_region
        elif op.get("status") == 503 and op["f"] in WRITE_FS:
            c.write_region = acct.hub_region
        elif op.get("status") == 503:
            c.unavailable[op["region"]] = self.world.now_ms + UNAVAILABLE_MS
        self._schedule(c)
