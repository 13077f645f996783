"""pytest plugin: the `regionlab` fixture, a fresh emulator per test on free loopback ports.

Options come from the `regionlab_config` marker, e.g.
`@pytest.mark.regionlab_config(partitions=4, consistency="Strong")`: the keywords of
`running_emulator` (emulator/config.py checks them; a bad or unknown one is a ConfigError).
The handle is emulator.testing.RunningEmulator: endpoints and key, and `faults` (one method per
fault type, each a context manager that heals on exit), `failover`, `lost_writes`, `topology`.
"""
import pytest

from .testing import running_emulator


def pytest_configure(config):
    config.addinivalue_line("markers", "regionlab_config(**kwargs): options for the regionlab fixture")


@pytest.fixture
def regionlab(request):
    marker = request.node.get_closest_marker("regionlab_config")
    kwargs = dict(marker.kwargs) if marker else {}
    with running_emulator(**kwargs) as emu:
        yield emu
