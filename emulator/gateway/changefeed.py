"""Change feed requests (cosmos-wire §7): `GET .../docs` with `A-IM`.

Scope: the partition key range id header picks the physical partition; EPK headers narrow it
to a sub-range or one partition key. Start: no If-None-Match = from the beginning, `*` = from
now, If-Modified-Since = from a time, an etag = after that position. The etag is the position
(`"<lsn>"`); nothing new answers 304 with the etag, so the SDK keeps its place.
"""
from email.utils import parsedate_to_datetime

from client.protocol import headers as H

from ..core import changefeed as cf
from ..core import charge
from ..core import feed as feeds
from ..core import throttle as th
from ..core.consistency import effective
from ..core.documents import choose_replica, pk_values_of
from ..core.errors import CosmosError, bad_request
from . import admission, responses
from .sessions import parse_session, session_headers


def _position(etag: str) -> int:
    try:
        return int(etag.strip('"'))
    except ValueError:
        raise bad_request(f"The change feed continuation (If-None-Match) '{etag[:60]}' is not one this "
                          "server issued; pass back the etag of the previous response.") from None


def _partition(call, container):
    range_id = call.header(H.PK_RANGE_ID)
    if range_id is None:
        if len(container.partitions) == 1:
            return container.partitions[0]
        raise bad_request("A change feed request needs x-ms-documentdb-partitionkeyrangeid on a container "
                          f"with {len(container.partitions)} partition key ranges.")
    for p in container.partitions:
        if p.range_id == range_id:
            return p
    raise CosmosError(410, 1002, f"Partition key range '{range_id}' is gone; refresh the partition key ranges.")


def _start(call, rs, upto: int) -> int:
    inm = call.header(H.IF_NONE_MATCH)
    ims = call.header(H.IF_MODIFIED_SINCE)
    if inm == "*":
        return upto
    if inm:
        return _position(inm)
    if ims:
        try:
            ts = int(parsedate_to_datetime(ims).timestamp())
        except (TypeError, ValueError, IndexError, OverflowError):
            raise bad_request(f"If-Modified-Since '{ims[:60]}' is not an RFC 1123 date.") from None
        return cf.position_at_time(rs.store, upto, ts)
    return 0


async def change_feed(call, container):
    full = (call.header(H.A_IM) or "").lower() == H.A_IM_FULL_FIDELITY.lower()
    rs = _partition(call, container).for_read(call.region)
    consistency = effective(call.gw.account.consistency, call.header(H.CONSISTENCY_LEVEL))
    session = parse_session(call)
    waiting = call.gw.readable(rs, consistency, session)
    if waiting is not None:
        await waiting
    _, upto = choose_replica(rs, consistency, session)
    epk_range = None
    if (call.header(H.READ_KEY_TYPE) or "") == H.READ_KEY_TYPE_EPK_RANGE:
        epk_range = ((call.header(H.START_EPK) or "").upper(), (call.header(H.END_EPK) or "FF").upper())
    after = _start(call, rs, upto)
    max_items = feeds.page_size(call.int_header(H.MAX_ITEM_COUNT))
    epk_of = lambda pk_json: container.epk_of(pk_json, pk_values_of(pk_json))
    if after >= upto:
        versions, nxt = [], after
    elif full:
        versions, nxt = cf.all_versions(rs, after, upto, max_items, epk_of, epk_range)
    else:
        versions, nxt = cf.latest_versions(rs.store, after, upto, max_items, epk_of, epk_range)
    hdrs = session_headers(call, container, rs, upto)
    hdrs[H.ETAG] = f'"{nxt}"'
    if not versions:
        admission.read(call, container, rs, charge.NOT_MODIFIED_RU, th.CHANGE_FEED)
        return responses.reply(304, None, call.activity_id, charge.NOT_MODIFIED_RU, hdrs)
    if full:
        names = [path.rsplit("/", 1)[-1].strip("\"'") for path in container.pk_def.paths]
        raw = [responses.dumps(cf.avad_entry(v, names)) for v in versions]
    else:
        raw = [v.body[:-1] + b',"_lsn":' + str(v.lsn).encode() + b"}" for v in versions]
    hdrs[H.ITEM_COUNT] = str(len(raw))
    ru = charge.feed(len(raw), sum(map(len, raw)))
    admission.read(call, container, rs, ru, th.CHANGE_FEED, len(raw))
    return responses.reply(200, responses.feed_body(container.rid, "Documents", raw), call.activity_id, ru, hdrs)
