"""The suite's tiers, in one place (tests/conftest.py loads this before any test file).

* **CI or not**: `in_ci()` is true when the CI environment variable says so (CI runs .ci/run with
  CI=true, the convention Hypothesis follows too).
* **Hypothesis profiles**: `dev`, a quick run for developers and the default outside CI, and `ci`,
  the thorough one (Hypothesis's own `ci` profile: derandomized, no deadline, no example database)
  and the default in CI. HYPOTHESIS_PROFILE=dev|ci picks one explicitly (so does pytest's
  `--hypothesis-profile`). A test that names its own example count writes it as `examples(n)`: n
  under `ci`, DEV_SHARE of it under `dev`, so an explicit count follows the profile instead of
  overriding it.
* **Tools CI installs for**: a test that needs Node or Chromium finds it with `require`. When a
  command is missing, outside CI the test is skipped with the reason; in CI the Debian packages
  that hold it are installed with apt-get (CI runs as root) and, if it is still missing, the test
  fails with the reason: CI never passes with those tests silently skipped.
"""
import os
import shutil
import subprocess

import pytest
from hypothesis import settings

EXAMPLES_CI = 100                 # Hypothesis's default; tests' own counts stay as written
DEV_SHARE = 0.1                   # the `dev` profile runs a tenth of each count, at least one
PROFILES = ("dev", "ci")
APT_TIMEOUT_S = 600


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def register_profiles() -> None:
    settings.register_profile("ci", settings.get_profile("ci"), max_examples=EXAMPLES_CI)
    settings.register_profile("dev", settings.get_profile("default"),
                              max_examples=max(1, round(EXAMPLES_CI * DEV_SHARE)))


def profile_name() -> str:
    name = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if in_ci() else "dev")
    if name not in PROFILES:
        raise pytest.UsageError(f"HYPOTHESIS_PROFILE={name!r}: must be one of {', '.join(PROFILES)}")
    return name


def examples(n: int) -> int:
    """A test's own example count under the active profile: n under `ci`, a share under `dev`."""
    return max(1, round(n * settings().max_examples / EXAMPLES_CI))


def require(commands, packages: tuple[str, ...], need: str) -> list[str]:
    """The path of each command (a name, or a tuple of names any one of which will do). A missing
    one is installed in CI (apt-get install `packages`), else the test is `unavailable`."""
    found, failed = [_which(c) for c in commands], None
    if None in found and in_ci():
        failed = apt_install(*packages)
        found = [_which(c) for c in commands]
    if None in found:
        missing = " and ".join(_names(c) for c, path in zip(commands, found) if path is None)
        unavailable(f"{need}: no {missing} on PATH (Debian: apt-get install {' '.join(packages)})"
                    + (f"; installing failed: {failed}" if failed else ""))
    return found


def _which(command) -> str | None:
    names = (command,) if isinstance(command, str) else command
    return next((path for path in map(shutil.which, names) if path), None)


def _names(command) -> str:
    return command if isinstance(command, str) else " or ".join(command)


def unavailable(reason: str):
    """A tool a test needs is missing: skip outside CI, fail in CI (which installs what it needs)."""
    if in_ci():
        pytest.fail(f"{reason}. CI=true: CI must run these tests, so the missing tool fails the run",
                    pytrace=False)
    pytest.skip(reason)


def apt_install(*packages: str) -> str | None:
    """Install Debian packages with apt-get (update first: a fresh image has no lists). None when
    it worked, else why not."""
    apt = shutil.which("apt-get")
    if apt is None:
        return "apt-get is not on PATH"
    if os.geteuid() != 0:
        return "apt-get needs root"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in ([apt, "update", "-qq"], [apt, "install", "-y", "-qq", *packages]):
        try:
            done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=APT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return f"{' '.join(argv)} took more than {APT_TIMEOUT_S} s"
        if done.returncode != 0:
            return f"{' '.join(argv)} exited {done.returncode}: {(done.stderr or done.stdout)[-1000:]}"
    return None
