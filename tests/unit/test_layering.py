"""Proves the import rules of STYLE.md hold, by parsing every module with `ast` (relative imports
resolved, imports inside functions included): the sans-IO core imports no I/O, clock, randomness
or threading module and nothing of the shells; the bundled client never imports the emulator
(nor the official SDK), its policies are sans-IO like the core, the wire contract imports nothing
of the client around it;
direct mode, a surface over the service, imports neither the gateway nor the runtime;
the emulator never imports the azure SDK (it is test-only) but in the one drill workload that runs
through it (the optional `sdk` extra), which nothing imports until a drill asks for it: with the
SDK absent the CLI and drills run, and such a drill says what to install; and regionlab's own
modules import one another without cycles (a cycle through a package counts: importing a.b runs
a/__init__.py first)."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The core takes time as `now`/a Clock and randomness as a seeded rng; sockets, loops, threads
# and processes belong to the shells (and so do the shells' own packages). What the store asks of
# the interpreter (untracking, interning: ctypes, gc, sys) the runtime hands it (core/memory.py).
SANS_IO_FORBIDDEN = ("asyncio", "socket", "os", "time", "random", "threading", "aiohttp", "uvloop",
                     "selectors", "subprocess", "multiprocessing", "signal", "ctypes", "gc", "sys")
CORE_FORBIDDEN = SANS_IO_FORBIDDEN + ("regionlab.emulator.gateway", "regionlab.emulator.runtime",
                                      "regionlab.emulator.sim", "regionlab.emulator.service",
                                      "regionlab.emulator.direct", "regionlab.emulator.server")


def module_name(path: Path, root: Path) -> str:
    """The installed name: the repository's emulator/ and client/ are regionlab.emulator and
    regionlab.client (pyproject.toml's package-dir)."""
    parts = ["regionlab", *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _statements(source: str, module: str, is_package: bool):
    """(the module an import names, the names it takes from it) for every import in the source,
    inside functions too, relative ones made absolute."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                base_name = ".".join(base + ([node.module] if node.module else []))
            else:
                base_name = node.module
            yield base_name, tuple(alias.name for alias in node.names if alias.name != "*")
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and ((isinstance(node.func, ast.Name) and node.func.id == "__import__")
                   or (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"))):
            yield node.args[0].value, ()


def imports_of(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every module name the source imports, relative imports made absolute. `from a import b`
    yields both "a" and "a.b" (b may be a submodule)."""
    found = set()
    for base_name, names in _statements(source, module, is_package):
        found.add(base_name)
        found.update(f"{base_name}.{name}" for name in names)
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


# The layers of shared/DESIGN.md: surfaces (gateway, direct, sim) -> service -> core. The
# service is sans-I/O like the core; the runtime (the asyncio infrastructure) imports no surface;
# only emulator/server.py and the entry points compose them.
SURFACES = ("regionlab.emulator.gateway", "regionlab.emulator.direct", "regionlab.emulator.sim")
SERVICE_FORBIDDEN = SANS_IO_FORBIDDEN + SURFACES + ("regionlab.emulator.runtime", "regionlab.emulator.server",
                                                    "regionlab.emulator.drill")


def test_service_is_sans_io_and_knows_no_surface():
    assert violations("emulator/service", SERVICE_FORBIDDEN) == []


def test_the_simulator_drives_the_service_not_the_runtime_or_another_surface():
    forbidden = ("asyncio", "socket", "time", "threading", "aiohttp", "uvloop", "regionlab.emulator.gateway",
                 "regionlab.emulator.direct", "regionlab.emulator.runtime", "regionlab.emulator.server")
    assert violations("emulator/sim", forbidden) == []


def test_the_gateway_knows_no_other_surface_and_no_composition():
    forbidden = ("regionlab.emulator.direct", "regionlab.emulator.sim", "regionlab.emulator.runtime",
                 "regionlab.emulator.server")
    assert violations("emulator/gateway", forbidden) == []


def test_no_runtime_module_imports_a_surface():
    assert violations("emulator/runtime", SURFACES + ("regionlab.emulator.server",)) == []


def test_direct_mode_is_a_surface_over_the_service():
    """emulator/direct imports neither the gateway nor the simulator (other surfaces) nor the
    runtime or the server that compose it."""
    forbidden = ("regionlab.emulator.gateway", "regionlab.emulator.runtime", "regionlab.emulator.sim",
                 "regionlab.emulator.server")
    assert violations("emulator/direct", forbidden) == []


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


def _packages_above(name: str, inclusive: bool) -> set[str]:
    """The packages a module sits in ("a.b.c": "a", "a.b"), and itself too if inclusive."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + inclusive)}


def import_graph(root: Path = ROOT, package_dirs: tuple = ("emulator", "client")) -> dict[str, set[str]]:
    """Each module -> the modules of the tree that importing it runs: what it names (`from a
    import b` is a.b where b is a module, else a) and the packages above each of those, since
    Python runs a/__init__.py before a.b (but not the packages the importer is inside: those are
    already running)."""
    paths = {module_name(p, root): p for d in package_dirs for p in sorted((root / d).rglob("*.py"))}
    graph = {}
    for module, path in paths.items():
        is_package = path.name == "__init__.py"
        named = set()
        for base_name, names in _statements(path.read_text(encoding="utf-8"), module, is_package):
            submodules = {f"{base_name}.{n}" for n in names} & paths.keys()
            named |= submodules
            if len(submodules) < len(names) or not names:
                named.add(base_name)
        own = _packages_above(module, is_package)
        runs = named.union(*(_packages_above(n, False) - own for n in named))
        graph[module] = {n for n in runs if n in paths and n != module}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan), each as its modules'
    names without the leading "regionlab."."""
    index, low, stack, on_stack, found = {}, {}, [], set(), set()

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while not component or w != v:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
            if len(component) > 1:
                found.add(frozenset(c.removeprefix("regionlab.") for c in component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    assert import_cycles(import_graph()) == set()


def _tree(root: Path, files: dict) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path):
    _tree(tmp_path, {"emulator/__init__.py": "", "emulator/a.py": "from . import b\n",
                     "emulator/b.py": "def f():\n    from .a import g\n", "emulator/c.py": "from . import a\n"})
    assert import_cycles(import_graph(tmp_path, ("emulator",))) == {frozenset({"emulator.a", "emulator.b"})}


def test_a_cycle_through_a_package_init_is_found(tmp_path):
    """sim/run.py imports drill/scenario.py, which runs drill/__init__.py, which imports a module
    that imports sim/observed.py, which runs sim/__init__.py, which imports sim/run.py."""
    _tree(tmp_path, {"emulator/__init__.py": "",
                     "emulator/sim/__init__.py": "from .run import run\n",
                     "emulator/sim/run.py": "def run():\n    from ..drill.scenario import parse\n",
                     "emulator/sim/observed.py": "",
                     "emulator/drill/__init__.py": "from . import runner\n",
                     "emulator/drill/runner.py": "from ..sim import observed\n",
                     "emulator/drill/scenario.py": ""})
    assert import_cycles(import_graph(tmp_path, ("emulator",))) == {frozenset({
        "emulator.sim", "emulator.sim.run", "emulator.drill", "emulator.drill.runner"})}


def test_a_package_that_imports_its_own_modules_is_no_cycle(tmp_path):
    """An __init__.py that re-exports its modules, which import one another through the package
    (`from . import values`), or a module that takes a name from a package's __init__ that does
    not import it back."""
    _tree(tmp_path, {"emulator/__init__.py": "", "emulator/query/__init__.py": "from .query import compile\n",
                     "emulator/query/query.py": "from emulator.query import values\nfrom . import parser\n",
                     "emulator/query/values.py": "", "emulator/query/parser.py": "from . import values\n",
                     "emulator/cli.py": "from .query import compile\n"})
    assert import_cycles(import_graph(tmp_path, ("emulator",))) == set()
