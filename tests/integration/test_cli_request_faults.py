"""Proves the `regionlab fault <request fault>` commands build the documented POST /faults bodies
and that a running emulator takes them: the real CLI entry point against a real in-process
emulator's control port, checked with `regionlab faults`."""
import pytest

from regionlab.emulator.testing import running_emulator
from control_harness import regionlab


@pytest.fixture
def emu():
    with running_emulator(auth=False) as handle:
        yield handle


@pytest.mark.parametrize("argv, expected", [
    (["latency", "East US", "--delay-ms", "1000", "--jitter-ms", "50", "--op", "read", "--seed", "7"],
     {"type": "latency", "region": "East US", "delay_ms": 1000, "jitter_ms": 50, "op": "read", "seed": 7}),
    (["error", "West US", "--status", "410", "--substatus", "1002", "--share", "0.5", "--count", "3"],
     {"type": "error", "region": "West US", "status": 410, "substatus": 1002, "share": 0.5, "count": 3}),
    (["timeout-after-apply", "East US", "--op", "write", "--duration-ms", "5000"],
     {"type": "timeout_after_apply", "region": "East US", "op": "write", "duration_ms": 5000}),
    (["tcp-reset", "East US 2", "--share", "0.2"], {"type": "tcp_reset", "region": "East US 2", "share": 0.2}),
    (["clock-skew", "East US", "--offset-ms", "-90000"], {"type": "clock_skew", "region": "East US", "offset_ms": -90000}),
])
def test_request_fault_commands(capsys, emu, argv, expected):
    rc, fault, _ = regionlab(capsys, emu, "fault", *argv)
    assert rc == 0
    assert {k: fault[k] for k in expected} == expected
    rc, listed, _ = regionlab(capsys, emu, "faults")
    assert [f["id"] for f in listed["faults"]] == [fault["id"]]
    assert regionlab(capsys, emu, "fault", "heal", str(fault["id"]))[0] == 0


def test_a_refused_request_fault_prints_the_reason(capsys, emu):
    rc, _, err = regionlab(capsys, emu, "fault", "error", "East US", "--status", "200")
    assert rc == 1 and "'status' must be an integer from 400 to 599" in err
