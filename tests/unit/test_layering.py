"""Proves the import rules of STYLE.md hold, by parsing every module with `ast` (relative imports
resolved, imports inside functions included): the sans-IO core imports no I/O, clock, randomness
or threading module and nothing of the shells; the bundled client never imports the emulator
(nor the official SDK), its policies are sans-IO like the core, the wire contract imports nothing
of the client around it;
direct mode, a surface over the service, imports neither the gateway nor the runtime;
the emulator never imports the azure SDK (it is test-only) but in the one drill workload that runs
through it (the optional `sdk` extra), which nothing imports until a drill asks for it: with the
SDK absent the CLI and drills run, and such a drill says what to install."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The core takes time as `now`/a Clock and randomness as a seeded rng; sockets, loops, threads
# and processes belong to the shells (and so do the shells' own packages).
CORE_FORBIDDEN = ("asyncio", "socket", "os", "time", "random", "threading", "aiohttp", "uvloop",
                  "selectors", "subprocess", "multiprocessing", "signal",
                  "regionlab.emulator.gateway", "regionlab.emulator.runtime", "regionlab.emulator.sim")


def module_name(path: Path, root: Path) -> str:
    """The installed name: the repository's emulator/ and client/ are regionlab.emulator and
    regionlab.client (pyproject.toml's package-dir)."""
    parts = ["regionlab", *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every module name the source imports, relative imports made absolute. `from a import b`
    yields both "a" and "a.b" (b may be a submodule)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                base_name = ".".join(base + ([node.module] if node.module else []))
            else:
                base_name = node.module
            found.add(base_name)
            found.update(f"{base_name}.{alias.name}" for alias in node.names if alias.name != "*")
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and ((isinstance(node.func, ast.Name) and node.func.id == "__import__")
                   or (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"))):
            found.add(node.args[0].value)
    return found


def violations(package_dir: str, forbidden: tuple, root: Path = ROOT) -> list[str]:
    files = sorted((root / package_dir).rglob("*.py"))
    assert files, f"no modules under {package_dir}: the rule would pass vacuously"
    out = []
    for path in files:
        names = imports_of(path.read_text(encoding="utf-8"), module_name(path, root), path.name == "__init__.py")
        for name in sorted(names):
            if any(name == f or name.startswith(f + ".") for f in forbidden):
                out.append(f"{path.relative_to(root).as_posix()} imports {name}")
    return out


def test_core_is_sans_io():
    assert violations("emulator/core", CORE_FORBIDDEN) == []


def test_direct_mode_is_a_surface_over_the_service():
    """emulator/direct imports neither the gateway (another surface) nor the runtime (which
    composes it), and nothing of the runtime imports direct mode but the server that composes it."""
    forbidden = ("regionlab.emulator.gateway", "regionlab.emulator.runtime", "regionlab.emulator.sim")
    assert violations("emulator/direct", forbidden) == []
    users = [v for v in violations("emulator/runtime", ("regionlab.emulator.direct",))
             if not v.startswith("emulator/runtime/server.py ")]
    assert users == []


def test_client_never_imports_the_emulator():
    assert violations("client", ("regionlab.emulator", "emulator")) == []


# The client's policies are sans-IO state machines driven in virtual time, like the core.
POLICIES_FORBIDDEN = CORE_FORBIDDEN + ("aiohttp", "regionlab.client.aio", "regionlab.client.sync")


def test_client_policies_are_sans_io():
    assert violations("client/policies", POLICIES_FORBIDDEN) == []


def test_the_wire_contract_imports_nothing_of_the_client():
    assert violations("client/protocol", ("regionlab.client.aio", "regionlab.client.sync", "regionlab.client.policies", "aiohttp")) == []


def test_client_never_imports_the_sdk():
    assert violations("client", ("azure",)) == []


SDK_WORKLOAD = "emulator/drill/sdk_workload.py"     # `"client": "azure-cosmos"` drills (extra `sdk`)


def test_emulator_never_imports_the_sdk():
    assert [v for v in violations("emulator", ("azure",)) if not v.startswith(SDK_WORKLOAD + " ")] == []
    assert violations("emulator", ("azure",)) != []           # the exception is the one module above


# A process where `azure` cannot be imported, as on an install without the `sdk` extra.
_NO_SDK = """
import importlib.abc, json, sys
class NoAzure(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "azure" or name.startswith("azure."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoAzure())
from regionlab.emulator import cli
from regionlab.emulator.drill import resolve, runner
drill = resolve({"workload": {"client": "azure-cosmos"}})
try:
    runner.run(drill, runner.Target("http://127.0.0.1:9/", "k", "http://127.0.0.1:9/"))
except Exception as e:
    print(type(e).__name__, e)
print(sorted(m for m in sys.modules if m.startswith("azure")))
"""


def test_without_the_sdk_the_emulator_imports_and_an_sdk_drill_says_what_to_install():
    done = subprocess.run([sys.executable, "-c", _NO_SDK], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "DrillError workload.client \"azure-cosmos\" runs the workload through the official SDK, which is "
        "not installed: pip install 'regionlab[sdk]' (azure-cosmos 4.17.1)", "[]"]


@pytest.mark.parametrize("source, module, expected", [
    ("import os.path", "regionlab.emulator.core.x", {"os.path"}),
    ("from time import monotonic", "regionlab.emulator.core.x", {"time", "time.monotonic"}),
    ("from . import store", "regionlab.emulator.core.x", {"regionlab.emulator.core", "regionlab.emulator.core.store"}),
    ("from ..gateway import server", "regionlab.emulator.core.x", {"regionlab.emulator.gateway", "regionlab.emulator.gateway.server"}),
    ("from ...emulator import core", "regionlab.client.protocol.x", {"regionlab.emulator", "regionlab.emulator.core"}),
    ("from .query import lexer", "regionlab.emulator.core", {"regionlab.emulator.core.query", "regionlab.emulator.core.query.lexer"}),
    ("def f():\n    import socket", "regionlab.emulator.core.x", {"socket"}),
    ("importlib.import_module('asyncio')", "regionlab.emulator.core.x", {"asyncio"}),
])
def test_the_import_reader_sees_every_form(source, module, expected):
    assert imports_of(source, module, is_package=module == "regionlab.emulator.core") == expected


def test_a_forbidden_import_is_reported(tmp_path):
    core = tmp_path / "emulator" / "core"
    core.mkdir(parents=True)
    (core / "ok.py").write_text("import heapq\nfrom . import store\n")
    (core / "bad.py").write_text("def now():\n    from ..runtime import clock\n    import time\n")
    assert violations("emulator/core", CORE_FORBIDDEN, tmp_path) == [
        "emulator/core/bad.py imports regionlab.emulator.runtime",
        "emulator/core/bad.py imports regionlab.emulator.runtime.clock",
        "emulator/core/bad.py imports time",
    ]
