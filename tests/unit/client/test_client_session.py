"""Proves the session container's token resolution (pure): global tokens merge by the SDK's rules;
a read of a key written here gets the region-scoped token of the regions it was written in, not
the progress of other keys' regions; a key never written here, or a Bloom-filter false positive
(a region named for which no token of the range is held), falls back to the range's global token;
no key (cross-partition) gets the compound token; the filter's size follows its settings."""
from rbloom import Bloom

from regionlab.client.policies.session import SessionContainer

C = "dbs/d/colls/c"


def test_nothing_captured_sends_nothing():
    assert SessionContainer().token_for(C, '["a"]') == (None, "no token yet")


def test_global_tokens_merge_and_cross_partition_reads_get_every_range():
    s = SessionContainer()
    s.capture(C, "0:-1#5", None, "East US", False)
    s.capture(C, "0:-1#3", None, "East US", False)
    s.capture(C, "1:-1#9", None, "East US", False)
    token, why = s.token_for(C, None)
    assert token == "0:-1#5,1:-1#9" and "compound" in why


def test_a_key_written_in_one_region_gets_that_regions_token():
    s = SessionContainer(expected_insertions=1000)
    s.capture(C, "0:-1#10#0=10#1=0", '["a"]', "East US", True)
    s.capture(C, "0:-1#20#0=10#1=10", '["b"]', "West US", True)
    assert s.token_for(C, '["a"]') == ("0:-1#10#0=10#1=0", "region-scoped token of range 0 from ['East US']")
    token, _ = s.token_for(C, '["b"]')
    assert token == "0:-1#20#0=10#1=10"


def test_a_key_written_in_two_regions_gets_their_merge():
    s = SessionContainer(expected_insertions=1000)
    s.capture(C, "0:-1#10#0=10#1=0", '["a"]', "East US", True)
    s.capture(C, "0:-1#12#0=4#1=12", '["a"]', "West US", True)
    assert s.token_for(C, '["a"]')[0] == "0:-1#12#0=10#1=12"


def test_a_key_only_read_here_falls_back_to_the_global_token():
    s = SessionContainer(expected_insertions=1000)
    s.capture(C, "0:-1#10", '["a"]', "East US", True)
    s.capture(C, "0:-1#30", '["z"]', "East US", False)
    token, why = s.token_for(C, '["z"]')
    assert token == "0:-1#30" and "not written here" in why


def test_a_false_positive_falls_back_to_the_global_token():
    s = SessionContainer(expected_insertions=1000)
    s.capture(C, "0:-1#10", '["a"]', "East US", True)
    s.capture(C, "1:-1#7", '["b"]', "West US", True)        # West US has a token of range 1 only
    # A false positive: the filter claims '["a"]' was written in West US too.
    s._bloom.add((C, '["a"]', "West US"))
    token, why = s.token_for(C, '["a"]')
    assert token == "0:-1#10" and "false positive" in why


def test_without_region_scoping_the_global_token_of_the_range_is_sent():
    s = SessionContainer(region_scoped=False)
    s.capture(C, "0:-1#10", '["a"]', "East US", True)
    s.capture(C, "0:-1#30", '["b"]', "West US", True)
    assert s.token_for(C, '["a"]') == ("0:-1#30", "global token of range 0")
    assert s.bloom_bytes == 0


def test_the_filter_is_sized_by_its_settings_and_allocated_on_the_first_write():
    s = SessionContainer(expected_insertions=100_000, false_positive_rate=0.001)
    assert s.bloom_bytes == 0
    s.capture(C, "0:-1#1", '["a"]', "East US", True)
    assert s.bloom_bytes == Bloom(100_000, 0.001).size_in_bits // 8
    assert 170_000 < s.bloom_bytes < 190_000                 # the seed's table: 100,000 -> 183 KB
