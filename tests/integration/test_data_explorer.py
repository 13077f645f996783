"""The data explorer (GET /explorer on the control port) in a real headless Chromium against a
real emulator whose data the official SDK wrote: databases, containers, items paged, a query with
its request charge and metrics, an item edited and one deleted through the page (the SDK sees
both), and per region what each region has while a link is cut. No script error or CSP refusal
on the way. The official emulator's explorer address on the gateway redirects to it.

Skips (with the reason) where no Chromium is installed; in CI it installs Chromium first and fails
without it (tests/tiers.py)."""
import asyncio
import http.client
import json
from urllib.parse import urlsplit

import pytest
from azure.cosmos import PartitionKey
from azure.cosmos.exceptions import CosmosResourceNotFoundError

from browser import chromium_page, chromium_path
from sdk_harness import make_client, wait_replicated

pytestmark = pytest.mark.slow             # a real browser
EAST, WEST = "East US", "West US"
ITEMS = 25
PAGE_ITEMS = 20                           # the page's read-feed page (explorer.html)


@pytest.fixture(scope="module")
def chromium() -> str:
    return chromium_path()


def rows() -> str:
    return "document.querySelectorAll('#items tr').length"


@pytest.mark.regionlab_config(regions=[EAST, WEST])
def test_the_explorer_browses_queries_edits_and_deletes_per_region(regionlab, chromium):
    emu = regionlab
    client = make_client(emu, preferred_locations=[EAST])
    container = client.create_database("shop").create_container("orders", PartitionKey(path="/customer"))
    for i in range(ITEMS):
        container.upsert_item({"id": f"order-{i}", "customer": f"c{i % 4}", "n": i})
    wait_replicated(emu, "shop", "orders", WEST)
    cut = emu.control("POST", "/faults", {"type": "link_cut", "from": EAST, "to": WEST, "one_way": True})
    container.upsert_item({"id": "late", "customer": "c9", "n": -1})     # East US only, while the link is cut

    async def count_in(page, endpoint: str) -> int:
        await page.choose("#endpoint", endpoint)
        await page.wait_for(rows() + " > 0")
        await page.click("#tab-query")
        await page.type_into("#query", "SELECT VALUE COUNT(1) FROM c")
        await page.evaluate("document.getElementById('results').textContent = ''")
        await page.click("#run")
        await page.wait_for("document.getElementById('results').textContent !== ''")
        info = await page.evaluate("document.getElementById('query-info').textContent")
        assert " RU " in info, info
        await page.click("#tab-items")
        return json.loads(await page.evaluate("document.getElementById('results').textContent"))[0]

    async def drive():
        async with chromium_page(chromium) as page:
            await page.navigate(emu.control_endpoint + "explorer")
            await page.wait_for("!!document.querySelector('#databases [data-name=\"shop\"]')")
            await page.click('#databases [data-name="shop"]')
            await page.wait_for("!!document.querySelector('#containers [data-name=\"orders\"]')")
            await page.click('#containers [data-name="orders"]')
            await page.wait_for(rows() + f" === {PAGE_ITEMS}")
            assert await page.evaluate("!document.getElementById('next-page').hidden")
            await page.click("#next-page")
            await page.wait_for(rows() + f" === {ITEMS + 1 - PAGE_ITEMS}")

            # Per region: West US lacks the write its cut link has not delivered.
            assert await count_in(page, EAST) == ITEMS + 1
            assert await count_in(page, WEST) == ITEMS
            metrics = await page.evaluate("document.getElementById('metrics').textContent")
            assert metrics, "the query's metrics are shown"

            # Edit one item through the page: the SDK reads the new value.
            await page.choose("#endpoint", "global")
            await page.wait_for(rows() + f" === {PAGE_ITEMS}")
            await page.click('#items tr[data-id="order-3"]' if await page.evaluate(
                "!!document.querySelector('#items tr[data-id=\"order-3\"]')") else "#items tr")
            edited = json.loads(await page.evaluate("document.getElementById('item-json').value"))
            await page.type_into("#item-json", json.dumps(dict(edited, n=999, note="from the explorer")))
            await page.click("#save")
            await page.wait_for("document.getElementById('editor').hidden")
            got = container.read_item(edited["id"], partition_key=edited["customer"])
            assert got["n"] == 999 and got["note"] == "from the explorer"

            # Delete one: two clicks, then the SDK gets 404.
            await page.wait_for(f"!!document.querySelector('#items tr[data-id=\"{edited['id']}\"]')")
            await page.click(f'#items tr[data-id="{edited["id"]}"]')
            await page.click("#delete")
            await page.click("#confirm-delete")
            await page.wait_for("document.getElementById('editor').hidden")
            with pytest.raises(CosmosResourceNotFoundError):
                container.read_item(edited["id"], partition_key=edited["customer"])
            assert "error" not in await page.evaluate("document.getElementById('status').className")
            assert page.errors == []

    try:
        asyncio.run(drive())
    finally:
        emu.control("DELETE", f"/faults/{cut['id']}")
        client.close()


def test_the_official_emulators_explorer_address_redirects_to_it(regionlab):
    u = urlsplit(regionlab.endpoint)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    try:
        conn.request("GET", "/_explorer/index.html")
        reply = conn.getresponse()
        assert reply.status == 302 and reply.getheader("Location") == regionlab.control_endpoint + "explorer"
    finally:
        conn.close()
