"""Wall time of each built-in drill, as `regionlab drill NAME` takes it end to end: the emulator's
start, the prefill, the timeline (duration x setups), reading the writes back, the history check
and the report with its plots. What `regionlab drill list` states (emulator/drill/command.py,
WALL_S_MEASURED) comes from this.

    python bench/drill_wall.py                 # every built-in, one after another
    python bench/drill_wall.py failover lag    # some

Each drill runs as its own process (the command line a user types), with its report in a
temporary directory; prints the timeline's length, the wall time, the rest (start, prefill,
read-back and report) and the report's own stage lines, and the machine it ran on.
"""
import os
import platform
import subprocess
import sys
import tempfile
import time

from regionlab.emulator.drill import builtin, builtin_names


def measure(name: str) -> tuple[float, float, list]:
    drill = builtin(name)
    timeline_s = drill.duration_ms / 1000 * max(1, len(drill.setups))
    with tempfile.TemporaryDirectory() as out:
        began = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "regionlab.emulator.cli", "drill", name, "--out", out],
                              capture_output=True, text=True, check=False)
        wall_s = time.monotonic() - began
    stages = [line for line in done.stdout.splitlines() if line.startswith("report: ") and line.endswith(" s")]
    return timeline_s, wall_s, stages


def main(names: list) -> None:
    print(f"# {platform.node()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, Python {platform.python_version()}")
    print(f"{'drill':20} {'timeline s':>10} {'wall s':>8} {'rest s':>8}")
    for name in names or builtin_names():
        timeline_s, wall_s, stages = measure(name)
        print(f"{name:20} {timeline_s:10.0f} {wall_s:8.1f} {wall_s - timeline_s:8.1f}")
        for s in stages:
            print(f"{'':22}{s}")
        sys.stdout.flush()
    print(f"# load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
