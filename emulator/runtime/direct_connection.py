"""One direct-mode client connection to a node (docs/direct-protocol.md; see direct_server.py).

States: hello -> auth -> ready -> closing. Frames out of place, bad bytes and timeouts end the
connection with an error frame; nothing a peer sends raises out of this class or leaves a task
behind (connection_lost cancels whatever is still in flight).

Request faults (core/request_faults.py) act on every request that reached a replica of the
node's region, decided as the gateway decides (op class and the replica's database, container
and partition): an `error` is answered instead of running; a `latency` holds this reply only
(a timer per held reply; the request and its replica stay in flight until it goes out);
`timeout_after_apply` closes the connection after the request ran, without its reply (the
service's direct clients see their channel close: the other requests in flight on it end
unanswered too); `tcp_reset` sends part of the reply, then resets the connection.
"""
import asyncio
import logging
import os
import socket
import ssl
import struct
import uuid

from regionlab.client.protocol import direct as D
from regionlab.client.protocol import headers as H

from ..core import throttle as th
from ..core.consistency import STRONG
from ..core.errors import CosmosError, bad_request
from ..core.faults import OUTAGE_RESET
from ..core.request_faults import DROP_AFTER_APPLY
from ..service import documents, partition_keys, responses, routes, sessions
from . import direct_ops
from .direct_tls import HANDSHAKE_FAILURE_ALERT, TLS_HANDSHAKE_RECORD, TlsSession
from .direct_server import (CLOSE_GRACE_S, HOT_CREATED, HOT_READ_200, WRITE_BUFFER_HIGH_BYTES, DirectCall, _OP_HEADERS,
                            _SCOPED_FEEDS, _HANDSHAKE, _AUTH, _READY, _CLOSING, carry_on)

log = logging.getLogger("regionlab.direct")


class DirectConnection(asyncio.Protocol):
    def __init__(self, node):
        self.node = node
        self.plane = node.plane
        self._max_in_flight = node.plane.max_in_flight      # fixed for the plane's life
        self.transport = None
        self.decoder = D.FrameDecoder()
        self.state = _HANDSHAKE
        self.nonce = b""
        self.in_flight: dict = {}            # request id -> task (only requests that suspended)
        self.pending = 0                     # requests begun and not answered (with the suspended ones)
        self._out: list = []
        self._in_data = False
        # The replica the last read of the buffer being handled resolved to. Nothing that
        # changes where a replica is or its state (faults, placement, containers) can run
        # while one buffer's frames are handled, so the reads after it in the same buffer
        # reuse it; it is forgotten when the buffer is done.
        self._batch_key, self._batch_target = _NO_KEY, None
        self._flush_scheduled = False
        self.loop = None
        self.opened = self.last_rx = 0.0
        # Bytes arrived since the sweeper last looked: it then sets last_rx to its own time (never
        # earlier than the bytes came), so a buffer costs no clock read; an idle deadline is seen
        # at most one sweep later than with the exact time, never earlier.
        self.received = False
        self.frame_since = 0.0               # when the incomplete frame began (0: none)
        self.closed = False
        self.svc = None                      # the region's Service whose functions requests run
        self.version = 0                     # the protocol version the challenge named
        self.compact = False                 # version 2: requests and replies are arrays
        self.tls = None                      # a TlsSession once the client started TLS (direct_tls.py)
        self._plain = False                  # the first bytes were looked at, and were not TLS
        self.faults = node.plane.account.faults.requests   # its by_region is empty without faults
        self._effects: dict = {}             # request id -> the request fault Effect on its reply
        self.silenced = False                # a region outage's blackhole: nothing more is sent, ever

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
        self.svc = self.plane.services.get(self.node.region)

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
        if self.node.silent:                 # its region is out in the reset or blackhole mode
            self._outage_received()
            return
        if not self._plain:                  # the first bytes (TLS or not?), or TLS records
            data = self._unwrap(data)
            if not data:
                return
        self.received = True                 # last_rx, for the sweeper (check_deadlines)
        self._in_data = True
        decoder = self.decoder
        try:
            try:
                frames = decoder.feed(data)
            except D.ProtocolError as e:
                for frame in e.frames:
                    self._frame(frame)
                self.fail(e.status, e.substatus, e.message)
                return
            for frame in frames:
                if self.closed:
                    break
                if type(frame) is list:
                    self._array(frame)
                else:
                    self._frame(frame)
            if decoder.pending:
                # The frame timer times the frame incomplete now: one that began in these bytes
                # (after a frame they completed) starts it again, so a busy sender whose reads
                # end mid-frame is not taken for a trickler; a trickler completes nothing.
                if frames or not self.frame_since:
                    self.frame_since = self.loop.time()
            elif self.frame_since:
                self.frame_since = 0.0
        finally:
            self._in_data = False
            if self._batch_target is not None:      # a read of these bytes resolved one
                self._batch_key, self._batch_target = _NO_KEY, None
            out = self._out
            if out:                          # _flush, inlined (every buffer that held a request)
                if not self.closed and not self.silenced:
                    if self.tls is None:
                        self.transport.write(b"".join(out))
                    else:
                        self._write(b"".join(out))
                out.clear()

    def _unwrap(self, data: bytes) -> bytes:
        """The plain bytes of what arrived while the connection is not known to be plain: the
        first bytes say whether the client starts TLS; under TLS, records are decrypted (b"":
        nothing to handle, or the connection ended)."""
        if self.tls is None:
            if data[0] == TLS_HANDSHAKE_RECORD:
                if not self._start_tls():
                    return b""
            else:
                self._plain = True
                return data
        self.received = True
        return self._tls_receive(data)

    def _outage_received(self) -> None:
        """Bytes from a peer while the region is out in a mode that listens but does not serve:
        `reset` resets the connection, `blackhole` reads and drops them (and answers nothing,
        not even the requests already running)."""
        if self.node.outage == OUTAGE_RESET:
            self.reset_now()
        else:
            self.silence()

    def silence(self) -> None:
        """A blackhole: drop what was queued and send nothing more; the heal closes it."""
        self.silenced = True
        self._out.clear()

    def reset_now(self) -> None:
        """Reset the connection (RST: SO_LINGER 0, then abort); whatever was in flight on it is lost."""
        if self.closed:
            return
        self.closed = True
        self.node.connections.discard(self)
        self._out.clear()
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
            except OSError:
                pass                         # already gone: the abort below is all there is to do
        self.transport.abort()
        for task in self.in_flight.values():
            task.cancel()

    # ---- TLS (direct_tls.py) -------------------------------------------------------------
    def _start_tls(self) -> bool:
        """A TLS ClientHello arrived: run TLS if the node has a certificate, else refuse it."""
        ctx = self.plane.tls_context
        if ctx is None:
            log.info("a TLS connection to node %s of %s, which has no certificate (--direct-tls-cert): refused",
                     self.node.index, self.node.region)
            self.transport.write(HANDSHAKE_FAILURE_ALERT)
            self._close()
            return False
        self.tls = TlsSession(ctx)
        return True

    def _tls_receive(self, data: bytes) -> bytes:
        tls = self.tls
        try:
            plain = tls.receive(data)
        except ssl.SSLError as e:
            log.info("a TLS handshake or record on node %s of %s failed: %s", self.node.index, self.node.region, e)
            out = tls.outgoing()
            if out:
                self.transport.write(out)    # the alert that tells the client why
            self.tls = None                  # nothing more can be sent in TLS
            self._close()
            return b""
        out = tls.outgoing()
        if out:
            self.transport.write(out)
        return plain

    def _write(self, data: bytes) -> None:
        tls = self.tls
        if tls is None:
            self.transport.write(data)
        elif tls.handshaken:                 # before the TLS handshake, nothing can be sent
            self.transport.write(tls.send(data))

    # ---- frames ------------------------------------------------------------------------
    def _frame(self, frame) -> None:
        if self.closed:
            return
        if type(frame) is list:
            self._array(frame)
            return
        t = frame["t"]
        state = self.state
        if state == _READY:
            if t == D.REQUEST and not self.compact:
                self._request(frame.get("id"), frame.get("op"), frame.get("replica"), frame.get("item"),
                              frame.get("pk"), frame.get("body"), frame)
            elif t == D.PING:
                self._send({"t": D.PONG})
            elif t == D.PONG:
                pass
            elif t == D.BYE:
                self.state = _CLOSING
                self._maybe_finish_close()
            elif t == D.REQUEST:
                self.fail(400, D.SUB_BAD_FRAME, f"Protocol version {self.version} sends requests as arrays "
                                                "(docs/direct-protocol.md), not maps.")
            else:
                self.fail(400, D.SUB_HANDSHAKE if t in (D.HELLO, D.AUTH) else D.SUB_BAD_FRAME,
                          f"A '{t[:40]}' frame is not allowed on a ready connection.")
        elif state == _HANDSHAKE:
            self._hello(frame) if t == D.HELLO else self._out_of_place(t, D.HELLO)
        elif state == _AUTH:
            self._auth(frame) if t == D.AUTH else self._out_of_place(t, D.AUTH)
        # closing: the client said bye; what it sends after that is ignored

    def _array(self, f: list) -> None:
        """A version 2 request: [REQUEST_CODE, id, op code, replica, item, pk, body, options]."""
        state = self.state
        if state != _READY:
            if state != _CLOSING:
                self._out_of_place("array", D.HELLO if state == _HANDSHAKE else D.AUTH)
            return
        if not self.compact or f[0] != _REQUEST_CODE:
            self.fail(400, D.SUB_BAD_FRAME, f"An array frame with code {str(f[0])[:20]} is not a request of "
                                            f"protocol version {self.version}.")
            return
        if len(f) != _REQUEST_LENGTH:
            rid = f[1] if len(f) > 1 else None
            err = CosmosError(400, D.SUB_BAD_REQUEST_FRAME, f"A request is an array of {D.REQUEST_LENGTH} elements "
                                                            "[1, id, op, replica, item, pk, body, options].")
            if self._id_ok(rid):
                self._refuse(rid, None, None, err)
            return
        _, rid, code, replica, item, pk, body, options = f
        # The common cases, a point read and a create or upsert, checked once as _request checks
        # (a bool is not an op code: False == 0 is the read's code).
        if type(code) is int and type(rid) is int and 0 <= rid <= _REQUEST_ID_MAX and rid not in self.in_flight \
                and self.pending < self._max_in_flight and (options is None or type(options) is dict):
            if code == _READ_CODE:
                self._read(rid, replica, item, pk, body, options)
                return
            if code == _CREATE_CODE and not self.faults.by_region:
                self._create(rid, D.CREATE, replica, pk, body, options)
                return
            if code == _UPSERT_CODE and not self.faults.by_region:
                self._create(rid, D.UPSERT, replica, pk, body, options)
                return
        op = D.OPERATION_CODES[code] if type(code) is int and 0 <= code < len(D.OPERATION_CODES) else code
        if options is not None and type(options) is not dict:
            if self._id_ok(rid):
                self._refuse(rid, op, None, bad_request("A request's options must be a map or nil."))
            return
        self._request(rid, op, replica, item, pk, body, options)

    def _out_of_place(self, t: str, expected: str) -> None:
        self.fail(400, D.SUB_HANDSHAKE, f"Expected a '{expected}' frame during the handshake, got '{t[:40]}'.")

    def _hello(self, frame: dict) -> None:
        if not self._instance_ok(frame.get("instance")):
            return
        version = D.choose_version(frame.get("versions"))
        if version is None:
            self.fail(400, D.SUB_VERSION, f"No protocol version in common: the node speaks "
                                          f"{list(D.PROTOCOL_VERSIONS)}, the client offered {str(frame.get('versions'))[:60]}.")
            return
        self.version = version
        self.compact = version >= D.COMPACT_VERSION
        self.nonce = os.urandom(D.NONCE_BYTES)
        self.state = _AUTH
        plane = self.plane
        self._send({"t": D.CHALLENGE, "version": version, "nonce": self.nonce, "node": self.node.index,
                    "region": self.node.region, "instance": plane.instance, "max_in_flight": plane.max_in_flight,
                    "max_frame_bytes": self.decoder.max_frame_bytes,
                    "idle_timeout_ms": int(plane.idle_timeout_s * 1000),
                    "heartbeat_ms": int(D.HEARTBEAT_INTERVAL_S * 1000)})

    def _instance_ok(self, stated) -> bool:
        """A hello that names an emulator instance must name this one: resource ids are
        sequential, so another emulator on this machine holds the same replica keys, and a
        client whose address is stale (its emulator restarted, or this node took a port that
        emulator's node had) would be served another account's data. Refused 410 (refresh the
        addresses) and closed. A hello naming none (an older client) is not checked. Once per
        connection: requests pay nothing."""
        if stated is None or stated == self.plane.instance:
            return True
        if type(stated) is not str:
            self.fail(400, D.SUB_HANDSHAKE, "A hello's 'instance' must be a string: the instance id of the "
                                            "address (rlmp://host:port/apps/<instance>/...).")
        else:
            self.fail(410, D.SUB_INSTANCE_MISMATCH,
                      f"This node belongs to emulator instance {self.plane.instance!r}, not "
                      f"{stated[:D.INSTANCE_CHARS_MAX]!r} as the address said: the address is stale (its emulator "
                      "restarted, or another emulator now listens on its port); refresh the addresses.")
        return False

    def _auth(self, frame: dict) -> None:
        key = self.plane.key
        if key is not None and not D.mac_matches(key, self.nonce, frame.get("mac")):
            self.fail(401, 0, "Authentication failed: 'mac' must be HMAC-SHA256 of the challenge's nonce "
                              "with the account key.")
            return
        self.state = _READY
        self._send({"t": D.READY})

    # ---- requests ----------------------------------------------------------------------
    def _id_ok(self, rid) -> bool:
        """Whether a request's id can be answered; if not, the connection ends."""
        if type(rid) is not int or not 0 <= rid <= D.REQUEST_ID_MAX:
            self.fail(400, D.SUB_BAD_REQUEST_FRAME, f"A request needs an integer 'id' 0-{D.REQUEST_ID_MAX}.")
            return False
        return True

    def _request(self, rid, op, replica, item, pk, body, options) -> None:
        """One request of either version; `options` holds its optional fields (a version 1
        frame is its own options map: the names that are not options are skipped)."""
        if type(rid) is not int or not 0 <= rid <= D.REQUEST_ID_MAX:
            self._id_ok(rid)
            return
        if type(op) is not str or op not in D.OPERATIONS:
            self._unknown_operation(rid, op, options)
            return
        if rid in self.in_flight:
            self._refuse(rid, op, options, CosmosError(400, D.SUB_BAD_REQUEST_FRAME,
                                                   f"Request id {rid} is already in flight on this connection."))
            return
        if self.pending >= self.plane.max_in_flight:
            self._refuse(rid, op, options, CosmosError(
                429, D.SUB_BUSY, f"This connection has {self.plane.max_in_flight} requests in flight, the node's "
                                 "limit (max_in_flight); nothing of this request was applied.",
                retry_after_ms=D.BUSY_RETRY_AFTER_MS))
            return
        if op == D.READ:
            self._read(rid, replica, item, pk, body, options)
            return
        try:
            call, target, item = self._prepare(op, replica, item, pk, body, options)
        except CosmosError as e:
            self._refuse(rid, op, options, e)
            return
        self.pending += 1
        target.replica.in_flight += 1
        if self.faults.by_region:            # one emptiness check when no request fault is on
            effect = self._effect(op, target)
            if effect is not None:
                self._effects[rid] = effect      # _answer applies it to the reply
                if effect.error is not None:     # answered instead of running: nothing applied
                    self._answer(rid, op, call.activity_id, target, responses.error(effect.error, call.activity_id))
                    return
        if op in _POINT_WRITES:
            self._point_write(rid, op, call, target, item)
            return
        coro = _serve(call, target, op, item)
        try:
            waiting = coro.send(None)
        except StopIteration as done:
            self._answer(rid, op, call.activity_id, target, done.value)
            return
        task = self.loop.create_task(carry_on(coro, waiting))
        self.in_flight[rid] = task
        task.add_done_callback(lambda t: self._finished(rid, op, call.activity_id, target, t))

    def _point_write(self, rid: int, op: str, call, target, item) -> None:
        """Stage, admit and commit now; answer now if the write is acknowledged already (nearly
        always without an intra-region delay), else from a task that waits for it."""
        activity = call.activity_id
        try:
            staged = _stage_and_commit(call, target, op, item)
        except CosmosError as e:
            self._answer(rid, op, activity, target, responses.error(e, activity))
            return
        except Exception:
            log.exception("internal error in a direct %s", op)
            self._answer(rid, op, activity, target, responses.error(_INTERNAL, activity))
            return
        writer, status, version, lsn, ru = staged
        # With --data-dir a write is answered only once on disk: write_acknowledged waits for it.
        if self.svc.persistence is None and self.svc.acknowledged(writer, lsn):
            self._answer(rid, op, activity, target, _write_fields(call, writer, status, version, lsn, ru))
            return
        task = self.loop.create_task(_acknowledged(call, staged))
        self.in_flight[rid] = task
        task.add_done_callback(lambda t: self._finished(rid, op, activity, target, t))

    def _create(self, rid: int, op: str, replica, pk, body, options) -> None:
        """A create or upsert without a request fault: _prepare's checks and _point_write's steps
        (documents.stage_body: no header dict, no Call), answered here when acknowledged already
        (_write_fields, fields_reply and _answer in one). As a read, it is in flight (connection,
        replica) only once it waits or fails: until then it runs without a pause."""
        if_match = prefer = activity = None
        try:
            target = self.node.resolve(replica, True)
            if options:
                if_match, prefer, activity, opt_pk = _write_options(options)
                if pk is None:
                    pk = opt_pk
            parsed = None
            if pk is not None:
                if type(pk) is not str:
                    raise bad_request("Request field 'pk' must be a string.")
                # _check_range, with its parse's cache hit inlined; a container of one partition
                # holds every key, so only a split one needs the range check.
                parsed = _parsed_pk(pk) or partition_keys.parse(pk)
                if target.split:
                    _check_range(target, pk)
            if body is None:
                body = b""
            elif type(body) is not bytes:
                raise bad_request("'body' must be the JSON request body as bytes (a msgpack bin).")
        except CosmosError as e:
            self._refuse(rid, op, options, e)
            return
        if not activity:                     # responses.activity_id's form
            activity = next(_ACTIVITIES)
        svc = self.svc
        account = svc.account
        try:
            if parsed is None:
                raise partition_keys.missing()
            container = target.container
            pk_json, values = parsed
            if len(values) != target.pk_paths:
                partition_keys.checked(container, pk_json, values)     # raises the gateway's 400
            upsert = op == D.UPSERT
            writer, status, version = documents.stage_body(svc, svc.region, container, pk_json, values, body,
                                                           upsert, if_match)
            # documents.commit_staged's two steps (admission.write's op for a create or upsert)
            ru = account.throttle.admit_writer(writer, th.UPSERT if upsert else th.CREATE)
            # Read before the commit settles the version: then it still holds its etag, after it
            # the etag is found again in the stored body (store.Version).
            etag = version.etag
            lsn = writer.commit()
        except Exception as e:
            self._create_failed(rid, op, activity, target, e)
            return
        # Gateway.acknowledged, inlined: a quorum of the region has it (under Strong, a majority
        # of the regions). With --data-dir the write waits for the disk in any case.
        rs = writer.rs
        if svc.persistence is not None or (lsn and (rs.partition.global_lsn if account.consistency == STRONG
                                                   else rs.committed_lsn) < lsn):
            self._create_waits(rid, op, target, body, prefer, activity, (writer, status, version, lsn, ru))
            return
        # The charge is admit_writer's, which charge.staged rounded already (_write_fields rounds
        # it again: round(x, 2), a correctly rounded decimal conversion, cost 2.4 k here).
        seen = lsn or rs.committed_lsn
        replica = target.replica
        res = [_RES, rid, status, 0, version.body if prefer is None or prefer.lower() != _MINIMAL else None, ru,
               sessions.token(rs, seen), replica.applied_lsn, target.rs.committed_lsn, target.partition.global_lsn,
               seen, etag, replica.role, activity, None]          # direct_ops.fields_reply's array
        if status == 201 and op == D.CREATE:
            self.node.hot[HOT_CREATED] += 1
        else:
            self.node.requests[(op, status, 0)] += 1
        target.served[0] += 1
        if self._in_data and not self.closed and self.state != _CLOSING:
            out = _pack(res)                 # queued (the frame limit is _send's check), as one piece:
            if len(out) <= _FRAME_BYTES_MAX:    # a lone reply then goes out without a join's copy
                self._out.append(_pack_length(len(out)) + out)
                return
        self._send_reply(res)
        if self.state == _CLOSING:
            self._maybe_finish_close()

    def _create_failed(self, rid: int, op: str, activity: str, target, e: Exception) -> None:
        """A create's staging, admission or commit raised: answered with the gateway's error."""
        self.pending += 1                    # what _answer gives back
        target.replica.in_flight += 1
        if not isinstance(e, CosmosError):
            log.error("internal error in a direct %s", op, exc_info=e)
            e = _INTERNAL
        self._answer(rid, op, activity, target, responses.error(e, activity))

    def _create_waits(self, rid: int, op: str, target, body: bytes, prefer, activity: str, staged) -> None:
        """Wait for a committed create's quorum (or the disk) in a task, as _point_write does;
        in flight until it is answered."""
        self.pending += 1
        target.replica.in_flight += 1
        headers = {H.PREFER: prefer} if prefer is not None else {}
        call = DirectCall(self.svc, "POST", headers, body, activity, None)
        task = self.loop.create_task(_acknowledged(call, staged))
        self.in_flight[rid] = task
        task.add_done_callback(lambda t: self._finished(rid, op, activity, target, t))

    def _read(self, rid: int, replica, item, pk, body, options) -> None:
        """A point read: checked as _prepare checks, then served at once (a read never waits, so
        it needs no coroutine and is never in flight when anything else runs)."""
        consistency = session = inm = activity = None
        try:
            if replica == self._batch_key and self._in_data:
                target = self._batch_target  # resolved by a read earlier in this buffer (see below)
            else:
                target = self.node.resolve(replica, False)
                if self._in_data:
                    self._batch_key, self._batch_target = replica, target
            if options:
                consistency, session, inm, activity = _read_options(options)
            if pk is not None and type(pk) is not str:
                raise bad_request("Request field 'pk' must be a string.")
            if type(item) is not str or not item:
                raise bad_request("Operation 'read' needs the item's id in 'item'.")
            if body is not None and type(body) is not bytes:
                raise bad_request("'body' must be the JSON request body as bytes (a msgpack bin).")
        except CosmosError as e:
            self._refuse(rid, D.READ, options, e)
            return
        if not activity:                     # responses.activity_id's form
            activity = next(_ACTIVITIES)
        if self.faults.by_region:            # one emptiness check when no request fault is on
            effect = self._effect(D.READ, target)
            if effect is not None:
                self._faulted_read(rid, target, item, pk, consistency, session, inm, activity, effect)
                return
        try:
            res = direct_ops.read(self.plane.account, self.node.region, target, rid, item, pk, consistency,
                                  session, inm, activity)
        except CosmosError as e:
            res = direct_ops.gateway_reply(rid, responses.error(e, activity), target, activity)
        except Exception:
            log.exception("internal error in a direct read")
            res = direct_ops.gateway_reply(rid, responses.error(_INTERNAL, activity), target, activity)
        status = res[2]
        if status == 200 and not res[3]:
            self.node.hot[HOT_READ_200] += 1
        else:
            self.node.requests[(D.READ, status, res[3])] += 1
        target.served[0] += 1
        if self.compact and self._in_data and not self.closed:
            body = _pack(res)                # a read's reply holds at most one item: under FRAME_BYTES_MAX
            self._out += (_pack_length(len(body)), body)
        else:
            self._send_reply(res)

    # ---- request faults (core/request_faults.py) ------------------------------------------
    def _effect(self, op: str, target):
        """The region's request faults' effect on a request for target, or None."""
        faults = self.faults
        region = self.node.region
        if region not in faults.by_region:
            return None
        kind = _FAULT_OP[op]
        if faults.selects_partitions(region):
            c = target.container
            return faults.decide(region, kind, c.db.id, c.id, target.partition.range_id)
        return faults.decide(region, kind)

    def _faulted_read(self, rid: int, target, item, pk, consistency, session, inm, activity, effect) -> None:
        """A point read under a request fault: in flight (on the connection and the replica)
        from now until its reply goes out, as any other request."""
        self.pending += 1
        target.replica.in_flight += 1
        if effect.error is not None:         # answered instead of running
            reply = responses.error(effect.error, activity)
            res = direct_ops.gateway_reply(rid, reply, target, activity)
        else:
            try:
                res = direct_ops.read(self.plane.account, self.node.region, target, rid, item, pk, consistency,
                                      session, inm, activity)
            except CosmosError as e:
                res = direct_ops.gateway_reply(rid, responses.error(e, activity), target, activity)
            except Exception:
                log.exception("internal error in a direct read")
                res = direct_ops.gateway_reply(rid, responses.error(_INTERNAL, activity), target, activity)
        self._faulted(rid, D.READ, target, res, effect)

    def _faulted(self, rid: int, op: str, target, res: list, effect) -> None:
        """Count the reply (a lost one as .../drop_after_apply or .../reset, as the gateway
        counts), then hold it for a latency fault, or send, drop or reset it now."""
        self.node.requests[(op, res[2], effect.drop or res[3])] += 1
        target.served[0] += 1
        if effect.delay_ms and not self.closed:
            replica = target.replica         # held, it is really in flight: routing sees it
            if replica.in_flight > replica.in_flight_peak:
                replica.in_flight_peak = replica.in_flight
            held = _Held(self, target)
            held.timer = self.loop.call_later(effect.delay_ms / 1000.0, self._release_held, rid, held, res,
                                              effect.drop)
            self.in_flight[rid] = held       # its id stays taken; a close releases it (_Held.cancel)
            return
        self._deliver(target, res, effect.drop)

    def _release_held(self, rid: int, held, res: list, drop) -> None:
        if self.in_flight.get(rid) is held:
            del self.in_flight[rid]
        held.done = True
        self._deliver(target=held.target, res=res, drop=drop)

    def _deliver(self, target, res: list, drop) -> None:
        """A faulted request's reply goes out (or is lost): it is no longer in flight."""
        self.pending -= 1
        target.replica.in_flight -= 1
        if self.closed:
            return
        if drop is None:
            self._send_reply(res)
            if self.state == _CLOSING:
                self._maybe_finish_close()
        elif drop == DROP_AFTER_APPLY:
            # The request ran; its reply is never sent. One reply cannot be lost on a multiplexed
            # connection without the client waiting forever, so the connection closes, as the
            # service's channel does: the other requests in flight on it end unanswered too.
            self._close()
        else:
            self._reset(res)

    def _reset(self, res: list) -> None:
        """Send part of the reply, then reset the connection (RST: SO_LINGER 0, then abort), as
        gateway/http.py resets one."""
        data = self._reply_bytes(res)
        self._out.append(data[:max(1, len(data) // 2)])
        self._flush()
        self.reset_now()

    def _unknown_operation(self, rid: int, op, options) -> None:
        """A peer that sends an operation this node does not know speaks another protocol than
        the one it negotiated: its request is answered 400 by id (definitely not applied), then
        the connection ends with an error frame, as for any other bad input (issue 12)."""
        message = f"Unknown operation {str(op)[:40]!r}; one of {', '.join(D.OPERATIONS)}."
        self._refuse(rid, op, options, CosmosError(400, D.SUB_BAD_REQUEST_FRAME, message))
        self.fail(400, D.SUB_BAD_REQUEST_FRAME, message + " The connection is closed.")

    def _prepare(self, op, replica, item, pk, body, options):
        method, has_item = D.OPERATIONS[op]          # _request checked op
        target = self.node.resolve(replica, op in D.WRITE_OPERATIONS)
        headers = _option_headers(options) if options else {}
        if pk is not None:
            if type(pk) is not str:
                raise bad_request("Request field 'pk' must be a string.")
            headers[H.PARTITION_KEY] = pk
        extra = _OP_HEADERS.get(op)
        if extra:
            headers.update(extra)
        if op in _SCOPED_FEEDS:
            headers[H.PK_RANGE_ID] = target.partition.range_id
        if pk is not None:
            _check_range(target, pk)         # a page's key too: else it reads another range's data
        if has_item:
            if not isinstance(item, str) or not item:
                raise bad_request(f"Operation '{op}' needs the item's id in 'item'.")
        else:
            item = None
        if body is None:
            body = b""
        elif not isinstance(body, bytes):
            raise bad_request("'body' must be the JSON request body as bytes (a msgpack bin).")
        activity = headers.get(H.ACTIVITY_ID) or responses.activity_id()
        return DirectCall(self.svc, method, headers, body, activity, None), target, item

    def _finished(self, rid: int, op: str, activity: str, target, task) -> None:
        self.in_flight.pop(rid, None)
        if task.cancelled():
            if self._effects:
                self._effects.pop(rid, None)
            target.replica.in_flight -= 1
            self.pending -= 1
            return
        exc = task.exception()
        if exc is not None:                   # _serve catches everything; this is a last resort
            log.error("internal error in direct %s", op, exc_info=exc)
            reply = responses.error(_INTERNAL, activity)
        else:
            reply = task.result()
        self._answer(rid, op, activity, target, reply)

    def _answer(self, rid: int, op: str, activity: str, target, reply) -> None:
        if type(reply) is dict:              # a point write's fields (_write)
            res = direct_ops.fields_reply(rid, reply, target, activity)
        else:                                # a gateway Reply (feeds, queries, batches, errors)
            res = direct_ops.gateway_reply(rid, reply, target, activity)
            if reply.body and len(reply.body) > _REPLY_BODY_BYTES_MAX:
                res = _too_large(res, len(reply.body))   # counted as what the client gets
        if self._effects:
            effect = self._effects.pop(rid, None)
            if effect is not None:
                self._faulted(rid, op, target, res, effect)
                return
        self.pending -= 1
        target.replica.in_flight -= 1
        self.node.requests[(op, res[2], res[3])] += 1
        target.served[0] += 1
        self._send_reply(res)
        if self.state == _CLOSING:
            self._maybe_finish_close()

    def _refuse(self, rid: int, op, options, err: CosmosError) -> None:
        """Answer a request refused before it reached a replica."""
        activity = options.get("activity_id") if type(options) is dict else None
        if not isinstance(activity, str):
            activity = responses.activity_id()
        self.node.requests[(op if type(op) is str and op in D.OPERATIONS else "other", err.status, err.substatus)] += 1
        self._send_reply(direct_ops.refusal(rid, err, activity))

    # ---- output, closing, deadlines ------------------------------------------------------
    def _send_reply(self, res: list) -> None:
        if not self.closed:
            self._queue(self._reply_bytes(res))

    def _reply_bytes(self, res: list) -> bytes:
        """The reply's frame, or, when it would exceed FRAME_BYTES_MAX (a batch that reads many
        large items), a 413/SUB_REPLY_TOO_LARGE reply in its place with the same LSNs, session
        and charge: the operation ran, only its reply cannot be framed."""
        try:
            return D.encode(res if self.compact else D.reply_fields(res))
        except ValueError:
            small = _too_large(res, len(D.pack(res)))
        return D.encode(small if self.compact else D.reply_fields(small))

    def _send(self, frame) -> None:
        if not self.closed:
            self._queue(D.encode(frame))

    def _queue(self, data: bytes) -> None:
        self._out.append(data)
        if not self._in_data and not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out = self._out
        if out and not self.closed and not self.silenced:
            data = b"".join(out)
            if self.tls is None:
                self.transport.write(data)
            else:
                self._write(data)
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
        if self.tls is not None and self.tls.handshaken and not self.silenced:
            transport.write(self.tls.close())
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
        if self.received:
            self.received = False
            self.last_rx = now
        if self.node.silent:                 # a region outage that answers nothing, not even a 408
            if self.node.outage == OUTAGE_RESET and now - self.last_rx > plane.handshake_timeout_s:
                self.reset_now()             # a peer that says nothing is reset once it had its time
            return
        if self.state in (_HANDSHAKE, _AUTH):
            if now - self.opened > plane.handshake_timeout_s:
                self.fail(408, D.SUB_HANDSHAKE, f"The handshake did not finish within {plane.handshake_timeout_s:g} s.")
        elif self.frame_since and now - self.frame_since > plane.frame_timeout_s:
            self.fail(408, D.SUB_IDLE, f"A frame was not complete within {plane.frame_timeout_s:g} s.")
        elif not self.pending and now - self.last_rx > plane.idle_timeout_s:
            self.fail(408, D.SUB_IDLE, f"Nothing arrived for {plane.idle_timeout_s:g} s (idle timeout); "
                                       "send pings to keep a connection open.")


def _too_large(res: list, size: int) -> list:
    """The 413/SUB_REPLY_TOO_LARGE reply in place of one of `size` bytes that cannot be framed
    (docs/direct-protocol.md): the same LSNs, session and charge, the error as its body."""
    err = CosmosError(413, D.SUB_REPLY_TOO_LARGE, (
        f"The reply ({size} bytes) exceeds the direct protocol's frame limit ({D.FRAME_BYTES_MAX} bytes). "
        "The operation ran (a batch's writes are applied); read the items back in smaller requests, "
        "or send this one through the gateway."))
    small = list(res)
    small[2], small[3], small[4] = err.status, err.substatus, responses.error(err, res[13] or "").body
    small[11] = None                         # no etag: the body is the error
    return small


class _Held:
    """A reply a latency fault holds: its timer, and what it keeps in flight until it goes out.
    A connection that ends first cancels it (once, however many times it is asked)."""
    __slots__ = ("conn", "target", "timer", "done")

    def __init__(self, conn, target):
        self.conn = conn
        self.target = target
        self.timer = None
        self.done = False

    def cancel(self) -> None:
        if self.done:
            return
        self.done = True
        self.timer.cancel()
        self.conn.pending -= 1
        self.target.replica.in_flight -= 1


def _check_range(target, pk_header: str) -> tuple:
    """A point operation's key must hash into the named replica's range (else the client's
    routing map is stale: 410/1002). Returns the parsed key (pk_json, values)."""
    container = target.container
    parsed = partition_keys.parse(pk_header)
    pk_json, values = parsed
    if len(values) != len(container.pk_def.paths):
        return parsed                        # the handler answers the 400 the gateway would
    if len(container.partitions) == 1:
        return parsed                        # every key is in the only range
    index = container.partition_index(container.epk_of(pk_json, values))
    if container.partitions[index] is not target.partition:
        raise direct_ops.range_gone(target, pk_json)
    return parsed



_STAGED_CREATES = frozenset((D.CREATE, D.UPSERT))
_STAGED_ITEM_WRITES = frozenset((D.REPLACE, D.DELETE, D.PATCH))
_POINT_WRITES = _STAGED_CREATES | _STAGED_ITEM_WRITES


def _stage_and_commit(call, target, op: str, item):
    """(writer, status, version, lsn, charge) of a point write at the primary, staged and
    committed by the gateway's own functions (not yet acknowledged, maybe)."""
    container = target.container
    if op in _STAGED_CREATES:
        writer, status, version = documents.stage_create(call, container)
    else:
        writer, status, version = documents.stage_item_write(call, container, item, False)
    lsn, ru = documents.commit_staged(call, writer)
    return writer, status, version, lsn, ru


def _write_fields(call, writer, status: int, version, lsn: int, ru: float) -> dict:
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


async def _acknowledged(call, staged):
    """The reply of a committed point write once its acknowledgement arrived (or its error)."""
    writer, status, version, lsn, ru = staged
    try:
        await call.svc.write_acknowledged(call, writer, lsn)
    except CosmosError as e:
        return responses.error(e, call.activity_id)
    return _write_fields(call, writer, status, version, lsn, ru)


async def _serve(call, target, op: str, item):
    """Run the operation through the gateway's own functions; every failure becomes the reply
    the gateway would send."""
    try:
        if item is None:
            return await routes.documents_feed(call, target.container)
        return await documents.item(call, target.container, item, False)
    except CosmosError as e:
        return responses.error(e, call.activity_id)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("internal error in a direct request")
        return responses.error(CosmosError(500, 0, "Internal error in regionlab; see the server log.",
                                           definite=False), call.activity_id)


# The request fault class of each direct operation (core/request_faults.py OPS).
_FAULT_OP = {D.READ: "read", D.READ_FEED: "read", D.CHANGE_FEED: "read", D.QUERY: "query",
             **{op: "write" for op in D.WRITE_OPERATIONS}}
_LINGER_RESET = struct.pack("ii", 1, 0)       # SO_LINGER on, 0 s: abort sends RST, not FIN
_READ_CODE = D.OPERATION_CODE[D.READ]
# No replica key equals this, not even a request's nil 'replica' (None would match a None here
# and reuse a target never resolved).
_NO_KEY = object()
# A reply body above this cannot be framed with its envelope (the reply's other fields, well
# under 64 KiB): it is answered 413/SUB_REPLY_TOO_LARGE (_too_large) before it is counted.
_REPLY_BODY_BYTES_MAX = D.FRAME_BYTES_MAX - 64 * 1024
_MINIMAL = H.PREFER_RETURN_MINIMAL
_FRAME_BYTES_MAX = D.FRAME_BYTES_MAX
_ACTIVITY_PREFIX = str(uuid.uuid4())[:24]     # the node's own, so its ids never equal the gateway's
# The activity ids of requests that bring none: next(_ACTIVITIES) (responses.activity_ids).
_ACTIVITIES = responses.activity_ids(_ACTIVITY_PREFIX)
_pack = D.pack
_pack_length = D.pack_length
_INTERNAL = CosmosError(500, 0, "Internal error in regionlab; see the server log.", definite=False)
_READ_OPTIONS = {"consistency": 0, "session": 1, "if_none_match": 2, "activity_id": 3}
_WRITE_OPTIONS = {"if_match": 0, "prefer": 1, "activity_id": 2, "pk": 3}
_CREATE_CODE = D.OPERATION_CODE[D.CREATE]
_REQUEST_ID_MAX = D.REQUEST_ID_MAX
_REQUEST_CODE = D.REQUEST_CODE
_REQUEST_LENGTH = D.REQUEST_LENGTH
_UPSERT_CODE = D.OPERATION_CODE[D.UPSERT]
_RES = D.RESPONSE_CODE
_parsed_pk = partition_keys.parsed       # a partition key header's parse, when cached


def _options(options: dict, slots: dict) -> list:
    """The values of the options `slots` names, in slot order, each checked as _option_headers
    checks it (the other options mean nothing to the operation)."""
    out = [None] * len(slots)
    known = D.REQUEST_OPTIONS
    for name, value in options.items():
        if name not in known:
            continue
        if type(value) is not str and not (type(value) is int and name == "max_items"):
            raise bad_request(f"Request field '{name}' must be a string.")
        slot = slots.get(name)
        if slot is not None:
            out[slot] = value
    return out


def _read_options(options: dict) -> list:
    """[consistency, session, if_none_match, activity_id] of a read's options."""
    return _options(options, _READ_OPTIONS)


def _write_options(options: dict) -> list:
    """[if_match, prefer, activity_id, pk] of a create's options."""
    return _options(options, _WRITE_OPTIONS)


def _option_headers(options: dict) -> dict:
    """The gateway headers of a request's optional fields, each a string (max_items may be an
    integer), or 400."""
    headers = {}
    known = D.REQUEST_OPTIONS
    for name, value in options.items():
        header = known.get(name)
        if header is None:
            continue
        if type(value) is int and name == "max_items":
            value = str(value)
        elif not isinstance(value, str):
            raise bad_request(f"Request field '{name}' must be a string.")
        headers[header] = value
    return headers
