"""A minimal direct-mode test client: it speaks only what docs/direct-protocol.md specifies,
through client/protocol/direct.py (never importing the emulator), so the integration tests drive
the server the way any client would. The full client is the bundled client's job (issue #13)."""
import asyncio
import json
import urllib.request
from email.utils import formatdate

from regionlab.client.protocol import direct as D
from regionlab.client.protocol.auth import authorization_header

CONNECT_TIMEOUT_S = 5.0
REPLY_TIMEOUT_S = 10.0


def addresses(endpoint: str, key: str, db: str, coll: str, ranges=None, protocol=D.PROTOCOL,
              signed: bool = True) -> tuple[int, dict]:
    """(status, body) of the gateway's address feed for one container."""
    query = f"$resolveFor=dbs/{db}/colls/{coll}/docs&$filter=protocol%20eq%20{protocol}"
    if ranges:
        query += "&$partitionKeyRangeIds=" + ",".join(ranges)
    date = formatdate(usegmt=True)
    headers = {"x-ms-date": date, "x-ms-version": "2020-07-15"}
    if signed:
        headers["authorization"] = authorization_header(key, "GET", "addresses", "", date)
    req = urllib.request.Request(f"{endpoint}addresses/?{query}", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


class HandshakeRefused(ConnectionError):
    """The node answered the handshake with an error frame (`frame`) instead of going on."""

    def __init__(self, frame: dict):
        super().__init__(f"handshake refused: {frame}")
        self.frame = frame


class Connection:
    """One handshaken connection to a node; requests are multiplexed by id."""

    def __init__(self, reader, writer):
        self.reader = reader
        self.writer = writer
        self.decoder = D.FrameDecoder()
        self.challenge = None
        self.version = None                   # the version the node chose
        self.reply_shapes: set = set()        # the msgpack types replies came as (map, array)
        self._waiting: dict = {}
        self._next_id = 0
        self._reader_task = None
        self.closed_with = None               # the error or bye frame the node ended with
        self.frames: list = []                # non-reply frames received after the handshake
        self._buffered: list = []             # decoded frames not yet taken
        self.arrivals: list = []              # reply ids in the order their replies arrived
        self.ended = None                     # what ended the read loop (EOF, a reset, ...)

    @classmethod
    async def open(cls, host: str, port: int, key: str, versions=D.PROTOCOL_VERSIONS, mac=None, tls=None,
                   instance=None):
        """`tls`: an ssl.SSLContext to speak TLS to the node (optional TLS on the same port);
        `instance`: the emulator instance the hello names (None: an older client's hello)."""
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=tls), CONNECT_TIMEOUT_S)
        conn = cls(reader, writer)
        writer.write(D.encode(D.hello(versions, instance=instance)))
        challenge = await conn.next_frame()
        if challenge["t"] != D.CHALLENGE:
            writer.close()
            raise HandshakeRefused(challenge)
        conn.challenge = challenge
        conn.version = challenge["version"]
        writer.write(D.encode({"t": D.AUTH, "mac": mac if mac is not None else D.handshake_mac(key, challenge["nonce"])}))
        ready = await conn.next_frame()
        if ready["t"] != D.READY:
            writer.close()
            raise HandshakeRefused(ready)
        conn._reader_task = asyncio.get_running_loop().create_task(conn._read_loop())
        return conn

    async def next_frame(self) -> dict:
        """The next frame off the wire (before the read loop runs); EOF raises ConnectionError."""
        while True:
            if self._buffered:
                return self._buffered.pop(0)
            data = await asyncio.wait_for(self.reader.read(65536), REPLY_TIMEOUT_S)
            if not data:
                raise ConnectionError("closed by the node")
            self._buffered.extend(self.decoder.feed(data))

    async def _read_loop(self) -> None:
        try:
            while True:
                frame = await self.next_frame()
                if D.frame_type(frame) == D.RESPONSE:
                    self.reply_shapes.add(type(frame))
                    frame = D.reply_fields(frame)
                    self.arrivals.append(frame["id"])
                    fut = self._waiting.pop(frame["id"], None)
                    if fut is not None and not fut.done():
                        fut.set_result(frame)
                else:
                    self.frames.append(frame)
                    if frame["t"] in (D.ERROR, D.BYE):
                        self.closed_with = frame
        except (ConnectionError, OSError, asyncio.TimeoutError, D.ProtocolError) as e:
            self.ended = e
            for fut in self._waiting.values():
                if not fut.done():
                    fut.set_exception(ConnectionError(f"connection ended: {e}"))

    def send_request(self, op: str, replica: str, **fields) -> asyncio.Future:
        self._next_id += 1
        rid = fields.pop("id", self._next_id)
        fut = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        self.writer.write(D.encode(D.request(self.version, rid, op, replica, **fields)))
        return fut

    async def request(self, op: str, replica: str, **fields) -> dict:
        return await asyncio.wait_for(self.send_request(op, replica, **fields), REPLY_TIMEOUT_S)

    async def close(self) -> None:
        try:
            self.writer.write(D.encode({"t": D.BYE}))
            await self.writer.drain()
        except (ConnectionError, OSError):
            pass
        if self._reader_task is not None:
            await asyncio.wait_for(self._reader_task, REPLY_TIMEOUT_S)
        self.writer.close()


def item_body(reply: dict):
    return json.loads(reply["body"]) if reply.get("body") else None


def by_range(feed: dict) -> dict:
    """{range id: {"primary": entry, "all": [entries by replica index]}} of an address feed."""
    out: dict = {}
    for a in feed["Addresss"]:
        r = out.setdefault(a["partitionKeyRangeId"], {"all": []})
        r["all"].append(a)
        if a["isPrimary"]:
            r["primary"] = a
    return out


def feed(emu, endpoint=None) -> dict:
    """`by_range` of the address feed of the tests' container db/items, read through `endpoint`
    (the account's by default)."""
    status, body = addresses(endpoint or emu.endpoint, emu.key, "db", "items")
    assert status == 200, body
    return by_range(body)


def target(entry: dict) -> tuple[str, int, str]:
    """(host, port, replica key) of an address feed entry."""
    return D.parse_uri(entry["physcialUri"])
