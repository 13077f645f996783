"""Proves runtime/script_engine.py, the service's V8 (mini-racer) on a real asyncio loop: an
evaluation is a future of the loop, so the loop keeps turning while JavaScript spins, and the
time bound (all of a session's rounds together) stops it with ScriptTimeout; the heap bound
gives ScriptOutOfMemory, a throw ScriptFailed with V8's message; sessions are isolated; at most
running_max run at once (429 past it); UDF sessions make synchronous calls bounded per call; and
without the package a script request gets the 501 that names the extra to install."""
import asyncio
import sys
import time

import pytest

from regionlab.emulator.core.errors import CosmosError
from regionlab.emulator.runtime.script_engine import V8Engine
from regionlab.emulator.service.script_engine import ScriptFailed, ScriptOutOfMemory, ScriptTimeout

HEAP = 32 * 1024 * 1024


def _run(coro):
    return asyncio.run(coro)


def test_the_loop_turns_while_a_script_spins_and_its_bound_stops_it():
    async def main():
        engine = V8Engine(asyncio.get_running_loop())
        ticks = 0

        async def tick():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.005)
                ticks += 1
        ticker = asyncio.get_running_loop().create_task(tick())
        opened = time.monotonic()           # the bound counts from here, over every round
        session = engine.session(1000, HEAP)
        await session.eval("var n = 1;")
        before = ticks
        with pytest.raises(ScriptTimeout):
            await session.eval("while (true) { }")
        spun = time.monotonic() - opened
        during = ticks - before
        ticker.cancel()
        session.close()
        return spun, during
    spun, during = _run(main())
    assert 1.0 <= spun < 4.0           # the bound, and generous room on a loaded 2-core machine
    assert during >= 5                 # up to ~200 at 5 ms; a held loop would make none


def test_errors_heap_and_isolation():
    async def main():
        engine = V8Engine(asyncio.get_running_loop())
        a, b = engine.session(5000, HEAP), engine.session(5000, HEAP)
        try:
            await a.eval("var secret = 42;")
            assert await b.eval("typeof secret") == "undefined"
            with pytest.raises(ScriptFailed) as thrown:
                await a.eval("throw new Error('boom')")
            assert "Error: boom" in str(thrown.value)
            with pytest.raises(ScriptOutOfMemory):
                await b.eval("var a = []; while (true) { a.push(new Array(100000).fill(1)); }")
        finally:
            a.close()
            b.close()
        return engine.running
    assert _run(main()) == 0


def test_at_most_running_max_sessions_at_once():
    async def main():
        engine = V8Engine(asyncio.get_running_loop(), running_max=1)
        first = engine.session(1000, HEAP)
        with pytest.raises(CosmosError) as busy:
            engine.session(1000, HEAP)
        first.close()
        engine.session(1000, HEAP).close()
        return busy.value
    busy = _run(main())
    assert busy.status == 429 and busy.retry_after_ms > 0


def test_udf_sessions_call_synchronously_within_their_bounds():
    async def main():
        engine = V8Engine(asyncio.get_running_loop())
        udfs = await engine.udf_session(2000, 100, HEAP)
        try:
            udfs.call("var f = function (x) { return JSON.stringify(x * 2); }")
            assert udfs.call("f(21)") == "42"
            assert udfs.call("undefined") is None
            began = time.monotonic()
            with pytest.raises(ScriptTimeout):
                udfs.call("while (true) { }")
            return time.monotonic() - began
        finally:
            udfs.close()
    assert _run(main()) < 1.5           # a 100 ms bound, generous for a loaded machine


def test_without_the_engine_a_script_gets_501_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "py_mini_racer", None)       # as if not installed

    async def main():
        with pytest.raises(CosmosError) as missing:
            V8Engine(asyncio.get_running_loop()).session(1000, HEAP)
        return missing.value
    missing = _run(main())
    assert missing.status == 501 and "pip install 'regionlab[scripts]'" in missing.message
