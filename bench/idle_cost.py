"""What an idle server costs: instructions per wall second of `python -m emulator` doing nothing,
counted by valgrind's callgrind (the collector's 50 ms loop-lag sampler, the sweepers, the loop).

    python bench/idle_cost.py [seconds]        # default 10

The server starts under callgrind; two seconds after its ready line the counters are zeroed,
then dumped after `seconds` of idling. This share of wall time lands in every request's count
in bench/direct_bench.py and bench/instructions.py (docs/performance.md, "The process's own timers").
"""
import glob
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from instructions import start  # noqa: E402

SETTLE_S = 2.0


def idle_instructions_per_s(seconds: float) -> float:
    with tempfile.TemporaryDirectory() as d:
        proc, _ = start([sys.executable, "-m", "regionlab.emulator", "--port", "0", "--control-port", "0", "--no-ru-limits"], d)
        try:
            time.sleep(SETTLE_S)             # a benchmark of idling: nothing to wait on but the clock
            subprocess.run(["callgrind_control", "-z", str(proc.pid)], capture_output=True, check=True)
            time.sleep(seconds)
            subprocess.run(["callgrind_control", "-d", str(proc.pid)], capture_output=True, check=True)
            newest = max(glob.glob(os.path.join(d, "cg.out*")), key=os.path.getmtime)
            with open(newest) as f:
                total = next(int(line.split()[1]) for line in f if line.startswith(("summary:", "totals:")))
            return total / seconds
        finally:
            proc.terminate()
            proc.wait()


def main(argv) -> None:
    seconds = float(argv[1]) if len(argv) > 1 else 10.0
    print(f"# idle_cost on {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, {seconds:g} s idle")
    print(f"idle server: {idle_instructions_per_s(seconds) / 1000:.1f} k instructions per wall second")


if __name__ == "__main__":
    main(sys.argv)
