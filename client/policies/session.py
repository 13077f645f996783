"""Session tokens: the session container and region-scoped session capture.

Theory of operation. Replies carry `x-ms-session-token` (`<rangeId>:<vector>`, one or more) and
the range that served them. The container keeps, per collection:

* the *global* token of every partition key range: everything this client has seen there,
  merged by the SDK's rules (client/protocol/session_token.merge);
* the region-scoped tokens: per (range, region) the merge of the tokens of *writes* accepted in
  that region, plus a Bloom filter of (collection, partition key, region) recording in which
  regions each logical partition was written (expected insertions 5,000,000 and false-positive
  rate 0.001 by default, as the Java SDK);
* which range each partition key was last served from (a bounded memo).

For a read of partition key p in range r, `token_for` sends the merge of the region tokens of the
regions where p was written: read-your-writes for p without waiting for other partition keys'
progress in other regions. When p was never written here (no region in the filter), or the
filter names a region for which no token of r is held (which only a false positive can cause),
it falls back to r's global token. Without a partition key (cross-partition queries) the
compound global token of every range is sent. Every decision is reported for diagnostics.

The Bloom filter is rbloom's (a maintained Rust implementation with a set-like API that takes
the expected insertions and the false-positive rate directly); it hashes with Python's `hash`,
which is fine for a filter that lives and dies with the process.
"""
from collections import OrderedDict

from rbloom import Bloom

from regionlab.client.protocol import session_token as st

BLOOM_EXPECTED_INSERTIONS = 5_000_000
BLOOM_FALSE_POSITIVE_RATE = 0.001
PK_RANGE_MEMO_MAX = 100_000


class _Collection:
    def __init__(self):
        self.global_tokens: dict[str, st.VectorToken] = {}
        self.region_tokens: dict[tuple[str, str], st.VectorToken] = {}
        self.pk_range: OrderedDict[str, str] = OrderedDict()
        self.regions_seen: set[str] = set()
        self.last_capture: tuple | None = None


def _merged(old, new):
    if old is None:
        return new
    try:
        return st.merge(old, new)
    except ValueError:          # same version, other regions: a newer topology; keep the new one
        return new


class SessionContainer:
    def __init__(self, region_scoped: bool = True,
                 expected_insertions: int = BLOOM_EXPECTED_INSERTIONS,
                 false_positive_rate: float = BLOOM_FALSE_POSITIVE_RATE):
        self.region_scoped = region_scoped
        self.expected_insertions = expected_insertions
        self.false_positive_rate = false_positive_rate
        self._bloom: Bloom | None = None          # allocated on the first write (9 MB at defaults)
        self._collections: dict[str, _Collection] = {}

    def _bloom_filter(self) -> Bloom:
        if self._bloom is None:
            self._bloom = Bloom(self.expected_insertions, self.false_positive_rate)
        return self._bloom

    @property
    def bloom_bytes(self) -> int:
        return 0 if self._bloom is None else self._bloom.size_in_bits // 8

    def capture(self, collection: str, header: str | None, pk: str | None, region: str,
                is_write: bool) -> None:
        """Remember a reply's token(s); `pk` is the request's partition key header, if any."""
        if not header:
            return
        c = self._collections.get(collection)
        if c is None:
            c = self._collections[collection] = _Collection()
        seen = (header, pk, region, is_write)
        if c.last_capture == seen:            # the same reply again (a hot key): nothing to merge
            return
        c.last_capture = seen
        tokens = st.parse_session_header(header)
        for range_id, token in tokens.items():
            c.global_tokens[range_id] = _merged(c.global_tokens.get(range_id), token)
            if is_write and self.region_scoped:
                key = (range_id, region)
                c.region_tokens[key] = _merged(c.region_tokens.get(key), token)
        if pk is None or len(tokens) != 1:
            return
        self._remember_range(c, pk, next(iter(tokens)))
        if is_write and self.region_scoped:
            c.regions_seen.add(region)
            self._bloom_filter().add((collection, pk, region))

    @staticmethod
    def _remember_range(c: _Collection, pk: str, range_id: str) -> None:
        c.pk_range[pk] = range_id
        c.pk_range.move_to_end(pk)
        if len(c.pk_range) > PK_RANGE_MEMO_MAX:
            c.pk_range.popitem(last=False)

    def token_for(self, collection: str, pk: str | None) -> tuple[str | None, str]:
        """(the x-ms-session-token to send or None, the decision in words)."""
        c = self._collections.get(collection)
        if c is None or not c.global_tokens:
            return None, "no token yet"
        range_id = c.pk_range.get(pk) if pk is not None else None
        if range_id is None:
            return st.format_session_header(c.global_tokens), "compound global token (range unknown)"
        if not self.region_scoped:
            return self._one(range_id, c.global_tokens[range_id]), f"global token of range {range_id}"
        return self._scoped(collection, c, pk, range_id)

    def _scoped(self, collection, c, pk, range_id) -> tuple[str, str]:
        bloom = self._bloom
        regions = [r for r in sorted(c.regions_seen) if bloom is not None and (collection, pk, r) in bloom]
        if not regions:
            return self._one(range_id, c.global_tokens[range_id]), \
                f"global token of range {range_id} (partition key not written here)"
        held = [c.region_tokens.get((range_id, r)) for r in regions]
        if any(t is None for t in held):
            return self._one(range_id, c.global_tokens[range_id]), \
                f"global token of range {range_id} (bloom false positive for {regions})"
        token = held[0]
        for t in held[1:]:
            token = _merged(token, t)
        return self._one(range_id, token), f"region-scoped token of range {range_id} from {regions}"

    @staticmethod
    def _one(range_id: str, token: st.VectorToken) -> str:
        return f"{range_id}:{st.format_vector(token)}"

    def clear(self, collection: str) -> None:
        self._collections.pop(collection, None)
