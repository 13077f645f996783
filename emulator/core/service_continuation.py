"""Query continuations in the service's own format, resumed here.

Theory of operation: the service's backend continuation is `-RID:~<rid>#RT:<round trips>#TRC:<results
so far>#ISV:2#IEO:65567#QCF:8` (also `+RID:`), and its gateway wraps it with the range it
belongs to: `[{"token": "-RID:...", "range": {"min": "05C1...", "max": "FF"}}]` (the Java SDK
writes the range as JSON text). Clients keep such tokens (the SDKs' own tests replay one), so a
token of that shape is resumed where regionlab's own continuation would be: in the partition
key range whose span holds the range's `min` (the first of the scope without one), after
`TRC` results of the query there. A document's `_rid` orders nothing here (documents are kept
by partition key and id), so the RID is not used; the count is exact while the documents ahead
of it do not change, as with the service's own position-based tokens.

Streaming queries (no ORDER BY, aggregate, GROUP BY, DISTINCT) and GROUP BY / DISTINCT (which
count the results already returned) resume; an ORDER BY token carries the service's ORDER BY
values and filter, which regionlab's engine does not take back: 400 saying so. Pure: text in,
state out; None for a token not in the service's format.
"""
from __future__ import annotations

import json
import re

from .errors import bad_request
from .query_page import Position, StreamState
from .validation import text_nests_at_most

_BACKEND = re.compile(r"^[+-]RID:~?[A-Za-z0-9+/=_~-]*#RT:(\d{1,9})#TRC:(\d{1,12})(#[A-Za-z]+:[^#]*)*$")


def looks_like_service_token(token: str) -> bool:
    return token[:5] in ("-RID:", "+RID:") or token[:1] in ("[", "{")


def service_state(query, token: str, range_mins: list):
    """The state to resume at for a service-format token, given the min EPK of each partition
    key range in scope (in order); None when the token is not in that format."""
    if not looks_like_service_token(token):
        return None
    backend, range_min = _unwrap(token)
    matched = _BACKEND.match(backend) if backend is not None else None
    if matched is None:
        raise bad_request(f"Invalid query continuation '{token[:60]}': not a continuation this query returned "
                          "(regionlab's, or the service's '-RID:...#RT:...#TRC:...' form).")
    returned = int(matched.group(2))
    part = _part_of(range_min, range_mins)
    if query.streams:
        plan = query.plan
        take = None if plan.take is None else max(plan.take - returned, 0)
        at = None if part == 0 else Position(part, None, None)
        return StreamState(at, plan.offset + returned, take)
    plan = query.plan
    if plan.order and not plan.distinct and plan.group_keys is None:
        raise bad_request("A continuation in the service's format cannot resume an ORDER BY query here: pass "
                          "back the x-ms-continuation regionlab returned for this query, or start it again.")
    return returned


def _unwrap(token: str):
    """(backend token, the range's min EPK or None)."""
    if token[:1] not in ("[", "{"):
        return token, None
    if not text_nests_at_most(token):
        return None, None
    try:
        data = json.loads(token)
    except ValueError:
        return None, None
    if isinstance(data, list):
        data = data[0] if data and isinstance(data[0], dict) else None
    if not isinstance(data, dict):
        return None, None
    data = data.get("compositeToken", data)
    backend, span = data.get("token"), data.get("range")
    if isinstance(span, str):
        try:
            span = json.loads(span) if text_nests_at_most(span) else None
        except ValueError:
            span = None
    range_min = span.get("min") if isinstance(span, dict) else None
    return (backend if isinstance(backend, str) else None), (range_min if isinstance(range_min, str) else None)


def _part_of(range_min: str | None, range_mins: list) -> int:
    """The ordinal of the range in scope holding range_min (the last whose min is not above it)."""
    if range_min is None:
        return 0
    wanted = range_min.upper()
    part = 0
    for i, low in enumerate(range_mins):
        if low <= wanted:
            part = i
    return part
