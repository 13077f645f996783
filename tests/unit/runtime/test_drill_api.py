"""Proves PUT /drill keeps only a whole, well-formed drill state: every field checked against
DRILL_FIELDS, a wrong one named in a 400, lists bounded. Pure checks on hand-made bodies."""
import pytest

from regionlab.emulator.core.errors import CosmosError
from regionlab.emulator.runtime.drill_api import DRILL_STEPS_MAX, DRILL_TIMELINE_MAX, check_state

STATE = {"name": "failover", "description": "d", "elapsed_ms": 1200.5, "duration_ms": 20000, "bucket_s": 0.1,
         "phase": "graceful failover -> East US 2", "next": {"label": "heal out", "at_ms": 2000},
         "steps": [{"label": "graceful failover -> East US 2", "at_ms": 1000.4, "ran": True},
                   {"label": "heal out", "at_ms": 2000, "ran": False}],
         "timeline": [{"t_s": 0.0, "ops": 12, "errors": 0}], "ops": 12, "errors": 0, "ended": None}


def test_a_whole_state_is_kept_as_sent():
    assert check_state(dict(STATE)) == STATE
    assert check_state(dict(STATE, next=None, ended="interrupted"))["ended"] == "interrupted"


@pytest.mark.parametrize("change, message", [
    ({"ops": -1}, "The drill state's 'ops' must be an integer >= 0."),
    ({"ended": "done"}, "The drill state's 'ended' must be null or one of completed, aborted, interrupted."),
    ({"name": "x" * 301}, "The drill state's 'name' must be a string of at most 300 characters."),
    ({"next": {"label": "heal"}}, "The drill state's 'next' must be null or {'label': a string of at most 300 "
                                  "characters, 'at_ms': a number >= 0}."),
    ({"steps": [STATE["steps"][0]] * (DRILL_STEPS_MAX + 1)}, "The drill state's 'steps' must be a list of at most "
     f"{DRILL_STEPS_MAX} items, each {{'label': a string of at most 300 characters, 'at_ms': a number >= 0, "
     "'ran': true or false}."),
    ({"timeline": [{"t_s": 0, "ops": True, "errors": 0}]}, f"The drill state's 'timeline' must be a list of at most "
     f"{DRILL_TIMELINE_MAX} items, each {{'t_s': a number >= 0, 'ops': an integer >= 0, 'errors': an integer >= 0}}."),
])
def test_a_wrong_field_is_a_400_that_names_it(change, message):
    with pytest.raises(CosmosError) as e:
        check_state(dict(STATE, **change))
    assert (e.value.status, e.value.message) == (400, message)


def test_a_missing_field_is_named():
    body = {k: v for k, v in STATE.items() if k != "phase"}
    with pytest.raises(CosmosError, match="missing: phase"):
        check_state(body)
