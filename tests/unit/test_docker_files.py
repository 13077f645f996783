"""The Docker files, the README's opening commands, Docker section and examples, and .ci/run agree
with the code, read as text (no Docker engine): docker-compose.yml through yaml, the Dockerfile
through a small line parser, checked against emulator/defaults.py, pyproject.toml and each other.
"""
import builtins
import fnmatch
import json
import re
import shlex
import tomllib
import types
from pathlib import Path

import pytest
import yaml

from regionlab.emulator import defaults, profile

REPO = Path(__file__).resolve().parents[2]
EXPECTED_PORTS = {defaults.GLOBAL_PORT, defaults.CONTROL_PORT,
                  *range(defaults.REGION_PORT_BASE, defaults.REGION_PORT_BASE + len(defaults.REGIONS)),
                  *range(defaults.DIRECT_PORT_MIN, defaults.DIRECT_PORT_MIN + defaults.DIRECT_PORTS_PUBLISHED)}
HEALTH_URL = f"http://127.0.0.1:{defaults.CONTROL_PORT}/health"


# ---- a Dockerfile, as (INSTRUCTION, arguments) pairs -------------------------------------------

def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """Join `\\` continuations, drop comments and blank lines, split off the instruction word."""
    out, pending = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):                  # a comment inside a continued instruction
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        word, _, args = (pending + line).partition(" ")
        out.append((word.upper(), args.strip()))
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    return out


def exec_form(args: str) -> list[str]:
    """The JSON-array (exec) form of CMD/ENTRYPOINT/HEALTHCHECK CMD; shell form is refused."""
    assert args.startswith("["), f"use the exec form (a JSON array), got: {args}"
    return json.loads(args)


def healthcheck_command(args: str) -> list[str]:
    """The command of `HEALTHCHECK [--option=value ...] CMD [...]`."""
    options, sep, command = args.partition("CMD ")
    assert sep, f"HEALTHCHECK without CMD: {args}"
    assert all(o.startswith("--") for o in options.split()), f"unexpected HEALTHCHECK options: {options}"
    return exec_form(command.strip())


def one(instructions, word: str) -> str:
    found = [args for w, args in instructions if w == word]
    assert len(found) == 1, f"expected exactly one {word}, found {found}"
    return found[0]


@pytest.fixture(scope="module")
def dockerfile():
    return dockerfile_instructions((REPO / "docker" / "Dockerfile").read_text())


@pytest.fixture(scope="module")
def compose_service():
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    assert len(services) == 1, f"one emulator service expected, got {list(services)}"
    return next(iter(services.values()))


def test_dockerfile_parser_joins_continuations_and_skips_comments():
    text = "# head\nFROM x\n\nRUN a \\\n    # inner\n    && b\nexpose 1 2\n"
    assert dockerfile_instructions(text) == [("FROM", "x"), ("RUN", "a  && b"), ("EXPOSE", "1 2")]


# ---- Dockerfile ----------------------------------------------------------------------------------

def test_dockerfile_builds_on_python_3_11_slim(dockerfile):
    assert one(dockerfile, "FROM") == "python:3.11-slim"


def test_dockerfile_exposes_the_default_ports(dockerfile):
    exposed = {port for w, args in dockerfile if w == "EXPOSE" for p in args.split()
               for port in _port_range(p.split("/")[0])}
    assert exposed == EXPECTED_PORTS


def test_dockerfile_runs_the_console_script_pyproject_declares_bound_to_all_interfaces(dockerfile):
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts.get("regionlab") == "regionlab.emulator.cli:main"
    assert not [w for w, _ in dockerfile if w == "CMD"], "arguments belong after the ENTRYPOINT"
    entrypoint = exec_form(one(dockerfile, "ENTRYPOINT"))
    assert entrypoint[0] == "regionlab"
    assert entrypoint[entrypoint.index("--host") + 1] == "0.0.0.0"
    assert "--port" not in entrypoint and "--control-port" not in entrypoint, "the ports must be the defaults"


def health_check_url(code: str, environ: dict) -> str:
    """The URL the health check's `python -c` code opens under `environ`: it is run for real,
    with only urlopen replaced by a recorder (sockets are the integration tests' business:
    tests/integration/test_cli.py runs the same command against a live server)."""
    opened = []
    fake_request = types.SimpleNamespace(urlopen=lambda url, timeout: opened.append((url, timeout)))
    fake_os = types.SimpleNamespace(environ=environ)
    real_import = builtins.__import__

    def importer(name, *args, **kwargs):
        return {"os": fake_os, "urllib.request": types.SimpleNamespace(request=fake_request)}.get(name) \
            or real_import(name, *args, **kwargs)
    exec(code, {"__builtins__": {**vars(builtins), "__import__": importer}})
    assert len(opened) == 1 and 0 < opened[0][1] <= 3, f"one request with a short timeout: {opened}"
    return opened[0][0]


def test_dockerfile_health_check_asks_the_control_port_the_environment_names(dockerfile):
    command = healthcheck_command(one(dockerfile, "HEALTHCHECK"))
    assert command[:2] == ["python", "-c"], "slim has no curl: use python's urllib"
    assert health_check_url(command[2], {}) == HEALTH_URL
    assert health_check_url(command[2], {"REGIONLAB_CONTROL_PORT": ""}) == HEALTH_URL
    assert health_check_url(command[2], {"REGIONLAB_CONTROL_PORT": "9100"}) == "http://127.0.0.1:9100/health"


def test_dockerfile_health_check_follows_the_official_emulator_profile(dockerfile):
    code = healthcheck_command(one(dockerfile, "HEALTHCHECK"))[2]
    official = f"http://127.0.0.1:{profile.OFFICIAL_CONTROL_PORT}/health"
    assert health_check_url(code, {"REGIONLAB_PROFILE": "official-emulator"}) == official
    assert health_check_url(code, {"REGIONLAB_PROFILE": "default"}) == HEALTH_URL
    assert health_check_url(code, {"REGIONLAB_PROFILE": "official-emulator",
                                   "REGIONLAB_CONTROL_PORT": "9100"}) == "http://127.0.0.1:9100/health"


def test_dockerfile_does_not_pin_the_control_port_the_health_check_reads(dockerfile):
    """A fixed ENV would be fine; one that disagrees with the default would break the check."""
    env = " ".join(args for w, args in dockerfile if w == "ENV")
    pinned = re.search(r"REGIONLAB_CONTROL_PORT=(\S+)", env)
    assert pinned is None or pinned.group(1) == str(defaults.CONTROL_PORT)


def test_dockerfile_copies_what_pip_needs_and_dockerignore_keeps_it(dockerfile):
    ignored = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    sources = [s for w, args in dockerfile if w == "COPY" for s in args.split()[:-1]]
    for source in sources:
        assert not source.startswith("--"), f"unexpected COPY option {source}"
        assert (REPO / source).exists(), f"COPY {source}: no such file in the build context"
        assert not any(fnmatch.fnmatch(source, pattern) for pattern in ignored), \
            f"COPY {source} is excluded by .dockerignore"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert {"pyproject.toml", project["readme"], "emulator", "client"} <= set(sources)


# ---- docker-compose.yml -----------------------------------------------------------------------------

def _port_range(text: str) -> range:
    """"8081" or a range "10000-10019"."""
    lo, _, hi = text.partition("-")
    return range(int(lo), int(hi or lo) + 1)


def _published(entry) -> list[tuple[int, int]]:
    """[(published, target)] of a compose port in short ("[ip:]pub:target", either side a
    range) or long syntax."""
    if isinstance(entry, dict):
        return [(int(entry["published"]), int(entry["target"]))]
    *_, published, target = str(entry).split(":")
    pubs, targets = _port_range(published), _port_range(target.split("/")[0])
    assert len(pubs) == len(targets), f"a port range must map to one as long: {entry}"
    return list(zip(pubs, targets))


def test_compose_builds_the_dockerfile(compose_service):
    build = compose_service["build"]
    assert build["dockerfile"] == "docker/Dockerfile"
    assert (REPO / build.get("context", ".") / build["dockerfile"]).is_file()


def test_compose_publishes_the_default_ports_unchanged(compose_service):
    pairs = [pair for p in compose_service["ports"] for pair in _published(p)]
    assert all(published == target for published, target in pairs), \
        "the account document advertises the container's ports, so the host must use the same ones"
    assert {target for _, target in pairs} == EXPECTED_PORTS


def test_compose_health_check_is_the_dockerfiles(compose_service, dockerfile):
    test = compose_service["healthcheck"]["test"]
    assert test[0] == "CMD"
    assert test[1:] == healthcheck_command(one(dockerfile, "HEALTHCHECK"))


def test_compose_health_check_follows_the_control_port_variable(compose_service):
    code = compose_service["healthcheck"]["test"][3]
    environment = compose_service.get("environment") or {}
    port = (environment.get("REGIONLAB_CONTROL_PORT") if isinstance(environment, dict) else None) \
        or str(defaults.CONTROL_PORT)
    assert health_check_url(code, {"REGIONLAB_CONTROL_PORT": port}) == f"http://127.0.0.1:{port}/health"
    assert int(port) in {target for p in compose_service["ports"] for _, target in _published(p)}


def test_compose_does_not_replace_the_entrypoint(compose_service):
    assert "entrypoint" not in compose_service and "command" not in compose_service


# ---- README and .ci/run -----------------------------------------------------------------------------

def readme_opening_commands() -> list[str]:
    """The first two fenced blocks of README.md, each of which must hold exactly one command."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", (REPO / "README.md").read_text(), flags=re.S | re.M)
    commands = []
    for block in blocks[:2]:
        lines = [line.strip() for line in block.splitlines() if line.strip()]
        assert len(lines) == 1, f"README opening blocks hold one command each, got {lines}"
        commands.append(lines[0])
    assert len(commands) == 2, "README.md must open with two fenced commands"
    return commands


def test_readme_first_command_installs_and_starts_the_console_script():
    start, _ = readme_opening_commands()
    words = shlex.split(start)
    assert words[:3] == ["python3", "-m", "venv"]
    assert words[-1] == ".venv/bin/regionlab", "the default topology: no flags"


def readme_section(title: str) -> str:
    text = (REPO / "README.md").read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def test_readme_docker_run_example_publishes_every_default_port():
    runs = [line.strip() for line in readme_section("Docker").splitlines() if line.strip().startswith("docker run")]
    assert runs, "the README's Docker section shows a docker run example"
    for run in runs:
        words = shlex.split(run)
        published = set()
        for i, word in enumerate(words):
            if word in ("-p", "--publish"):
                *_, host, target = words[i + 1].split(":")
                assert host == target, "the account document advertises the container's ports"
                lo, _, hi = target.partition("-")
                published |= set(range(int(lo), int(hi or lo) + 1))
        assert published == EXPECTED_PORTS, f"{run}: publishes {sorted(published)}"


def test_readme_says_when_compose_waits_for_health():
    docker = readme_section("Docker")
    assert "Compose waits" not in docker, "plain `docker compose up` does not wait on the health check"
    assert "docker compose up --wait" in docker


def test_readme_throttle_example_names_the_database_and_container_its_sdk_example_creates():
    text = (REPO / "README.md").read_text()
    db = re.search(r'create_database_if_not_exists\("([^"]+)"\)', text).group(1)
    container = re.search(r'create_container_if_not_exists\("([^"]+)"', text).group(1)
    throttles = re.findall(r"^regionlab throttle (?:container) (\S+) (\S+)", text, flags=re.M)
    assert throttles and all(t == (db, container) for t in throttles), throttles


def test_readme_commands_run_from_the_venv_or_say_how():
    """After the opening command the venv is not active: a bare `regionlab` needs the README to
    say how to activate it, before the first such command."""
    text = (REPO / "README.md").read_text()
    first_bare = re.search(r"^regionlab ", text, flags=re.M)
    activate = text.find(". .venv/bin/activate")
    assert first_bare is None or -1 < activate < first_bare.start()


def test_ci_runs_the_readmes_test_command_verbatim():
    _, test_command = readme_opening_commands()
    assert "pip install -e '.[test]'" in test_command and test_command.endswith("-m pytest")
    ci = REPO / ".ci" / "run"
    assert ci.stat().st_mode & 0o111, ".ci/run must be executable"
    lines = [line.strip() for line in ci.read_text().splitlines()]
    assert "set -euo pipefail" in lines
    runs = [line for line in lines if line.startswith(test_command)]
    assert len(runs) == 1, f".ci/run must run the README's test command once: {test_command}"
    rest = runs[0][len(test_command):].strip()
    assert rest in ("", "|| status=$?"), f"only the exit status may be captured after it, got: {rest}"


def test_compose_pins_the_direct_nodes_to_the_published_slice_and_advertises_the_host(compose_service):
    env = compose_service["environment"]
    published = [pair for p in compose_service["ports"] for pair in _published(p)
                 if pair[1] >= defaults.DIRECT_PORT_MIN]
    lo, hi = (int(x) for x in env["REGIONLAB_DIRECT_PORTS"].split("-"))
    assert {t for _, t in published} == set(range(lo, hi + 1))
    assert hi - lo + 1 >= 4 * len(defaults.REGIONS), "every default node needs a published port"
    assert env["REGIONLAB_ADVERTISE_HOST"] == "127.0.0.1", "addresses must name the host, not the container"



def test_compose_keeps_the_account_in_a_named_volume(compose_service):
    """--data-dir (docs/durability.md): the data dir the environment names is a named volume."""
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    data_dir = compose_service["environment"]["REGIONLAB_DATA_DIR"]
    mounts = [m.split(":") for m in compose_service["volumes"]]
    assert [name for name, target, *_ in mounts if target == data_dir] == ["regionlab-data"]
    assert "regionlab-data" in compose["volumes"]


def test_compose_seeds_from_the_repositorys_seed_directory(compose_service):
    """--seed-data (docs/seed-data.md): the seed path the environment names is the repository's
    docker/seed, mounted read-only, and what it holds reads as a seed (nothing, as shipped)."""
    from regionlab.emulator.runtime import seed_data
    seed = compose_service["environment"]["REGIONLAB_SEED_DATA"]
    mounts = [m.split(":") for m in compose_service["volumes"]]
    [(source, options)] = [(name, rest) for name, target, *rest in mounts if target == seed]
    assert options == ["ro"] and (REPO / source).is_dir()
    assert seed_data.read(str(REPO / source)) == []


def test_the_regional_hostnames_overlay_aliases_the_names_the_sdk_derives_from_its_host():
    from regionlab.emulator.config import BY_NAME
    from regionlab.emulator.gateway.hosts import regional_host
    overlay = yaml.safe_load((REPO / "docker" / "compose.regional-hostnames.yml").read_text())
    svc = overlay["services"]["regionlab"]
    env = svc["environment"]
    assert env["REGIONLAB_REGIONAL_HOSTNAMES"] == "true"
    assert BY_NAME["regional_hostnames"].variable == "REGIONLAB_REGIONAL_HOSTNAMES"
    host = env["REGIONLAB_ADVERTISE_HOST"]
    base = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    assert host in base["services"]                  # the name the compose network resolves
    assert svc["networks"]["default"]["aliases"] == [regional_host(host, r) for r in defaults.REGIONS]
