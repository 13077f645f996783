"""The black-box history checker (emulator/drill/observed.py) on hand-built live histories: each
outcome rule and each check fires on the history that breaks it and stays quiet on its
lawful twin."""
from regionlab.emulator.drill.observed import ABSENT, FAIL, OK, UNKNOWN, attempt_outcome, check

_seq = iter(range(1, 10_000))


def op(id, f, key, value, *statuses, client=0, consistency="Session", concurrent=False):
    """A logical op whose attempts got `statuses` (None: no reply); invoke/complete in call order."""
    invoke = next(_seq)
    return {"id": id, "client": client, "f": f, "key": key, "value": value, "consistency": consistency,
            "invoke_seq": invoke, "complete_seq": invoke if concurrent else next(_seq),
            "attempts": [{"status": s[0], "substatus": s[1]} if isinstance(s, tuple) else {"status": s}
                         for s in statuses]}


def test_attempt_outcomes_follow_definite_and_indefinite():
    assert attempt_outcome("create", 201) == OK
    assert attempt_outcome("read", 404, 0) == OK
    assert attempt_outcome("read", 404, 1002) == FAIL
    assert attempt_outcome("create", None) == UNKNOWN        # no reply: dropped or reset
    assert attempt_outcome("create", 408) == UNKNOWN
    for status in (400, 403, 409, 412, 429, 449, 500, 503):
        assert attempt_outcome("create", status) == FAIL


def test_a_dropped_first_attempt_makes_the_409_retry_unknown_and_applied():
    ops = [op(1, "create", "x", 1, None, 409)]
    v = check(ops, final={"x": 1})
    assert v.valid, v.violations
    assert ops[0]["outcome"] == UNKNOWN and v.ops == {UNKNOWN: 1}
    assert v.unknown_writes == [{"op": 1, "f": "create", "key": "x", "applied": True,
                                 "attempts": [UNKNOWN, FAIL]}]


def test_a_definitely_failed_write_that_shows_up_is_a_violation():
    v = check([op(1, "create", "x", 1, 503, 409)], final={"x": 1})
    assert [x["check"] for x in v.violations] == ["definite"]


def test_an_acknowledged_write_that_vanished_is_a_violation_unless_listed_or_replaced():
    assert [x["check"] for x in check([op(1, "create", "x", 1, 201)], final={"x": ABSENT}).violations] == ["acknowledged"]
    assert check([op(1, "create", "x", 1, 201)], final={"x": ABSENT}, lost_keys=["x"]).valid
    assert check([op(1, "upsert", "x", 1, 200), op(2, "upsert", "x", 2, None)], final={"x": 2}).valid


def test_listed_lost_but_still_there_is_a_violation():
    v = check([op(1, "create", "x", 1, 201)], final={"x": 1}, lost_keys=["x"])
    assert [x["check"] for x in v.violations] == ["lost-writes"]


def test_a_value_nobody_wrote_is_a_phantom():
    v = check([op(1, "read", "x", 7, 200)], final={"x": 7}, initial={})
    assert {x["check"] for x in v.violations} == {"phantom"}
    assert check([op(1, "read", "x", 7, 200)], final={"x": 7}, initial={"x": 7}).valid


def test_session_read_older_than_what_the_client_saw_is_stale():
    ops = [op(1, "upsert", "x", 1, 200), op(2, "upsert", "x", 2, 200), op(3, "read", "x", 1, 200)]
    assert [x["check"] for x in check(ops, final={"x": 2}).violations] == ["session"]
    other = [op(1, "upsert", "x", 1, 200), op(2, "upsert", "x", 2, 200), op(3, "read", "x", 1, 200, client=9)]
    assert check(other, final={"x": 2}).valid                 # another client's session: allowed


def test_strong_read_must_see_writes_acknowledged_before_it_began():
    ops = [op(1, "upsert", "x", 1, 200), op(2, "upsert", "x", 2, 200, client=1),
           op(3, "read", "x", 1, 200, client=2, consistency="Strong")]
    assert [x["check"] for x in check(ops, final={"x": 2}).violations] == ["strong"]
    eventual = [dict(o) for o in ops]
    eventual[2]["consistency"] = "Eventual"
    assert check(eventual, final={"x": 2}).valid


def test_an_unknown_write_that_did_not_apply_says_so():
    v = check([op(1, "create", "x", 1, None)], final={"x": ABSENT})
    assert v.valid and v.unknown_writes[0]["applied"] is False
