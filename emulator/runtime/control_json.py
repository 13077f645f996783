"""JSON helpers shared by the control port's route modules: replies, request bodies, and the
wrapper that turns a core CosmosError into `{"error": message}` with its status."""
from aiohttp import web

from ..core.errors import CosmosError


def json_reply(data, status: int = 200) -> web.Response:
    return web.json_response(data, status=status)


async def json_body(request) -> dict:
    try:
        body = await request.json()
    except ValueError:
        raise CosmosError(400, 0, "The body must be a JSON object.") from None
    if not isinstance(body, dict):
        raise CosmosError(400, 0, "The body must be a JSON object.")
    return body


def guarded(fn):
    """A route handler whose CosmosErrors become JSON error replies."""
    async def handler(request):
        try:
            return await fn(request)
        except CosmosError as e:
            return json_reply({"error": e.message}, status=e.status)
    return handler
