"""Proves the control port's dashboard (GET / for a browser) works in a real headless Chromium
against a real emulator with SDK traffic: the page shows the regions, injects faults through its
form (real clicks and typing), shows the region go down within its live updates, heals through
the fault's own Heal button, starts a failover, works behind --control-token once the token is
pasted, and raises no script error or CSP refusal on the way. The control API confirms each
change the page shows. A full-page screenshot is saved under tests/artifacts/.

Skips (with the reason) where no Chromium is installed (`apt-get install chromium` on Debian); in
CI (CI=true) it installs Chromium first and fails without it (tests/tiers.py)."""
import asyncio
import os
import threading

import pytest
from azure.cosmos import PartitionKey

from browser import artifact_dir, chromium_page, chromium_path
from sdk_harness import make_client

EAST, EAST2, WEST = "East US", "East US 2", "West US"
pytestmark = pytest.mark.slow             # a real browser, against live updates
WORKLOAD_PAUSE_S = 0.05        # pacing of the background traffic, not a wait for anything
TOKEN = "dash-secret"
SCREENSHOT_POLLS = 8           # live updates between the faults and the screenshot


@pytest.fixture(scope="module")
def chromium() -> str:
    return chromium_path()


def region(name: str, attr: str = "state") -> str:
    return f"(document.querySelector('[data-region=\"{name}\"]') || {{dataset: {{}}}}).dataset.{attr}"


class Traffic:
    """SDK reads and writes in the background, so the page has live request rates to show."""

    def __init__(self, emu):
        self.stop = threading.Event()
        self.client = make_client(emu, preferred_locations=[EAST, EAST2, WEST])
        db = self.client.create_database("shop")
        self.container = db.create_container("orders", PartitionKey(path="/customer"), offer_throughput=1000)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        i = 0
        while not self.stop.wait(WORKLOAD_PAUSE_S):
            i += 1
            try:
                self.container.upsert_item({"id": f"order-{i % 40}", "customer": f"c{i % 7}", "n": i})
                self.container.read_item(f"order-{i % 40}", partition_key=f"c{i % 7}")
            except Exception:          # during an outage or failover some fail: that is the point
                continue

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)
        self.client.close()


async def inject_through_form(page, fault_type: str, fields: dict) -> None:
    await page.choose("#fault-type", fault_type)
    for name, value in fields.items():
        selector = f"#fault-field-{name}"
        if await page.evaluate(f"document.querySelector('{selector}').tagName") == "SELECT":
            await page.choose(selector, value)
        else:
            await page.type_into(selector, value)
    await page.click("#fault-submit")


@pytest.mark.regionlab_config(partitions=2, detection_delay_ms=600_000)
def test_the_dashboard_injects_shows_and_heals_faults_and_fails_over(regionlab, chromium):
    emu = regionlab
    shot = os.path.join(artifact_dir(), "dashboard.png")
    after = os.path.join(artifact_dir(), "dashboard-after-failover.png")

    async def drive():
        async with chromium_page(chromium) as page:
            await page.navigate(emu.control_endpoint)
            await page.wait_for(region(WEST) + " === 'up'")
            assert await page.evaluate("document.querySelectorAll('.region').length") == 3
            assert await page.evaluate(region(EAST, "write")) == "true"
            await page.wait_for("document.querySelectorAll('#partitions .chip.primary').length === 6")

            await inject_through_form(page, "region_outage", {"region": WEST, "mode": "reset"})
            await page.wait_for(region(WEST) + " === 'down'")
            card = await page.evaluate(f"document.querySelector('[data-region=\"{WEST}\"]').innerText")
            assert "reset" in card.lower() and "down" in card.lower()
            (outage,) = emu.faults.active()
            assert (outage.type, outage.spec["region"], outage.spec["mode"]) == ("region_outage", WEST, "reset")
            await page.wait_for(f"document.querySelector('[data-fault-id=\"{outage.id}\"] button.heal')")

            await inject_through_form(page, "link_lag", {"from": EAST, "to": EAST2, "lag_ms": "750"})
            await page.wait_for(f"document.querySelector('[data-link=\"{EAST} → {EAST2}\"]')"
                                f".innerText.includes('750 ms')")
            assert {f.type for f in emu.faults.active()} == {"region_outage", "link_lag"}

            polls = int(await page.evaluate("document.body.dataset.polls"))     # some rate history to plot
            await page.wait_for(f"parseInt(document.body.dataset.polls, 10) >= {polls + SCREENSHOT_POLLS}")
            await page.screenshot(shot)
            print(f"\ndashboard screenshot: {shot}")

            await page.click(f"[data-fault-id=\"{outage.id}\"] button.heal")
            await page.wait_for(region(WEST) + " === 'up'")
            await page.wait_for(f"!document.querySelector('[data-fault-id=\"{outage.id}\"]')")
            assert [f.type for f in emu.faults.active()] == ["link_lag"]
            await page.click("#heal-all")
            await page.wait_for("document.querySelector('#faults .empty')")
            assert emu.faults.active() == []

            await page.choose("#failover-region", EAST2)
            await page.click("#failover-submit")
            await page.wait_for(region(EAST2, "write") + " === 'true'")
            assert emu.topology()["write_regions"] == [EAST2]
            assert await page.evaluate(region(EAST, "write")) == "false"
            await page.wait_for("document.querySelector('#failovers .badge.completed')")
            await page.screenshot(after)
            assert page.errors == []

    with Traffic(emu):
        asyncio.run(drive())
    assert os.path.getsize(shot) > 10_000 and os.path.getsize(after) > 10_000


@pytest.mark.regionlab_config(control_token=TOKEN)
def test_behind_a_token_the_page_asks_for_it_and_sends_it(regionlab, chromium):
    emu = regionlab

    async def drive():
        async with chromium_page(chromium) as page:
            await page.navigate(emu.control_endpoint)
            await page.wait_for("!document.getElementById('token-bar').hidden")
            assert await page.evaluate("document.querySelectorAll('.region').length") == 0
            await page.type_into("#token-input", TOKEN)
            await page.click("#token-save")
            await page.wait_for(region(WEST) + " === 'up'")
            assert await page.evaluate("sessionStorage.getItem('regionlab.control-token')") == TOKEN
            await inject_through_form(page, "region_outage", {"region": WEST})
            await page.wait_for(region(WEST) + " === 'down'")
            assert [(f.type, f.spec["mode"]) for f in emu.faults.active()] == [("region_outage", "unavailable")]
            # the only refusal on the way is the first topology poll's 401, before the token
            assert all("401" in e for e in page.errors), page.errors

    asyncio.run(drive())


def test_reads_of_absent_items_are_not_counted_as_errors(regionlab, chromium):
    """The page's per-region counts (what errors/s is drawn from): a 404 read miss, gateway or
    direct, is a served request; 404/1002 and every other 4xx/5xx is an error."""
    counts = ('regionCounts({requests: {"East US": {"GET docs 200": 4, "GET docs 404": 5, "GET docs 404/1002": 2, '
              '"POST docs 429/3200": 1, "DELETE docs 404": 1}}, direct_requests: {"East US": {"read 404": 3}}})')

    async def drive():
        async with chromium_page(chromium) as page:
            await page.navigate(regionlab.control_endpoint)
            await page.wait_for(region(WEST) + " === 'up'")
            got = await page.evaluate(f"JSON.stringify({counts})")
            assert got == '{"East US":{"total":16,"errors":4,"throttled":1}}'

    asyncio.run(drive())


DASH_DRILL = {"name": "dash-drill", "description": "East US 2 goes out for a second", "duration_ms": 3000,
              "workload": {"mix": {"read": 1, "write": 1}, "concurrency": 2, "keys": 5, "rate_per_s": 100},
              "schedule": [{"at_ms": 800, "fault": {"type": "region_outage", "region": EAST2}, "as": "out"},
                           {"at_ms": 2000, "heal": "out"}]}


@pytest.mark.regionlab_config(regions=[EAST, EAST2], detection_delay_ms=600_000)
def test_the_dashboard_shows_a_running_drill_and_no_404_miss_as_an_error(regionlab, chromium):
    """The drill runner's PUT /drill, as the page shows it while the drill runs: its name, the
    phase, the next step and when, the timeline so far and the steps; then its end. And a 404
    of a GET (an SDK's create_..._if_not_exists looks before it creates) is a miss, not an error."""
    panel = "document.getElementById('drill-panel')"
    text = "document.getElementById('{}').textContent"

    async def drive():
        async with chromium_page(chromium) as page:
            await page.navigate(regionlab.control_endpoint)
            await page.wait_for(region(EAST2) + " === 'up'")
            assert await page.evaluate(panel + ".hidden")               # no drill yet
            with regionlab.drill_in_background(DASH_DRILL) as drill:
                await page.wait_for(f"!{panel}.hidden && {panel}.dataset.phase === 'region_outage East US 2'")
                assert await page.evaluate(text.format("drill-name")) == "dash-drill"
                assert await page.evaluate(text.format("drill-status")) == "running"
                nxt = await page.evaluate(text.format("drill-next"))
                assert nxt.startswith("heal out at 2.0 s (in ") and nxt.endswith(" s)"), nxt
                steps = await page.evaluate("[...document.querySelectorAll('#drill-steps li')].map(li => li.className + ':' + li.textContent)")
                assert steps == ["ran:0.8 s region_outage East US 2 ✓", "next:2.0 s heal out"], steps
                assert await page.evaluate("document.querySelectorAll('#drill-timeline rect').length") > 0
                report = drill.result()
            await page.wait_for(f"{panel}.dataset.ended === 'completed'")
            assert await page.evaluate(text.format("drill-next")) == "none: the drill has ended"
            shown = await page.evaluate(text.format("drill-ops"))
            assert shown == f"{report['total']['ops']} ({report['total']['errors']} failed)"
            counts = await page.evaluate('JSON.stringify(regionCounts({requests: {"East US": {"GET colls 404": 2, '
                                         '"GET dbs 404": 1, "POST dbs 201": 1, "DELETE colls 404": 1}}}))')
            assert counts == '{"East US":{"total":5,"errors":1,"throttled":0}}'
            assert page.errors == []

    asyncio.run(drive())
