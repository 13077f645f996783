"""Proves what pyproject.toml installs is the tree, under the one import name `regionlab`: every
package directory of emulator/ and client/ is listed as regionlab.emulator.* / regionlab.client.*
(a missing one would be absent from the wheel), and nothing else is. The wheel itself is built
and installed next to a colliding project in tests/integration/test_install.py."""
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_directory_is_installed_under_regionlab():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"regionlab.emulator": "emulator", "regionlab.client": "client"}
    on_disk = sorted("regionlab." + ".".join(p.parent.relative_to(ROOT).parts)
                     for top in ("emulator", "client") for p in (ROOT / top).rglob("__init__.py"))
    assert sorted(setuptools["packages"]) == on_disk


def test_console_script_and_plugin_live_under_regionlab():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"regionlab": "regionlab.emulator.cli:main"}
    assert project["entry-points"]["pytest11"] == {"regionlab": "regionlab.emulator.pytest_plugin"}


def test_uvloop_is_a_dependency_only_where_it_has_wheels():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert [d for d in deps if d.startswith("uvloop")] == ["uvloop>=0.19; sys_platform != 'win32'"]
