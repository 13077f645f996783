"""Proves `regionlab drill list` states each built-in's wall time, not only its timeline: every
built-in has a measurement (bench/drill_wall.py) longer than its timeline, and the line shows
both. Runs the command's own function on the packaged drills."""
import io

from regionlab.emulator.drill import builtin, builtin_names
from regionlab.emulator.drill.command import WALL_S_MEASURED, main


def test_every_builtin_has_a_measured_wall_time_past_its_timeline():
    assert sorted(WALL_S_MEASURED) == builtin_names()
    for name in builtin_names():
        d = builtin(name)
        assert WALL_S_MEASURED[name] > d.duration_ms / 1000 * max(1, len(d.setups)), name


def test_the_list_shows_timeline_and_wall_time():
    out = io.StringIO()
    assert main(["list"], out=out) == 0
    lines = {line.split()[0]: line for line in out.getvalue().splitlines()}
    assert lines["failover"].startswith("failover                 20 s timeline, ~30 s in all  ")
    assert " 10 s x4 timeline, ~48 s in all " in lines["hedging-vs-breaker"]
