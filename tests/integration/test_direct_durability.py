"""Proves --data-dir keeps what direct mode acknowledged: a real `python -m emulator` process
with a data dir takes upserts, patches, replaces and deletes from the bundled client in direct
mode (each acknowledged outcome recorded), is killed with SIGKILL mid-load and started again on
the same dir and the same gateway port; the same client, its cached replica addresses now
dead, refreshes them and reads every key back through the new nodes, the official azure-cosmos
SDK reads the same through the gateway, and direct writes go on. Real sockets, real processes."""
import asyncio

from azure.cosmos import CosmosClient as SdkClient

from regionlab.client import PartitionKey
from regionlab.client.aio import CosmosClient
from regionlab.client.aio.direct import ADDRESS_REFRESH_MIN_MS
from regionlab.client.exceptions import CosmosHttpResponseError, CosmosResourceNotFoundError
from test_cli import EXIT_TIMEOUT_S, spawn
from test_client_faults import MovableClock
from test_direct_acceptance import _free_block

WRITERS = 4
KEYS_PER_WRITER = 25
ACKS_BEFORE_KILL = 300           # acknowledged direct writes across all writers before the SIGKILL
WRITER_END_S = 60                # the writers notice the dead process within this
REGIONS = 3


def _args(port: int, data) -> tuple:
    return ("--port", str(port), "--control-port", "0", "--direct-ports", "0", "--data-dir", str(data))


def _node_ports(info: dict) -> set:
    return {n["port"] for n in info["direct"]["nodes"]}


def _served_ports(result) -> set:
    """The node ports of the replicas that answered an operation with success (its diagnostics).
    Not every replica that replied: a killed node's port may since belong to another emulator on
    this machine (same key), whose node answers 410 "not here", and the client refreshes."""
    out = set()
    for r in result.diagnostics.to_dict()["replicas_contacted"]:
        if r.get("status") is not None and r["status"] < 300:
            out.add(int(r["address"].rsplit(":", 1)[1].split("/", 1)[0]))
    return out


class Writer:
    """One key space, one write at a time: upserts, a patch every 5th, a replace every 6th and a
    delete every 7th write; each acknowledged outcome kept, and the one in flight."""

    def __init__(self, container, n: int, acks: list):
        self.container, self.n, self.acks = container, n, acks
        self.state: dict = {}          # id -> last acknowledged value (None: deleted)
        self.in_flight = None          # (id, value) sent, not yet answered
        self.refused: list = []        # error replies from a live server: none expected
        self.served_ports: set = set()

    async def run(self, dead) -> None:
        pk = f"p{self.n}"
        i = 0
        while True:
            id = f"w{self.n}-{i % KEYS_PER_WRITER}"
            known = self.state.get(id)
            op = ("delete" if i % 7 == 6 and known is not None else "patch" if i % 5 == 4 and known is not None
                  else "replace" if i % 6 == 5 and known is not None else "upsert")
            value = None if op == "delete" else i
            self.in_flight = (id, value)
            try:
                if op == "delete":
                    r = await self.container.delete_item(id, partition_key=pk)
                elif op == "patch":
                    r = await self.container.patch_item(id, pk, [{"op": "set", "path": "/v", "value": i}])
                elif op == "replace":
                    r = await self.container.replace_item(id, {"id": id, "pk": pk, "v": i})
                else:
                    r = await self.container.upsert_item({"id": id, "pk": pk, "v": i})
            except Exception as e:
                if not dead.is_set() and isinstance(e, CosmosHttpResponseError):
                    self.refused.append(e)
                return                 # the server went away: this write's outcome is unknown
            if r.diagnostics is not None:
                self.served_ports |= _served_ports(r)
            self.state[id] = value
            self.in_flight = None
            self.acks.append(1)
            i += 1


async def _load_then_kill(client, cli):
    db = await client.create_database_if_not_exists("durable")
    container = await db.create_container_if_not_exists("items", partition_key=PartitionKey(path="/pk"),
                                                        offer_throughput=20_000)
    acks, dead = [], asyncio.Event()
    writers = [Writer(container, n, acks) for n in range(WRITERS)]
    tasks = [asyncio.create_task(w.run(dead)) for w in writers]
    while len(acks) < ACKS_BEFORE_KILL and not all(t.done() for t in tasks):
        await asyncio.wait(tasks, timeout=0.05)      # wakes as writers end, else looks again
    dead.set()
    fallbacks = client.direct_transport.fallbacks    # every write so far went to a node, none via the gateway
    cli.proc.kill()                                  # SIGKILL, mid-load: no clean shutdown
    await asyncio.wait_for(asyncio.gather(*tasks), WRITER_END_S)
    assert len(acks) >= ACKS_BEFORE_KILL, [w.refused for w in writers]
    assert [e for w in writers for e in w.refused] == []
    assert fallbacks == 0
    return writers


async def _read_back(client, writers) -> tuple:
    """({id: value, None when absent}, node ports that answered, reads that fell back to the gateway)."""
    c = client.get_database_client("durable").get_container_client("items")
    seen, ports, fallbacks = {}, set(), []
    for w in writers:
        for k in range(KEYS_PER_WRITER):
            id = f"w{w.n}-{k}"
            try:
                r = await c.read_item(id, partition_key=f"p{w.n}")
                diagnostics = r.diagnostics
                seen[id] = r["v"]
                ports |= _served_ports(r)
            except CosmosResourceNotFoundError as e:
                diagnostics = getattr(e, "diagnostics", None)
                seen[id] = None if id in w.state else "never written"
            for a in diagnostics.to_dict()["attempts"] if diagnostics is not None else ():
                if a["direct"] and a["direct"]["fallback"]:
                    fallbacks.append((id, a["direct"]["fallback"],
                                      [(r["address"], r.get("error")) for r in a["direct"]["replicas"]]))
    return seen, ports, fallbacks


def _allowed(w: Writer, id: str) -> set:
    allowed = {w.state.get(id, "never written")}
    if w.in_flight is not None and w.in_flight[0] == id:
        allowed.add(w.in_flight[1])          # the write the kill interrupted: either outcome
    return allowed


def test_direct_writes_acknowledged_before_a_kill_9_are_read_back_direct_and_through_the_gateway(tmp_path):
    data = tmp_path / "data"
    port = _free_block(REGIONS + 1)    # the restart listens on the same gateway ports

    async def main():
        first = spawn(tmp_path, *_args(port, data))
        cli = await asyncio.to_thread(first.__enter__)
        try:
            key, old_nodes = cli.info["key"], _node_ports(cli.info)
            # The client's clock runs ahead on demand: a write cut by the kill may have refetched
            # the addresses from the dying process a moment before it died, and the client does
            # not refetch a set of unreachable replicas it fetched within ADDRESS_REFRESH_MIN_MS
            # (it uses the gateway meanwhile). A restart can beat that window, so the test moves
            # the client's clock past it instead of waiting.
            clock = MovableClock()
            async with CosmosClient(f"http://127.0.0.1:{port}/", credential=key, connection_mode="direct",
                                    timeout=10, clock=clock) as client:
                writers = await _load_then_kill(client, cli)
                await asyncio.to_thread(first.__exit__, None, None, None)
                first = None
                assert all(w.served_ports and w.served_ports <= old_nodes for w in writers)
                second = spawn(tmp_path, *_args(port, data))     # the same dir, the same gateway port
                cli = await asyncio.to_thread(second.__enter__)
                try:
                    assert cli.info["restored_items"] > 0
                    new_nodes = _node_ports(cli.info)
                    clock.advance(ADDRESS_REFRESH_MIN_MS / 1000)
                    fallbacks_before = client.direct_transport.fallbacks   # the writes the kill cut
                    # The dead addresses leave the cache either when a write sent after the kill
                    # finds the primary refusing (its refetch fails: the gateway is dead too) or
                    # when the first read after the restart finds every replica refusing: which
                    # one is a race of the kill, so count the feeds fetched, not the reasons.
                    feeds_before = client.direct_transport.addresses.refreshes
                    seen, ports, fallbacks = await _read_back(client, writers)
                    c = client.get_database_client("durable").get_container_client("items")
                    created = await c.create_item({"id": "after", "pk": "p0", "v": -1})
                    assert fallbacks == [] and client.direct_transport.fallbacks == fallbacks_before, (sorted(new_nodes), fallbacks[:2])
                    assert ports and ports <= new_nodes and _served_ports(created) <= new_nodes
                    assert client.direct_transport.addresses.refreshes > feeds_before, \
                        "the client never refetched the addresses of the killed nodes"
                    through_gateway = await asyncio.to_thread(_read_all_through_the_gateway, cli.info, key)
                finally:
                    await asyncio.to_thread(second.__exit__, None, None, None)
        finally:
            if first is not None:
                await asyncio.to_thread(first.__exit__, None, None, None)
        return writers, seen, through_gateway

    writers, seen, through_gateway = asyncio.run(main())
    for w in writers:
        for k in range(KEYS_PER_WRITER):
            id = f"w{w.n}-{k}"
            assert seen[id] in _allowed(w, id), f"{id} read direct: acknowledged {_allowed(w, id)}, found {seen[id]}"
            found = through_gateway.get(id, None if id in w.state else "never written")
            assert found in _allowed(w, id), f"{id} via the gateway: acknowledged {_allowed(w, id)}, found {found}"
    assert through_gateway["after"] == -1


def _read_all_through_the_gateway(info: dict, key: str) -> dict:
    sdk = SdkClient(info["account_endpoint"], key, retry_total=0, connection_timeout=5)
    container = sdk.get_database_client("durable").get_container_client("items")
    return {d["id"]: d["v"] for d in container.read_all_items()}
