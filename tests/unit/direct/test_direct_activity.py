"""Proves the activity ids made for requests that bring none (responses.activity_ids: an
iterator in C, one per surface) are GUID-shaped, carry their surface's prefix, and count up by
one in 12 hex digits across the blocks of 256 that share their first 10 digits; and that the
direct node's ids never equal the gateway's."""
import uuid

from regionlab.emulator.service import responses
from regionlab.emulator.direct import adapter as dc


def _check(ids: list, prefix: str) -> None:
    assert len(set(ids)) == len(ids)
    for a in ids:
        assert len(a) == 36 and str(uuid.UUID(a)) == a
        assert a.startswith(prefix)
    counters = [int(a[len(prefix):], 16) for a in ids]
    assert counters == list(range(counters[0], counters[0] + len(ids)))    # +1 each, through 3 block ends


def test_the_direct_nodes_ids_have_its_prefix_and_a_counter_across_blocks():
    _check([next(dc._ACTIVITIES) for _ in range(3 * 256 + 5)], dc._ACTIVITY_PREFIX)


def test_the_gateways_ids_have_their_prefix_and_a_counter_across_blocks():
    ids = [responses.activity_id() if i % 2 else next(responses.ACTIVITY_IDS) for i in range(3 * 256 + 5)]
    _check(ids, responses._ACTIVITY_PREFIX)
    assert responses._ACTIVITY_PREFIX != dc._ACTIVITY_PREFIX


def test_a_fresh_iterator_starts_at_zero():
    ids = responses.activity_ids("00000000-0000-0000-0000-")
    assert [next(ids) for _ in range(257)][-2:] == ["00000000-0000-0000-0000-0000000000ff",
                                                     "00000000-0000-0000-0000-000000000100"]
