"""The change feed of a container: per partition key range, from the beginning, now, a time or a
continuation, for the whole container, one partition key or a feed range; latest versions or all
versions and deletes.

The continuation token is the client's own (base64 JSON): each range's position (the etag the
server gave it) and how the feed started. A page is one range's reply; a round in which every
range answered 304 ends the iteration, and its token continues after everything seen.
"""
import email.utils
from datetime import datetime, timezone

from regionlab.client import partition_key as pkmod
from regionlab.client.protocol import headers as H
from regionlab.client.protocol.partition_key_hash import epk_successor

from .feed import AsyncItemPaged, decode_token, encode_token
from .links import link_path
from .request import Request, request_options
from .responses import body_json

BEGINNING, NOW = "Beginning", "Now"
ALL_VERSIONS = "AllVersionsAndDeletes"
FULL_FIDELITY_WIRE_FORMAT = "2021-09-15"


def _start_of(start_time) -> str:
    if start_time is None or start_time == NOW:
        return NOW
    if start_time == BEGINNING:
        return BEGINNING
    if isinstance(start_time, datetime):
        ts = start_time if start_time.tzinfo else start_time.replace(tzinfo=timezone.utc)
        return email.utils.format_datetime(ts.astimezone(timezone.utc), usegmt=True)
    raise ValueError(f"start_time must be 'Beginning', 'Now' or a datetime, not {start_time!r}")


def feed_range_bounds(feed_range: dict) -> tuple[str, str]:
    """[min, max) of a feed range dict (ours, or the SDK's, whose max may be inclusive: one
    partition key's range is [epk, epk])."""
    bounds = feed_range.get("Range", feed_range)
    try:
        low, high = bounds["min"], bounds["max"]
        if bounds.get("isMaxInclusive"):
            high = epk_successor(high)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise ValueError(f"not a feed range: {feed_range!r}") from None
    return low, high


def _scopes(ranges: list[dict], partition_key, feed_range, paths=None) -> list[dict]:
    """One scope per range to read: its id and, when narrower than the range, EPK bounds."""
    if partition_key is not None:
        values = list(partition_key) if isinstance(partition_key, (list, tuple)) else [partition_key]
        epk = pkmod.epk_of(values)
        for r in ranges:
            if r["minInclusive"] <= epk < r["maxExclusive"]:
                return [{"id": r["id"], "min": epk, "max": epk_successor(epk), "etag": None}]
        raise ValueError(f"no partition key range holds the key {partition_key!r}")
    low, high = ("", "FF")
    if feed_range is not None:
        low, high = feed_range_bounds(feed_range)
    out = []
    for r in ranges:
        lo, hi = max(low, r["minInclusive"]), min(high, r["maxExclusive"])
        if lo < hi:
            narrower = (lo, hi) != (r["minInclusive"], r["maxExclusive"])
            out.append({"id": r["id"], "min": lo if narrower else None, "max": hi if narrower else None,
                        "etag": None})
    return out


class ChangeFeed:
    """One change feed iteration; its state is opened on the first page (the partition key
    ranges are read then), so building one costs nothing, as the SDK's."""

    def __init__(self, container, *, partition_key=None, feed_range=None, start_time=None,
                 continuation=None, max_item_count=None, mode=None, is_start_from_beginning=False, **kwargs):
        self.container = container
        self.scope = (partition_key, feed_range)
        # is_start_from_beginning: azure-cosmos's older spelling of start_time="Beginning"
        self.start = _start_of(BEGINNING if is_start_from_beginning and start_time is None else start_time)
        self.mode = mode or "LatestVersion"
        self.max_item_count = max_item_count
        self.continuation = continuation
        self.options = request_options(kwargs, "query_items_change_feed")

    def pages(self) -> AsyncItemPaged:
        return AsyncItemPaged(self._fetch, self.continuation)

    async def _open(self) -> str:
        ranges = await self.container._partition_key_ranges()
        return encode_token({"v": 1, "start": self.start, "mode": self.mode,
                             "scopes": _scopes(ranges, *self.scope, None)})

    async def _fetch(self, token):
        state = decode_token(token or await self._open())
        state["max"] = self.max_item_count
        scopes = state["scopes"]
        quiet = 0
        cursor = state.get("cursor", 0)
        while quiet < len(scopes):
            scope = scopes[cursor % len(scopes)]
            cursor += 1
            reply, diag = await self._request(state, scope)
            scope["etag"] = reply.headers.get(H.ETAG) or scope["etag"]
            state["cursor"] = cursor
            if reply.status == 304:
                quiet += 1
                continue
            items = (body_json(reply) or {}).get("Documents", [])
            return items, encode_token(state), diag, reply.headers
        return None, encode_token(state), None, None

    async def _request(self, state, scope):
        c = self.container
        headers = {H.A_IM: H.A_IM_INCREMENTAL, H.PK_RANGE_ID: scope["id"]}
        if state["mode"] == ALL_VERSIONS:
            headers[H.A_IM] = H.A_IM_FULL_FIDELITY
            headers[H.CHANGE_FEED_WIRE_FORMAT_VERSION] = FULL_FIDELITY_WIRE_FORMAT
        if scope["min"] is not None:
            headers.update({H.READ_KEY_TYPE: H.READ_KEY_TYPE_EPK_RANGE,
                            H.START_EPK: scope["min"], H.END_EPK: scope["max"]})
        if state.get("max"):
            headers[H.MAX_ITEM_COUNT] = str(state["max"])
        if scope["etag"]:
            headers[H.IF_NONE_MATCH] = scope["etag"]
        elif state["start"] == NOW:
            headers[H.IF_NONE_MATCH] = "*"
        elif state["start"] != BEGINNING:
            headers[H.IF_MODIFIED_SINCE] = state["start"]
        req = Request("GET", link_path(c.link, "docs"), "change_feed", headers, is_document=True,
                      is_feed=True, collection=c.link, **self.options)
        return await c.client._pipeline.execute(req)
