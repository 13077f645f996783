"""Building HTTP replies the way the service shapes them: JSON bodies, feed envelopes, error
bodies with `x-ms-substatus`, and the headers every reply carries."""
import json

from aiohttp import web

from client.protocol import headers as H
from client.protocol.status import code_name

from ..core.errors import CosmosError

GATEWAY_VERSION = "2.0.0"
JSON = "application/json"


def dumps(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def base_headers(activity_id: str, charge: float) -> dict:
    return {"Content-Type": JSON, H.ACTIVITY_ID: activity_id, H.REQUEST_CHARGE: f"{charge:.2f}",
            "x-ms-gatewayversion": GATEWAY_VERSION, "x-ms-serviceversion": "version=2.14.0.0"}


def reply(status: int, body, activity_id: str, charge: float = 0.0, extra: dict | None = None) -> web.Response:
    hdrs = base_headers(activity_id, charge)
    if extra:
        hdrs.update(extra)
    if body is None:
        return web.Response(status=status, headers=hdrs)
    raw = body if isinstance(body, (bytes, bytearray)) else dumps(body)
    return web.Response(status=status, body=raw, headers=hdrs)


def feed_body(rid: str, key: str, items_raw: list) -> bytes:
    """A feed envelope from already-serialised items (no re-encoding of stored bodies)."""
    return b"".join((b'{"_rid":', dumps(rid), b',"', key.encode(), b'":[', b",".join(items_raw),
                     b'],"_count":', str(len(items_raw)).encode(), b"}"))


def error(err: CosmosError, activity_id: str, extra: dict | None = None) -> web.Response:
    hdrs = base_headers(activity_id, 0.0)
    hdrs[H.SUBSTATUS] = str(err.substatus)
    if err.retry_after_ms is not None:
        hdrs[H.RETRY_AFTER_MS] = str(int(err.retry_after_ms))
    if extra:
        hdrs.update(extra)
    body = {"code": code_name(err.status), "message": f"Message: {err.message}\r\nActivityId: {activity_id}"}
    return web.Response(status=err.status, body=dumps(body), headers=hdrs)
