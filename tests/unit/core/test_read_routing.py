"""Proves read_routing.py picks, among up replicas that applied min_lsn, the highest
weight / (in_flight + 1) with ties to the lowest index; uses weight-0 replicas and a primary
that does not accept reads only as fallbacks (primary first); a hypothesis property checks every
choice against a direct restatement of those rules."""
from hypothesis import given, settings
from hypothesis import strategies as st

from regionlab.emulator.core.read_routing import ReadRoutingPolicy
from regionlab.emulator.core.replica import DOWN, PRIMARY, SECONDARY, Replica
from tiers import examples


def replicas(*specs):
    """specs: (applied_lsn, in_flight, weight, up) for the primary, then each secondary."""
    out = []
    for i, (lsn, in_flight, weight, up) in enumerate(specs):
        r = Replica(i, PRIMARY if i == 0 else SECONDARY)
        r.applied_lsn, r.in_flight, r.weight = lsn, in_flight, weight
        if not up:
            r.state = DOWN
        out.append(r)
    return out


def chosen(policy, rs, min_lsn=0):
    r = policy.choose(rs, min_lsn)
    return None if r is None else r.index


ON = ReadRoutingPolicy(primary_accepts_reads=True)
OFF = ReadRoutingPolicy(primary_accepts_reads=False)


def test_fewest_in_flight_wins_with_equal_weights():
    rs = replicas((5, 3, 100, True), (5, 2, 100, True), (5, 0, 100, True), (5, 1, 100, True))
    assert chosen(ON, rs) == 2
    rs[2].in_flight = 4
    assert chosen(ON, rs) == 3


def test_ties_go_to_the_lowest_index():
    rs = replicas((5, 1, 100, True), (5, 0, 100, True), (5, 0, 100, True), (5, 0, 100, True))
    assert chosen(ON, rs) == 1
    rs[0].in_flight = 0
    assert chosen(ON, rs) == 0


def test_weights_scale_the_load():
    # dynamic weight: 100/(3+1) = 25 beats 20/(0+1) = 20; 50/(1+1) = 25 ties and loses on index
    rs = replicas((5, 9, 100, True), (5, 3, 100, True), (5, 0, 20, True), (5, 1, 50, True))
    assert chosen(ON, rs) == 1
    rs[1].in_flight = 4
    assert chosen(ON, rs) == 3


def test_weight_zero_serves_only_when_nothing_else_can():
    rs = replicas((5, 0, 100, True), (5, 0, 0, True), (5, 50, 1, True), (5, 0, 0, True))
    assert chosen(OFF, rs) == 2                      # heavily loaded, but weight 1 > 0
    rs[2].state = DOWN
    assert chosen(OFF, rs) == 0                      # fallbacks: the primary first
    rs[0].state = DOWN
    assert chosen(OFF, rs) == 1                      # then weight-0 secondaries, lowest index
    rs[1].in_flight = 2
    assert chosen(OFF, rs) == 3                      # ... fewest in flight


def test_primary_accepts_reads_switch():
    rs = replicas((5, 0, 100, True), (5, 5, 100, True), (5, 5, 100, True), (5, 5, 100, True))
    assert chosen(ON, rs) == 0
    assert chosen(OFF, rs) == 1
    # a session read no secondary has applied yet goes to the primary even when it is "off"
    for r in rs[1:]:
        r.applied_lsn = 4
    assert chosen(OFF, rs, min_lsn=5) == 0


def test_min_lsn_filters_and_down_replicas_never_serve():
    rs = replicas((9, 0, 100, False), (3, 0, 100, True), (7, 5, 100, True), (8, 9, 100, True))
    assert chosen(ON, rs, min_lsn=0) == 1
    assert chosen(ON, rs, min_lsn=4) == 2
    assert chosen(ON, rs, min_lsn=8) == 3
    assert chosen(ON, rs, min_lsn=9) is None         # only the down primary has it


spec = st.tuples(st.integers(0, 4), st.integers(0, 4), st.sampled_from([0, 1, 50, 100]), st.booleans())


@settings(max_examples=examples(300), deadline=None)
@given(specs=st.lists(spec, min_size=4, max_size=4), min_lsn=st.integers(0, 4),
       primary_reads=st.booleans())
def test_choice_matches_the_documented_rules(specs, min_lsn, primary_reads):
    rs = replicas(*specs)
    got = ReadRoutingPolicy(primary_reads).choose(rs, min_lsn)
    eligible = [r for r in rs if r.up and r.applied_lsn >= min_lsn]
    normal = [r for r in eligible if r.weight > 0 and (r.role != PRIMARY or primary_reads)]
    if normal:
        best = max(r.weight / (r.in_flight + 1) for r in normal)
        expected = min((r for r in normal if r.weight / (r.in_flight + 1) == best), key=lambda r: r.index)
    elif eligible:
        primaries = [r for r in eligible if r.role == PRIMARY]
        if primaries:
            expected = primaries[0]
        else:
            fewest = min(r.in_flight for r in eligible)
            expected = min((r for r in eligible if r.in_flight == fewest), key=lambda r: r.index)
    else:
        expected = None
    assert got is expected
