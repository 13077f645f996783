"""A service Reply as HTTP/1.1 bytes, serialised once and written in a single transport write by
the connection (gateway/http.py)."""
import time
from email.utils import formatdate
from http import HTTPStatus

from ..service.responses import GATEWAY_VERSION, JSON, SERVICE_VERSION

# The headers every reply carries with the same value, as one block of text.
CONSTANT_HEADERS = {"Content-Type": JSON, "x-ms-gatewayversion": GATEWAY_VERSION,
                    "x-ms-serviceversion": SERVICE_VERSION}
_CONSTANT_LINES = "".join(f"{k}: {v}\r\n" for k, v in CONSTANT_HEADERS.items())


def encode(reply, connection: str, head_only: bool) -> bytes:
    """The reply's bytes; `connection` is its Connection header line, or "" for none."""
    status = reply.status
    hdrs = reply.headers
    lines = "\r\n".join(map(_header_line, hdrs.items())) + "\r\n" if hdrs else ""
    constant = _CONSTANT_LINES if reply.content_type is None else _constant_lines(reply.content_type)
    if status in _NO_BODY:
        head = f"{_status_line(status)}{constant}{lines}{_http_date()}"
        head_only = True
    else:
        head = (f"{_status_line(status)}{constant}{lines}"
                f"Content-Length: {len(reply.body)}\r\n{_http_date()}")
    head = f"{head}{connection}\r\n".encode()
    return head if head_only else head + reply.body


def _constant_lines(content_type: str) -> str:
    return "".join(f"{k}: {content_type if k == 'Content-Type' else v}\r\n" for k, v in CONSTANT_HEADERS.items())


_NO_BODY = frozenset((204, 304))
_header_line = ": ".join               # ("name", "value") -> "name: value"
_STATUS_LINES: dict = {}
_date = [0, ""]


def _status_line(status: int) -> str:
    line = _STATUS_LINES.get(status)
    if line is None:
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = "Unknown"
        line = _STATUS_LINES[status] = f"HTTP/1.1 {status} {reason}\r\n"
    return line


def _http_date() -> str:
    """The Date header, formatted at most once a second (the gateway is a shell: it may read
    the wall clock; the core never does)."""
    now = int(time.time())
    if _date[0] != now:
        _date[0], _date[1] = now, f"Date: {formatdate(now, usegmt=True)}\r\n"
    return _date[1]
