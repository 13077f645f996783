"""Proves the retry policy's schedules, by calling decide() with outcomes in sequence (pure, no
clock): 429/3200 waits the retry-after for at most 9 retries and never more than 30 s in all;
429/50009 waits 2 s then doubles up to 8 s, 30 s in all; 403/3 refreshes and goes to the write region; 403/1008 marks the region
and moves on; 404/1002 goes to the write region once (single-write) or through the regions
(multi-write); a 503 moves to the next region at once (a local retry only in the last or only
region); 408/connection errors retry locally then move region for reads, while writes retry
only when unsent, or on multi-write accounts when idempotent or opted in; a write region that
does not answer a write (503, transport error) is reported whether or not the write is retried;
a session retry the write region does not answer goes to a read region not tried."""
import pytest

from regionlab.client.policies.retry import (CONNECT_ERROR, RESPONSE_ERROR, TIMEOUT_ERROR, Outcome, RequestKind,
                                             RetryOptions, RetryState, decide)

READ = RequestKind(is_write=False, regions=3)
CREATE = RequestKind(is_write=True, idempotent=False, regions=1)
MW_CREATE = RequestKind(is_write=True, idempotent=False, multi_write=True, regions=3)
MW_UPSERT = RequestKind(is_write=True, idempotent=True, multi_write=True, regions=3)


def schedule(outcome, kind=READ, options=RetryOptions(), limit=100):
    state, out = RetryState(), []
    for _ in range(limit):
        d = decide(options, state, outcome, kind)
        if not d.retry:
            return out
        out.append(d)
    raise AssertionError("no bound")


def test_throttled_waits_the_retry_after_nine_times_at_most():
    ds = schedule(Outcome(429, 3200, 100))
    assert [d.delay_ms for d in ds] == [100] * 9
    assert all(d.route == "same" for d in ds) and "429/3200" in ds[0].reason


def test_throttled_never_waits_more_than_thirty_seconds_in_all():
    ds = schedule(Outcome(429, 3200, 12_000))
    assert [d.delay_ms for d in ds] == [12_000, 12_000]             # a third would make 36 s
    assert [d.delay_ms for d in schedule(Outcome(429, 3200, 10_000))] == [10_000] * 3
    assert schedule(Outcome(429, 3200, 31_000)) == []
    ds = schedule(Outcome(429, 3200, 5_000), options=RetryOptions(throttle_wait_ms_max=12_000))
    assert [d.delay_ms for d in ds] == [5_000, 5_000]


def test_credits_back_off_from_two_seconds_doubling_to_a_bound():
    ds = schedule(Outcome(429, 50009, 1000))
    assert [d.delay_ms for d in ds] == [2000, 4000, 8000, 8000, 8000]
    assert sum(d.delay_ms for d in ds) == 30_000                        # and never more
    assert [d.delay_ms for d in schedule(Outcome(429, 50009, 12_000))] == [12_000, 12_000]


def test_write_forbidden_refreshes_and_retries_in_the_write_region():
    state = RetryState()
    first = decide(RetryOptions(), state, Outcome(403, 3), CREATE)
    second = decide(RetryOptions(), state, Outcome(403, 3), CREATE)
    assert (first.retry, first.route, first.refresh_account, first.delay_ms) == (True, "write", True, 0)
    assert second.delay_ms == 1000
    assert len(schedule(Outcome(403, 3), CREATE, RetryOptions(write_forbidden_retries_max=4))) == 4


def test_account_not_found_marks_the_region_and_moves_on():
    ds = schedule(Outcome(403, 1008))
    assert [(d.route, d.mark_unavailable, d.refresh_account) for d in ds] == [("next", True, True)] * 2


def test_session_not_available_single_write_goes_once_to_the_write_region():
    ds = schedule(Outcome(404, 1002))
    assert [d.route for d in ds] == ["write"]


def test_session_not_available_multi_write_walks_the_regions():
    ds = schedule(Outcome(404, 1002), RequestKind(False, multi_write=True, regions=3))
    assert [d.route for d in ds] == ["next"] * 3


@pytest.mark.parametrize("outcome", [Outcome(408), Outcome(None, transport_error=CONNECT_ERROR),
                                     Outcome(None, transport_error=RESPONSE_ERROR)])
def test_reads_retry_locally_then_move_region(outcome):
    ds = schedule(outcome)
    assert [d.route for d in ds] == ["same", "next", "same", "next", "same"]
    assert ds[0].delay_ms == 100


def test_a_503_moves_to_the_next_region_at_once_and_retries_locally_only_in_the_last():
    ds = schedule(Outcome(503))
    assert [(d.route, d.delay_ms) for d in ds] == [("next", 0), ("next", 0), ("same", 100)]
    assert not any(d.mark_unavailable for d in ds)      # a 503 may be one partition's: the breaker's job


def test_a_503_in_a_single_region_account_is_retried_there_once():
    # then once more after the account refresh (it may list a region the request can move to)
    ds = schedule(Outcome(503), RequestKind(is_write=False, regions=1))
    assert [(d.route, d.delay_ms) for d in ds] == [("same", 100), ("next", 0), ("same", 100)]


def test_a_regional_503_refreshes_the_account():
    assert schedule(Outcome(503))[0].refresh_account
    assert not schedule(Outcome(408))[0].refresh_account


def test_a_sent_single_write_write_is_not_retried():
    assert schedule(Outcome(503), CREATE) == []
    assert schedule(Outcome(None, transport_error=RESPONSE_ERROR), CREATE) == []


def test_an_unsent_write_is_retried_locally():
    assert [d.route for d in schedule(Outcome(None, transport_error=CONNECT_ERROR), CREATE)] == ["same"]


def test_multi_write_crosses_regions_for_idempotent_writes_and_opted_in_creates():
    assert schedule(Outcome(503), MW_CREATE) == []
    assert [d.route for d in schedule(Outcome(503), MW_UPSERT)] == ["next", "next", "same"]
    opted = RetryOptions(non_idempotent_write_retry=True)
    assert [d.route for d in schedule(Outcome(503), MW_CREATE, opted)] == ["next", "next", "same"]
    assert [d.route for d in schedule(Outcome(408), MW_UPSERT)] == ["same", "next", "same", "next", "same"]


@pytest.mark.parametrize("status, sub", [(400, 0), (401, 0), (404, 0), (409, 0), (412, 0), (413, 0),
                                         (449, 0), (410, 1002), (403, 0)])
def test_errors_about_the_request_are_raised(status, sub):
    assert schedule(Outcome(status, sub)) == []


SESSION_READ = RequestKind(is_write=False, regions=2, read_regions=3)


@pytest.mark.parametrize("outcome", [Outcome(503), Outcome(None, transport_error=RESPONSE_ERROR),
                                     Outcome(None, transport_error=TIMEOUT_ERROR),
                                     Outcome(None, transport_error=CONNECT_ERROR)])
def test_a_single_write_write_the_region_did_not_answer_reports_it_retried_or_not(outcome):
    d = decide(RetryOptions(), RetryState(), outcome, CREATE)
    assert d.write_region_down
    assert d.retry == (outcome.transport_error == CONNECT_ERROR)      # only an unsent write is retried


def test_what_reports_a_region_not_answering():
    down = lambda outcome, kind: decide(RetryOptions(), RetryState(), outcome, kind).write_region_down
    assert down(Outcome(None, transport_error=RESPONSE_ERROR), READ)          # any request's transport error
    assert not down(Outcome(503), READ)                 # a read's 503 may be one partition's
    assert not down(Outcome(503), MW_UPSERT)            # multi-write writes move region instead
    assert not down(Outcome(408), CREATE) and not down(Outcome(429, 3200, 10), CREATE)


def test_a_session_retry_the_write_region_does_not_answer_goes_to_a_read_region_not_tried():
    state = RetryState()
    first = decide(RetryOptions(), state, Outcome(404, 1002), SESSION_READ)
    rescue = decide(RetryOptions(), state, Outcome(503), SESSION_READ)
    assert (first.route, rescue.route, rescue.delay_ms) == ("write", "session", 0)
    assert "session from a read region not tried" in rescue.reason
    again = decide(RetryOptions(), state, Outcome(404, 1002), SESSION_READ)
    assert not again.retry                              # that region lacks it too: the 404/1002 stands
    # with only two read regions (the one that lacked it and the write region) there is none to try
    state = RetryState()
    decide(RetryOptions(), state, Outcome(404, 1002), RequestKind(is_write=False, regions=2, read_regions=2))
    assert decide(RetryOptions(), state, Outcome(503), RequestKind(is_write=False, regions=2,
                                                                  read_regions=2)).route != "session"


@pytest.mark.parametrize("error", [CONNECT_ERROR, RESPONSE_ERROR, TIMEOUT_ERROR])
def test_a_region_that_fails_twice_at_the_transport_level_is_marked_when_the_read_moves_on(error):
    ds = schedule(Outcome(None, transport_error=error))
    assert [(d.route, d.mark_unavailable) for d in ds[:2]] == [("same", False), ("next", True)]
    assert not any(d.mark_unavailable for d in schedule(Outcome(408)))       # the service answered
