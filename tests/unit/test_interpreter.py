"""Proves the hook of core/memory.py is what keeps stored state cheap, and that the core is
right without it: in a fresh process, versions written before emulator/interpreter.py installs the
interpreter's calls stay tracked and keep their own partition key strings, and read back the
same; versions written after are untracked and share one string per partition key."""
import subprocess
import sys

_SCRIPT = """
import gc, random
from regionlab.emulator.core.account import Account, AccountConfig
from regionlab.emulator.core.container import canonical_pk_json
from regionlab.emulator.core.documents import Writer
from regionlab.emulator.core.scheduler import ManualClock, Scheduler, run_until_idle

clock = ManualClock()
account = Account(AccountConfig(), clock, Scheduler(), random.Random(0))
c = account.create_container(account.create_database({"id": "d"}),
                             {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}})

def write(i):
    pk_json = "".join(["[", canonical_pk_json(["p"])[1:]])      # an equal string, not the same one
    w = Writer(c, account.write_regions[0], pk_json, ["p"], clock.now_ms())
    _, v = w.create({"id": f"i{i}", "pk": "p", "n": i})
    w.commit()
    run_until_idle(clock, account.scheduler)
    return v

def report(versions):
    print(all(map(gc.is_tracked, versions)), versions[0].key[0] is versions[1].key[0],
          [v.doc["n"] for v in versions])

report([write(0), write(1)])
from regionlab.emulator import interpreter
interpreter.install()
report([write(2), write(3)])
"""


def test_the_core_is_right_without_the_hook_and_cheap_with_it():
    done = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["True False [0, 1]", "False True [2, 3]"]
