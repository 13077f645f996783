"""One direct-mode client connection to a node (docs/direct-protocol.md; see direct_server.py).

States: hello -> auth -> ready -> closing. Frames out of place, bad bytes and timeouts end the
connection with an error frame; nothing a peer sends raises out of this class or leaves a task
behind (connection_lost cancels whatever is still in flight).
"""
import asyncio
import logging
import os

from client.protocol import direct as D
from client.protocol import headers as H

from ..core.errors import CosmosError, bad_request, not_found
from ..gateway import documents, partition_keys, responses, sessions
from .direct_server import (CLOSE_GRACE_S, WRITE_BUFFER_HIGH_BYTES, DirectCall, _OP_HEADERS,
                            _REPLY_FIELDS, _SCOPED_FEEDS, _HANDSHAKE, _AUTH, _READY, _CLOSING, carry_on)

log = logging.getLogger("regionlab.direct")


class DirectConnection(asyncio.Protocol):
    def __init__(self, node):
        self.node = node
        self.plane = node.plane
        self.transport = None
        self.decoder = D.FrameDecoder()
        self.state = _HANDSHAKE
        self.nonce = b""
        self.in_flight: dict = {}            # request id -> task (only requests that suspended)
        self.pending = 0                     # requests begun and not answered (with the suspended ones)
        self._out: list = []
        self._in_data = False
        self._flush_scheduled = False
        self.loop = None
        self.opened = self.last_rx = 0.0
        self.frame_since = 0.0               # when the incomplete frame began (0: none)
        self.closed = False
        self.gw = None                       # the region's Gateway whose functions requests run

    # ---- asyncio.Protocol ---------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        self.loop = asyncio.get_running_loop()
        self.opened = self.last_rx = self.loop.time()
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH_BYTES)
        if len(self.node.connections) >= self.plane.max_connections:
            self.fail(503, D.SUB_BUSY, f"Node {self.node.index} of {self.node.region} has "
                                       f"{self.plane.max_connections} connections, its limit.")
            return
        self.node.connections.add(self)
        self.gw = self.plane.gateways.get(self.node.region)

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.node.connections.discard(self)
        for task in self.in_flight.values():
            task.cancel()
        self.in_flight.clear()

    def pause_writing(self) -> None:
        self.transport.pause_reading()       # a peer that does not read gets no more served

    def resume_writing(self) -> None:
        if not self.closed:
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.last_rx = now = self.loop.time()
        self._in_data = True
        try:
            try:
                frames = self.decoder.feed(data)
            except D.ProtocolError as e:
                for frame in e.frames:
                    self._frame(frame)
                self.fail(e.status, e.substatus, e.message)
                return
            for frame in frames:
                if self.closed:
                    break
                self._frame(frame)
            if self.frame_since or self.decoder.pending:
                self.frame_since = (self.frame_since or now) if self.decoder.pending else 0.0
        finally:
            self._in_data = False
            self._flush()

    # ---- frames ------------------------------------------------------------------------
    def _frame(self, frame: dict) -> None:
        if self.closed:
            return
        t = frame["t"]
        state = self.state
        if state == _READY:
            if t == D.REQUEST:
                self._request(frame)
            elif t == D.PING:
                self._send({"t": D.PONG})
            elif t == D.PONG:
                pass
            elif t == D.BYE:
                self.state = _CLOSING
                self._maybe_finish_close()
            else:
                self.fail(400, D.SUB_HANDSHAKE if t in (D.HELLO, D.AUTH) else D.SUB_BAD_FRAME,
                          f"A '{t[:40]}' frame is not allowed on a ready connection.")
        elif state == _HANDSHAKE:
            self._hello(frame) if t == D.HELLO else self._out_of_place(t, D.HELLO)
        elif state == _AUTH:
            self._auth(frame) if t == D.AUTH else self._out_of_place(t, D.AUTH)
        # closing: the client said bye; what it sends after that is ignored

    def _out_of_place(self, t: str, expected: str) -> None:
        self.fail(400, D.SUB_HANDSHAKE, f"Expected a '{expected}' frame during the handshake, got '{t[:40]}'.")

    def _hello(self, frame: dict) -> None:
        version = D.choose_version(frame.get("versions"))
        if version is None:
            self.fail(400, D.SUB_VERSION, f"No protocol version in common: the node speaks "
                                          f"{list(D.PROTOCOL_VERSIONS)}, the client offered {str(frame.get('versions'))[:60]}.")
            return
        self.nonce = os.urandom(D.NONCE_BYTES)
        self.state = _AUTH
        plane = self.plane
        self._send({"t": D.CHALLENGE, "version": version, "nonce": self.nonce, "node": self.node.index,
                    "region": self.node.region, "max_in_flight": plane.max_in_flight,
                    "max_frame_bytes": self.decoder.max_frame_bytes,
                    "idle_timeout_ms": int(plane.idle_timeout_s * 1000),
                    "heartbeat_ms": int(D.HEARTBEAT_INTERVAL_S * 1000)})

    def _auth(self, frame: dict) -> None:
        key = self.plane.key
        if key is not None and not D.mac_matches(key, self.nonce, frame.get("mac")):
            self.fail(401, 0, "Authentication failed: 'mac' must be HMAC-SHA256 of the challenge's nonce "
                              "with the account key.")
            return
        self.state = _READY
        self._send({"t": D.READY})

    # ---- requests ----------------------------------------------------------------------
    def _request(self, frame: dict) -> None:
        rid = frame.get("id")
        if type(rid) is not int or not 0 <= rid <= D.REQUEST_ID_MAX:
            self.fail(400, D.SUB_BAD_REQUEST_FRAME, f"A request needs an integer 'id' 0-{D.REQUEST_ID_MAX}.")
            return
        if rid in self.in_flight:
            self._send_error(rid, frame, CosmosError(400, D.SUB_BAD_REQUEST_FRAME,
                                                     f"Request id {rid} is already in flight on this connection."))
            return
        if self.pending >= self.plane.max_in_flight:
            self._send_error(rid, frame, CosmosError(
                429, D.SUB_BUSY, f"This connection has {self.plane.max_in_flight} requests in flight, the node's "
                                 "limit (max_in_flight); nothing of this request was applied.",
                retry_after_ms=D.BUSY_RETRY_AFTER_MS))
            return
        op = frame.get("op")
        try:
            call, target, item = self._prepare(frame, op)
        except CosmosError as e:
            self._send_error(rid, frame, e)
            return
        self.pending += 1
        target.replica.in_flight += 1
        if op == D.READ:                     # a read never waits: no coroutine needed
            try:
                result = _read(call, target, item)
            except CosmosError as e:
                result = responses.error(e, call.activity_id)
            except Exception:
                log.exception("internal error in a direct read")
                result = responses.error(CosmosError(500, 0, "Internal error in regionlab; see the server log.",
                                                     definite=False), call.activity_id)
            self._answer(rid, op, call, target, result)
            return
        coro = _serve(call, target, op, item)
        try:
            waiting = coro.send(None)
        except StopIteration as done:
            self._answer(rid, op, call, target, done.value)
            return
        task = self.loop.create_task(carry_on(coro, waiting))
        self.in_flight[rid] = task
        task.add_done_callback(lambda t: self._finished(rid, op, call, target, t))

    def _prepare(self, frame: dict, op):
        spec = D.OPERATIONS.get(op)
        if spec is None:
            raise CosmosError(400, D.SUB_BAD_REQUEST_FRAME, f"Unknown operation {str(op)[:40]!r}; one of "
                                                            f"{', '.join(D.OPERATIONS)}.")
        method, has_item = spec
        target = self.node.resolve(frame.get("replica"), op in D.WRITE_OPERATIONS)
        headers = {}
        options = D.REQUEST_OPTIONS
        for name, value in frame.items():
            header = options.get(name)
            if header is None:
                continue
            if type(value) is int and name == "max_items":
                value = str(value)
            elif not isinstance(value, str):
                raise bad_request(f"Request field '{name}' must be a string.")
            headers[header] = value
        extra = _OP_HEADERS.get(op)
        if extra:
            headers.update(extra)
        if op in _SCOPED_FEEDS:
            headers[H.PK_RANGE_ID] = target.partition.range_id
        elif "pk" in frame and op != D.READ:       # a read checks the replica set it lands on
            _check_range(target, headers[H.PARTITION_KEY])
        item = None
        if has_item:
            item = frame.get("item")
            if not isinstance(item, str) or not item:
                raise bad_request(f"Operation '{op}' needs the item's id in 'item'.")
        body = frame.get("body")
        if body is None:
            body = b""
        elif not isinstance(body, bytes):
            raise bad_request("'body' must be the JSON request body as bytes (a msgpack bin).")
        activity = headers.get(H.ACTIVITY_ID) or responses.activity_id()
        return DirectCall(self.gw, method, headers, body, activity, target.replica if op == D.READ else None), target, item

    def _finished(self, rid: int, op: str, call, target, task) -> None:
        self.in_flight.pop(rid, None)
        if task.cancelled():
            target.replica.in_flight -= 1
            self.pending -= 1
            return
        exc = task.exception()
        if exc is not None:                   # _serve catches everything; this is a last resort
            log.error("internal error in direct %s", op, exc_info=exc)
            reply = responses.error(CosmosError(500, 0, "Internal error in regionlab; see the server log.",
                                                definite=False), call.activity_id)
        else:
            reply = task.result()
        self._answer(rid, op, call, target, reply)

    def _answer(self, rid: int, op: str, call, target, reply) -> None:
        self.pending -= 1
        replica = target.replica
        replica.in_flight -= 1
        if type(reply) is dict:              # a point operation's fields (_read, _write)
            res = reply
        else:                                # a gateway Reply (feeds, queries, batches, errors)
            h = reply.headers
            res = {"status": reply.status, "sub": reply.substatus, "body": reply.body or None,
                   "charge": float(h.get(H.REQUEST_CHARGE, 0.0))}
            for header, field, as_int in _REPLY_FIELDS:
                v = h.get(header)
                if v is not None:
                    res[field] = int(v) if as_int else v
        res["t"] = D.RESPONSE
        res["id"] = rid
        res["activity_id"] = call.activity_id
        res["lsn"] = replica.applied_lsn
        res["quorum_lsn"] = target.rs.committed_lsn
        res["global_lsn"] = target.partition.global_lsn
        res["role"] = replica.role
        self.node.requests[(op, res["status"], res["sub"])] += 1
        target.counter[target.key] += 1
        self._send(res)
        if self.state == _CLOSING:
            self._maybe_finish_close()

    def _send_error(self, rid: int, frame: dict, err: CosmosError) -> None:
        op = frame.get("op") if isinstance(frame.get("op"), str) and frame.get("op") in D.OPERATIONS else "other"
        activity = frame.get("activity_id") if isinstance(frame.get("activity_id"), str) else responses.activity_id()
        reply = responses.error(err, activity)
        res = {"t": D.RESPONSE, "id": rid, "status": err.status, "sub": err.substatus, "body": reply.body,
               "charge": 0.0, "activity_id": activity}
        if err.retry_after_ms is not None:
            res["retry_after_ms"] = int(err.retry_after_ms)
        self.node.requests[(op, err.status, err.substatus)] += 1
        self._send(res)

    # ---- output, closing, deadlines ------------------------------------------------------
    def _send(self, frame: dict) -> None:
        if self.closed:
            return
        self._out.append(D.encode(frame))
        if not self._in_data and not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out = self._out
        if out and not self.closed:
            self.transport.write(out[0] if len(out) == 1 else b"".join(out))
        out.clear()

    def fail(self, status: int, sub: int, message: str) -> None:
        """End the connection: an error frame, then close (abort if it does not drain in time)."""
        if self.closed:
            return
        self._send({"t": D.ERROR, "status": status, "sub": sub, "message": message})
        self._close()

    def goodbye(self) -> None:
        if not self.closed:
            self._send({"t": D.BYE})
            self._close()

    def _maybe_finish_close(self) -> None:
        if self.pending == 0:
            self.goodbye()

    def _close(self) -> None:
        self._flush()
        self.closed = True
        self.node.connections.discard(self)
        transport = self.transport
        transport.close()
        self.loop.call_later(CLOSE_GRACE_S, transport.abort)
        for task in self.in_flight.values():
            task.cancel()

    def abort(self) -> None:
        """The node stopped listening (crash, outage, blocked ports): drop at once, no goodbye."""
        self.closed = True
        self.node.connections.discard(self)
        self.transport.abort()

    def check_deadlines(self, now: float) -> None:
        plane = self.plane
        if self.state in (_HANDSHAKE, _AUTH):
            if now - self.opened > plane.handshake_timeout_s:
                self.fail(408, D.SUB_HANDSHAKE, f"The handshake did not finish within {plane.handshake_timeout_s:g} s.")
        elif self.frame_since and now - self.frame_since > plane.frame_timeout_s:
            self.fail(408, D.SUB_IDLE, f"A frame was not complete within {plane.frame_timeout_s:g} s.")
        elif not self.pending and now - self.last_rx > plane.idle_timeout_s:
            self.fail(408, D.SUB_IDLE, f"Nothing arrived for {plane.idle_timeout_s:g} s (idle timeout); "
                                       "send pings to keep a connection open.")


def _range_gone(target, pk_json: str) -> CosmosError:
    return CosmosError(410, D.SUB_PARTITION_KEY_RANGE_GONE,
                       f"The partition key {pk_json[:80]} is not in range {target.partition.range_id}; "
                       "refresh the partition key ranges and addresses.")


def _check_range(target, pk_header: str) -> None:
    """A point operation's key must hash into the named replica's range (else the client's
    routing map is stale: 410/1002)."""
    container = target.container
    pk_json, values = partition_keys.parse(pk_header)
    if len(values) != len(container.pk_def.paths):
        return                               # the handler answers the 400 the gateway would
    if len(container.partitions) == 1:
        return                               # every key is in the only range
    index = container.partition_index(container.epk_of(pk_json, values))
    if container.partitions[index] is not target.partition:
        raise _range_gone(target, pk_json)


_STAGED_CREATES = frozenset((D.CREATE, D.UPSERT))
_STAGED_ITEM_WRITES = frozenset((D.REPLACE, D.DELETE, D.PATCH))


def _read(call, target, item: str) -> dict:
    """A point read at the named replica, through the gateway's own read_target/read_point."""
    container = target.container
    rs, pk_json, id, consistency, session = documents.read_target(call, container, item, False)
    if rs is not target.rs:
        raise _range_gone(target, pk_json)
    version, lsn, ru = documents.read_point(call, container, rs, pk_json, id, consistency, session)
    out = {"status": 200, "sub": 0, "body": None, "charge": round(ru, 2), "session": sessions.token(rs, lsn),
           "item_lsn": lsn}
    if version is None:
        out["status"] = 404
        out["body"] = responses.error(not_found(), call.activity_id).body
        return out
    out["etag"] = etag = version.etag
    inm = call.header(H.IF_NONE_MATCH)
    if inm is not None and inm in (etag, "*"):
        out["status"] = 304
    else:
        out["body"] = version.body
    return out


async def _write(call, target, op: str, item) -> dict:
    """A point write at the primary, staged and committed by the gateway's own functions."""
    container = target.container
    if op in _STAGED_CREATES:
        writer, status, version = documents.stage_create(call, container)
    else:
        writer, status, version = documents.stage_item_write(call, container, item, False)
    lsn, ru = await documents.commit(call, writer)
    rs = writer.rs
    seen = lsn or rs.committed_lsn
    out = {"status": status, "sub": 0, "body": None, "charge": round(ru, 2), "session": sessions.token(rs, seen),
           "item_lsn": seen}
    if version is None or status == 204:
        out["status"] = 204
        return out
    out["etag"] = version.etag
    if (call.header(H.PREFER) or "").lower() != H.PREFER_RETURN_MINIMAL:
        out["body"] = version.body
    return out


async def _serve(call, target, op: str, item):
    """Run the operation through the gateway's own functions; every failure becomes the reply
    the gateway would send."""
    try:
        if op in _STAGED_CREATES or op in _STAGED_ITEM_WRITES:
            return await _write(call, target, op, item)
        if item is None:
            return await documents.feed(call, target.container)
        return await documents.item(call, target.container, item, False)
    except CosmosError as e:
        return responses.error(e, call.activity_id)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("internal error in a direct request")
        return responses.error(CosmosError(500, 0, "Internal error in regionlab; see the server log.",
                                           definite=False), call.activity_id)
