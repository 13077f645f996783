"""Direct mode: the backend nodes' TCP protocol (`rlmp`, docs/direct-protocol.md), an adapter
over the service, as the HTTP gateway is.

A client asks a gateway for a partition's replica addresses, then talks to the replicas' nodes
itself: one TCP listener per node, length-prefixed msgpack frames, many requests multiplexed on
a connection by id (docs/direct.md). The package, outside in:

* plane.py — every node of every region: ports, listening as faults and outages say, the
  sweeper, the counts; node.py — one node: its listener, its connections, what it serves;
* connection.py — the asyncio shell of one connection: bytes in and out, TLS (tls.py), flow
  control, the tasks of requests that wait, closing;
* session.py — the protocol itself, sans-I/O (handshake, framing, multiplexing by request id,
  closing, deadlines), its transitions written as tables;
* adapter.py — a request frame becomes a service Call; targets.py resolves the replica it
  names; routes.py is what the service runs for point reads, creates and batches;
  replies.py makes the reply arrays.

Every request runs through the same `Service.handle` as a gateway request (service/service.py):
region state, request faults, admission, waits, errors and counting are the service's. Nothing
here imports the gateway or the runtime; emulator/server.py composes the plane.
"""
