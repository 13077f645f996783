"""Proves `pip install regionlab` installs nothing outside the `regionlab` import name and works
next to a project with its own `client.py` and `emulator/` package: the wheel is built from this
tree and installed into a fresh venv (real pip, real dependencies), and that project's own pytest
runs green with the regionlab plugin loaded: its tests import their own `client` and `emulator`,
and one uses the `regionlab` fixture with the bundled client. Then uvloop is uninstalled, as on
Windows where it has no wheels, and the same project runs green again on asyncio's own loop, the
CLI included (start to ready line)."""
import json
import os
import shutil
import subprocess
import sys
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PIP_TIMEOUT_S = 600

pytestmark = pytest.mark.slow

PROJECT = {
    "client.py": 'NAME = "the application\'s own client"\n',
    "emulator/__init__.py": 'KIND = "the application\'s own emulator"\n',
    "tests/test_app.py": '''
        import client
        import emulator
        from regionlab.client import CosmosClient, PartitionKey
        from regionlab.client import event_loop


        def test_the_projects_own_modules_win():
            assert client.NAME == "the application's own client"
            assert emulator.KIND == "the application's own emulator"


        def test_the_regionlab_fixture_serves_the_bundled_client(regionlab):
            with CosmosClient(regionlab.endpoint, regionlab.key) as cosmos:
                db = cosmos.create_database("shop")
                orders = db.create_container("orders", partition_key=PartitionKey(path="/customer"))
                orders.create_item({"id": "1", "customer": "ada", "total": 42})
                assert orders.read_item("1", partition_key="ada")["total"] == 42


        def test_the_loop_is_the_one_installed():
            try:
                import uvloop  # noqa: F401
                expected = "uvloop"
            except ImportError:
                expected = "asyncio"
            assert event_loop.loop_name() == expected
    ''',
}


def run(cmd, cwd, timeout=PIP_TIMEOUT_S, env=None):
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, f"{cmd} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of this tree, built from a copy (an in-tree build would leave build/ behind)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("emulator", "client"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)], cwd=src)
    (found,) = out.glob("regionlab-*.whl")
    return found


def test_the_wheel_holds_only_regionlab(wheel):
    with zipfile.ZipFile(wheel) as zf:
        top = {name.split("/", 1)[0] for name in zf.namelist()}
        entry_points = zf.read(next(n for n in zf.namelist() if n.endswith("entry_points.txt"))).decode()
    assert top == {"regionlab", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}
    assert "regionlab = regionlab.emulator.cli:main" in entry_points
    assert "regionlab = regionlab.emulator.pytest_plugin" in entry_points


def test_a_project_with_its_own_client_and_emulator_runs_its_tests_with_the_plugin(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    run([str(py), "-m", "pip", "install", "-q", str(wheel), "pytest"], cwd=tmp_path)
    project = tmp_path / "app"
    for name, text in PROJECT.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(textwrap.dedent(text))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REGIONLAB_LOOP", "PYTEST_ADDOPTS")}

    def project_tests():
        done = run([str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=project, timeout=300, env=env)
        assert "3 passed" in done.stdout, done.stdout
        plugins = run([str(py), "-m", "pytest", "--trace-config", "--co", "-q"], cwd=project, timeout=120, env=env)
        assert "regionlab.emulator.pytest_plugin" in plugins.stdout

    project_tests()
    run([str(py), "-m", "pip", "uninstall", "-y", "-q", "uvloop"], cwd=tmp_path)
    project_tests()
    proc = subprocess.Popen([str(env_dir / "bin" / "regionlab"), "--port", "0", "--control-port", "0",
                             "--direct-ports", "0"], cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, env=env)
    try:
        ready = json.loads(proc.stdout.readline())
        assert ready["ready"] is True and len(ready["regions"]) == 3
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
