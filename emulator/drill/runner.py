"""Run a drill: an emulator (started in-process on free ports, or a running one through its
control port), the workload, the schedule's steps at their times, a live progress line, and at
the end the lost-writes cross-check and the report (report.py).

The workload and the schedule share one asyncio loop in the caller's thread; control-port calls
(blocking urllib, a graceful failover waits for its drain) run in worker threads so the workload
keeps going while they are answered. A drill with `setups` runs once per setup, one after another
on the same account: each run heals its faults and restores the throttling knobs it changed
before the next begins, and comparison.py puts the runs side by side.
"""
import asyncio
import importlib.util
import math
import signal
import sys
import threading
import time
from contextlib import contextmanager

from regionlab.client.aio import CosmosClient
from regionlab.client.exceptions import CosmosResourceNotFoundError

from .. import config, defaults
from ..control_client import ControlError, call
from ..embedded import EmbeddedEmulator
from . import comparison, html, report as reports, served, verdict
from .guard import Guard, Interrupt
from .live import Live
from .progress import Progress, Stage
from .scenario import DrillError, account_options
from .workload import CONTAINER, DATABASE, Workload

HEAL_TIMEOUT_S = 30.0


class Target:
    """Where the drill runs: the account endpoint and key, and the control port. drop_database:
    remove the drill's database at the end if the drill created it (the command line's choice for
    a running emulator, `--keep-database` to keep it; an own emulator goes away whole)."""

    def __init__(self, endpoint: str, key: str, control: str, token: str | None = None, regions: tuple = (),
                 drop_database: bool = False):
        self.endpoint, self.key, self.control, self.token = endpoint, key, control.rstrip("/"), token
        self.regions = regions             # a running emulator's (its account, not the drill's)
        self.drop_database = drop_database

    def call(self, method: str, path: str, body=None):
        return call(self.control, method, path, body, token=self.token)


@contextmanager
def own_emulator(drill):
    """An emulator of the drill's account, in-process on free ports, for the with-block."""
    emu = EmbeddedEmulator.started(config.from_keywords(account_options(drill)))
    try:
        yield Target(emu.endpoint, emu.key, emu.control_endpoint, emu.control_token)
    finally:
        emu.stop()


def remote(control: str, token: str | None = None, endpoint: str | None = None, key: str | None = None,
           drop_database: bool = True) -> Target:
    topology = call(control.rstrip("/"), "GET", "/topology", token=token)
    return Target(endpoint or topology["account_endpoint"], key or defaults.EMULATOR_KEY, control, token,
                  tuple(r["name"] for r in topology["regions"]), drop_database)


def run(drill, target: Target, out=None, seed: int = 0, handle_signals: bool = False) -> dict:
    """The drill's report. handle_signals: the first SIGINT/SIGTERM ends the run early (healed,
    reported, marked interrupted) instead of raising (the command line's choice; a library
    caller keeps its own Ctrl-C)."""
    if drill.client == "azure-cosmos":
        _sdk_installed()
    return asyncio.run(_run_setups(drill, target, out or sys.stdout, seed, handle_signals))


def _sdk_installed() -> None:
    """The official SDK is the optional extra `sdk`: say so before anything runs."""
    try:
        found = importlib.util.find_spec("azure.cosmos") is not None
    except ImportError:                  # "azure" itself is absent
        found = False
    if not found:
        raise DrillError('workload.client "azure-cosmos" runs the workload through the official SDK, which is '
                         "not installed: pip install 'regionlab[sdk]' (azure-cosmos 4.17.1)") from None


async def _run_setups(drill, target: Target, out, seed: int, handle_signals: bool) -> dict:
    interrupt = Interrupt()
    if handle_signals:
        interrupt.install()
    created = target.drop_database and not drill.served and not await _database_exists(target)
    try:
        if not drill.setups:
            report, _ = await _run(drill, target, out, seed, interrupt, last=True)
            return report
        runs = []
        for setup in drill.setups:
            out.write(f"setup {setup['name']}: client options {setup['client_options']}\n")
            report, ops = await _run(drill.for_setup(setup), target, out, seed, interrupt,
                                     last=setup is drill.setups[-1])
            runs.append((setup, report, ops))
            if report["ended"]["kind"] != "completed":
                break                      # the setups after an early end do not run
        return comparison.combine(drill, runs)
    finally:
        if created:
            await _drop_database(target, out)
        interrupt.uninstall()


async def _database_exists(target: Target) -> bool:
    async with CosmosClient(target.endpoint, target.key) as client:
        try:
            await client.get_database_client(DATABASE).read()
        except CosmosResourceNotFoundError:
            return False
    return True


async def _drop_database(target: Target, out) -> None:
    """The database the drill created on a running emulator goes when the run ends, however it ends."""
    async with CosmosClient(target.endpoint, target.key) as client:
        try:
            await client.delete_database(DATABASE)
        except CosmosResourceNotFoundError:
            return
    out.write(f"removed the database {DATABASE!r} the drill created (--keep-database keeps it)\n")


def workload_for(drill, target: Target, seed: int):
    """The workload of the drill's client: the bundled one, or the official SDK (sdk_workload.py);
    without a workload section, the requests your application sends (served.py)."""
    if drill.served:
        return served.ServedWorkload(drill, target)
    if drill.client == "azure-cosmos":
        from .sdk_workload import SdkWorkload      # azure-cosmos is imported only by drills that use it
        return SdkWorkload(drill, target.endpoint, target.key, seed)
    return Workload(drill, target.endpoint, target.key, seed)


async def _run(drill, target: Target, out, seed: int, interrupt: Interrupt, last: bool) -> tuple[dict, list]:
    """One run of the workload and schedule, and its report; last: no setup runs after it."""
    workload = workload_for(drill, target, seed)
    progress = Progress(out, drill)
    live = Live(target, drill, workload, progress, out)
    guard = Guard(drill, workload, interrupt)
    lost_before = {_lost_key(w) for w in (await _control(target, "GET", "/lost-writes"))["writes"]}
    if not await _prefill(workload, interrupt):
        await workload.close()
        guard.ended = {"kind": "interrupted", "at_ms": 0.0, "signal": interrupt.signum,
                       "reason": f"{signal.Signals(interrupt.signum).name} received while the keys were written"}
    started_epoch_ms = time.time() * 1000.0
    workload.start_clock()
    if guard.ended is None:
        runner = asyncio.ensure_future(workload.run())
        watcher = asyncio.ensure_future(guard.watch())
        publisher = asyncio.ensure_future(live.publish_forever())
        try:
            await _schedule(drill, target, workload, progress, guard, live)
        finally:
            publisher.cancel()
            watcher.cancel()
            workload.stop()
            if last:
                # matplotlib's import takes 1-5 s: it overlaps the healing and the read-back, and
                # starts only after the last run's workload, so its CPU counts in no latency.
                threading.Thread(target=html.load_pyplot, daemon=True).start()
            await _heal_own(target, workload)    # first: a blackholed request returns once healed
            await runner
            await workload.close()
            progress.finish(workload)
    if guard.ended is not None:
        out.write(f"{guard.ended['kind']} at {guard.ended['at_ms'] / 1000:.1f} s: {guard.ended['reason']}; "
                  "every fault the drill injected is healed\n")
    report = await _report(drill, target, workload, lost_before, started_epoch_ms, guard.ended, out)
    await live.publish(ended=report["ended"]["kind"])
    return report, workload.ops


async def _prefill(workload, interrupt: Interrupt) -> bool:
    """The workload's setup, unless a signal comes first (then False: nothing was injected yet)."""
    setup = asyncio.ensure_future(workload.setup())
    stopped = asyncio.ensure_future(interrupt.event.wait())
    await asyncio.wait([setup, stopped], return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if setup.done():
        setup.result()
        return True
    setup.cancel()
    await asyncio.gather(setup, return_exceptions=True)
    return False


def as_run(drill, started_at_ms: list, ended: dict | None = None):
    """The drill with each step at the time it actually ran (a graceful failover's drain can
    hold the next step back), so phases and windows match what the workload saw. Steps planned
    for the same time stay together, at the time the first of them ran, unrounded: an operation
    that started before a step ran is in the phase before it (rounded to the millisecond, one that
    started 0.4 ms before a client step could land in its phase, sent with the old options). A run that ended early
    lasted until then, and the steps it did not reach are not in it."""
    first_at: dict = {}            # steps planned for one time are one phase: the first one's time
    for s, t in zip(drill.schedule, started_at_ms):
        first_at.setdefault(s["at_ms"], t)
    steps = [dict(s, at_ms=first_at[s["at_ms"]]) for s in drill.schedule[:len(started_at_ms)]]
    if ended is not None:
        return drill.__class__(**{**drill.__dict__, "schedule": steps,
                                  # whole milliseconds, up to the last step that ran (unrounded)
                                  "duration_ms": math.ceil(max(ended["at_ms"], *(s["at_ms"] for s in steps), 0))})
    return drill.__class__(**{**drill.__dict__, "schedule": steps + drill.schedule[len(steps):]})


async def _schedule(drill, target, workload, progress, guard, live) -> None:
    """The steps at their times, until the end or the guard ends the run (between steps)."""
    named = {}
    steps = list(drill.schedule)
    ticker = asyncio.ensure_future(progress.tick_forever(workload))
    try:
        for i, step in enumerate(steps):
            await guard.wait((step["at_ms"] - workload.now_ms()) / 1000.0)
            if guard.ended is not None or i == 0 and not guard.steady_state_holds(step["at_ms"]):
                return
            workload.step_started_ms.append(max(step["at_ms"], workload.now_ms()))
            progress.phase(workload, reports.describe(step))
            try:
                await _apply(target, step, named, workload)
            except ControlError as e:          # what only the account as it is now could refuse
                guard.refused(i, reports.describe(step), getattr(e, "message", None) or str(e))
                return
            await live.publish()
        await guard.wait((drill.duration_ms - workload.now_ms()) / 1000.0)
    finally:
        ticker.cancel()


async def _apply(target, step: dict, named: dict, workload) -> None:
    if "fault" in step:
        spec = await _control(target, "POST", "/faults", step["fault"])
        named[step.get("as", spec["id"])] = spec["id"]
        workload.injected.append(spec["id"])
        ends_ms = workload.now_ms() + step["fault"]["duration_ms"] if "duration_ms" in step["fault"] else None
        workload.active_faults[spec["id"]] = (reports.describe(step), ends_ms)
    elif "failover" in step:
        await _control(target, "POST", "/failover", {"wait": True, **step["failover"]})
    elif "client" in step:
        await workload.change_client(step["client"])
    elif "throttle" in step:
        before = await _control(target, "GET", "/throttle")
        await _control(target, "PUT", "/throttle", step["throttle"])
        name = step.get("as", f"throttle@{step['at_ms']}")
        workload.knobs_changed[name] = {k: before[k] for k in step["throttle"]}
        workload.active_faults[name] = (reports.describe(step), None)
    elif step["heal"] == "all":
        for fid in list(named.values()):
            await _heal(target, fid)
            workload.active_faults.pop(fid, None)
        await _restore_knobs(target, workload)
    elif step["heal"] in workload.knobs_changed:
        await _restore_knobs(target, workload, step["heal"])
    else:
        fid = named.get(step["heal"], step["heal"])
        await _heal(target, fid)
        workload.active_faults.pop(fid, None)


async def _restore_knobs(target, workload, name: str | None = None) -> None:
    """Put back the throttling knobs a throttle step changed (all of them, the latest first)."""
    for n in [name] if name is not None else list(reversed(workload.knobs_changed)):
        await _control(target, "PUT", "/throttle", workload.knobs_changed.pop(n))
        workload.active_faults.pop(n, None)


async def _heal(target, fault_id) -> None:
    try:
        await _control(target, "DELETE", f"/faults/{fault_id}")
    except ControlError as e:
        if e.status != 404:                # 404: it ended by its own duration_ms
            raise


async def _heal_own(target, workload) -> None:
    """Heal what the drill injected and is still active, so a shared emulator is left as found."""
    active = {f["id"] for f in (await _control(target, "GET", "/faults"))["faults"]}
    for fid in workload.injected:
        if fid in active:
            await _heal(target, fid)
    await _restore_knobs(target, workload)


async def _control(target, method, path, body=None):
    return await asyncio.to_thread(target.call, method, path, body)


def _lost_key(w: dict) -> tuple:
    return (w["database"], w["container"], w["partition"], w["lsn"], w["id"])


async def _report(drill, target, workload, lost_before: set, started_epoch_ms: float, ended: dict | None,
                  out) -> dict:
    if drill.served:
        return await _served_report(drill, target, workload, lost_before, started_epoch_ms, ended)
    topology = await _control(target, "GET", "/topology")
    listed = [w for w in (await _control(target, "GET", "/lost-writes"))["writes"]
              if _lost_key(w) not in lost_before and w["database"] == DATABASE and w["container"] == CONTAINER]
    failovers = [f for f in (await _control(target, "GET", "/failovers"))["failovers"]
                 if (f.get("started_ms") or 0) >= started_epoch_ms]
    writes = sum(1 for op in workload.ops if op.kind == "write")
    with Stage(out, f"reading back {writes} writes in {topology['write_regions'][0]}"):
        present = await workload.read_back(topology["write_regions"][0])
    acked = {op.item_id for op in workload.ops if op.kind == "write" and op.ok}
    lost = reports.LostWrites(listed=listed, acked=len(acked), acked_unreadable=sorted(acked - present),
                              listed_acked=sorted({w["id"] for w in listed} & acked))
    with Stage(out, f"history check of {len(workload.ops)} operations"):
        consistency = verdict.check(drill, workload.ops, present, {w["id"] for w in listed})
    return reports.build(as_run(drill, workload.step_started_ms, ended), workload.ops, lost, failovers,
                         started_epoch_ms, consistency, ended)


async def _served_report(drill, target, workload, lost_before: set, started_epoch_ms: float,
                         ended: dict | None) -> dict:
    """The report of what the emulator served (served.py): every write a forced failover
    discarded during the run is lost, whichever container it was in; which of them the
    application had been told succeeded is only the application's to know."""
    listed = [w for w in (await _control(target, "GET", "/lost-writes"))["writes"] if _lost_key(w) not in lost_before]
    failovers = [f for f in (await _control(target, "GET", "/failovers"))["failovers"]
                 if (f.get("started_ms") or 0) >= started_epoch_ms]
    lost = reports.LostWrites(listed=listed, acked=0, acked_unreadable=[])
    run = as_run(drill, workload.step_started_ms, ended)
    first_step_ms = run.schedule[0]["at_ms"] if run.schedule else 0
    expected = served.expected_per_bin(workload.ops, first_step_ms, reports.RTO_BIN_MS)
    report = reports.build(run, workload.ops, lost, failovers, started_epoch_ms, None, ended, expected_per_bin=expected)
    return served.annotate(report, workload.ops)
