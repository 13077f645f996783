"""A world for the client's pipeline tests: an event loop whose clock is virtual (a wait jumps
the clock to the next timer at once, so a 30 s back-off costs nothing and timings are exact), and
a scripted transport: a second, in-memory implementation of the gateway transport whose regions
answer by a script (a function of the request) after a virtual delay."""
import asyncio
import base64
import json
import selectors

from regionlab.client.aio import CosmosClient
from regionlab.client.aio.transport import Reply, TransportError
from regionlab.client.protocol import headers as H

REGIONS = {"East US": "http://east/", "West US": "http://west/", "North": "http://north/"}
GLOBAL = "http://global/"
KEY = base64.b64encode(b"k" * 32).decode()
# Two partition key ranges with the keys "a" (EPK 3A53...) and "b" (EPK 1956...) in different ones
TWO_RANGES = [{"id": "0", "minInclusive": "", "maxExclusive": "20"},
              {"id": "1", "minInclusive": "20", "maxExclusive": "FF"}]
CONTAINER = {"id": "c", "_self": "dbs/x/colls/y/", "partitionKey": {"paths": ["/pk"], "kind": "Hash"}}


class _VirtualSelector(selectors.SelectSelector):
    def __init__(self):
        super().__init__()
        self.loop = None

    def select(self, timeout=None):
        ready = super().select(0)
        if ready:
            return ready
        if timeout is None:
            raise RuntimeError("the virtual loop would wait forever: nothing is scheduled")
        self.loop.virtual_s += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self):
        selector = _VirtualSelector()
        super().__init__(selector)
        selector.loop = self
        self.virtual_s = 0.0
        self.timers_armed: list = []           # the callback of every call_later/call_at, in order

    def time(self) -> float:
        return self.virtual_s

    def call_at(self, when, callback, *args, context=None):
        self.timers_armed.append(callback)
        return super().call_at(when, callback, *args, context=context)


def run(coro, loop_class=None):
    """coro's result on a fresh VirtualTimeLoop (or loop_class, a subclass of it)."""
    loop = (loop_class or VirtualTimeLoop)()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def account_doc(write=("East US",), read=("East US", "West US", "North"), multi_write=False):
    loc = lambda n: {"name": n, "databaseAccountEndpoint": REGIONS[n]}
    return {"writableLocations": [loc(n) for n in write], "readableLocations": [loc(n) for n in read],
            "enableMultipleWriteLocations": multi_write,
            "userConsistencyPolicy": {"defaultConsistencyLevel": "Session"}}


def reply(status=200, sub=0, body=None, charge=1.0, retry_after_ms=None, session=None):
    headers = {H.SUBSTATUS: str(sub), H.REQUEST_CHARGE: str(charge)}
    if retry_after_ms is not None:
        headers[H.RETRY_AFTER_MS] = str(retry_after_ms)
    if session:
        headers[H.SESSION_TOKEN] = session
    return Reply(status, headers, json.dumps(body if body is not None else {"id": "1"}).encode())


class ScriptedTransport:
    """`script(region_name, method, path, headers)` returns (delay_s, Reply) or
    (delay_s, TransportError); `account` is served at GET / of every endpoint."""

    def __init__(self, script, account=None):
        self.script = script
        self.account = account or account_doc()
        self.sent: list[tuple] = []           # (virtual ms, region, method, path, headers)
        self.account_reads = 0
        self.cancelled = 0
        self.closed = False

    async def send(self, endpoint, method, path, headers, body):
        if path == "/":
            self.account_reads += 1
            return Reply(200, {}, json.dumps(self.account).encode())
        region = next((n for n, e in REGIONS.items() if e == endpoint), endpoint)
        now_ms = asyncio.get_running_loop().time() * 1000
        self.sent.append((now_ms, region, method, path, headers))
        delay_s, outcome = self.script(region, method, path, headers)
        try:
            await asyncio.sleep(delay_s)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        if isinstance(outcome, TransportError):
            raise outcome
        return outcome

    def regions_sent(self) -> list[str]:
        return [s[1] for s in self.sent]

    async def close(self):
        self.closed = True


async def container(transport, **kwargs):
    """(client, container "c" of database "d", read once) on transport, timed by the loop's clock."""
    client = CosmosClient(GLOBAL, KEY, transport=transport, clock=asyncio.get_running_loop().time, **kwargs)
    await client.__aenter__()
    c = client.get_database_client("d").get_container_client("c")
    await c.read()
    return client, c
