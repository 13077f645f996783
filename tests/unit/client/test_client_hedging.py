"""Proves the hedging decisions (HedgeRace, pure, with elapsed times given): copies are due at 0,
500 and 600 ms by default; the first final reply wins and no copy starts after it; a
non-transient error (404/0, 409, 412, ...) is final, a transient one (503, 429, 404/1002, 403/3,
no reply) is not; when every running copy failed transiently the next starts at once; when all
fail the first region's result is the answer; writes hedge only multi-write with the opt-in."""
import pytest

from regionlab.client.policies.hedging import AvailabilityStrategy, HedgeRace, applies, is_final


def test_copies_are_due_at_the_threshold_then_each_step():
    race = HedgeRace(AvailabilityStrategy(), 3)
    assert race.due(0) == [0]
    assert race.due(499) == [] and race.next_due_ms() == 500
    assert race.due(500) == [1] and race.next_due_ms() == 600
    assert race.due(650) == [2] and race.next_due_ms() is None


def test_custom_thresholds_and_late_ticks_start_every_copy_due():
    race = HedgeRace(AvailabilityStrategy(threshold_ms=50, threshold_steps_ms=10), 3)
    assert race.due(1000) == [0, 1, 2]


def test_the_first_final_reply_wins_and_stops_hedging():
    race = HedgeRace(AvailabilityStrategy(), 3)
    race.due(0)
    race.due(500)
    assert race.on_reply(1, 200, 0, "b") == []
    assert race.done and race.result_index() == 1
    assert race.due(10_000) == []


def test_a_non_transient_error_is_final_so_nothing_is_hedged_after_it():
    race = HedgeRace(AvailabilityStrategy(), 3)
    race.due(0)
    race.on_reply(0, 404, 0, "a")
    assert race.done and race.result_index() == 0 and race.due(600) == []


def test_a_transient_failure_of_every_running_copy_starts_the_next_at_once():
    race = HedgeRace(AvailabilityStrategy(), 3)
    race.due(0)
    assert race.on_reply(0, None, 0, "refused") == [1]
    assert race.next_due_ms() == 600
    assert race.on_reply(1, 503, 0, "b") == [2]
    assert race.on_reply(2, 429, 3200, "c") == []
    assert race.done and race.result_index() == 0       # all failed: the first region's error


@pytest.mark.parametrize("status, sub, final", [(200, 0, True), (201, 0, True), (304, 0, True),
                                                (404, 0, True), (409, 0, True), (412, 0, True),
                                                (400, 0, True), (401, 0, True), (403, 0, True),
                                                (404, 1002, False), (403, 3, False), (403, 1008, False),
                                                (503, 0, False), (408, 0, False), (429, 3200, False),
                                                (500, 0, False), (None, 0, False)])
def test_which_replies_are_final(status, sub, final):
    assert is_final(status, sub) is final


def test_what_hedges():
    s = AvailabilityStrategy()
    assert applies(s, True, False, False, False)
    assert not applies(None, True, False, False, False)
    assert not applies(s, False, False, False, False)          # metadata never
    assert not applies(s, True, True, False, True)             # single-write writes never
    assert not applies(s, True, True, True, False)             # multi-write without the opt-in
    assert applies(s, True, True, True, True)


def test_the_strategy_option_forms():
    assert AvailabilityStrategy.of(True) == AvailabilityStrategy(500, 100)
    assert AvailabilityStrategy.of({"threshold_ms": 200, "threshold_steps_ms": 50}).start_ms(2) == 250
    assert AvailabilityStrategy.of(False) is None
    with pytest.raises(ValueError):
        AvailabilityStrategy(threshold_ms=0)
