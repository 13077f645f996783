"""Direct transport: the operations the direct protocol offers go to the replicas themselves
(docs/direct-protocol.md), everything else to the gateway transport it wraps.

Theory of operation. The pipeline hands every request to `send(endpoint, ...)` as it would to the
gateway transport; `endpoint` is the region the retry policy chose. A document operation the
protocol offers (point operations, batch, a query or read-feed page with a partition key, a
change-feed page of one range) is turned into a request frame: its container's routing map
(partition key ranges, fetched through the gateway) names the range, the address cache the
replicas of (container, range, region), filled from the region's address feed. Writes go to the
primary; reads to the replicas the consistency level allows: Session and weaker any replica
(after 404/1002 the next, then the primary), Strong and Bounded Staleness two replicas at once,
deciding by their LSNs. A 410 (replica moved, not primary, down) or 410/1002 refreshes the
addresses (or the routing map) and tries again; so does a node that refuses the hello because it
belongs to another emulator instance than the address named (410/21005: a stale address, its
emulator restarted or another emulator's node took the port; the endpoint is not marked down).
A refused connection marks the endpoint down and tries another replica (reads) or refreshes the
addresses (writes). When no replica of the region
can be reached (its direct ports are blocked, or every node refuses), the operation falls back to
the gateway transport, which the retry policy fails over as usual. Metadata always goes through
the gateway. Each reply carries `direct`: the replicas contacted, the refreshes and the quorum
decision, which the pipeline puts into the attempt's diagnostics.
"""
import asyncio
import json
import time
import urllib.parse

from multidict import CIMultiDict

from regionlab.client import partition_key as pkmod
from regionlab.client.policies import direct_pool as pool
from regionlab.client.policies.addresses import AddressCache, parse_feed
from regionlab.client.policies.retry import RESPONSE_ERROR, TIMEOUT_ERROR
from regionlab.client.protocol import auth, direct as D, headers as H, status as S

from .direct_nodes import PROTOCOL_VERSION, Endpoint, InstanceMismatch
from .request import API_VERSION, http_date
from .transport import Reply, TransportError

GONE_RETRIES_MAX = 8                     # 410s refreshed and retried inside one attempt
GONE_BACKOFF_MS = (0, 50, 100, 200, 400, 800, 1000, 1000)   # an election takes ~500 ms
SUB_GONE = frozenset((D.SUB_REPLICA_NOT_HERE, D.SUB_NOT_PRIMARY, D.SUB_REPLICA_DOWN, D.SUB_INSTANCE_MISMATCH))
ADDRESS_REFRESH_MIN_MS = 1_000          # unreachable replicas fetched this recently: no refetch, the gateway
QUORUM_LEVELS = frozenset(("Strong", "BoundedStaleness"))
_OPTION_OF_HEADER = {header: name for name, header in D.REQUEST_OPTIONS.items()}
# Request headers that make a feed something the protocol's scoped pages do not carry.
_GATEWAY_ONLY_HEADERS = (H.CHANGE_FEED_WIRE_FORMAT_VERSION, H.READ_KEY_TYPE, H.IS_QUERY_PLAN)


class _Unreachable(Exception):
    """No replica of the region could be reached: the operation goes through the gateway."""


class _Route:
    __slots__ = ("container", "op", "item", "pk", "range_id")

    def __init__(self, container, op, item, pk, range_id):
        self.container, self.op, self.item, self.pk, self.range_id = container, op, item, pk, range_id


def route_of(method: str, path: str, headers: dict) -> _Route | None:
    """The direct operation for a gateway request, or None when it must go through the gateway."""
    segs = path.split("?", 1)[0].strip("/").split("/")
    if len(segs) not in (5, 6) or segs[0] != "dbs" or segs[2] != "colls" or segs[4] != "docs":
        return None
    if any(h in headers for h in _GATEWAY_ONLY_HEADERS):
        return None
    if str(headers.get(H.BATCH_ATOMIC, "")).lower() == "false":
        return None                      # bulk: the protocol's batch frame is atomic; the gateway runs it
    container = "/".join(segs[:4])
    pk, range_id = headers.get(H.PARTITION_KEY), headers.get(H.PK_RANGE_ID)
    if len(segs) == 6:
        op = {"GET": D.READ, "PUT": D.REPLACE, "DELETE": D.DELETE, "PATCH": D.PATCH}.get(method)
        item = urllib.parse.unquote(segs[5])
    else:
        item = None
        if method == "POST":
            op = D.BATCH if H.IS_BATCH in headers else D.QUERY if H.IS_QUERY in headers \
                else D.UPSERT if H.IS_UPSERT in headers else D.CREATE
        elif method == "GET":
            op = D.CHANGE_FEED if headers.get(H.A_IM) == H.A_IM_INCREMENTAL else D.READ_FEED
        else:
            op = None
    if op is None or (pk is None and range_id is None):
        return None                      # a cross-partition feed: the gateway fans it out
    return _Route(container, op, item, pk, range_id)


class DirectTransport:
    def __init__(self, key: str, gateway, consistency=lambda: None, options: pool.PoolOptions | None = None,
                 clock=None):
        self.key = key
        self.gateway = gateway
        self.signer = auth.MasterKeySigner(key)
        self.consistency = consistency       # the account's default level (a callable: it can change)
        self.options = options or pool.PoolOptions()
        self.clock = clock or time.perf_counter
        self.addresses = AddressCache()
        self.endpoints: dict[tuple, Endpoint] = {}
        self._maps: dict[tuple, pkmod.RangeMap] = {}   # per (region endpoint, container)
        self._fetching: dict[tuple, asyncio.Future] = {}
        self._housekeeper: asyncio.Task | None = None
        self._opened = asyncio.Event()       # a connection opened: its heartbeat may be shorter
        self.fallbacks = 0

    def _now_ms(self) -> float:
        return self.clock() * 1000.0

    # ---- the transport interface -------------------------------------------------------
    async def send(self, endpoint: str, method: str, path: str, headers: dict, body: bytes | None) -> Reply:
        route = route_of(method, path, headers)
        if route is None:
            return await self.gateway.send(endpoint, method, path, headers, body)
        info = {"replicas": [], "refreshes": [], "quorum": None, "fallback": None}
        try:
            return await self._direct(endpoint, route, headers, body, info)
        except _Unreachable as e:
            self.fallbacks += 1
            info["fallback"] = f"gateway: {e}"
            reply = await self.gateway.send(endpoint, method, path, headers, body)
            reply.direct = info
            return reply

    async def close(self) -> None:
        if self._housekeeper is not None:
            self._housekeeper.cancel()
            await asyncio.gather(self._housekeeper, return_exceptions=True)
        endpoints, self.endpoints = list(self.endpoints.values()), {}
        for ep in endpoints:
            await asyncio.gather(*(c.close() for c in ep.connections), return_exceptions=True)
        await self.gateway.close()

    # ---- one direct operation ------------------------------------------------------------
    async def _direct(self, endpoint, route, headers, body, info) -> Reply:
        options = {name: headers[h] for h, name in _OPTION_OF_HEADER.items() if h in headers}
        write = route.op in D.WRITE_OPERATIONS
        level = headers.get(H.CONSISTENCY_LEVEL) or self.consistency()
        for attempt in range(GONE_RETRIES_MAX + 1):
            if attempt:
                await asyncio.sleep(GONE_BACKOFF_MS[min(attempt, len(GONE_BACKOFF_MS)) - 1] / 1000.0)
            rmap = await self._routing_map(endpoint, route.container, info)
            try:
                range_id = route.range_id or rmap.range_of_key(route.pk)
            except (ValueError, TypeError) as e:
                raise _Unreachable(f"cannot place the partition key: {e}") from None
            rs = await self._replica_set(endpoint, route.container, range_id, info)
            frame_of = lambda rid, key: D.request_frame(PROTOCOL_VERSION, rid, route.op, key, options, body, route.item)
            if write and rs.primary is None:     # the feed lists no live primary: an election runs
                self._invalidate(route.container, range_id, endpoint, "no primary in the feed (election)", info)
                continue
            if write:
                res = await self._write(rs, frame_of, info)
            elif level in QUORUM_LEVELS and route.op == D.READ:
                res = await self._quorum_read(rs, frame_of, info)
            else:
                res = await self._read(rs, frame_of, info)
            if res is None:              # nothing reachable: refresh once, then the gateway
                if attempt >= 1 or self._now_ms() - rs.fetched_ms < ADDRESS_REFRESH_MIN_MS:
                    raise _Unreachable("no replica of the region accepts connections")
                self._invalidate(route.container, range_id, endpoint, "no replica reachable", info)
                continue
            status, sub = res.get("status"), int(res.get("sub") or 0)
            if status == S.GONE and (sub in SUB_GONE or sub == D.SUB_PARTITION_KEY_RANGE_GONE):
                if sub == D.SUB_PARTITION_KEY_RANGE_GONE:
                    self._maps.pop((endpoint, route.container), None)
                self._invalidate(route.container, range_id if sub in SUB_GONE else None, endpoint,
                                 f"410/{sub}", info)
                continue
            return _as_reply(res, info)
        raise _Unreachable(f"still 410 after {GONE_RETRIES_MAX} address refreshes")

    def _invalidate(self, container, range_id, endpoint, reason, info) -> None:
        self.addresses.invalidate(container, range_id, endpoint)
        info["refreshes"].append(reason)

    async def _write(self, rs, frame_of, info) -> dict | None:
        primary = self.addresses.write_target(rs, self._now_ms())
        if primary is None:
            return None
        return await self._call(primary, frame_of, info, write=True)

    async def _read(self, rs, frame_of, info) -> dict | None:
        last = None
        for replica in self.addresses.read_order(rs, self._now_ms()):
            res = await self._call(replica, frame_of, info)
            if res is None:
                continue
            last = res
            if (res.get("status"), int(res.get("sub") or 0)) != (S.NOT_FOUND, D.SUB_READ_SESSION_NOT_AVAILABLE):
                return res
        return last

    async def _quorum_read(self, rs, frame_of, info) -> dict | None:
        order = self.addresses.read_order(rs, self._now_ms())
        replies = []
        while order and len(replies) < 2:
            need = 2 - len(replies)
            batch, order = order[:need], order[need:]
            got = await asyncio.gather(*(self._call(r, frame_of, info) for r in batch))
            replies += [(r, res) for r, res in zip(batch, got) if res is not None]
        answered = [(r, res) for r, res in replies if res.get("status") in (200, 304, 404)]
        if len(answered) < 2:
            info["quorum"] = f"only {len(answered)} of 2 replicas answered"
            return replies[0][1] if replies else None
        best = max(answered, key=lambda p: int(p[1].get("lsn") or 0))
        committed = max(int(res.get("quorum_lsn") or 0) for _, res in answered)
        lsns = ", ".join(f"replica {r.index} lsn {res.get('lsn')}" for r, res in answered)
        if int(best[1].get("lsn") or 0) >= committed:
            info["quorum"] = f"{lsns}; quorum lsn {committed}: replica {best[0].index} answers"
            return best[1]
        primary = rs.primary
        info["quorum"] = f"{lsns}; both below the quorum lsn {committed}: the primary answers"
        res = await self._call(primary, frame_of, info) if primary is not None else None
        return res or best[1]

    async def _call(self, replica, frame_of, info, write=False) -> dict | None:
        """The reply of one replica, or None when its node refused (the endpoint is marked down)."""
        entry = {"address": f"{replica.host}:{replica.port}", "node": replica.node, "replica": replica.index,
                 "role": replica.role, "region": replica.region}
        info["replicas"].append(entry)
        try:
            ep = self._endpoint(replica)
            conn = await ep.acquire()
        except (OSError, asyncio.TimeoutError) as e:
            entry["error"] = f"connect: {e!r}"
            self.addresses.mark_down(replica.endpoint, self._now_ms())
            return None
        except InstanceMismatch as e:    # a stale address: answered as the node's 410, so it is refreshed
            entry.update(error=f"handshake: {e}", status=S.GONE, sub=D.SUB_INSTANCE_MISMATCH)
            return {"status": S.GONE, "sub": D.SUB_INSTANCE_MISMATCH}
        try:
            frame = await conn.call(lambda rid: frame_of(rid, replica.key), self.options.request_timeout_s)
        except asyncio.TimeoutError:
            entry["error"] = "timeout"
            raise TransportError(TIMEOUT_ERROR, f"replica {replica.key} at {entry['address']} did not answer "
                                                f"in {self.options.request_timeout_s} s") from None
        except OSError as e:
            entry["error"] = f"connection: {e}"
            self.addresses.mark_down(replica.endpoint, self._now_ms())
            if not write:
                return None              # a read may go to another replica; a write may have happened
            raise TransportError(RESPONSE_ERROR, f"the connection to {entry['address']} broke: {e}") from None
        self.addresses.mark_up(replica.endpoint)
        res = D.named_reply(frame)
        entry.update(status=res.get("status"), sub=int(res.get("sub") or 0), lsn=res.get("lsn"),
                     served_by=res.get("role"))
        return res

    def _endpoint(self, replica) -> Endpoint:
        """The pool of the replica's node, keyed by host:port and the instance its address names."""
        pool_key = replica.pool_key
        ep = self.endpoints.get(pool_key)
        if ep is None:
            ep = self.endpoints[pool_key] = Endpoint(replica.endpoint, self.key, self.options, self.clock,
                                                     self._opened.set, replica.instance)
            if self._housekeeper is None:
                self._housekeeper = asyncio.get_running_loop().create_task(self._housekeeping())
        return ep

    async def _housekeeping(self) -> None:
        while True:
            beats = [c.heartbeat_s for ep in self.endpoints.values() for c in ep.connections]
            try:
                await asyncio.wait_for(self._opened.wait(), min(beats, default=D.HEARTBEAT_INTERVAL_S) / 3)
            except asyncio.TimeoutError:
                pass
            self._opened.clear()
            now = self.clock()
            for address, ep in list(self.endpoints.items()):
                if pool.endpoint_expired(self.options, ep.last_used, now):
                    closing, ep.connections = ep.connections, []
                    del self.endpoints[address]
                else:
                    closing = ep.housekeeping(now)
                for c in closing:
                    await c.close()

    # ---- caches --------------------------------------------------------------------------
    async def _shared(self, key, make):
        fut = self._fetching.get(key)
        if fut is not None:
            return await asyncio.shield(fut)
        fut = self._fetching[key] = asyncio.get_running_loop().create_future()
        try:
            value = await make()
            fut.set_result(value)
            return value
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()
            raise
        finally:
            del self._fetching[key]

    async def _routing_map(self, endpoint, container, info) -> pkmod.RangeMap:
        rmap = self._maps.get((endpoint, container))
        if rmap is None:
            async def fetch():
                body = await self._get(endpoint, f"/{container}/pkranges", {H.MAX_ITEM_COUNT: "-1"})
                self._maps[(endpoint, container)] = m = pkmod.RangeMap(body.get("PartitionKeyRanges", []))
                return m
            rmap = await self._shared(("map", endpoint, container), fetch)
        return rmap

    async def _replica_set(self, endpoint, container, range_id, info):
        rs = self.addresses.get(container, range_id, endpoint)
        if rs is None:
            await self._shared(("addresses", endpoint, container), lambda: self.fill(endpoint, container))
            rs = self.addresses.get(container, range_id, endpoint)
            if rs is None:
                raise _Unreachable(f"the address feed lists no replicas of range {range_id}")
        return rs

    async def fill(self, endpoint, container) -> int:
        """Fetch the region's address feed of a container into the cache; the ranges it had."""
        query = (f"$resolveFor={container}/docs&$filter=protocol%20eq%20{D.PROTOCOL}")
        body = await self._get(endpoint, f"/addresses/?{query}", {}, ("addresses", ""))
        sets = parse_feed(body, self._now_ms())
        self.addresses.put(container, endpoint, sets)
        return len(sets)

    async def _get(self, endpoint, path, extra, signed=None) -> dict:
        resource_type, link = signed or auth.resource_type_and_link(path)
        date = http_date()
        headers = dict(extra, **{H.X_MS_DATE: date, H.X_MS_VERSION: API_VERSION,
                                 H.AUTHORIZATION: self.signer.header("GET", resource_type, link, date)})
        try:
            reply = await self.gateway.send(endpoint, "GET", path, headers, None)
        except TransportError as e:
            raise _Unreachable(f"routing metadata from {endpoint}: {e}") from None
        if reply.status != 200:
            raise _Unreachable(f"routing metadata from {endpoint}: {reply.status} {reply.body[:200]!r}")
        return json.loads(reply.body)

    # ---- warm-up -----------------------------------------------------------------------------
    async def warm_up(self, endpoint, container) -> int:
        """Fill the region's caches for a container and open one connection per replica endpoint;
        the number of connections opened."""
        await self._routing_map(endpoint, container, None)
        await self.fill(endpoint, container)
        opened = 0
        seen = set()
        for (c, _, region), rs in list(self.addresses._sets.items()):
            if c != container or region != endpoint:
                continue
            for r in rs.replicas:
                if r.up and r.pool_key not in seen:
                    seen.add(r.pool_key)
                    ep = self._endpoint(r)
                    if not [c for c in ep.connections if not c.closed]:
                        try:
                            await ep._open()
                            opened += 1
                        except (OSError, asyncio.TimeoutError):
                            self.addresses.mark_down(r.endpoint, self._now_ms())
                        except InstanceMismatch:
                            pass         # a stale feed: the first request refreshes it
        return opened

    def connection_count(self) -> int:
        return sum(len([c for c in ep.connections if not c.closed]) for ep in self.endpoints.values())


def _as_reply(res: dict, info: dict) -> Reply:
    headers = CIMultiDict()
    headers[H.SUBSTATUS] = str(int(res.get("sub") or 0))
    headers[H.REQUEST_CHARGE] = str(float(res.get("charge") or 0.0))
    for name, header in D.REPLY_HEADERS:
        v = res.get(name)
        if v is not None:
            headers[header] = str(v)
    reply = Reply(int(res["status"]), headers, res.get("body") or b"")
    reply.direct = info
    return reply
