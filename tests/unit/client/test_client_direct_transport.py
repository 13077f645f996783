"""Proves the direct transport takes a replica address that no longer leads to a direct node
for one that refuses connections, over real loopback sockets in virtual time (client_world's
loop), the gateway a scripted transport serving the routing map, the address feed and the
read: when a killed node's port now belongs to an HTTP server (the restarted emulator's control
port, another emulator's gateway), its answer to the hello is no frame ("HTTP" read as a length
prefix); the endpoint is marked down, the addresses are refreshed once, and the read goes
through the gateway instead of failing with the protocol error."""
import asyncio
import json

from regionlab.client.aio.direct import ADDRESS_REFRESH_MIN_MS, DirectTransport
from regionlab.client.aio.transport import Reply
from regionlab.client.protocol import direct as D, headers as H

from client_world import reply, run

EAST = "http://east/"
ITEM = "/dbs/db/colls/c/docs/i"
HTTP_400 = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


async def _http_server():
    async def serve(reader, writer):
        await reader.read(1024)           # the client's hello
        writer.write(HTTP_400)
        await writer.drain()
        writer.close()
    return await asyncio.start_server(serve, "127.0.0.1", 0)


def _feed(port: int) -> dict:
    def entry(index):
        uri = D.replica_uri("127.0.0.1", port, D.replica_key("R", "0", index), index == 0)
        return {"protocol": D.PROTOCOL, "isPrimary": index == 0, "physcialUri": uri, "logicalUri": uri,
                "partitionKeyRangeId": "0", "node": index, "region": "East US", "state": "up"}
    return {"_rid": "R", "Addresss": [entry(i) for i in range(4)]}


class Gateway:
    """The region's gateway: routing map, address feed (counted) and the document read."""

    def __init__(self, port: int):
        self.port, self.feeds, self.reads = port, 0, 0

    async def send(self, endpoint, method, path, headers, body):
        if path.endswith("/pkranges"):
            return Reply(200, {}, json.dumps({"PartitionKeyRanges": [
                {"id": "0", "minInclusive": "", "maxExclusive": "FF"}]}).encode())
        if path.startswith("/addresses/"):
            self.feeds += 1
            return Reply(200, {}, json.dumps(_feed(self.port)).encode())
        assert (method, path) == ("GET", ITEM)
        self.reads += 1
        return reply(200, body={"id": "i"})

    async def close(self):
        pass


def test_a_replica_port_now_served_by_an_http_server_is_unreachable_and_the_read_goes_through_the_gateway():
    async def main():
        server = await _http_server()
        port = server.sockets[0].getsockname()[1]
        gateway = Gateway(port)
        loop = asyncio.get_running_loop()
        transport = DirectTransport("a2V5", gateway, lambda: "Session", clock=loop.time)
        try:
            await transport.fill(EAST, "dbs/db/colls/c")       # the addresses of the nodes before the kill
            await asyncio.sleep(ADDRESS_REFRESH_MIN_MS / 1000)  # virtual time: the cache is not fresh
            r = await transport.send(EAST, "GET", ITEM, {H.PARTITION_KEY: '["p"]'}, None)
            down = transport.addresses.is_down(("127.0.0.1", port), loop.time() * 1000)
        finally:
            await transport.close()
            server.close()
            await server.wait_closed()
        return r, down, gateway, transport.fallbacks

    r, down, gateway, fallbacks = run(main())
    assert r.status == 200 and json.loads(r.body) == {"id": "i"} and gateway.reads == 1
    assert r.direct["fallback"] == "gateway: no replica of the region accepts connections"
    assert r.direct["refreshes"] == ["no replica reachable"] and gateway.feeds == 2 and fallbacks == 1
    errors = [e["error"] for e in r.direct["replicas"]]
    assert errors and all(e.startswith("connect: ConnectionRefusedError('not a direct node") for e in errors), errors
    assert down
