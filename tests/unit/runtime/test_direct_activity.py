"""Proves the direct node's own activity ids (for requests that bring none) keep
responses.activity_id's form while made by an iterator in C: GUID-shaped, the node's prefix, a
counter in 12 hex digits that goes on across the blocks of 256 that share their first 10 digits."""
import uuid

from emulator.runtime import direct_connection as dc


def test_activity_ids_are_guids_with_the_nodes_prefix_and_a_counter_across_blocks():
    ids = [dc._next_activity() for _ in range(3 * 256 + 5)]
    assert len(set(ids)) == len(ids)
    for a in ids:
        assert len(a) == 36 and str(uuid.UUID(a)) == a
        assert a.startswith(dc._ACTIVITY_PREFIX)
    counters = [int(a[len(dc._ACTIVITY_PREFIX):], 16) for a in ids]
    assert counters == list(range(counters[0], counters[0] + len(ids)))    # +1 each, through 3 block ends
