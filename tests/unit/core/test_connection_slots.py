"""core/connection_slots.py against a trivially correct model: a list of [connection, state,
since, order] rows, the victim found by sorting. A hypothesis state machine admits, starts and
finishes requests, closes connections and sweeps under pressure in virtual time; one invariant
per documented one (states, order, the cap, shed connections are closed exactly once, a refusal
only when every slot is busy). Plus the examples the docstring promises, spelled out.
"""
import itertools

import pytest
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from regionlab.emulator.core.connection_slots import ConnectionSlots
from regionlab.emulator.core.limits import PRESSURE_OCCUPANCY_FRACTION, SILENT_DEADLINE_UNDER_PRESSURE_S
from tiers import examples


class Conn:
    def __init__(self, name):
        self.name = name
        self.shed_calls = 0

    def shed(self):
        self.shed_calls += 1

    def __repr__(self):
        return f"Conn({self.name})"


def test_the_oldest_silent_goes_first_then_the_longest_idle_and_only_all_busy_refuses():
    slots = ConnectionSlots(3)
    a, b, c, d, e, f = (Conn(n) for n in "abcdef")
    for i, conn in enumerate((a, b, c)):
        assert slots.admit(conn, float(i))
    slots.speaking(a)
    slots.idle(a)                   # a: idle
    slots.speaking(b)               # b: busy; c: silent
    assert slots.admit(d, 3.0) and c.shed_calls == 1 and c not in slots
    slots.speaking(d)
    assert slots.admit(e, 4.0) and a.shed_calls == 1            # no silent one: the idle a
    slots.speaking(e)
    assert not slots.admit(f, 5.0) and f not in slots           # b, d, e busy: refused
    assert slots.counts() == {"silent": 0, "idle": 0, "busy": 3} and slots.shed == 2


def test_idle_again_makes_a_connection_the_newest_idle():
    slots = ConnectionSlots(3)
    a, b, c, d = (Conn(n) for n in "abcd")
    for conn in (a, b, c):
        slots.admit(conn, 0.0)
        slots.idle(conn)
    slots.idle(a)                   # active again (direct mode): b is now idle longest
    slots.admit(d, 1.0)
    assert (a.shed_calls, b.shed_calls, c.shed_calls) == (0, 1, 0)


def test_overdue_only_under_pressure_and_only_past_the_deadline():
    slots = ConnectionSlots(4)
    conns = [Conn(i) for i in range(4)]
    slots.admit(conns[0], 0.0)
    assert slots.overdue(100.0) == []                          # 1 of 4: no pressure
    for i, conn in enumerate(conns[1:], 1):
        slots.admit(conn, float(i))
    assert slots.under_pressure
    assert slots.overdue(SILENT_DEADLINE_UNDER_PRESSURE_S + 0.5) == conns[:1]
    assert slots.shed_overdue(SILENT_DEADLINE_UNDER_PRESSURE_S + 2.5) == 3
    assert [c.shed_calls for c in conns] == [1, 1, 1, 0]


def test_a_cap_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        ConnectionSlots(0)


SILENT, IDLE, BUSY = "silent", "idle", "busy"


class SlotsMachine(RuleBasedStateMachine):
    """The slots against a list of rows; time only moves forward."""

    @initialize(cap=st.integers(1, 6))
    def start(self, cap):
        self.slots = ConnectionSlots(cap)
        self.cap = cap
        self.rows = []              # [conn, state, since, order]: order = when it last entered its state
        self.tick = itertools.count()
        self.now = 0.0
        self.names = itertools.count()
        self.gone = []              # connections no longer held (shed or closed)

    def _row(self, conn):
        return next(r for r in self.rows if r[0] is conn)

    def _model_victim(self):
        for state in (SILENT, IDLE):
            held = sorted((r for r in self.rows if r[1] == state), key=lambda r: r[3])
            if held:
                return held[0]
        return None

    @rule(dt=st.floats(0, 3))
    def admit(self, dt):
        self.now += dt
        conn = Conn(next(self.names))
        victim = self._model_victim() if len(self.rows) >= self.cap else None
        full = len(self.rows) >= self.cap
        admitted = self.slots.admit(conn, self.now)
        assert admitted == (not full or victim is not None)
        if full and victim is not None:
            assert victim[0].shed_calls == 1
            self.rows.remove(victim)
            self.gone.append(victim[0])
        if admitted:
            self.rows.append([conn, SILENT, self.now, next(self.tick)])
        else:
            assert conn.shed_calls == 0 and conn not in self.slots

    @precondition(lambda self: self.rows)
    @rule(data=st.data())
    def speak(self, data):
        row = data.draw(st.sampled_from(self.rows))
        self.slots.speaking(row[0])
        if row[1] != BUSY:
            row[1], row[3] = BUSY, next(self.tick)

    @precondition(lambda self: self.rows)
    @rule(data=st.data())
    def answered(self, data):
        row = data.draw(st.sampled_from(self.rows))
        self.slots.idle(row[0])
        row[1], row[3] = IDLE, next(self.tick)

    @precondition(lambda self: self.rows)
    @rule(data=st.data())
    def close(self, data):
        row = data.draw(st.sampled_from(self.rows))
        self.slots.gone(row[0])
        self.rows.remove(row)
        self.gone.append(row[0])

    @precondition(lambda self: self.gone)
    @rule(data=st.data())
    def late_calls_on_a_gone_connection_change_nothing(self, data):
        conn = data.draw(st.sampled_from(self.gone))
        self.slots.speaking(conn)
        self.slots.idle(conn)
        self.slots.gone(conn)

    @rule(dt=st.floats(0, 5))
    def sweep(self, dt):
        self.now += dt
        pressed = len(self.rows) >= max(1, int(self.cap * PRESSURE_OCCUPANCY_FRACTION))
        late = [r for r in self.rows if r[1] == SILENT and self.now - r[2] > SILENT_DEADLINE_UNDER_PRESSURE_S]
        late = sorted(late, key=lambda r: r[3]) if pressed else []
        assert self.slots.shed_overdue(self.now) == len(late)
        for row in late:
            self.rows.remove(row)
            self.gone.append(row[0])

    @invariant()
    def every_connection_held_is_in_exactly_its_state(self):
        if not hasattr(self, "slots"):
            return
        assert {r[0]: r[1] for r in self.rows} == {r[0]: self.slots.state(r[0]) for r in self.rows}
        assert len(self.slots) == len(self.rows) <= self.cap
        assert self.slots.counts() == {s: sum(r[1] == s for r in self.rows) for s in (SILENT, IDLE, BUSY)}

    @invariant()
    def a_gone_connection_is_not_held_and_was_shed_at_most_once(self):
        if not hasattr(self, "slots"):
            return
        for conn in self.gone:
            if all(r[0] is not conn for r in self.rows):
                assert conn not in self.slots
            assert conn.shed_calls <= 1
        assert all(r[0].shed_calls == 0 for r in self.rows)


TestSlotsMachine = SlotsMachine.TestCase
TestSlotsMachine.settings = settings(max_examples=examples(200), deadline=None)
