"""Session tokens on the wire: parsing the request's, producing the reply's.

The reply token is `<pkRangeId>:<epoch>#<lsn>` (cosmos-wire §8). The SDK stores it only when
the reply also names the collection (`x-ms-alt-content-path`) and the range
(`x-ms-documentdb-partitionkeyrangeid`).
"""
from client.protocol import headers as H
from client.protocol.session_token import parse_session_header

from ..core.errors import bad_request


def parse_session(call) -> dict | None:
    raw = call.header(H.SESSION_TOKEN)
    if not raw:
        return None
    try:
        return parse_session_header(raw)
    except ValueError as e:
        raise bad_request(f"The session token '{raw[:120]}' is malformed: {e}. Expected "
                          "<pkRangeId>:<version>#<globalLSN>[#<regionId>=<localLSN>...].") from None


def token(rs, lsn: int) -> str:
    """`<range>:<version>#<lsn>#<regionId>=<count>...`: the LSN, and the region vector: how many
    writes that originated in each region (by id) this region has applied, for every region.
    Single-write reads are judged by the LSN (one history); multi-write reads by the vector."""
    if rs.partition is None:
        return f"{rs.range_id}:{rs.epoch}#{lsn}"
    vector = "".join(f"#{rid}={rs.progress.get(name, 0)}"
                     for name, rid in sorted(rs.partition.region_ids.items(), key=lambda kv: kv[1]))
    return f"{rs.range_id}:{rs.epoch}#{lsn}{vector}"


def session_headers(call, container, rs, lsn: int) -> dict:
    return {H.SESSION_TOKEN: token(rs, lsn),
            H.ALT_CONTENT_PATH: container.name_path,
            H.PK_RANGE_ID: rs.range_id,
            H.LSN: str(lsn)}
