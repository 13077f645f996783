"""Session tokens on the wire: parsing the request's, producing the reply's.

The reply token is `<pkRangeId>:<epoch>#<lsn>` (cosmos-wire §8). The SDK stores it only when
the reply also names the collection and the range (`x-ms-documentdb-partitionkeyrangeid`): the
Python SDK keys its session container on the name path (`x-ms-alt-content-path`), the JS SDK on
the container's `_rid` (`x-ms-content-path`, cosmos-wire §10.2), so every reply sends both.
"""
from regionlab.client.protocol import headers as H
from regionlab.client.protocol.session_token import parse_session_header

from ..core.cache import Cache, text_bytes
from ..core.errors import SUB_READ_SESSION_NOT_AVAILABLE, CosmosError, bad_request
from ..core.limits import SESSION_TOKENS_CACHE_MAX_BYTES

TOKEN_BYTES = 400             # one parsed range token (a VectorToken and its dict slot), measured ~330
_parsed = Cache(SESSION_TOKENS_CACHE_MAX_BYTES)     # raw header -> parsed tokens (never mutated by readers)


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
    return _parsed.put(raw, tokens, text_bytes(raw) + TOKEN_BYTES * len(tokens))


def token(rs, lsn: int) -> str:
    """`<range>:<version>#<lsn>#<regionId>=<count>...`: the LSN, and the region vector: how many
    writes that originated in each region (by id) this region has applied, for every region.
    Single-write reads are judged by the LSN (one history); multi-write reads by the vector.

    The vector's text is kept per replica set until its progress or the account's regions change
    (formatting its numbers anew costs more than the rest of a point read). It is kept on the
    replica set itself (`token_vector`, below), so a deleted container takes it along. A write
    changes the progress, so every write needs a new text; but a write moves one region's count
    (the write region's, `rs.progress_moved`), so once the same region moved twice in a row the
    text is kept split around that count, and the next move formats that one number.

    token_vector: (progress_seq, region order, text, form, moved, before, after): the vector
    text for that progress_seq; the region whose count the change to it moved (or None); and,
    when known, the text before and after that region's count (else None)."""
    partition = rs.partition
    if partition is None:
        return f"{rs.range_id}:{rs.epoch}#{lsn}"
    order = partition.region_order
    hit = rs.token_vector
    seq = rs.progress_seq
    if hit is not None and hit[1] is order:
        if hit[0] == seq:
            return f"{rs.range_id}:{rs.epoch}#{lsn}{hit[2]}"
        moved = rs.progress_moved
        if hit[0] + 1 == seq and moved is not None and moved == hit[4] and hit[5] is not None:
            # The one change since the kept text moved the count it is split around.
            before, after = hit[5], hit[6]
            text = f"{before}{rs.progress[moved]}{after}"
            rs.token_vector = (seq, order, text, hit[3], moved, before, after)
            return f"{rs.range_id}:{rs.epoch}#{lsn}{text}"
        form = hit[3]
        again = moved is not None and moved == hit[4]      # the same region moved again
    else:
        form = _form(order)
        moved, again = rs.progress_moved, False
    fmt, names, zeros = form
    values = tuple(map(rs.progress.get, names, zeros))
    text = fmt % values
    before = after = None
    if again and moved in names:
        # Split the text around moved's count (once per run of moves of one region).
        i = names.index(moved)
        parts = fmt.split("%d")
        before = "".join([parts[k] + str(values[k]) for k in range(i)]) + parts[i]
        after = parts[i + 1] + "".join([str(values[k]) + parts[k + 1] for k in range(i + 1, len(values))])
    rs.token_vector = (seq, order, text, form, moved, before, after)
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


def session_refused(err: CosmosError) -> bool:
    return err.status == 404 and err.substatus == SUB_READ_SESSION_NOT_AVAILABLE


def refusal_headers(call, container, rs) -> dict:
    """The session headers of a 404/1002: the token of what this region's replica set has
    committed, with the name path, as the service sends them on this reply. The Python SDK stores
    an error reply's token before its retry policy decides; its last try then clears the
    container's tokens by that name (`clear_session_token`), which raises KeyError when a request
    in between had put the name back without tokens. A reply that names the container puts both
    back first."""
    return session_headers(call, container, rs, rs.committed_lsn)
