"""`regionlab drill`: rehearse a bad day against the emulator and get a report (docs/drills.md).

    scenario.py  the scenario file: account, workload, timed steps, assertions; validation
    workload.py  the operations, through the bundled client's aio API, each one recorded
    served.py    no workload: the requests your own application sent, as the emulator served them
    runner.py    an emulator (own or running), the schedule, the progress line, the cross-checks
    report.py    phases, fault windows, RTO/RPO, the timeline, the assertions (pure arithmetic)
    verdict.py / observed.py   the black-box history check of what the clients saw
    table.py / html.py   the terminal summary and the self-contained report.html
    builtin/     the built-in drills, one scenario file each
"""
import io
import json
import os
from importlib import resources

from . import html, runner, table
from .progress import Stage
from .scenario import Drill, DrillError, check_regions, load, parse

SHORT_SCALE = 0.3                  # `--short`: every time of the drill times this


class Report(dict):
    """A drill's report: report.json's dict, plus the figures a test asserts on most."""

    @property
    def passed(self) -> bool:
        return self["passed"]

    @property
    def lost_writes(self) -> list[dict]:
        """The writes GET /lost-writes listed for the drill's container during the drill."""
        return self["lost_writes"]["writes"]

    @property
    def phases(self) -> list[dict]:
        return self["phases"]

    @property
    def ended(self) -> str:
        """completed, aborted (a stop condition, or the steady state before the first fault) or interrupted."""
        return self["ended"]["kind"]


def builtin_names() -> list[str]:
    files = resources.files(__package__).joinpath("builtin")
    return sorted(f.name.removesuffix(".json") for f in files.iterdir() if f.name.endswith(".json"))


def builtin(name: str) -> Drill:
    if name not in builtin_names():
        raise DrillError(f"no built-in drill {name!r}; the drills are: {', '.join(builtin_names())} "
                         "(or `regionlab drill run FILE`)")
    text = resources.files(__package__).joinpath("builtin", f"{name}.json").read_text(encoding="utf-8")
    return parse(text, default_name=name)


def resolve(file_or_name) -> Drill:
    """A Drill from a Drill, a built-in's name, a path to a scenario file, or parsed JSON."""
    if isinstance(file_or_name, Drill):
        return file_or_name
    if isinstance(file_or_name, dict):
        return parse(file_or_name)
    text = os.fspath(file_or_name)
    if text in builtin_names():
        return builtin(text)
    return load(text)


def run(file_or_name, *, target=None, scale: float = 1.0, seed: int = 0, out=None,
        report_dir: str | None = None, handle_signals: bool = False) -> "Report":
    """Run a drill and return its report (a dict, as report.json has it). Without a target it
    starts its own emulator of the drill's account; with report_dir it writes report.json and
    report.html there. handle_signals: SIGINT/SIGTERM end the run early, reported as interrupted."""
    drill = resolve(file_or_name)
    if scale != 1.0:
        drill = drill.scaled(scale)
    if target is not None and target.regions:
        check_regions(drill, target.regions)
    if drill.served and target is None:
        raise DrillError("a scenario without a `workload` section watches your own application drive a running "
                         "emulator: give its control port (--control URL), or add a workload")
    if target is None:
        with runner.own_emulator(drill) as own:
            report = runner.run(drill, own, out, seed, handle_signals)
    else:
        report = runner.run(drill, target, out, seed, handle_signals)
    if report_dir is not None:
        write(report, report_dir, out)
    return Report(report)


def write(report: dict, report_dir: str, out=None) -> tuple[str, str]:
    """report.json and report.html in report_dir; with out, a line on each (the plots take seconds)."""
    os.makedirs(report_dir, exist_ok=True)
    json_path, html_path = os.path.join(report_dir, "report.json"), os.path.join(report_dir, "report.html")
    with open(json_path, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    with Stage(out or io.StringIO(), f"writing {html_path} with its plots"):
        page = html.render(report)
    with open(html_path, "w", encoding="utf-8") as f:
        f.write(page)
    return json_path, html_path


__all__ = ["Drill", "DrillError", "Report", "builtin", "builtin_names", "resolve", "run", "write", "table"]
