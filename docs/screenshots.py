"""The screenshots of docs/drills.md: the dashboard while a drill runs, and that drill's report.

    python docs/screenshots.py            # writes docs/images/drill-dashboard.png and drill-report.png

Starts an emulator of the `failover` drill's account on free ports, runs `regionlab drill failover`
at x0.6 against it in the background, and drives a headless Chromium (Debian's `chromium`) over
its DevTools protocol with the dashboard test's own driver (tests/integration/browser.py): the
dashboard is taken once the drill's panel shows the graceful failover's phase, the report.html
once the drill has written it. Needs matplotlib (`pip install 'regionlab[report]'`) for the
report's plots.
"""
import asyncio
import logging
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "tests", "integration"), os.path.join(ROOT, "tests")]   # browser.py, tiers.py

from browser import chromium_page, chromium_path  # noqa: E402
from regionlab.emulator.drill import builtin  # noqa: E402
from regionlab.emulator.drill.runner import account_options  # noqa: E402
from regionlab.emulator.testing import running_emulator  # noqa: E402

IMAGES = os.path.join(ROOT, "docs", "images")
DRILL, SCALE = "failover", 0.6             # x0.6: the graceful phase lasts seconds of live updates
PHASE = "graceful failover -> East US 2"       # the forced failover is its next step


async def shoot(emu, report_dir: str) -> None:
    panel = "document.getElementById('drill-panel')"
    async with chromium_page(chromium_path()) as page:
        await page.navigate(emu.control_endpoint)
        with emu.drill_in_background(DRILL, scale=SCALE, report_dir=report_dir) as drill:
            # In the phase, once the writes that waited for the graceful failover's drain are in.
            await page.wait_for(f"!{panel}.hidden && {panel}.dataset.phase === {PHASE!r} && "
                                "document.querySelectorAll('#drill-timeline rect').length > 16", timeout_ms=25_000)
            await page.screenshot(os.path.join(IMAGES, "drill-dashboard.png"))
            drill.result()
        # A static page: nothing mutates its DOM after it loads, so wait for its load event.
        await page.send("Page.navigate", url="file://" + os.path.join(report_dir, "report.html"))
        await page.evaluate("new Promise(done => document.title.startsWith('regionlab drill') && "
                            "document.readyState === 'complete' ? done(true) : addEventListener('load', () => done(true)))")
        await page.screenshot(os.path.join(IMAGES, "drill-report.png"))


def main() -> None:
    logging.getLogger("regionlab.client.diagnostics").setLevel(logging.ERROR)     # as `regionlab drill` does
    with tempfile.TemporaryDirectory() as report_dir, running_emulator(**account_options(builtin(DRILL))) as emu:
        asyncio.run(shoot(emu, report_dir))
    print("wrote docs/images/drill-dashboard.png and docs/images/drill-report.png")


if __name__ == "__main__":
    main()
