"""Set-up for the whole suite: the hypothesis profiles of tests/tiers.py, registered and loaded
before any test file is imported (a test's `examples(n)` reads the loaded profile; pytest's
`--hypothesis-profile` still overrides it). This file's folder is on sys.path from here on, so
test files import tiers.py by name."""
import logging

from hypothesis import settings

import tiers

tiers.register_profiles()
settings.load_profile(tiers.profile_name())


def pytest_report_header(config):
    return (f"hypothesis profile: {settings.get_current_profile_name()} (tests/tiers.py: dev outside CI, "
            "ci with CI=true; HYPOTHESIS_PROFILE picks one)")


class _ClosedSdkClientHealthCheck(logging.Filter):
    """azure-cosmos runs its region health check as a background task that can outlive the
    client: when it fires after `close()` it logs "Health check task failed: HTTP transport has
    already been closed" at ERROR, in whatever test runs next. That line is the SDK's, about a
    client a finished test closed, and says nothing of the emulator, so tests that assert "no
    error was logged" do not see it. Any other health-check failure is still logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.getMessage().startswith("Health check task failed")
                    and "transport has already been closed" in record.getMessage())


for _name in ("azure.cosmos._GlobalEndpointManager", "azure.cosmos.aio._GlobalEndpointManager"):
    logging.getLogger(_name).addFilter(_ClosedSdkClientHealthCheck())
