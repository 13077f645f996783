"""pyflakes over the installed code (emulator/, client/): no name redefined before it was used
(a merge of two branches can leave a method defined twice, the later one silently shadowing the
first), none used undefined, no import shadowed by a loop variable. Unused imports and variables
are left to review: they break nothing."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IGNORED = ("imported but unused", "is assigned to but never used", "f-string is missing placeholders",
           "unable to detect undefined names")


def test_no_redefinitions_or_undefined_names():
    done = subprocess.run([sys.executable, "-m", "pyflakes", "emulator", "client"], cwd=ROOT,
                          capture_output=True, text=True)
    problems = [line for line in (done.stdout + done.stderr).splitlines()
                if line.strip() and not any(text in line for text in IGNORED)]
    assert problems == []
