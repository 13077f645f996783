"""Proves the gateway transport's connection pool (client/aio/http_pool.py) over real loopback
sockets against a small scripted HTTP server, in virtual time (client_world's loop: a wait
jumps the clock to the next timer, so timeouts cost nothing): keep-alive reuses one connection;
a 256 KB body arrives whole; Connection: close is not reused; a chunked reply arrives whole; a
reset, a reply cut in the middle and a close before replying are `response` errors, a refused
port a `connect` error, no reply a `timeout` after the request timeout; at most
`connections_max` connections are open and a request waits for one to come back (bounded by the
connect timeout); an idle connection is closed after the idle timeout; a request cancelled in
flight closes its connection."""
import asyncio
import socket

import pytest

from regionlab.client.aio.http_pool import CONNECT, RESPONSE, TIMEOUT, ConnectionFailed, EndpointPool
from regionlab.client.aio.transport import GatewayTransport, TransportError

from client_world import run

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Ms-Substatus: 0\r\n\r\n{}"


class ScriptedServer:
    """Answers the n-th request with `answer(n, head)`: bytes; None to hold it (until `release()`);
    "reset" or "close"; or (bytes, "close") to write them and close. Counts connections and closes."""

    def __init__(self, answer):
        self.answer = answer
        self.connections = 0
        self.closed = 0
        self.requests = 0
        self.held: list = []
        self._writers: set = set()
        self._tasks: set = set()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader, writer):
        self.connections += 1
        self._writers.add(writer)
        self._tasks.add(asyncio.current_task())
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = [int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:")]
                if length:
                    await reader.readexactly(length[0])
                self.requests += 1
                out = self.answer(self.requests, head)
                if out is None:
                    gate = asyncio.get_running_loop().create_future()
                    self.held.append(gate)
                    out = await gate
                if out == "reset":
                    writer.transport.abort()
                    return
                if out == "close":
                    writer.close()
                    return
                if isinstance(out, tuple):       # (bytes, "close"): a reply cut short
                    writer.write(out[0])
                    await writer.drain()
                    return
                writer.write(out)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.closed += 1
            writer.transport.abort()

    def release(self, reply=OK) -> None:
        self.held.pop(0).set_result(reply)

    async def stop(self):
        self.server.close()
        for w in self._writers:
            w.transport.abort()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.server.wait_closed()


async def pool_for(port, **kwargs) -> EndpointPool:
    options = dict(connections_max=10, idle_timeout_s=60.0, connect_timeout_s=5.0, request_timeout_s=65.0,
                   ssl_context=None)
    options.update(kwargs)
    return EndpointPool(f"http://127.0.0.1:{port}", **options)


async def settle():
    for _ in range(5):
        await asyncio.sleep(0)


def test_keep_alive_reuses_one_connection_and_close_is_not_reused():
    async def main():
        server = ScriptedServer(lambda n, h: OK if n != 2 else
                                b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
        pool = await pool_for(await server.start())
        first = await pool.send("GET", "/a", {"x-ms-version": "v"}, None)
        second = await pool.send("GET", "/b", {}, None)
        third = await pool.send("POST", "/c", {}, b"{}")
        await settle()
        out = first, second[0], third[0], server.connections, pool.size
        await pool.close()
        await server.stop()
        return out
    first, second, third, connections, size = run(main())
    assert first == (200, {"content-length": "2", "x-ms-substatus": "0"}, b"{}")
    assert (second, third) == (200, 200)
    assert connections == 2 and size == 1       # the 2nd reply closed the first connection


def test_a_large_body_goes_out_whole_after_its_head():
    got = []

    async def main():
        server = ScriptedServer(lambda n, h: OK)
        original = server._serve

        async def recording(reader, writer):            # the body's bytes as the server read them
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.startswith(b"content-length")))
            got.append(await reader.readexactly(length))
            writer.write(OK)
            await writer.drain()
            await original(reader, writer)
        server._serve = recording
        pool = await pool_for(await server.start())
        body = bytes(range(256)) * 1024                  # 256 KB: written after the head, not copied
        reply = await pool.send("PUT", "/big", {}, body)
        await pool.close()
        await server.stop()
        return reply[0], body
    status, body = run(main())
    assert status == 200 and got == [body]


def test_a_chunked_reply_arrives_whole():
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"".join(
        b"%x\r\n%s\r\n" % (len(p), p) for p in (b"x" * 70_000, b"y" * 3)) + b"0\r\n\r\n"

    async def main():
        server = ScriptedServer(lambda n, h: chunked)
        pool = await pool_for(await server.start())
        out = await pool.send("GET", "/", {}, None)
        await pool.close()
        await server.stop()
        return out
    status, _, body = run(main())
    assert status == 200 and body == b"x" * 70_000 + b"yyy"


@pytest.mark.parametrize("answer", [
    "reset",
    "close",
    (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part", "close"),     # cut in the body
    b"garbage\r\n\r\n",
])
def test_broken_replies_are_response_errors_and_the_next_request_gets_a_new_connection(answer):
    async def main():
        server = ScriptedServer(lambda n, h: answer if n == 1 else OK)
        pool = await pool_for(await server.start())
        with pytest.raises(ConnectionFailed) as e:
            await pool.send("GET", "/", {}, None)
        after = await pool.send("GET", "/", {}, None)
        await settle()
        out = e.value.kind, str(e.value), after[0], server.connections
        await pool.close()
        await server.stop()
        return out
    kind, message, after, connections = run(main())
    assert kind == RESPONSE and "127.0.0.1" in message
    assert after == 200 and connections == 2


def test_a_refused_port_is_a_connect_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def main():
        pool = await pool_for(port)
        with pytest.raises(ConnectionFailed) as e:
            await pool.send("GET", "/", {}, None)
        return e.value.kind, pool.size
    assert run(main()) == (CONNECT, 0)


def test_no_reply_is_a_timeout_after_the_request_timeout():
    async def main():
        server = ScriptedServer(lambda n, h: None)
        pool = await pool_for(await server.start(), request_timeout_s=65.0)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(ConnectionFailed) as e:
            await pool.send("GET", "/", {}, None)
        waited = loop.time() - t0
        await settle()
        out = e.value.kind, waited, pool.size
        await pool.close()
        await server.stop()
        return out
    kind, waited, size = run(main())
    assert kind == TIMEOUT and waited == pytest.approx(65.0) and size == 0


def test_at_most_connections_max_are_open_and_a_request_waits_for_one():
    async def main():
        server = ScriptedServer(lambda n, h: None)
        pool = await pool_for(await server.start(), connections_max=2)
        sends = [asyncio.ensure_future(pool.send("GET", f"/{i}", {}, None)) for i in range(3)]
        while len(server.held) < 2:
            await asyncio.sleep(0)
        await settle()
        held_before = len(server.held), pool.size, server.connections
        server.release()
        while len(server.held) < 2:                    # the third request took the freed connection
            await asyncio.sleep(0)
        server.release()
        server.release()
        replies = await asyncio.gather(*sends)
        out = held_before, [r[0] for r in replies], server.connections
        await pool.close()
        await server.stop()
        return out
    held_before, statuses, connections = run(main())
    assert held_before == (2, 2, 2)
    assert statuses == [200, 200, 200] and connections == 2


def test_waiting_for_a_connection_is_bounded_by_the_connect_timeout():
    async def main():
        server = ScriptedServer(lambda n, h: None)
        pool = await pool_for(await server.start(), connections_max=1, connect_timeout_s=5.0)
        first = asyncio.ensure_future(pool.send("GET", "/", {}, None))
        while not server.held:
            await asyncio.sleep(0)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(ConnectionFailed) as e:
            await pool.send("GET", "/", {}, None)
        waited = loop.time() - t0
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        await pool.close()
        await server.stop()
        return e.value.kind, waited
    kind, waited = run(main())
    assert kind == CONNECT and waited == pytest.approx(5.0)


def test_an_idle_connection_is_closed_after_the_idle_timeout():
    async def main():
        server = ScriptedServer(lambda n, h: OK)
        pool = await pool_for(await server.start(), idle_timeout_s=30.0)
        await pool.send("GET", "/", {}, None)
        kept = pool.idle_count
        await asyncio.sleep(29.0)
        still = pool.idle_count
        await asyncio.sleep(2.0)
        await settle()
        out = kept, still, pool.idle_count, pool.size, server.closed
        await pool.close()
        await server.stop()
        return out
    assert run(main()) == (1, 1, 0, 0, 1)


def test_a_request_cancelled_in_flight_closes_its_connection():
    async def main():
        server = ScriptedServer(lambda n, h: None if n == 1 else OK)
        pool = await pool_for(await server.start())
        task = asyncio.ensure_future(pool.send("GET", "/", {}, None))
        while not server.held:
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await settle()
        size_after_cancel = pool.size
        again = await pool.send("GET", "/", {}, None)
        out = size_after_cancel, again[0], server.connections
        await pool.close()
        await server.stop()
        return out
    assert run(main()) == (0, 200, 2)


def test_the_transport_raises_the_retry_policys_kinds():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def main():
        t = GatewayTransport()
        try:
            await t.send(f"http://127.0.0.1:{port}/", "GET", "/", {}, None)
        except TransportError as e:
            return e.kind
        finally:
            await t.close()
    assert run(main()) == CONNECT
