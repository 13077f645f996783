"""Session tokens: the vector format, the compound header, and the SDK's merge (cosmos-wire §8).

Theory of operation. A session token records how far a client has seen a partition's log. One
partition key range's token is a *vector*:

    <version>#<globalLSN>[#<regionId>=<localLSN>]...      e.g. "-1#42" or "2#90#1=25#2=30"

and the ``x-ms-session-token`` header carries one vector per range, ``<rangeId>:<vector>``,
comma-separated. Every integer may be negative.

Parsing is strict where the SDK is strict (a malformed vector after a ``:`` makes the SDK raise a
500, so we raise ValueError) and lenient where it is lenient (a comma-separated piece that does
not split into exactly two on ``:`` is ignored). We are stricter than the SDK in three places,
all of which the SDK never produces itself: integers must be plain ASCII ``-?[0-9]+`` (Python's
``int`` would also take ``" 5"``, ``"+5"``, ``"1_0"``), a region id may appear once per vector,
and the region list is kept sorted, so ``format_vector(parse_vector(s)) == s`` holds for tokens
whose regions are in ascending order.

``merge`` follows the SDK with its default ``AZURE_COSMOS_SESSION_TOKEN_FALSE_PROGRESS_MERGE``:
same version → the max of everything; different versions → the higher version's own global LSN
and its own regions, each maxed with the other token's value for that region.
"""

import re
from dataclasses import dataclass

_INT = re.compile(r"-?[0-9]+\Z")
_SEGMENT_SEPARATOR = "#"
_REGION_SEPARATOR = "="
_PAIR_SEPARATOR = ","
_RANGE_SEPARATOR = ":"


@dataclass(frozen=True, slots=True)
class VectorToken:
    version: int
    global_lsn: int
    region_lsns: tuple[tuple[int, int], ...] = ()   # (regionId, localLSN), sorted by regionId

    def __post_init__(self) -> None:
        ids = [region for region, _ in self.region_lsns]
        if ids != sorted(set(ids)):
            raise ValueError(f"region ids must be unique and sorted, got {ids}")


def _parse_int(text: str, what: str, token: str) -> int:
    if not _INT.match(text):
        raise ValueError(f"malformed session token {token!r}: {what} {text!r} is not an integer")
    return int(text)


def parse_vector(s: str) -> VectorToken:
    """Parse one range's token, e.g. ``"-1#42#1=20"``. Raises ValueError if malformed."""
    segments = s.split(_SEGMENT_SEPARATOR)
    if len(segments) < 2:
        raise ValueError(f"malformed session token {s!r}: expected '<version>#<globalLSN>…'")
    version = _parse_int(segments[0], "version", s)
    global_lsn = _parse_int(segments[1], "global LSN", s)
    regions: dict[int, int] = {}
    for segment in segments[2:]:
        parts = segment.split(_REGION_SEPARATOR)
        if len(parts) != 2:
            raise ValueError(f"malformed session token {s!r}: expected '<regionId>=<localLSN>', "
                             f"got {segment!r}")
        region = _parse_int(parts[0], "region id", s)
        if region in regions:
            raise ValueError(f"malformed session token {s!r}: region {region} appears twice")
        regions[region] = _parse_int(parts[1], "local LSN", s)
    return VectorToken(version, global_lsn, tuple(sorted(regions.items())))


def format_vector(t: VectorToken) -> str:
    text = f"{t.version}{_SEGMENT_SEPARATOR}{t.global_lsn}"
    for region, lsn in t.region_lsns:
        text += f"{_SEGMENT_SEPARATOR}{region}{_REGION_SEPARATOR}{lsn}"
    return text


def parse_session_header(s: str) -> dict[str, VectorToken]:
    """Parse ``x-ms-session-token``: ``"0:-1#42,1:-1#7"`` → {"0": …, "1": …}.

    Pieces that do not split into exactly ``<rangeId>:<vector>`` are ignored, as the SDK does;
    a repeated range id keeps the last vector, as the SDK's dict does.
    """
    tokens: dict[str, VectorToken] = {}
    if not s:
        return tokens
    for pair in s.split(_PAIR_SEPARATOR):
        parts = pair.split(_RANGE_SEPARATOR)
        if len(parts) != 2:
            continue
        tokens[parts[0]] = parse_vector(parts[1])
    return tokens


def format_session_header(d: dict[str, VectorToken]) -> str:
    pieces = []
    for range_id, token in d.items():
        if _PAIR_SEPARATOR in range_id or _RANGE_SEPARATOR in range_id:
            raise ValueError(f"range id {range_id!r} may not contain ',' or ':'")
        pieces.append(f"{range_id}{_RANGE_SEPARATOR}{format_vector(token)}")
    return _PAIR_SEPARATOR.join(pieces)


def merge(a: VectorToken, b: VectorToken) -> VectorToken:
    """The token that has seen everything ``a`` and ``b`` have, by the SDK's rules.

    Raises ValueError where the SDK raises its 500: same version but different region sets.
    """
    if a.version == b.version:
        a_regions, b_regions = dict(a.region_lsns), dict(b.region_lsns)
        if a_regions.keys() != b_regions.keys():
            raise ValueError(f"session tokens {format_vector(a)!r} and {format_vector(b)!r} have "
                             f"the same version but different regions")
        merged = tuple((r, max(lsn, b_regions[r])) for r, lsn in a.region_lsns)
        return VectorToken(a.version, max(a.global_lsn, b.global_lsn), merged)
    higher, lower = (a, b) if a.version > b.version else (b, a)
    lower_regions = dict(lower.region_lsns)
    merged = tuple((r, max(lsn, lower_regions.get(r, lsn))) for r, lsn in higher.region_lsns)
    return VectorToken(higher.version, higher.global_lsn, merged)
