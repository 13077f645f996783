"""Set-up for the whole suite: the hypothesis profiles of tests/tiers.py, registered and loaded
before any test file is imported (a test's `examples(n)` reads the loaded profile; pytest's
`--hypothesis-profile` still overrides it). This file's folder is on sys.path from here on, so
test files import tiers.py by name."""
from hypothesis import settings

import tiers

tiers.register_profiles()
settings.load_profile(tiers.profile_name())


def pytest_report_header(config):
    return (f"hypothesis profile: {settings.get_current_profile_name()} (tests/tiers.py: dev outside CI, "
            "ci with CI=true; HYPOTHESIS_PROFILE picks one)")
