"""The event loop regionlab runs on: uvloop where it installs, asyncio's own loop elsewhere.

uvloop has no Windows wheels, so pyproject.toml depends on it only off Windows; there (or with
REGIONLAB_LOOP=asyncio, which the test suite uses to keep that path working on every machine)
the emulator, the test fixture and the sync client run on asyncio's default loop. Both the
emulator and the client start their loops here, so the choice is made in one place.
"""
import asyncio
import os

LOOP_ENV = "REGIONLAB_LOOP"              # "uvloop" (the default where it installs) or "asyncio"


def _uvloop():
    """The uvloop module, or None where it is not installed or REGIONLAB_LOOP=asyncio."""
    if os.environ.get(LOOP_ENV, "").strip().lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop


def loop_name() -> str:
    return "uvloop" if _uvloop() is not None else "asyncio"


def new_event_loop() -> asyncio.AbstractEventLoop:
    uvloop = _uvloop()
    return uvloop.new_event_loop() if uvloop is not None else asyncio.new_event_loop()


def run(main):
    """asyncio.run(main) on the chosen loop."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)
