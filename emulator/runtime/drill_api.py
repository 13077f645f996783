"""Control-port routes for the drill that is running against this emulator (docs/control-api.md,
"A running drill"): the drill runner reports its state here (`PUT /drill`, about once a second and
at every step) and the dashboard shows it (`GET /drill`).

The emulator does not run drills; it keeps the last state a runner sent, checked whole against
DRILL_FIELDS (a body with an unknown key, a wrong type or a list past its bound is a 400 and
changes nothing), so what it keeps is bounded: at most DRILL_STEPS_MAX steps and
DRILL_TIMELINE_MAX timeline points of short labels, well under the control port's body limit.
"""
from aiohttp import web

from ..core.errors import CosmosError
from .control_json import guarded, json_body, json_reply

DRILL_LABEL_MAX_CHARS = 300
DRILL_TEXT_MAX_CHARS = 2000
DRILL_STEPS_MAX = 500
DRILL_TIMELINE_MAX = 600
ENDINGS = ("completed", "aborted", "interrupted")


def _text(limit):
    def check(v):
        return isinstance(v, str) and len(v) <= limit, f"a string of at most {limit} characters"
    return check


def _number(v):
    return (isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0), "a number >= 0"


def _count(v):
    return (isinstance(v, int) and not isinstance(v, bool) and v >= 0), "an integer >= 0"


def _record(fields: dict):
    def check(v):
        ok = isinstance(v, dict) and set(v) == set(fields) and all(fields[k](v[k])[0] for k in fields)
        return ok, "{" + ", ".join(f"{k!r}: {fields[k](None)[1]}" for k in fields) + "}"
    return check


def _list_of(item, limit):
    def check(v):
        return (isinstance(v, list) and len(v) <= limit and all(item(x)[0] for x in v),
                f"a list of at most {limit} items, each {item(None)[1]}")
    return check


def _optional(check):
    def inner(v):
        ok, what = check(v)
        return v is None or ok, f"null or {what}"
    return inner


def _ending(v):
    return v in ENDINGS, f"one of {', '.join(ENDINGS)}"


_STEP = _record({"label": _text(DRILL_LABEL_MAX_CHARS), "at_ms": _number, "ran": lambda v: (isinstance(v, bool), "true or false")})
_POINT = _record({"t_s": _number, "ops": _count, "errors": _count})
DRILL_FIELDS = {
    "name": _text(DRILL_LABEL_MAX_CHARS), "description": _text(DRILL_TEXT_MAX_CHARS),
    "elapsed_ms": _number, "duration_ms": _number, "bucket_s": _number, "phase": _text(DRILL_LABEL_MAX_CHARS),
    "next": _optional(_record({"label": _text(DRILL_LABEL_MAX_CHARS), "at_ms": _number})),
    "steps": _list_of(_STEP, DRILL_STEPS_MAX), "timeline": _list_of(_POINT, DRILL_TIMELINE_MAX),
    "ops": _count, "errors": _count, "ended": _optional(_ending),
}


def check_state(body: dict) -> dict:
    """The body as the drill's state, or a 400 naming the first field that is wrong."""
    missing = sorted(set(DRILL_FIELDS) - set(body))
    if missing:
        raise CosmosError(400, 0, f"A drill state needs every field of: {', '.join(DRILL_FIELDS)}; "
                                  f"missing: {', '.join(missing)}.")
    for name, check in DRILL_FIELDS.items():
        ok, what = check(body[name])
        if not ok:
            raise CosmosError(400, 0, f"The drill state's {name!r} must be {what}.")
    return body


def add_drill_routes(app: web.Application, emu) -> None:
    current = {"drill": None}

    async def show(request):
        return json_reply(current)

    async def put(request):
        state = check_state(await json_body(request, tuple(DRILL_FIELDS)))
        current["drill"] = dict(state, updated_ms=emu.account.clock.now_ms())
        return json_reply(current)

    async def clear(request):
        current["drill"] = None
        return json_reply(current)

    app.router.add_get("/drill", guarded(show))
    app.router.add_put("/drill", guarded(put))
    app.router.add_delete("/drill", guarded(clear))
