"""JSON helpers shared by the control port's route modules: replies, request bodies, and the
wrapper that turns a core CosmosError into `{"error": message}` with its status.

A body is parsed from its bytes (never through a declared charset, which could name a codec that
does not exist), must be one JSON object of bounded size and nesting, and may not contain NaN or
Infinity (nor a number that overflows to it): whatever a client sends, the answer is the value or a 400, and what the control port
stores from a body can always be written back out as JSON."""
import json
import math

from aiohttp import web

from ..core.errors import CosmosError
from ..core.limits import CONTROL_BODY_NESTING_MAX_LEVELS


BODY_HINT = "The body must be one JSON object, e.g. {\"name\": \"North Europe\"}."


def json_reply(data, status: int = 200) -> web.Response:
    return web.json_response(data, status=status)


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):                       # 1e400 overflows to inf
        raise ValueError(f"{text} is out of range")
    return value


def _depth_ok(value) -> bool:
    """Whether value nests at most CONTROL_BODY_NESTING_MAX_LEVELS containers deep (iteratively: a check
    that recursed could itself overflow the stack)."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, (dict, list)):
            if depth > CONTROL_BODY_NESTING_MAX_LEVELS:
                return False
            children = v.values() if isinstance(v, dict) else v
            stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return True


def parse_body(raw: bytes) -> dict:
    """The JSON object in raw, or a CosmosError 400 saying what is wrong with it."""
    if not raw.strip():
        raise CosmosError(400, 0, "The request has no body. " + BODY_HINT)
    try:
        body = json.loads(raw, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise CosmosError(400, 0, f"The body nests too deeply (at most {CONTROL_BODY_NESTING_MAX_LEVELS} levels).") from None
    except ValueError as e:                # also bad UTF-8 and integers too long to convert
        raise CosmosError(400, 0, f"The body is not valid JSON ({e}). " + BODY_HINT) from None
    if not isinstance(body, dict):
        raise CosmosError(400, 0, BODY_HINT)
    if not _depth_ok(body):
        raise CosmosError(400, 0, f"The body nests too deeply (at most {CONTROL_BODY_NESTING_MAX_LEVELS} levels).")
    return body


async def json_body(request, keys: tuple | None = None) -> dict:
    """The request's JSON object; with `keys`, a body naming any other key is a 400 that lists
    the keys the route takes (a misspelt option must not be silently ignored while the rest
    acts)."""
    body = parse_body(await request.read())
    if keys is not None:
        unknown = sorted(set(body) - set(keys))
        if unknown:
            raise CosmosError(400, 0, f"Unknown key(s) {unknown} for {request.method} {request.path}; "
                                      f"it takes: {', '.join(keys)}.")
    return body


def guarded(fn):
    """A route handler whose CosmosErrors become JSON error replies."""
    async def handler(request):
        try:
            return await fn(request)
        except CosmosError as e:
            return json_reply({"error": e.message}, status=e.status)
    return handler
