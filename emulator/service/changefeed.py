"""Change feed requests (cosmos-wire §7): `GET .../docs` with `A-IM`.

Scope: the partition key range id header picks the physical partition; EPK headers narrow it
to a sub-range or one partition key. A partition key header without EPK headers (the JS SDK's
form) scopes the feed to that key (or, for a prefix of a hierarchical key, to every key under
it), in the partition that holds it. Start: no If-None-Match = from the beginning, `*` = from
now, If-Modified-Since = from a time, an etag = after that position. The etag is the position
(`"<lsn>"`); nothing new answers 304 with the etag, so the SDK keeps its place.
"""
from email.utils import parsedate_to_datetime

from regionlab.client.protocol import headers as H

from ..core import changefeed as cf
from ..core import charge
from ..core import epk as epks
from ..core import feed as feeds
from ..core import throttle as th
from ..core.consistency import effective
from ..core.documents import choose_replica, pk_values_of
from ..core.errors import CosmosError, bad_request
from . import admission, partition_keys, responses
from .sessions import parse_session, session_headers

MAX_EPK = "FF"          # the exclusive end of the last partition key range


def _position(etag: str) -> int:
    try:
        return int(etag.strip('"'))
    except ValueError:
        raise bad_request(f"The change feed continuation (If-None-Match) '{etag[:60]}' is not one this "
                          "server issued; pass back the etag of the previous response.") from None


def _partition(call, container, key_scope):
    range_id = call.header(H.PK_RANGE_ID)
    if range_id is None:
        if key_scope is not None:
            return key_scope[0]
        if len(container.partitions) == 1:
            return container.partitions[0]
        raise bad_request("A change feed request needs x-ms-documentdb-partitionkeyrangeid (or a partition key) "
                          f"on a container with {len(container.partitions)} partition key ranges.")
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


def _key_scope(call, container, epk_of):
    """(partition, filter) of a feed for one partition key (`x-ms-documentdb-partitionkey` and no
    EPK range; the JS SDK's form), or None. A prefix of a hierarchical key selects every key under
    it, so it must lie within one partition key range."""
    if call.header(H.PARTITION_KEY) is None or _epk_headers(call):
        return None
    pk_json, values = partition_keys.required(call, container, full=False)
    if len(values) == len(container.pk_def.paths):
        epk = container.epk_of(pk_json, values)
        return container.partition_for_epk(epk), cf.of_partition_key(pk_json)
    prefix = epks.effective_partition_key(container.pk_def, values)
    p = container.partition_for_epk(prefix)
    if p.max_epk != MAX_EPK and p.max_epk.startswith(prefix):
        raise bad_request(f"The partition key prefix {pk_json} spans several partition key ranges; read the "
                          "change feed per range (x-ms-documentdb-partitionkeyrangeid or an EPK range).")
    return p, lambda key: epk_of(key[0]).startswith(prefix)


def _epk_headers(call) -> bool:
    return (call.header(H.READ_KEY_TYPE) or "") == H.READ_KEY_TYPE_EPK_RANGE


async def change_feed(call, container):
    full = (call.header(H.A_IM) or "").lower() == H.A_IM_FULL_FIDELITY.lower()
    epk_of = lambda pk_json: container.epk_of(pk_json, pk_values_of(pk_json))
    key_scope = _key_scope(call, container, epk_of)
    rs = _partition(call, container, key_scope).for_read(call.region)
    consistency = effective(call.svc.account.consistency, call.header(H.CONSISTENCY_LEVEL))
    session = parse_session(call)
    waiting = call.svc.readable(rs, consistency, session)
    if waiting is not None:
        await waiting
    _, upto = choose_replica(rs, consistency, session, call.svc.primary_ok, call.pins())
    accept = None if key_scope is None else key_scope[1]
    if _epk_headers(call):
        accept = cf.in_epk_range(epk_of, (call.header(H.START_EPK) or "").upper(),
                                 (call.header(H.END_EPK) or MAX_EPK).upper())
    after = _start(call, rs, upto)
    max_items = feeds.page_size(call.int_header(H.MAX_ITEM_COUNT))
    entries = {}                # id(version) -> its wire bytes, made once while sizing the page
    if full:
        names = [path.rsplit("/", 1)[-1].strip("\"'") for path in container.pk_def.paths]
        encode = lambda v: responses.dumps(cf.avad_entry(v, names))        # noqa: E731
    else:
        encode = lambda v: v.body[:-1] + b',"_lsn":' + str(v.lsn).encode() + b"}"  # noqa: E731

    def size_of(v) -> int:
        raw = entries[id(v)] = encode(v)
        return len(raw)
    if after >= upto:
        versions, nxt = [], after
    elif full:
        versions, nxt = cf.all_versions(rs, after, upto, max_items, accept, size_of)
    else:
        expired = None
        if container.ttl is not None:
            now_ms = container.ttl.now_ms(call.region)
            expired = lambda v: container.ttl.expired_at(v, now_ms)     # noqa: E731
        versions, nxt = cf.latest_versions(rs.store, after, upto, max_items, accept, size_of, expired=expired)
    hdrs = session_headers(call, container, rs, upto)
    hdrs[H.ETAG] = f'"{nxt}"'
    if not versions:
        admission.read(call, container, rs, charge.NOT_MODIFIED_RU, th.CHANGE_FEED)
        return responses.reply(304, None, call.activity_id, charge.NOT_MODIFIED_RU, hdrs)
    raw = [entries[id(v)] for v in versions]
    hdrs[H.ITEM_COUNT] = str(len(raw))
    ru = charge.feed(len(raw), sum(map(len, raw)))
    admission.read(call, container, rs, ru, th.CHANGE_FEED, len(raw))
    return responses.reply(200, responses.feed_body(container.rid, "Documents", raw), call.activity_id, ru, hdrs)
