"""Session tokens on the wire: parsing the request's, producing the reply's.

The reply token is `<pkRangeId>:<epoch>#<lsn>` (cosmos-wire §8). The SDK stores it only when
the reply also names the collection and the range (`x-ms-documentdb-partitionkeyrangeid`): the
Python SDK keys its session container on the name path (`x-ms-alt-content-path`), the JS SDK on
the container's `_rid` (`x-ms-content-path`, cosmos-wire §10.2), so every reply sends both.
"""
from client.protocol import headers as H
from client.protocol.session_token import parse_session_header

from ..core.errors import bad_request


SESSION_CACHE_MAX = 16_384
_parsed: dict = {}            # raw header -> parsed tokens (never mutated by readers)


def parse_session(call) -> dict | None:
    raw = call.header(H.SESSION_TOKEN)
    if not raw:
        return None
    return parse_session_text(raw)


def parse_session_text(raw: str) -> dict:
    """The parsed tokens of a session token's text (direct mode passes the text itself)."""
    hit = _parsed.get(raw)
    if hit is not None:
        return hit
    try:
        tokens = parse_session_header(raw)
    except ValueError as e:
        raise bad_request(f"The session token '{raw[:120]}' is malformed: {e}. Expected "
                          "<pkRangeId>:<version>#<globalLSN>[#<regionId>=<localLSN>...].") from None
    if len(_parsed) >= SESSION_CACHE_MAX:
        _parsed.clear()
    _parsed[raw] = tokens
    return tokens


def token(rs, lsn: int) -> str:
    """`<range>:<version>#<lsn>#<regionId>=<count>...`: the LSN, and the region vector: how many
    writes that originated in each region (by id) this region has applied, for every region.
    Single-write reads are judged by the LSN (one history); multi-write reads by the vector.

    The vector's text is kept per replica set until its progress or the account's regions change
    (formatting its numbers anew costs more than the rest of a point read). It is kept on the
    replica set itself (`token_vector`: its progress_seq, region order, vector text, and the
    order's format: "#id=%d..." with the names in id order), so a deleted container takes it
    along. A write changes the progress, so every write formats it: with one %-format of the
    counts (map over the names, no Python frame per region), here rather than in a function of
    its own (a call per write)."""
    partition = rs.partition
    if partition is None:
        return f"{rs.range_id}:{rs.epoch}#{lsn}"
    order = partition.region_order
    hit = rs.token_vector
    if hit is not None and hit[1] is order:
        if hit[0] == rs.progress_seq:
            return f"{rs.range_id}:{rs.epoch}#{lsn}{hit[2]}"
        form = hit[3]
    else:
        form = _form(order)
    fmt, names, zeros = form
    text = fmt % tuple(map(rs.progress.get, names, zeros))
    rs.token_vector = (rs.progress_seq, order, text, form)
    return f"{rs.range_id}:{rs.epoch}#{lsn}{text}"


def _form(order) -> tuple:
    """(the vector's %-format in id order, the region names in that order, a 0 per region)."""
    return "".join([f"#{rid}=%d" for _, rid in order]), tuple([name for name, _ in order]), (0,) * len(order)


def session_headers(call, container, rs, lsn: int) -> dict:
    return {H.SESSION_TOKEN: token(rs, lsn),
            H.ALT_CONTENT_PATH: container.name_path,
            H.CONTENT_PATH: container.rid,
            H.PK_RANGE_ID: rs.range_id,
            H.LSN: str(lsn)}
