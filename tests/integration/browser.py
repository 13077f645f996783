"""A headless Chromium driven over its DevTools protocol (CDP) with aiohttp's websocket client:
the dashboard test's browser, with no driver package. Chromium is started with
--remote-debugging-port=0 and a fresh profile; the DevTools URL comes from its stderr. Where none
is installed, CI installs Debian's `chromium` and fails without it; elsewhere the test is skipped
(tests/tiers.py).

Interactions are real input: clicks are mouse events at the element's centre
(Input.dispatchMouseEvent), text is typed with Input.insertText, a <select> gets its value and a
bubbling `change` event. Waits are event-driven: `wait_for` resolves inside the page from a
MutationObserver the moment a condition holds (or fails after a deadline), never by sleeping.
"""
import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import tempfile

import aiohttp

from tiers import require

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_PACKAGES = ("chromium",)        # Debian's: what CI installs when no Chromium is found
START_TIMEOUT_S = 30.0
COMMAND_TIMEOUT_S = 30.0
WAIT_TIMEOUT_MS = 15_000
WINDOW = (1440, 1000)


def chromium_path() -> str:
    """The Chromium binary (in CI, installed when missing; tests/tiers.py)."""
    return require((CHROMIUM_NAMES,), CHROMIUM_PACKAGES, "the dashboard test needs Chromium")[0]


class Page:
    def __init__(self, ws):
        self._ws = ws
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self.errors: list[str] = []          # uncaught exceptions, console errors, CSP refusals
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        async for msg in self._ws:
            data = json.loads(msg.data)
            if "id" in data:
                fut = self._pending.pop(data["id"], None)
                if fut is not None and not fut.done():
                    fut.set_result(data)
            else:
                self._event(data)

    def _event(self, data: dict) -> None:
        method, params = data.get("method"), data.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.errors.append(details.get("exception", {}).get("description") or details.get("text"))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.errors.append(params["entry"]["text"])

    async def send(self, method: str, **params):
        mid = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._pending[mid] = fut
        await self._ws.send_str(json.dumps({"id": mid, "method": method, "params": params}))
        reply = await asyncio.wait_for(fut, COMMAND_TIMEOUT_S)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    async def evaluate(self, expression: str):
        result = await self.send("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise AssertionError(details.get("exception", {}).get("description") or details.get("text"))
        return result["result"].get("value")

    async def navigate(self, url: str) -> None:
        for domain in ("Page", "Runtime", "Log"):
            await self.send(f"{domain}.enable")
        await self.send("Page.navigate", url=url)
        await self.wait_for("document.readyState === 'complete'")

    async def wait_for(self, condition: str, timeout_ms: int = WAIT_TIMEOUT_MS):
        """The first truthy value of the JS expression `condition`, checked on every DOM change."""
        source = json.dumps(condition)
        return await self.evaluate(f"""new Promise((resolve, reject) => {{
            let observer, timer;
            const check = () => {{ let v; try {{ v = ({condition}); }} catch (e) {{ return; }}
                if (v) {{ observer && observer.disconnect(); clearTimeout(timer); resolve(v); }} }};
            observer = new MutationObserver(check);
            observer.observe(document, {{subtree: true, childList: true, attributes: true, characterData: true}});
            timer = setTimeout(() => {{ observer.disconnect();
                reject(new Error("timed out after {timeout_ms} ms waiting for " + {source})); }}, {timeout_ms});
            check(); }})""")

    async def click(self, selector: str) -> None:
        """A real left click at the centre of the element (scrolled into view first)."""
        box = await self.evaluate(f"""(() => {{ const el = document.querySelector({json.dumps(selector)});
            if (!el) throw new Error("no element " + {json.dumps(selector)});
            el.scrollIntoView({{block: "center"}}); const r = el.getBoundingClientRect();
            return {{x: r.left + r.width / 2, y: r.top + r.height / 2}}; }})()""")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            await self.send("Input.dispatchMouseEvent", type=kind, x=box["x"], y=box["y"], button="left",
                            clickCount=0 if kind == "mouseMoved" else 1)

    async def type_into(self, selector: str, text: str) -> None:
        """Focus the field, clear it, and type text as keyboard input."""
        await self.evaluate(f"""(() => {{ const el = document.querySelector({json.dumps(selector)});
            el.focus(); el.select && el.select(); }})()""")
        await self.send("Input.dispatchKeyEvent", type="keyDown", key="Backspace", code="Backspace",
                        windowsVirtualKeyCode=8)
        await self.send("Input.dispatchKeyEvent", type="keyUp", key="Backspace", code="Backspace",
                        windowsVirtualKeyCode=8)
        await self.send("Input.insertText", text=text)

    async def choose(self, selector: str, value: str) -> None:
        """Pick an option of a <select> and fire the `change` event a user's pick fires."""
        ok = await self.evaluate(f"""(() => {{ const el = document.querySelector({json.dumps(selector)});
            if (![...el.options].some(o => o.value === {json.dumps(value)})) return false;
            el.value = {json.dumps(value)}; el.dispatchEvent(new Event("input", {{bubbles: true}}));
            el.dispatchEvent(new Event("change", {{bubbles: true}})); return true; }})()""")
        assert ok, f"{selector} has no option {value!r}"

    async def screenshot(self, path: str) -> None:
        """The whole page (not just the window) as a PNG."""
        metrics = await self.send("Page.getLayoutMetrics")
        size = metrics["cssContentSize"]
        shot = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                               clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))

    async def close(self) -> None:
        self._reader.cancel()
        await self._ws.close()


@contextlib.asynccontextmanager
async def chromium_page(binary: str):
    """A fresh headless Chromium with one page; killed and its profile removed on exit."""
    profile = tempfile.mkdtemp(prefix="regionlab-chromium-")
    proc = await asyncio.create_subprocess_exec(
        binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
        "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars", "--remote-debugging-port=0",
        "--remote-debugging-address=127.0.0.1", f"--user-data-dir={profile}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}", "about:blank",
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    try:
        browser_url = await asyncio.wait_for(_devtools_url(proc), START_TIMEOUT_S)
        http_base = "http://" + browser_url.split("/")[2]
        async with aiohttp.ClientSession() as session:
            async with session.get(http_base + "/json/list") as reply:
                targets = await reply.json()
            target = next(t for t in targets if t["type"] == "page")
            async with session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=64 * 1024 * 1024) as ws:
                page = Page(ws)
                try:
                    await page.send("Emulation.setDeviceMetricsOverride", width=WINDOW[0], height=WINDOW[1],
                                    deviceScaleFactor=1, mobile=False)
                    yield page
                finally:
                    await page.close()
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


async def _devtools_url(proc) -> str:
    lines = []
    while True:
        line = await proc.stderr.readline()
        if not line:
            raise RuntimeError("chromium exited before DevTools listened:\n" + "".join(lines))
        text = line.decode(errors="replace")
        lines.append(text)
        if text.startswith("DevTools listening on "):
            asyncio.get_running_loop().create_task(_drain(proc.stderr))     # a full pipe would stall it
            return text.split(" ", 3)[3].strip()


async def _drain(stream) -> None:
    while await stream.read(65536):
        pass


def artifact_dir() -> str:
    """tests/artifacts/ (git-ignored): where the dashboard screenshots go."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "artifacts")
    os.makedirs(path, exist_ok=True)
    return path
