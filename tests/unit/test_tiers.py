"""Proves the suite's tiers (tests/tiers.py) do what the README says: the profile follows CI and
HYPOTHESIS_PROFILE, a test's own example count is kept under `ci` and cut to a tenth under `dev`,
and a missing tool skips a test outside CI but fails it in CI (after trying to install it)."""
import pytest
from hypothesis import settings

import tiers


@pytest.fixture
def profile():
    """Load a profile for one test, then the one the session runs under again."""
    before = settings.get_current_profile_name()
    yield settings.load_profile
    settings.load_profile(before)


@pytest.mark.parametrize("env, expected", [
    ({}, "dev"), ({"CI": "true"}, "ci"), ({"CI": "false"}, "dev"),
    ({"CI": "true", "HYPOTHESIS_PROFILE": "dev"}, "dev"), ({"HYPOTHESIS_PROFILE": "ci"}, "ci"),
])
def test_the_profile_follows_ci_unless_one_is_named(monkeypatch, env, expected):
    for name in ("CI", "HYPOTHESIS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert tiers.profile_name() == expected


def test_an_unknown_profile_is_a_usage_error(monkeypatch):
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "thorough")
    with pytest.raises(pytest.UsageError, match="HYPOTHESIS_PROFILE='thorough': must be one of dev, ci"):
        tiers.profile_name()


def test_ci_keeps_each_count_and_dev_runs_a_tenth(profile):
    profile("ci")
    assert [tiers.examples(n) for n in (12, 60, 150, 500)] == [12, 60, 150, 500]
    assert settings().derandomize and settings().deadline is None        # hypothesis's own ci profile
    profile("dev")
    assert [tiers.examples(n) for n in (4, 12, 60, 150, 500)] == [1, 1, 6, 15, 50]


def test_a_missing_tool_skips_outside_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(pytest.skip.Exception, match=r"no node-that-is-not-there on PATH"):
        tiers.require(("node-that-is-not-there",), ("nodejs",), "a test needs it")


def test_a_missing_tool_fails_in_ci_saying_why_it_could_not_be_installed(monkeypatch):
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(pytest.fail.Exception, match=r"installing failed: apt-get is not on PATH\. CI=true"):
        tiers.require((("chromium-x", "chrome-x"),), ("chromium",), "the dashboard test needs Chromium")


def test_a_found_tool_is_its_path(tmp_path, monkeypatch):
    tool = tmp_path / "chrome-x"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert tiers.require((("chromium-x", "chrome-x"),), ("chromium",), "a test needs it") == [str(tool)]
