"""Two emulators on one machine coexist with the default direct port range (issue #25,
"Lockouts"): the second, started with another --port, takes the first free ports of the range
after the first one's, says which in its ready line, and both serve direct-mode reads; a range
given explicitly with --direct-ports whose ports are taken still fails, with one clear line.

Real processes: tests/integration/two_emulators.py starts the emulators and drives the bundled
client in direct mode inside a private network namespace (`unshare -rn`, its own loopback), so
the fixed default ports are free there whatever else runs on this machine.
"""
import json
import subprocess
import sys
from pathlib import Path

from test_cli import _clean_env

HELPER = Path(__file__).with_name("two_emulators.py")
RUN_TIMEOUT_S = 120.0
NODES = 12                      # 3 regions x 4 nodes


def _in_private_network() -> dict:
    script = f'ip link set lo up && exec "{sys.executable}" "{HELPER}"'
    done = subprocess.run(["unshare", "-rn", "sh", "-c", script], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, env=_clean_env())
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _ports(info: dict) -> list:
    return [n["port"] for n in info["direct"]["nodes"]]


def test_a_second_emulator_takes_the_next_free_direct_ports_and_both_serve_direct_reads():
    out = _in_private_network()
    a, b, c = out["a"], out["b"], out["c"]
    assert a.get("ready") and b.get("ready"), out
    assert _ports(a) == list(range(10000, 10000 + NODES))
    assert _ports(b) == list(range(10000 + NODES, 10000 + 2 * NODES))      # the first free ones after A's
    assert a["direct_port_range"] == b["direct_port_range"] == [10000, 20000]
    for name, info in (("a", a), ("b", b)):
        served = out[f"{name}_served_by"]
        assert len(served) == 2 and all(s is not None for s in served), served     # direct, not the gateway
        assert {int(s.rsplit(":", 1)[1]) for s in served} <= set(_ports(info))      # by its own nodes
    assert c["exit"] == 1
    lines = c["stderr"].strip().splitlines()
    assert lines == [
        "regionlab: error: node 0 of East US (direct mode) cannot listen on 127.0.0.1:10000: Address already "
        "in use; choose another range with --direct-ports, or --direct-ports 0 for free ports"]
